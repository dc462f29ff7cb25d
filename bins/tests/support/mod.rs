//! What more than one of the binaries' tests sets up.

use std::ffi::OsString;
use std::path::Path;

/// envoyproxy/ratelimit's variables that alone place sluice-rls (with
/// `SLUICE_RLS_UPSTREAM_ENV=true`): its runtime directory
/// (`<runtime_root>/ratelimit`) and both listeners on loopback.
pub fn upstream_placement(
    runtime_root: &Path,
    grpc: u16,
    http: u16,
) -> Vec<(&'static str, OsString)> {
    vec![
        ("SLUICE_RLS_UPSTREAM_ENV", "true".into()),
        ("RUNTIME_ROOT", runtime_root.into()),
        ("RUNTIME_SUBDIRECTORY", "ratelimit".into()),
        ("GRPC_HOST", "127.0.0.1".into()),
        ("GRPC_PORT", grpc.to_string().into()),
        ("HOST", "127.0.0.1".into()),
        ("PORT", http.to_string().into()),
    ]
}
