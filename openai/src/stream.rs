//! Server-Sent Events as OpenAI streams answers: `data:` lines carrying
//! JSON chunks, the last chunk carrying `usage` when asked for
//! (`stream_options.include_usage`), and `data: [DONE]` at the end.
//!
//! [`SseParser`] follows the WHATWG rules the backend's stream relies on:
//! lines end with `\n`, `\r\n` or `\r`; a blank line dispatches the event;
//! `data:` lines (one optional space after the colon) are joined with `\n`;
//! comments (`:`), `event:`, `id:` and `retry:` lines are ignored here; an
//! event without data is not dispatched.

use std::fmt;

/// The payload of the stream's last event.
pub const DONE: &str = "[DONE]";
/// The stream's last event, as written.
pub const DONE_EVENT: &str = "data: [DONE]\n\n";

/// Whether an event's payload is the end of the stream.
pub fn is_done(payload: &str) -> bool {
    payload.trim() == DONE
}

/// The payload of one `data:` line (its line end already cut), without the
/// one optional space after the colon; `None` for any other line.
pub fn data_payload(line: &[u8]) -> Option<&[u8]> {
    let data = line.strip_prefix(b"data:")?;
    Some(data.strip_prefix(b" ").unwrap_or(data))
}

/// One event carrying `value` as its JSON `data`.
pub fn data_event(value: &impl serde::Serialize) -> serde_json::Result<Vec<u8>> {
    let mut event = b"data: ".to_vec();
    serde_json::to_writer(&mut event, value)?;
    event.extend_from_slice(b"\n\n");
    Ok(event)
}

/// Largest event accepted (a guard against a backend that never ends a line).
pub const MAX_EVENT_BYTES: usize = 4 * 1024 * 1024;

#[derive(Debug, PartialEq, Eq)]
pub struct EventTooLarge;

impl fmt::Display for EventTooLarge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SSE event larger than {MAX_EVENT_BYTES} bytes")
    }
}

impl std::error::Error for EventTooLarge {}

#[derive(Debug, Default)]
pub struct SseParser {
    line: Vec<u8>,
    data: String,
    has_data: bool,
    /// The previous byte was `\r` (a following `\n` belongs to the same line end).
    after_cr: bool,
}

impl SseParser {
    /// Feeds bytes; returns the payloads of the events they completed.
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<String>, EventTooLarge> {
        let mut events = Vec::new();
        for &byte in bytes {
            if self.after_cr {
                self.after_cr = false;
                if byte == b'\n' {
                    continue;
                }
            }
            match byte {
                b'\n' => self.end_line(&mut events),
                b'\r' => {
                    self.after_cr = true;
                    self.end_line(&mut events);
                }
                _ => {
                    self.line.push(byte);
                    if self.line.len() + self.data.len() > MAX_EVENT_BYTES {
                        return Err(EventTooLarge);
                    }
                }
            }
        }
        Ok(events)
    }

    /// At the end of the body: an event whose blank line never came is
    /// dispatched anyway (some servers end with `data: [DONE]\n`).
    pub fn finish(&mut self) -> Option<String> {
        if !self.line.is_empty() {
            let mut sink = Vec::new();
            self.end_line(&mut sink);
        }
        self.take_event()
    }

    fn end_line(&mut self, events: &mut Vec<String>) {
        if self.line.is_empty() {
            if let Some(event) = self.take_event() {
                events.push(event);
            }
            return;
        }
        let line = std::mem::take(&mut self.line);
        let line = String::from_utf8_lossy(&line);
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line.as_ref(), ""),
        };
        if field == "data" {
            if self.has_data {
                self.data.push('\n');
            }
            self.data.push_str(value);
            self.has_data = true;
        }
    }

    fn take_event(&mut self) -> Option<String> {
        if !self.has_data {
            return None;
        }
        self.has_data = false;
        Some(std::mem::take(&mut self.data))
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing, clippy::unwrap_used)] // tests fail loudly
mod tests {
    use super::*;

    fn parse_in_pieces(input: &[u8], piece: usize) -> Vec<String> {
        let mut parser = SseParser::default();
        let mut out = Vec::new();
        for chunk in input.chunks(piece) {
            out.extend(parser.push(chunk).unwrap());
        }
        out.extend(parser.finish());
        out
    }

    #[test]
    fn events_split_anywhere() {
        let input = b"data: {\"a\":1}\n\n: comment\nevent: x\ndata:{\"b\":2}\r\n\r\ndata: line1\ndata: line2\n\nid: 7\n\ndata: [DONE]\n\n";
        let expected = vec!["{\"a\":1}", "{\"b\":2}", "line1\nline2", "[DONE]"];
        for piece in [1, 2, 3, 7, 1000] {
            assert_eq!(parse_in_pieces(input, piece), expected, "piece {piece}");
        }
    }

    #[test]
    fn cr_only_line_ends_and_unterminated_last_event() {
        assert_eq!(parse_in_pieces(b"data: a\r\rdata: b", 1), vec!["a", "b"]);
        assert_eq!(parse_in_pieces(b"data: [DONE]\n", 4), vec!["[DONE]"]);
        assert_eq!(parse_in_pieces(b"data\n\n", 4), vec![""]);
        assert!(parse_in_pieces(b"retry: 5\n\n", 4).is_empty());
    }

    #[test]
    fn bounded() {
        let mut parser = SseParser::default();
        let big = vec![b'x'; MAX_EVENT_BYTES + 1];
        assert_eq!(parser.push(&big), Err(EventTooLarge));
    }

    #[test]
    fn data_lines_and_the_end() {
        assert_eq!(data_payload(b"data: {}"), Some(&b"{}"[..]));
        assert_eq!(data_payload(b"data:{}"), Some(&b"{}"[..]));
        assert_eq!(data_payload(b"data:  x"), Some(&b" x"[..]));
        assert_eq!(data_payload(b"event: data: x"), None);
        assert!(is_done(" [DONE] ") && !is_done("[done]"));
        let mut parser = SseParser::default();
        assert_eq!(parser.push(DONE_EVENT.as_bytes()).unwrap(), vec![DONE]);
        let event = data_event(&serde_json::json!({"a": "b\nc"})).unwrap();
        assert_eq!(event, b"data: {\"a\":\"b\\nc\"}\n\n");
        assert_eq!(parser.push(&event).unwrap(), vec![r#"{"a":"b\nc"}"#]);
    }
}
