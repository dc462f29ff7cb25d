#![recursion_limit = "256"] // rocketmq-client futures are deeply nested
//! Sluice's processes, assembled in one place from the libraries:
//!
//! - `sluice-rls` ([`rls`]): the rate-limit service, with the deferral
//!   endpoint when `--deferral-addr` is given;
//! - `sluice-consumer` ([`consumer`]): the paced consumer;
//! - `sluice-allinone` ([`allinone`]): both in one process (small installs).
//!
//! The flags two of them share ([`RedisArgs`], [`BrokerArgs`]) are declared
//! here once; each library declares its own (`ServeArgs`, `DeferralArgs`,
//! `ConsumerFlags`). Each `src/bin/` file is a `main` over [`Program::run_main`].
//!
//! `sluice` is all three in one binary, with the RocketMQ name server and
//! broker and the simulated model server, run by the name it is called by
//! ([`program_of`]): set-up's release build links it once and names it
//! `sluice-rls`, `sluice-consumer`, `sluice-allinone`, `sluice-rocketmq`
//! and `sluice-llm-sim` (hard links;
//! scripts/common.sh `release_build`; scripts/install-broker installs it
//! under the broker's two names).

pub mod allinone;
pub mod consumer;
mod probe;
pub mod rls;

use sluice_redis::RedisOptions;
use std::ffi::OsStr;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Redis, as every process names it.
#[derive(clap::Args)]
pub struct RedisArgs {
    /// Redis (sluice-rls: `--store redis` and the deferral endpoint; the
    /// consumer: response streams, pacing, membership):
    /// redis://[user:password@]host:port[/db] (one server),
    /// redis+cluster://host:port,host:port (Redis Cluster seeds),
    /// redis+sentinel://host:port,host:port/master[/db] (Sentinel);
    /// rediss… for TLS. See docs/configuration.md.
    #[arg(
        long,
        env = "SLUICE_REDIS_URL",
        default_value = "redis://127.0.0.1:6379",
        hide_env_values = true
    )]
    pub redis_url: String,

    /// File holding the Redis password (wins over one in --redis-url).
    #[arg(long, env = "SLUICE_REDIS_PASSWORD_FILE")]
    pub redis_password_file: Option<PathBuf>,
}

impl RedisArgs {
    /// The connection settings every Redis user in the process shares.
    pub fn options(&self) -> RedisOptions {
        RedisOptions {
            password_file: self.redis_password_file.clone(),
            ..RedisOptions::from_url(self.redis_url.as_str())
        }
    }
}

/// The RocketMQ broker deferred requests are queued on.
#[derive(clap::Args)]
pub struct BrokerArgs {
    /// RocketMQ name server, for queuing deferred requests.
    #[arg(long, env = "SLUICE_NAMESRV", default_value = "127.0.0.1:9876")]
    pub namesrv: String,

    /// Parent topic of the per tenant × model LiteTopics.
    #[arg(long, env = "SLUICE_LITE_PARENT", default_value = "sluice-deferred")]
    pub lite_parent: String,

    /// Consumer group bound to the parent topic (created if missing).
    #[arg(long, env = "SLUICE_CONSUMER_GROUP", default_value = "sluice-consumer")]
    pub consumer_group: String,
}

impl BrokerArgs {
    /// The broker as the deferral endpoint takes it.
    pub fn for_deferral(&self) -> sluice_deferral::Broker {
        sluice_deferral::Broker {
            namesrv: self.namesrv.clone(),
            parent: self.lite_parent.clone(),
            consumer_group: self.consumer_group.clone(),
        }
    }
}

/// A binary's life: rustls's process-wide crypto provider chosen, then `run`
/// on a multi-threaded runtime; an error is printed as `name: error` and
/// the process exits with status 1.
pub fn run_main(name: &str, run: impl Future<Output = anyhow::Result<()>>) -> ExitCode {
    install_rustls_provider();
    let result = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(anyhow::Error::from)
        .and_then(|runtime| runtime.block_on(run));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{name}: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// One of the programs the multi-call `sluice` binary runs: Sluice's three
/// processes, the RocketMQ name server and broker (sluice-broker's copies of
/// upstream's mains), and the simulated model server of the tests, demo and
/// benchmarks (in this binary so that set-up's build makes one LTO link).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Program {
    Rls,
    Consumer,
    Allinone,
    Rocketmq(sluice_broker::Role),
    LlmSim,
}

impl Program {
    /// Every program, in the order the usage message lists them.
    pub const ALL: [Program; 6] = [
        Program::Rls,
        Program::Consumer,
        Program::Allinone,
        Program::Rocketmq(sluice_broker::Role::NameServer),
        Program::Rocketmq(sluice_broker::Role::Broker),
        Program::LlmSim,
    ];

    /// The binary name the program is installed and run under.
    pub fn name(self) -> &'static str {
        match self {
            Program::Rls => "sluice-rls",
            Program::Consumer => "sluice-consumer",
            Program::Allinone => "sluice-allinone",
            Program::Rocketmq(role) => role.name(),
            Program::LlmSim => "sluice-llm-sim",
        }
    }

    /// Runs the program as its own binary does: the command line is read by
    /// the program itself, unchanged (argv[0] included). Upstream's mains
    /// build their own runtime and exit the process on a fatal error.
    pub fn run_main(self) -> ExitCode {
        match self {
            Program::Rls => run_main(self.name(), rls::run()),
            Program::Consumer => run_main(self.name(), consumer::run()),
            Program::Allinone => run_main(self.name(), allinone::run()),
            Program::LlmSim => run_main(self.name(), sluice_llm_sim::cli::run()),
            Program::Rocketmq(role) => {
                sluice_broker::run(role);
                ExitCode::SUCCESS
            }
        }
    }
}

/// The program `argv0` (the process's `argv[0]`) names by its file name, so
/// `/usr/local/bin/sluice-rls` and a bare `sluice-rls` (a `PATH` lookup)
/// both pick sluice-rls. Any other name, none, or one that is not UTF-8
/// names none.
pub fn program_of(argv0: Option<&OsStr>) -> Option<Program> {
    let name = Path::new(argv0?).file_name()?;
    Program::ALL
        .into_iter()
        .find(|program| name == program.name())
}

/// What `sluice` prints (with exit status 2) when run by a name that is no
/// program's.
pub fn usage(argv0: Option<&OsStr>) -> String {
    let shown = argv0.map_or_else(|| "(none)".into(), OsStr::to_string_lossy);
    let names: Vec<&str> = Program::ALL.iter().map(|p| p.name()).collect();
    format!(
        "sluice: run as {} (e.g. through a link of that name); the program is \
         chosen by the name it is run by, and this one was {shown:?}",
        names.join(", ")
    )
}

/// Selects rustls's process-wide crypto provider (ring) by name: rustls
/// picks one itself only while exactly one is linked, and a dependency that
/// turns on another (reqwest's default TLS did, vendor/PATCHES.md) would
/// leave every TLS user (rediss:// URLs, https backends, the gRPC listener,
/// the xDS client) without one. Done once, before anything else runs.
fn install_rustls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn program(argv0: &str) -> Option<Program> {
        program_of(Some(OsStr::new(argv0)))
    }

    #[test]
    fn full_paths_pick_the_program_by_file_name() {
        assert_eq!(program("/usr/local/bin/sluice-rls"), Some(Program::Rls));
        assert_eq!(
            program("/work/target/release/sluice-consumer"),
            Some(Program::Consumer)
        );
        assert_eq!(program("./sluice-allinone"), Some(Program::Allinone));
        assert_eq!(
            program("/usr/local/bin/sluice-llm-sim"),
            Some(Program::LlmSim)
        );
    }

    #[test]
    fn bare_names_pick_the_program() {
        for p in Program::ALL {
            assert_eq!(program(p.name()), Some(p));
        }
    }

    #[test]
    fn other_names_pick_none() {
        assert_eq!(program_of(None), None);
        assert_eq!(program(""), None);
        assert_eq!(program("sluice"), None);
        assert_eq!(program("/usr/local/bin/sluice"), None);
        // A directory of that name, a prefix, a suffix, another case.
        assert_eq!(program("/opt/sluice-rls/sluice"), None);
        assert_eq!(program("sluice-r"), None);
        assert_eq!(program("sluice-rls-bench"), None);
        assert_eq!(program("sluice-rls.exe"), None);
        assert_eq!(program("SLUICE-RLS"), None);
        assert_eq!(program("/"), None);
    }

    #[cfg(unix)]
    #[test]
    fn non_utf8_names_pick_none_and_are_shown_lossily() {
        use std::os::unix::ffi::OsStrExt;
        let name = OsStr::from_bytes(b"/bin/sluice-rls\xff");
        assert_eq!(program_of(Some(name)), None);
        // The program is found by the file name even when a directory above is not UTF-8.
        let dir = OsStr::from_bytes(b"/opt/\xff/sluice-consumer");
        assert_eq!(program_of(Some(dir)), Some(Program::Consumer));
        assert!(usage(Some(name)).contains("sluice-rls\u{FFFD}"));
    }

    #[test]
    fn usage_names_every_program_and_what_it_was_run_as() {
        let text = usage(Some(OsStr::new("/tmp/sluice")));
        for p in Program::ALL {
            assert!(text.contains(p.name()), "{text}");
        }
        for name in [sluice_broker::NAMESRV_NAME, sluice_broker::BROKER_NAME] {
            assert!(text.contains(name), "{text}");
        }
        assert!(text.contains("\"/tmp/sluice\""), "{text}");
        assert!(usage(None).contains("(none)"));
    }
}
