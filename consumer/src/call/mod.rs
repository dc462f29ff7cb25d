//! One work item from claim to terminal entry: the idempotency markers, the
//! streaming call to the model, the response stream it is written to, and
//! the usage the answer reports.
//!
//! Below pacing and sharing: nothing here asks whether a call may start.

pub(crate) mod http_client;
pub(crate) mod idempotency;
pub(crate) mod invoke;
pub(crate) mod processor;
pub(crate) mod sent;
pub(crate) mod stream;
pub(crate) mod usage;

pub use invoke::OutputObserver;
