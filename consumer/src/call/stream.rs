//! Writing the response stream `response:{<req_id>}`. Its entries
//! (`chunk`, `done`, `error`) are the contract's [`StreamEvent`].
//!
//! Every XADD trims with `MAXLEN ~ maxlen`. While a call runs, every write
//! also refreshes an in-flight expiry (so the stream of a consumer that died
//! does not stay forever); the terminal entry sets the final expiry.

use serde::{Deserialize, Serialize};
use sluice_contract::stream::{Field, Kind, StreamEvent};
use sluice_redis::RedisConn;

/// Settings of response streams.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StreamConfig {
    /// `XADD … MAXLEN ~ maxlen`.
    pub maxlen: u64,
    /// Expiry of the stream after its `done` / `error` entry.
    pub ttl_after_end_secs: u64,
    /// Expiry refreshed by every write while the call runs.
    pub in_flight_ttl_secs: u64,
}

impl Default for StreamConfig {
    fn default() -> Self {
        StreamConfig {
            maxlen: 10_000,
            ttl_after_end_secs: 300,
            in_flight_ttl_secs: 3600,
        }
    }
}

/// The last entry of a stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Terminal {
    Done {
        /// JSON text of the usage object.
        usage: Option<String>,
    },
    Error {
        status: u16,
        code: ErrorCode,
        message: String,
    },
}

/// The codes written in `error` entries (their `code` field): a closed set,
/// so a caller cannot write one that clients do not know.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorCode {
    /// The backend answered an error (status passed through for client
    /// errors, 502 otherwise), or sent an error event in its stream.
    BackendError,
    /// The backend's stream broke after output started.
    BackendStreamBroken,
    /// The backend went silent for longer than the idle timeout after output started.
    BackendTimeout,
    /// The backend could not be reached (written only by [`crate::Processor::give_up`]).
    BackendUnreachable,
    /// Sluice's store (Redis) failed every attempt: down, or no replica
    /// took the claim (`claim_replicas`). Written only by
    /// [`crate::Processor::give_up`].
    StoreUnavailable,
    /// The work item cannot be sent (body not an object, path not allowed).
    InvalidRequest,
    /// The client went away (`cancel:{id}` was set).
    Cancelled,
    /// A redelivery found an earlier attempt that died mid-call; the model
    /// is not called a second time (written by the claim script).
    Interrupted,
}

impl ErrorCode {
    /// The code as the entry spells it.
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BackendError => "backend_error",
            ErrorCode::BackendStreamBroken => "backend_stream_broken",
            ErrorCode::BackendTimeout => "backend_timeout",
            ErrorCode::BackendUnreachable => "backend_unreachable",
            ErrorCode::StoreUnavailable => "store_unavailable",
            ErrorCode::InvalidRequest => "invalid_request",
            ErrorCode::Cancelled => "cancelled",
            ErrorCode::Interrupted => "interrupted",
        }
    }
}

impl Terminal {
    /// The entry, as the contract spells it.
    pub fn event(&self) -> StreamEvent {
        match self {
            Terminal::Done { usage } => StreamEvent::Done {
                usage: usage.clone(),
            },
            Terminal::Error {
                status,
                code,
                message,
            } => StreamEvent::Error {
                status: *status,
                code: code.as_str().to_string(),
                message: message.clone(),
            },
        }
    }

    /// Field/value pairs of the entry.
    pub fn fields(&self) -> Vec<(&'static str, String)> {
        self.event().fields()
    }

    /// Value of `done:{id}`.
    pub fn done_value(&self) -> &'static str {
        match self {
            Terminal::Done { .. } => "ok",
            Terminal::Error {
                code: ErrorCode::Cancelled,
                ..
            } => "cancelled",
            Terminal::Error { .. } => "error",
        }
    }
}

/// KEYS: response, cancel. ARGV: maxlen, in-flight ttl s, claimed-at ms,
/// sequence number of the first chunk, then the chunks. Returns whether the
/// request was cancelled.
///
/// The chunks of one attempt have the ids `<claimed-at>-<n>` (n = 1, 2, …),
/// and the script adds only those past the stream's last one: a batch sent
/// again after its reply was lost with the connection is not written twice.
/// (Only the owner writes chunks; a terminal entry, `*`, always sorts after
/// them, since Redis never issues an id below the stream's last.)
const WRITE_CHUNKS: &str = r#"
local written = 0
local top = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
if top[1] then
  local ms, n = string.match(top[1][1], '^(%d+)-(%d+)$')
  if ms == ARGV[3] then written = tonumber(n) end
end
local first = tonumber(ARGV[4])
for i = 5, #ARGV do
  local n = first + i - 5
  if n > written then
    redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], ARGV[3] .. '-' .. n,
      '{TYPE}', '{CHUNK}', '{DATA}', ARGV[i])
  end
end
redis.call('EXPIRE', KEYS[1], ARGV[2])
return redis.call('EXISTS', KEYS[2])
"#;

/// [`WRITE_CHUNKS`] with the contract's field and kind names.
static WRITE_CHUNKS_SCRIPT: std::sync::LazyLock<redis::Script> = std::sync::LazyLock::new(|| {
    redis::Script::new(
        &WRITE_CHUNKS
            .replace("{TYPE}", Field::Type.as_str())
            .replace("{CHUNK}", Kind::Chunk.as_str())
            .replace("{DATA}", Field::Data.as_str()),
    )
});

/// Where one attempt's chunks go, and the id of its next one.
pub(crate) struct ChunkTarget<'a> {
    pub response_key: &'a str,
    pub cancel_key: &'a str,
    /// The claim's time: the first part of every chunk id.
    pub claimed_at_ms: u64,
    /// The sequence number of `chunks[0]` (1 for the first chunk).
    pub first_seq: u64,
}

/// Writes `chunks` (idempotently: see [`WRITE_CHUNKS`]), refreshes the
/// in-flight expiry and reads `cancel:{id}`, in one script. Returns whether
/// the request was cancelled.
pub(crate) async fn write_chunks(
    conn: &mut RedisConn,
    config: &StreamConfig,
    target: &ChunkTarget<'_>,
    chunks: &[String],
) -> Result<bool, redis::RedisError> {
    let mut invocation = WRITE_CHUNKS_SCRIPT.key(target.response_key);
    invocation
        .key(target.cancel_key)
        .arg(config.maxlen)
        .arg(config.in_flight_ttl_secs)
        .arg(target.claimed_at_ms)
        .arg(target.first_seq);
    for chunk in chunks {
        invocation.arg(chunk);
    }
    let cancelled: i64 = invocation.invoke_async(conn).await?;
    Ok(cancelled == 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_fields() {
        let done = Terminal::Done {
            usage: Some("{\"total_tokens\":3}".into()),
        };
        assert_eq!(
            done.fields(),
            vec![
                ("type", "done".to_string()),
                ("usage", "{\"total_tokens\":3}".to_string())
            ]
        );
        assert_eq!(done.done_value(), "ok");
        assert_eq!(Terminal::Done { usage: None }.fields().len(), 1);
        let error = Terminal::Error {
            status: 499,
            code: ErrorCode::Cancelled,
            message: "client went away".into(),
        };
        assert_eq!(error.fields()[1], ("status", "499".to_string()));
        assert_eq!(error.done_value(), "cancelled");
    }
}
