//! The deferral contract: what the deferral endpoint (in `sluice-rls`) and
//! the paced consumer (`sluice-consumer`) agree on, defined once.
//!
//! - [`work`]: the work item (LiteTopic message body) and [`Priority`];
//! - [`keys`]: every Redis key both sides touch, with its hash tag
//!   ([`key_table`]: the same keys as docs/architecture.md's table shows them);
//! - [`stream`]: the entries of a response stream as a typed [`StreamEvent`];
//! - [`claim`]: the `processing:{id}` claim value and when it is stale;
//! - [`bookkeeping`]: every Redis command on the shared bucket keys
//!   (announce, count a publish, count a pop, leases, lease lapse);
//! - [`local`]: the in-process channel for chunks ([`LocalBus`]);
//! - [`saturation`]: whether a model's server is saturated (written by the
//!   consumers' controller, read by sluice-rls) and where an in-quota
//!   request goes then;
//! - [`trace`]: the client's W3C trace context ([`TraceContext`]), carried
//!   by the work item to the model call.
//!
//! The `x-sluice-*` header names and the RLS metadata keys are not here:
//! their one home is `sluice-admission` (`admission/`), which the filter,
//! ext_authz and the endpoint share; the consumer uses none of them.
//!
//! Why a crate of its own and not a module of `sluice-proto`: `proto/` holds
//! the prost wire types that the Wasm filter links, while this contract needs
//! serde, redis and tokio, which the filter must not pull in. This crate
//! depends on neither `sluice-ratelimit` nor `sluice-consumer`; both depend
//! on it.

pub mod bookkeeping;
pub mod claim;
pub mod key_table;
pub mod keys;
pub mod local;
pub mod saturation;
pub mod stream;
pub mod trace;
pub mod work;

pub use claim::{ClaimTiming, ClaimTimingError};
pub use local::LocalBus;
pub use stream::StreamEvent;
pub use trace::{join_trace, join_trace_read, onward_trace, TraceContext, TRACE_TARGET};
pub use work::{Priority, WorkItem, WorkItemError};

/// Unix time in milliseconds (0 if the clock is before 1970).
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
