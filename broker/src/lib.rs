//! What the two copied upstream mains share in this workspace: which build
//! this is. `--version` keeps upstream's lines (component, then
//! `version=1.0.0`, which `scripts/install-broker` reads) and adds one that
//! tells this build apart from a plain `cargo install` of upstream.

/// The rocketmq-rust release these binaries are built from (the `=` pins in
/// Cargo.toml); upstream prints its own crate version, ours is Sluice's.
pub const UPSTREAM_VERSION: &str = "1.0.0";

/// The patches this build carries, by id (vendor/PATCHES.md).
pub const PATCHES: &str = "store-cq-lock-order,store-lmq-offset-order";

/// The line after upstream's `version=` one: `scripts/install-broker` skips a
/// rebuild only when it finds this exact line.
pub fn build_line() -> String {
    format!("build=sluice-workspace patched={PATCHES}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_line_names_the_workspace_build_and_its_patches() {
        assert_eq!(
            build_line(),
            "build=sluice-workspace patched=store-cq-lock-order,store-lmq-offset-order"
        );
    }
}
