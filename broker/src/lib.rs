//! What the two copied upstream mains share in this workspace: which build
//! this is, and which of the two a process is. `--version` keeps upstream's
//! lines (component, then `version=1.0.0`, which `scripts/install-broker`
//! reads) and adds one that tells this build apart from a plain `cargo
//! install` of upstream.
//!
//! Both mains live here ([`run`]), picked by the name a process is run by
//! ([`role_of`]). The `sluice` multi-call binary (sluice-bins) links them
//! beside Sluice's own programs: set-up's release build makes one LTO link
//! for all of them instead of one per binary, and `sluice-rocketmq` (a link
//! to `sluice`) is installed under upstream's two names. This crate's own
//! `sluice-rocketmq` binary runs the same mains, for a build of the broker
//! alone.

// Upstream's mains build deeply nested futures; the limit is the crate's, so
// it moved here from the top of each copied file.
#![recursion_limit = "512"]

// The copied mains name this crate as their binaries did.
extern crate self as sluice_broker;

#[path = "../vendor/rocketmq-broker-rust.rs"]
mod broker_main;
#[path = "../vendor/rocketmq-namesrv-rust.rs"]
mod namesrv_main;

use std::ffi::OsStr;
use std::path::Path;

/// Runs upstream's main for `role`: it reads the command line itself and
/// exits the process on a fatal error, as upstream's binary does.
pub fn run(role: Role) {
    match role {
        Role::NameServer => namesrv_main::main(),
        Role::Broker => broker_main::main(),
    }
}

/// The rocketmq-rust release these binaries are built from (the `=` pins in
/// Cargo.toml); upstream prints its own crate version, ours is Sluice's.
pub const UPSTREAM_VERSION: &str = "1.0.0";

/// The patches this build carries, by id (vendor/PATCHES.md).
pub const PATCHES: &str =
    "store-cq-lock-order,store-lmq-offset-order,broker-lite-pop-time,broker-lite-event-batches,broker-send-permits,transport-reqwest-no-tls";

/// The line after upstream's `version=` one: `scripts/install-broker` skips a
/// rebuild only when it finds this exact line.
pub fn build_line() -> String {
    format!("build=sluice-workspace patched={PATCHES}")
}

/// The name the name server is installed and run under.
pub const NAMESRV_NAME: &str = "rocketmq-namesrv-rust";

/// The name the broker is installed and run under.
pub const BROKER_NAME: &str = "rocketmq-broker-rust";

/// Which upstream program a process of `sluice-rocketmq` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    NameServer,
    Broker,
}

impl Role {
    /// Both roles.
    pub const ALL: [Role; 2] = [Role::NameServer, Role::Broker];

    /// The name the role's program is installed and run under.
    pub fn name(self) -> &'static str {
        match self {
            Role::NameServer => NAMESRV_NAME,
            Role::Broker => BROKER_NAME,
        }
    }
}

/// The role `argv0` (the process's `argv[0]`) names by its file name, so
/// `/usr/local/bin/rocketmq-broker-rust` and a bare `rocketmq-broker-rust`
/// (a `PATH` lookup) both pick the broker. Any other name, none, or one that
/// is not UTF-8 names no role.
pub fn role_of(argv0: Option<&OsStr>) -> Option<Role> {
    let name = Path::new(argv0?).file_name()?;
    Role::ALL.into_iter().find(|role| name == role.name())
}

/// What `sluice-rocketmq` prints (with exit status 2) when run by a name
/// that is neither role's.
pub fn usage(argv0: Option<&OsStr>) -> String {
    let shown = argv0.map_or_else(|| "(none)".into(), OsStr::to_string_lossy);
    format!(
        "sluice-rocketmq: run as {NAMESRV_NAME} (the name server) or {BROKER_NAME} \
         (the broker), e.g. through a link of that name; the role is chosen by \
         the program name, and this one was {shown:?}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_name_picks_the_role_and_nothing_else_does() {
        let picks = [
            ("/usr/bin/rocketmq-namesrv-rust", Some(Role::NameServer)),
            ("/root/rocketmq-broker-rust", Some(Role::Broker)),
            ("./rocketmq-broker-rust", Some(Role::Broker)),
            ("rocketmq-namesrv-rust", Some(Role::NameServer)),
            ("rocketmq-broker-rust", Some(Role::Broker)),
            // Its own name, a directory of a role's name, a prefix, a
            // suffix, another case, no file name.
            ("", None),
            ("sluice-rocketmq", None),
            ("/usr/local/bin/sluice-rocketmq", None),
            ("/opt/rocketmq-broker-rust/sluice-rocketmq", None),
            ("rocketmq-broker", None),
            ("rocketmq-broker-rust.new", None),
            ("ROCKETMQ-BROKER-RUST", None),
            ("/", None),
        ];
        for (argv0, want) in picks {
            assert_eq!(role_of(Some(OsStr::new(argv0))), want, "{argv0}");
        }
        assert_eq!(role_of(None), None);
    }

    #[test]
    fn usage_names_both_roles_and_what_it_was_run_as_even_not_utf8() {
        let text = usage(Some(OsStr::new("/tmp/sluice-rocketmq")));
        for name in [NAMESRV_NAME, BROKER_NAME, "\"/tmp/sluice-rocketmq\""] {
            assert!(text.contains(name), "{text}");
        }
        assert!(usage(None).contains("(none)"));
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStrExt;
            // Found by the file name even below a directory that is not
            // UTF-8; a file name that is not names no role, shown lossily.
            let dir = OsStr::from_bytes(b"/opt/\xff/rocketmq-namesrv-rust");
            assert_eq!(role_of(Some(dir)), Some(Role::NameServer));
            let name = OsStr::from_bytes(b"/bin/rocketmq-broker-rust\xff");
            assert_eq!(role_of(Some(name)), None);
            assert!(usage(Some(name)).contains("rocketmq-broker-rust\u{FFFD}"));
        }
    }

    #[test]
    fn build_line_names_the_workspace_build_and_its_patches() {
        assert_eq!(
            build_line(),
            "build=sluice-workspace patched=store-cq-lock-order,store-lmq-offset-order,\
             broker-lite-pop-time,transport-reqwest-no-tls"
        );
    }
}
