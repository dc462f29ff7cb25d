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
//! entries with the same field names; [`Field`] and [`Kind`] are their
//! single spelling on the Rust side.

/// Field names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    Type,
    Data,
    Usage,
    Status,
    Code,
    Message,
}

impl Field {
    pub const fn as_str(self) -> &'static str {
        match self {
            Field::Type => "type",
            Field::Data => "data",
            Field::Usage => "usage",
            Field::Status => "status",
            Field::Code => "code",
            Field::Message => "message",
        }
    }
}

/// Values of the `type` field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Chunk,
    Done,
    Error,
}

impl Kind {
    pub const fn as_str(self) -> &'static str {
        match self {
            Kind::Chunk => "chunk",
            Kind::Done => "done",
            Kind::Error => "error",
        }
    }

    /// The kind a `type` value names; `None` for one this version does not know.
    pub fn parse(value: &str) -> Option<Kind> {
        [Kind::Chunk, Kind::Done, Kind::Error]
            .into_iter()
            .find(|kind| kind.as_str() == value)
    }
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
    /// Its `type`.
    pub fn kind(&self) -> Kind {
        match self {
            StreamEvent::Chunk { .. } => Kind::Chunk,
            StreamEvent::Done { .. } => Kind::Done,
            StreamEvent::Error { .. } => Kind::Error,
        }
    }

    /// Field/value pairs of the entry, `type` first.
    pub fn fields(&self) -> Vec<(&'static str, String)> {
        let mut fields = vec![(Field::Type.as_str(), self.kind().as_str().to_string())];
        match self {
            StreamEvent::Chunk { data } => fields.push((Field::Data.as_str(), data.clone())),
            StreamEvent::Done { usage } => {
                fields.extend(
                    usage
                        .iter()
                        .map(|usage| (Field::Usage.as_str(), usage.clone())),
                );
            }
            StreamEvent::Error {
                status,
                code,
                message,
            } => fields.extend([
                (Field::Status.as_str(), status.to_string()),
                (Field::Code.as_str(), code.clone()),
                (Field::Message.as_str(), message.clone()),
            ]),
        }
        fields
    }

    /// Reads an entry through `get` (field name → value). `None` when the
    /// entry has no `type` or one this version does not know (the reader
    /// skips it). Missing fields of a known type take their defaults: an
    /// empty chunk, no usage, the `DEFAULT_ERROR_*` values.
    pub fn from_fields<'a>(get: impl Fn(&str) -> Option<&'a str>) -> Option<Self> {
        let get = |field: Field| get(field.as_str());
        Some(match Kind::parse(get(Field::Type)?)? {
            Kind::Chunk => StreamEvent::Chunk {
                data: get(Field::Data).unwrap_or("").to_string(),
            },
            Kind::Done => StreamEvent::Done {
                usage: get(Field::Usage).map(str::to_string),
            },
            Kind::Error => StreamEvent::Error {
                status: get(Field::Status)
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(DEFAULT_ERROR_STATUS),
                code: get(Field::Code).unwrap_or(DEFAULT_ERROR_CODE).to_string(),
                message: get(Field::Message)
                    .unwrap_or(DEFAULT_ERROR_MESSAGE)
                    .to_string(),
            },
        })
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
