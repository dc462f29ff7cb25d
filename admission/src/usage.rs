//! Real token usage, read from the response as it passes (never delaying it).

use serde_json::Value;

/// Usage as the backend reported it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

impl Usage {
    pub fn total(&self) -> u64 {
        self.prompt_tokens.saturating_add(self.completion_tokens)
    }

    /// From a `usage` object: chat/completions (`prompt_tokens`,
    /// `completion_tokens`), embeddings (`prompt_tokens`, `total_tokens`),
    /// responses (`input_tokens`, `output_tokens`).
    pub fn from_value(usage: &Value) -> Option<Usage> {
        let n = |k: &str| usage.get(k).and_then(Value::as_u64);
        let prompt = n("prompt_tokens").or(n("input_tokens"))?;
        let completion = n("completion_tokens")
            .or(n("output_tokens"))
            .or_else(|| n("total_tokens").map(|t| t.saturating_sub(prompt)))
            .unwrap_or(0);
        Some(Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
        })
    }
}

/// Where `usage` sits in a JSON document: top level, or under `response`
/// (the Responses API's `response.completed` event).
fn usage_in(document: &Value) -> Option<Usage> {
    document
        .get("usage")
        .filter(|u| !u.is_null())
        .or_else(|| document.get("response").and_then(|r| r.get("usage")))
        .and_then(Usage::from_value)
}

#[derive(Debug)]
enum Mode {
    Json { body: Vec<u8> },
    Sse { line: Vec<u8> },
}

/// Collects what is needed to find `usage`, within a memory bound.
#[derive(Debug)]
pub struct UsageTracker {
    mode: Mode,
    found: Option<Usage>,
    limit: usize,
    overflowed: bool,
}

impl UsageTracker {
    /// For a response with this content type; `None` for types without usage.
    /// `limit` bounds what is buffered (a whole JSON body, or one SSE line).
    pub fn for_content_type(content_type: &str, limit: usize) -> Option<UsageTracker> {
        let content_type = content_type.to_ascii_lowercase();
        let mode = if content_type.starts_with("text/event-stream") {
            Mode::Sse { line: Vec::new() }
        } else if content_type.starts_with("application/json") {
            Mode::Json { body: Vec::new() }
        } else {
            return None;
        };
        Some(UsageTracker {
            mode,
            found: None,
            limit,
            overflowed: false,
        })
    }

    pub fn feed(&mut self, chunk: &[u8]) {
        match &mut self.mode {
            Mode::Json { body } => {
                if body.len() + chunk.len() > self.limit {
                    self.overflowed = true;
                    body.clear();
                } else if !self.overflowed {
                    body.extend_from_slice(chunk);
                }
            }
            Mode::Sse { line } => {
                let mut rest = chunk;
                while let Some(newline) = rest.iter().position(|&b| b == b'\n') {
                    let (head, tail) = rest.split_at(newline);
                    if line.len() + head.len() <= self.limit {
                        line.extend_from_slice(head);
                        if let Some(usage) = sse_line_usage(line) {
                            self.found = Some(usage);
                        }
                    }
                    line.clear();
                    rest = tail.get(1..).unwrap_or_default();
                }
                if line.len() + rest.len() <= self.limit {
                    line.extend_from_slice(rest);
                } else {
                    // An oversized line cannot hold anything we can parse in bounds.
                    line.clear();
                }
            }
        }
    }

    /// The usage, once the response has ended.
    pub fn finish(&mut self) -> Option<Usage> {
        match &mut self.mode {
            Mode::Json { body } => {
                if self.overflowed {
                    return None;
                }
                serde_json::from_slice::<Value>(body)
                    .ok()
                    .as_ref()
                    .and_then(usage_in)
            }
            Mode::Sse { line } => {
                if let Some(usage) = sse_line_usage(line) {
                    self.found = Some(usage);
                }
                line.clear();
                self.found
            }
        }
    }
}

fn sse_line_usage(line: &[u8]) -> Option<Usage> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let data = line.strip_prefix(b"data:")?;
    let data = data.strip_prefix(b" ").unwrap_or(data);
    // Cheap filter before parsing: most chunks carry no usage.
    if !data.windows(7).any(|w| w == b"\"usage\"") {
        return None;
    }
    serde_json::from_slice::<Value>(data)
        .ok()
        .as_ref()
        .and_then(usage_in)
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)] // tests fail loudly
mod tests {
    use super::*;

    #[test]
    fn json_usage() {
        let mut t =
            UsageTracker::for_content_type("application/json; charset=utf-8", 1 << 20).unwrap();
        let body = br#"{"id":"x","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":30,"total_tokens":42}}"#;
        let (a, b) = body.split_at(17);
        t.feed(a);
        t.feed(b);
        assert_eq!(
            t.finish(),
            Some(Usage {
                prompt_tokens: 12,
                completion_tokens: 30
            })
        );
    }

    #[test]
    fn embeddings_and_responses_usage() {
        let v: Value =
            serde_json::from_str(r#"{"usage":{"prompt_tokens":8,"total_tokens":8}}"#).unwrap();
        assert_eq!(
            usage_in(&v),
            Some(Usage {
                prompt_tokens: 8,
                completion_tokens: 0
            })
        );
        let v: Value = serde_json::from_str(r#"{"type":"response.completed","response":{"usage":{"input_tokens":5,"output_tokens":9}}}"#).unwrap();
        assert_eq!(
            usage_in(&v),
            Some(Usage {
                prompt_tokens: 5,
                completion_tokens: 9
            })
        );
    }

    #[test]
    fn sse_usage_across_chunk_boundaries() {
        let stream = concat!(
            "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}],\"usage\":null}\n\n",
            "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":3,\"total_tokens\":10}}\r\n\r\n",
            "data: [DONE]\n\n"
        );
        for split in 1..stream.len() - 1 {
            let mut t = UsageTracker::for_content_type("text/event-stream", 1 << 16).unwrap();
            let (a, b) = stream.as_bytes().split_at(split);
            t.feed(a);
            t.feed(b);
            assert_eq!(
                t.finish(),
                Some(Usage {
                    prompt_tokens: 7,
                    completion_tokens: 3
                }),
                "split at {split}"
            );
        }
    }

    #[test]
    fn bounds_and_garbage() {
        let mut t = UsageTracker::for_content_type("application/json", 10).unwrap();
        t.feed(br#"{"usage":{"prompt_tokens":1}}"#);
        assert_eq!(t.finish(), None);
        let mut t = UsageTracker::for_content_type("text/event-stream", 64).unwrap();
        t.feed(b"data: not json \"usage\"\n\ndata: {\"usage\": 5}\n\n");
        assert_eq!(t.finish(), None);
        assert!(UsageTracker::for_content_type("text/plain", 10).is_none());
    }
}
