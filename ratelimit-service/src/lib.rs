//! Sluice rate-limit service: an Envoy RLS v3 server (`ShouldRateLimit`) with
//! fixed-window counters in memory or Redis, the envoyproxy/ratelimit config
//! format, and Sluice's defer/priority extensions.
//!
//! The binaries (`sluice-rls`, `sluice-allinone`, in sluice-bins) are thin
//! shells over [`cli::serve`], which wires [`server::run`].

pub mod admin;
pub mod cli;
pub mod config;
pub mod ext_authz;
pub mod guard;
pub mod limiter;
pub mod metrics;
pub mod reload;
pub mod saturation;
pub mod server;
pub mod service;
pub mod store;
pub mod upstream_env;
pub mod window;
pub mod xds;

pub use limiter::{Clock, Limiter, ManualClock, SystemClock};
