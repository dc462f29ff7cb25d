//! Wire types shared across Sluice.
//!
//! * [`rls`] — the Envoy rate limit service v3 messages (`envoy.service.ratelimit.v3`)
//!   as plain `prost` structs with the upstream field numbers. They have no tonic or
//!   transport dependency, so the wasm filter can encode a `RateLimitRequest` and
//!   decode the `RateLimitResponse` it gets back through Envoy's gRPC client.
//! * [`pb`] (feature `server`) — the full generated types and the tonic
//!   service/client code from the `envoy-types` crate, used by the services.
//!
//! The two are byte-compatible on the wire; the tests in this crate check it by
//! encoding with one and decoding with the other.

pub mod rls;

#[cfg(feature = "server")]
pub use envoy_types::pb;

/// envoyproxy/ratelimit's `RateLimitConfig` xDS resource.
#[cfg(feature = "server")]
pub mod rls_config;

/// Fully qualified gRPC service name and method of the Envoy RLS v3 API.
pub const RLS_SERVICE: &str = "envoy.service.ratelimit.v3.RateLimitService";
/// Method name of [`RLS_SERVICE`] that makes a decision.
pub const RLS_METHOD: &str = "ShouldRateLimit";
