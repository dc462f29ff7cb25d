#![recursion_limit = "256"] // rocketmq-client futures are deeply nested
//! The deferral endpoint: deferred requests are queued for their tenant ×
//! model bucket and answered from the Redis Streams the consumer writes.
//!
//! [`Endpoint::build`] wires it (stream hub, control connection, LiteTopic
//! publisher with its bucket caps, router) from an [`EndpointConfig`]; the
//! binaries and the tests use it. [`args::DeferralArgs`] are its flags.

pub mod args;
pub mod body;
pub mod budget;
mod build;
pub mod caps;
pub mod endpoint;
pub mod hub;
pub mod listener;
pub mod metrics;
pub mod publisher;
pub mod quota;
pub mod secrets;
pub mod sse;
mod watch;

pub use args::{Broker, DeferralArgs, DeferralMetrics, InProcess};
pub use build::{BuildError, Endpoint, EndpointConfig};
