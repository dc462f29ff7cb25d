//! Entries of the response stream `response:{<req_id>}`: the consumer writes
//! them (`XADD`), the deferral endpoint reads them (`XREAD`). Each entry has a
//! `type` field and the fields of its type:
//!
//! - `chunk`: `data` = the exact `data:` payload of one SSE event from the
//!   backend (JSON text).
//! - `done`: `usage` = JSON text of the usage object, when the backend sent one.
//! - `error`: `status` (HTTP status for the client), `code` (machine code),
//!   `message` (human readable).
//!
//! The consumer's Lua scripts (consumer/src/call/idempotency.rs) write `error`
//! entries with the same field names; [`field`] and [`kind`] are their
//! single spelling on the Rust side.

/// Field names.
pub mod field {
    pub const TYPE: &str = "type";
    pub const DATA: &str = "data";
    pub const USAGE: &str = "usage";
    pub const STATUS: &str = "status";
    pub const CODE: &str = "code";
    pub const MESSAGE: &str = "message";
}

/// Values of the `type` field.
pub mod kind {
    pub const CHUNK: &str = "chunk";
    pub const DONE: &str = "done";
    pub const ERROR: &str = "error";
}

/// Status of an `error` entry whose `status` is missing or unreadable.
pub const DEFAULT_ERROR_STATUS: u16 = 502;
/// Code of an `error` entry without one.
pub const DEFAULT_ERROR_CODE: &str = "backend_error";
/// Message of an `error` entry without one.
pub const DEFAULT_ERROR_MESSAGE: &str = "the model call failed";

/// One entry of a response stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StreamEvent {
    /// One SSE event's payload from the backend.
    Chunk { data: String },
    /// The answer is complete; `usage` is the usage object's JSON text.
    Done { usage: Option<String> },
    /// The answer failed: what the client is told.
    Error {
        status: u16,
        code: String,
        message: String,
    },
}

impl StreamEvent {
    /// Field/value pairs of the entry, `type` first.
    pub fn fields(&self) -> Vec<(&'static str, String)> {
        match self {
            StreamEvent::Chunk { data } => vec![
                (field::TYPE, kind::CHUNK.to_string()),
                (field::DATA, data.clone()),
            ],
            StreamEvent::Done { usage } => {
                let mut fields = vec![(field::TYPE, kind::DONE.to_string())];
                if let Some(usage) = usage {
                    fields.push((field::USAGE, usage.clone()));
                }
                fields
            }
            StreamEvent::Error {
                status,
                code,
                message,
            } => vec![
                (field::TYPE, kind::ERROR.to_string()),
                (field::STATUS, status.to_string()),
                (field::CODE, code.clone()),
                (field::MESSAGE, message.clone()),
            ],
        }
    }

    /// Reads an entry through `get` (field name → value). `None` when the
    /// entry has no `type` or one this version does not know (the reader
    /// skips it). Missing fields of a known type take their defaults: an
    /// empty chunk, no usage, the `DEFAULT_ERROR_*` values.
    pub fn from_fields<'a>(get: impl Fn(&str) -> Option<&'a str>) -> Option<Self> {
        match get(field::TYPE)? {
            kind::CHUNK => Some(StreamEvent::Chunk {
                data: get(field::DATA).unwrap_or("").to_string(),
            }),
            kind::DONE => Some(StreamEvent::Done {
                usage: get(field::USAGE).map(str::to_string),
            }),
            kind::ERROR => Some(StreamEvent::Error {
                status: get(field::STATUS)
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(DEFAULT_ERROR_STATUS),
                code: get(field::CODE).unwrap_or(DEFAULT_ERROR_CODE).to_string(),
                message: get(field::MESSAGE)
                    .unwrap_or(DEFAULT_ERROR_MESSAGE)
                    .to_string(),
            }),
            _ => None,
        }
    }

    /// `done` or `error`: nothing follows it.
    pub fn is_terminal(&self) -> bool {
        !matches!(self, StreamEvent::Chunk { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn round_trip(event: &StreamEvent) -> Option<StreamEvent> {
        let map: HashMap<&str, String> = event.fields().into_iter().collect();
        StreamEvent::from_fields(|name| map.get(name).map(String::as_str))
    }

    #[test]
    fn events_round_trip_through_their_fields() {
        for event in [
            StreamEvent::Chunk {
                data: "{\"choices\":[]}".into(),
            },
            StreamEvent::Done { usage: None },
            StreamEvent::Done {
                usage: Some("{\"total_tokens\":3}".into()),
            },
            StreamEvent::Error {
                status: 499,
                code: "cancelled".into(),
                message: "client went away".into(),
            },
        ] {
            assert_eq!(round_trip(&event).as_ref(), Some(&event));
        }
        assert_eq!(
            StreamEvent::Done { usage: None }.fields(),
            vec![("type", "done".to_string())]
        );
    }

    #[test]
    fn unknown_or_partial_entries() {
        let none = |_: &str| None::<&str>;
        assert_eq!(StreamEvent::from_fields(none), None);
        let strange = |name: &str| (name == "type").then_some("progress");
        assert_eq!(StreamEvent::from_fields(strange), None);
        let bare_error = |name: &str| match name {
            "type" => Some("error"),
            "status" => Some("not a number"),
            _ => None,
        };
        assert_eq!(
            StreamEvent::from_fields(bare_error),
            Some(StreamEvent::Error {
                status: 502,
                code: "backend_error".into(),
                message: "the model call failed".into(),
            })
        );
        let bare_chunk = |name: &str| (name == "type").then_some("chunk");
        let chunk = StreamEvent::from_fields(bare_chunk);
        assert_eq!(
            chunk,
            Some(StreamEvent::Chunk {
                data: String::new()
            })
        );
        assert!(!chunk.is_some_and(|c| c.is_terminal()));
    }
}
