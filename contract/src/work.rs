//! The work item: the body of one LiteTopic message, written by the deferral
//! endpoint and read by the consumer. This is the single definition.

use crate::keys;
use crate::trace::TraceContext;
use serde::{Deserialize, Serialize};

/// Upper bound of a request id (it is embedded in four Redis keys).
pub const MAX_REQ_ID_LEN: usize = 200;

/// Priority class of traffic: set per limit in the RLS's limits file, sent
/// by the filter as `x-sluice-priority`, carried in the work item. High
/// waits longest when deferred, low fails fast.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Priority {
    Low,
    #[default]
    Normal,
    High,
}

impl Priority {
    pub const fn as_str(self) -> &'static str {
        match self {
            Priority::Low => "low",
            Priority::Normal => "normal",
            Priority::High => "high",
        }
    }

    /// The priority a header label names; anything else is normal (the
    /// label is signed by the filter, so it is one of the three in practice).
    pub fn from_label(label: &str) -> Self {
        match label {
            "low" => Priority::Low,
            "high" => Priority::High,
            _ => Priority::Normal,
        }
    }
}

/// One deferred request.
///
/// ```json
/// {"req_id": "r-1", "tenant": "acme", "model": "gpt-4o", "priority": "normal",
///  "path": "/v1/chat/completions", "body": {"model": "gpt-4o", "messages": []},
///  "enqueued_at_ms": 1732890000000, "estimated_tokens": 512,
///  "trace": {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}
/// ```
///
/// `priority`, `enqueued_at_ms` and `estimated_tokens` default (normal, 0, 0)
/// when absent, `attempt` to 0 and `trace` to none (it is not written when
/// there is none); every other field is required.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkItem {
    /// Request id; the Redis Cluster hash tag of every key of this request.
    pub req_id: String,
    /// Tenant, as identified by the filter (trusted).
    pub tenant: String,
    /// Model the client asked for (the LiteTopic's model column).
    pub model: String,
    #[serde(default)]
    pub priority: Priority,
    /// Backend path, e.g. `/v1/chat/completions`.
    pub path: String,
    /// The client's JSON request object, unchanged.
    pub body: serde_json::Value,
    /// Unix milliseconds when the deferral endpoint published the message.
    #[serde(default)]
    pub enqueued_at_ms: u64,
    /// Prompt tokens + estimated output tokens (the filter's estimate): the
    /// cost of this message in the tokens/s pacing dimension.
    #[serde(default)]
    pub estimated_tokens: u64,
    /// Times the consumer re-published this item after an infrastructure
    /// failure (the broker never redelivers).
    #[serde(default)]
    pub attempt: u32,
    /// The client's W3C trace context, sent on to the model with the call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceContext>,
}

/// Why a message cannot be processed at all.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WorkItemError {
    #[error("work item is not valid JSON for the contract: {0}")]
    Json(String),
    #[error("invalid req_id: {0}")]
    ReqId(&'static str),
}

impl WorkItem {
    /// Parses a message body and checks the request id (see
    /// [`WorkItem::validate`]). A malformed trace context is dropped: it
    /// never costs the request its answer.
    pub fn from_json(bytes: &[u8]) -> Result<Self, WorkItemError> {
        let mut item: WorkItem =
            serde_json::from_slice(bytes).map_err(|e| WorkItemError::Json(e.to_string()))?;
        item.validate()?;
        item.trace = item.trace.filter(TraceContext::is_valid);
        Ok(item)
    }

    /// The trace id of the client's trace context, if it sent one.
    pub fn trace_id(&self) -> Option<&str> {
        self.trace.as_ref().map(TraceContext::trace_id)
    }

    /// The message body.
    pub fn to_json(&self) -> Vec<u8> {
        // Serializing a struct of strings, numbers and a Value cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Checks what must hold before any Redis key is built from the item: a
    /// request id that is non-empty, bounded, and free of braces (the hash
    /// tag), whitespace and control characters. An item failing this cannot
    /// even be answered (there is no safe stream key): the caller logs and
    /// acks it.
    pub fn validate(&self) -> Result<(), WorkItemError> {
        validate_req_id(&self.req_id)
    }

    /// Milliseconds spent in the queue, given the current Unix time.
    pub fn queued_ms(&self, now_ms: u64) -> u64 {
        now_ms.saturating_sub(self.enqueued_at_ms)
    }

    /// Key of the response stream.
    pub fn response_key(&self) -> String {
        keys::response(&self.req_id)
    }
}

/// See [`WorkItem::validate`].
pub fn validate_req_id(req_id: &str) -> Result<(), WorkItemError> {
    if req_id.is_empty() {
        return Err(WorkItemError::ReqId("empty"));
    }
    if req_id.len() > MAX_REQ_ID_LEN {
        return Err(WorkItemError::ReqId("longer than 200 bytes"));
    }
    if req_id
        .chars()
        .any(|c| c == '{' || c == '}' || c.is_whitespace() || c.is_control())
    {
        return Err(WorkItemError::ReqId(
            "contains a brace, whitespace or a control character",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_defaults() {
        let text = br#"{"req_id":"r-1","tenant":"acme","model":"m","path":"/v1/chat/completions","body":{"model":"m","messages":[]}}"#;
        let item = WorkItem::from_json(text).unwrap();
        assert_eq!(item.priority, Priority::Normal);
        assert_eq!(item.estimated_tokens, 0);
        assert_eq!(item.trace, None);
        let again = WorkItem::from_json(&item.to_json()).unwrap();
        assert_eq!(again, item);
        assert!(!String::from_utf8_lossy(&item.to_json()).contains("trace"));
        let full = br#"{"req_id":"r-2","tenant":"t","model":"m","priority":"high","path":"/v1/completions","body":{},"enqueued_at_ms":5,"estimated_tokens":7}"#;
        let item = WorkItem::from_json(full).unwrap();
        assert_eq!(item.priority, Priority::High);
        assert_eq!(item.estimated_tokens, 7);
        assert_eq!(item.queued_ms(12), 7);
        assert_eq!(item.response_key(), keys::response("r-2"));
        assert!(item.response_key().ends_with(":response:r-2"));
    }

    #[test]
    fn carries_the_trace_context_and_drops_a_malformed_one() {
        let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let text = format!(
            r#"{{"req_id":"r","tenant":"t","model":"m","path":"/","body":{{}},"trace":{{"traceparent":"{parent}","tracestate":"a=b"}}}}"#
        );
        let item = WorkItem::from_json(text.as_bytes()).unwrap();
        assert_eq!(item.trace_id(), Some("4bf92f3577b34da6a3ce929d0e0e4736"));
        assert_eq!(
            item.trace.as_ref().unwrap().tracestate.as_deref(),
            Some("a=b")
        );
        assert_eq!(WorkItem::from_json(&item.to_json()).unwrap(), item);
        let forged = br#"{"req_id":"r","tenant":"t","model":"m","path":"/","body":{},"trace":{"traceparent":"00-x\r\nevil: 1"}}"#;
        let item = WorkItem::from_json(forged).unwrap();
        assert_eq!(item.trace, None);
    }

    #[test]
    fn rejects_bad_request_ids() {
        for bad in ["", "a}b", "a{b", "a b", "a\nb"] {
            assert!(validate_req_id(bad).is_err(), "{bad:?}");
        }
        assert!(validate_req_id(&"x".repeat(201)).is_err());
        assert!(validate_req_id("chatcmpl-0f3a_9:x").is_ok());
        assert_eq!(Priority::from_label("high"), Priority::High);
        assert_eq!(Priority::from_label("low"), Priority::Low);
        assert_eq!(Priority::from_label("urgent"), Priority::Normal);
        assert!(Priority::Low < Priority::Normal && Priority::Normal < Priority::High);
        assert!(WorkItem::from_json(br#"{"req_id":"r"}"#).is_err());
        assert!(WorkItem::from_json(
            br#"{"req_id":"r","tenant":"t","model":"m","priority":"urgent","path":"/","body":{}}"#
        )
        .is_err());
    }
}
