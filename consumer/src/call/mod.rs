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

/// A chat request's work item with `body` and `estimated_tokens`, for the
/// call module's tests.
#[cfg(test)]
pub(crate) fn test_item(
    body: serde_json::Value,
    estimated_tokens: u64,
) -> sluice_contract::WorkItem {
    sluice_contract::WorkItem {
        req_id: "r".into(),
        tenant: "t".into(),
        model: "m".into(),
        priority: Default::default(),
        path: "/v1/chat/completions".into(),
        body,
        enqueued_at_ms: 0,
        estimated_tokens,
        attempt: 0,
        trace: None,
    }
}
