#![recursion_limit = "256"] // rocketmq-client futures are deeply nested
//! Sluice rate-limit service: an Envoy RLS v3 server (`ShouldRateLimit`) with
//! fixed-window counters in memory or Redis, the envoyproxy/ratelimit config
//! format, and Sluice's defer/priority extensions.
//!
//! The binary (`sluice-rls`) is a thin shell over [`cli::serve`], which
//! wires [`server::run`].

pub mod admin;
pub mod cli;
pub mod config;
pub mod deferral;
pub mod ext_authz;
pub mod guard;
pub mod limiter;
pub mod metrics;
pub mod reload;
pub mod server;
pub mod service;
pub mod store;
pub mod upstream_env;
pub mod window;
pub mod xds;

pub use limiter::{Clock, Limiter, ManualClock, SystemClock};

/// Selects rustls's process-wide crypto provider (ring) if none is yet: the
/// build links two (through different dependencies), so rustls cannot pick
/// one itself. Every TLS user here calls it first; later calls do nothing.
pub fn install_rustls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
