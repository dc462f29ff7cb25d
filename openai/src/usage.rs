//! The `usage` object of an answer, and reading it back from the answer as
//! it passes (never delaying it): the filter and ext_authz settle a charge
//! with it, the consumer corrects its pacing, the simulator writes it.

use crate::stream;
use serde::ser::{Serialize, SerializeStruct, Serializer};
use serde_json::Value;

/// Largest response body (or SSE line) kept to find `usage`, and most output
/// text kept to count an answer without it: one bound for every reader.
pub const USAGE_BUFFER_LIMIT: usize = 4 * 1024 * 1024;

/// Usage as the backend reported it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Prompt tokens served from the backend's cache (part of `prompt_tokens`).
    pub cached_tokens: u64,
}

impl Usage {
    /// No cached tokens.
    pub fn new(prompt_tokens: u64, completion_tokens: u64) -> Self {
        Usage {
            prompt_tokens,
            completion_tokens,
            cached_tokens: 0,
        }
    }

    /// What the model processed: prompt (cached included) plus completion.
    pub fn total(&self) -> u64 {
        self.prompt_tokens.saturating_add(self.completion_tokens)
    }

    /// From a `usage` object: chat/completions (`prompt_tokens`,
    /// `completion_tokens`), embeddings (`prompt_tokens`, `total_tokens`),
    /// responses (`input_tokens`, `output_tokens`); `None` without a prompt
    /// count.
    pub fn from_value(usage: &Value) -> Option<Usage> {
        let n = |k: &str| usage.get(k).and_then(Value::as_u64);
        let prompt = n("prompt_tokens").or(n("input_tokens"))?;
        let completion = n("completion_tokens")
            .or(n("output_tokens"))
            .or_else(|| n("total_tokens").map(|t| t.saturating_sub(prompt)))
            .unwrap_or(0);
        let cached = usage
            .get("prompt_tokens_details")
            .or_else(|| usage.get("input_tokens_details"))
            .and_then(|d| d.get("cached_tokens"))
            .and_then(Value::as_u64)
            .unwrap_or(0)
            .min(prompt);
        Some(Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            cached_tokens: cached,
        })
    }
}

/// As chat/completions write it: `prompt_tokens`, `completion_tokens`,
/// `total_tokens`, and `prompt_tokens_details.cached_tokens` when some were.
impl Serialize for Usage {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(serde::Serialize)]
        struct Details {
            cached_tokens: u64,
        }
        let cached = self.cached_tokens > 0;
        let mut usage = serializer.serialize_struct("Usage", 3 + usize::from(cached))?;
        usage.serialize_field("prompt_tokens", &self.prompt_tokens)?;
        usage.serialize_field("completion_tokens", &self.completion_tokens)?;
        usage.serialize_field("total_tokens", &self.total())?;
        if cached {
            let details = Details {
                cached_tokens: self.cached_tokens,
            };
            usage.serialize_field("prompt_tokens_details", &details)?;
        }
        usage.end()
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

/// Most pieces of output text kept apart (a choice's text, each tool call's
/// name and arguments); an answer with more is not counted.
const MAX_SEGMENTS: usize = 256;

/// A piece of output counted on its own: a choice's text, or the name or
/// arguments of one of its tool calls (generated as separate token runs, so
/// joining them would merge tokens across their boundary).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Segment {
    Text { choice: usize },
    CallName { choice: usize, call: usize },
    CallArguments { choice: usize, call: usize },
}

/// The generated text that passed, per segment: what the answer is charged
/// when the backend reports no usage (a broken stream, or a backend without
/// usage). Bounded by the tracker's limit.
#[derive(Debug, Default)]
struct OutputText {
    segments: Vec<(Segment, String)>,
    bytes: usize,
    overflowed: bool,
}

/// An array index of the wire (`index` fields), or the position.
fn index_of(item: &Value, position: usize) -> usize {
    item.get("index")
        .and_then(Value::as_u64)
        .map_or(position, |i| usize::try_from(i).unwrap_or(usize::MAX))
}

impl OutputText {
    fn push(&mut self, segment: Segment, text: &str) {
        if text.is_empty() || self.overflowed {
            return;
        }
        let slot = match self.segments.iter().position(|(s, _)| *s == segment) {
            Some(slot) => slot,
            None if self.segments.len() < MAX_SEGMENTS => {
                self.segments.push((segment, String::new()));
                self.segments.len() - 1
            }
            None => {
                self.overflowed = true;
                return;
            }
        };
        if let Some((_, kept)) = self.segments.get_mut(slot) {
            kept.push_str(text);
            self.bytes += text.len();
        }
    }

    /// The text of a streamed chunk: chat deltas (content, refusal, tool
    /// call names and arguments), completions' `text`, the Responses API's
    /// `*.delta` events.
    fn add_chunk(&mut self, chunk: &Value) {
        if let Some(choices) = chunk.get("choices").and_then(Value::as_array) {
            for (position, choice) in choices.iter().enumerate() {
                let message = choice.get("delta").or_else(|| choice.get("message"));
                self.add_choice(index_of(choice, position), choice, message);
            }
        } else if chunk
            .get("type")
            .and_then(Value::as_str)
            .is_some_and(|t| t.ends_with(".delta"))
        {
            if let Some(delta) = chunk.get("delta").and_then(Value::as_str) {
                self.push(Segment::Text { choice: 0 }, delta);
            }
        }
    }

    fn add_choice(&mut self, choice_index: usize, choice: &Value, message: Option<&Value>) {
        let text = |v: Option<&Value>, key: &str| {
            v.and_then(|v| v.get(key))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let segment = Segment::Text {
            choice: choice_index,
        };
        self.push(segment, &text(Some(choice), "text"));
        self.push(segment, &text(message, "content"));
        self.push(segment, &text(message, "refusal"));
        let calls = message
            .and_then(|m| m.get("tool_calls"))
            .and_then(Value::as_array);
        for (position, call) in calls.into_iter().flatten().enumerate() {
            let (choice, call_index) = (choice_index, index_of(call, position));
            let function = call.get("function");
            self.push(
                Segment::CallName {
                    choice,
                    call: call_index,
                },
                &text(function, "name"),
            );
            self.push(
                Segment::CallArguments {
                    choice,
                    call: call_index,
                },
                &text(function, "arguments"),
            );
        }
    }

    /// Output tokens of the text, each segment counted on its own.
    fn count(&self, count_tokens: impl Fn(&str) -> usize) -> Option<u64> {
        (!self.overflowed).then(|| {
            self.segments
                .iter()
                .map(|(_, text)| count_tokens(text) as u64)
                .sum()
        })
    }
}

/// How an answer ended, for reconciliation.
#[derive(Debug)]
pub enum Outcome {
    /// The backend reported usage.
    Reported(Usage),
    /// No usage: this many output tokens passed (counted with the model's tokenizer).
    Counted { output_tokens: u64 },
    /// Neither: the text did not fit the tracker's bound.
    Unknown,
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
    output: OutputText,
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
            output: OutputText::default(),
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
                        sse_line(line, &mut self.found, &mut self.output, self.limit);
                    } else {
                        self.output.overflowed = true;
                    }
                    line.clear();
                    rest = tail.get(1..).unwrap_or_default();
                }
                if line.len() + rest.len() <= self.limit {
                    line.extend_from_slice(rest);
                } else {
                    // An oversized line cannot hold anything we can parse in bounds.
                    line.clear();
                    self.output.overflowed = true;
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
                let document = serde_json::from_slice::<Value>(body).ok();
                body.clear();
                let document = document?;
                self.output.add_chunk(&document);
                usage_in(&document)
            }
            Mode::Sse { line } => {
                sse_line(line, &mut self.found, &mut self.output, self.limit);
                line.clear();
                self.found
            }
        }
    }

    /// How the answer ended (complete or not): the reported usage, else the
    /// output that passed, counted with `count_tokens` (the model's tokenizer).
    pub fn outcome(&mut self, count_tokens: Option<impl Fn(&str) -> usize>) -> Outcome {
        if let Some(usage) = self.finish() {
            return Outcome::Reported(usage);
        }
        match count_tokens.and_then(|count| self.output.count(count)) {
            Some(output_tokens) => Outcome::Counted { output_tokens },
            None => Outcome::Unknown,
        }
    }
}

/// One complete SSE line: its usage (if any) and the text it carries.
fn sse_line(line: &[u8], found: &mut Option<Usage>, output: &mut OutputText, limit: usize) {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let Some(data) = stream::data_payload(line) else {
        return;
    };
    if data.first() != Some(&b'{') {
        return; // [DONE], or not a JSON event
    }
    let Ok(chunk) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    if let Some(usage) = usage_in(&chunk) {
        *found = Some(usage);
    }
    output.add_chunk(&chunk);
    if output.bytes > limit {
        output.overflowed = true;
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)] // tests fail loudly
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn usage_of_every_shape() {
        let chat = json!({"prompt_tokens": 11, "completion_tokens": 30, "total_tokens": 41,
            "prompt_tokens_details": {"cached_tokens": 8}});
        assert_eq!(
            Usage::from_value(&chat),
            Some(Usage {
                prompt_tokens: 11,
                completion_tokens: 30,
                cached_tokens: 8
            })
        );
        let responses = json!({"input_tokens": 5, "output_tokens": 7,
            "input_tokens_details": {"cached_tokens": 9}});
        let usage = Usage::from_value(&responses);
        assert_eq!(usage.map(|u| (u.total(), u.cached_tokens)), Some((12, 5)));
        let totals_only = json!({"prompt_tokens": 4, "total_tokens": 10});
        assert_eq!(
            Usage::from_value(&totals_only).map(|u| u.completion_tokens),
            Some(6)
        );
        assert_eq!(Usage::from_value(&json!({"completion_tokens": 3})), None);
        assert_eq!(Usage::from_value(&json!(null)), None);
    }

    #[test]
    fn written_as_chat_completions_write_it() {
        assert_eq!(
            serde_json::to_string(&Usage::new(3, 4)).unwrap(),
            r#"{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}"#
        );
        let cached = Usage {
            cached_tokens: 2,
            ..Usage::new(3, 4)
        };
        let written = serde_json::to_value(cached).unwrap();
        assert_eq!(
            written["prompt_tokens_details"],
            json!({"cached_tokens": 2})
        );
        assert_eq!(Usage::from_value(&written), Some(cached));
    }

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
                completion_tokens: 30,
                cached_tokens: 0
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
                completion_tokens: 0,
                cached_tokens: 0
            })
        );
        let v: Value = serde_json::from_str(r#"{"type":"response.completed","response":{"usage":{"input_tokens":5,"output_tokens":9}}}"#).unwrap();
        assert_eq!(
            usage_in(&v),
            Some(Usage {
                prompt_tokens: 5,
                completion_tokens: 9,
                cached_tokens: 0
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
                    completion_tokens: 3,
                    cached_tokens: 0
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

#[cfg(test)]
#[allow(clippy::indexing_slicing, clippy::unwrap_used)] // tests fail loudly
mod output_tests {
    use super::*;

    fn chars(text: &str) -> usize {
        text.chars().count()
    }

    fn counted(tracker: &mut UsageTracker) -> u64 {
        match tracker.outcome(Some(chars)) {
            Outcome::Counted { output_tokens } => output_tokens,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_broken_stream_is_counted_from_its_deltas() {
        let mut t = UsageTracker::for_content_type("text/event-stream", 1 << 16).unwrap();
        t.feed(b"data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}],\"usage\":null}\n\n");
        t.feed(b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"abc\"}}]}\n\n");
        t.feed(b"data: {\"choices\":[{\"index\":1,\"text\":\"xy\"}]}\n\n");
        t.feed(b"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"function\":{\"arguments\":\"{}\"}}]}}]}\n\n");
        // The last line never ended: what it holds did not pass as an event.
        t.feed(b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"zzz");
        assert_eq!(counted(&mut t), 3 + 2 + 2);
        // Tool calls as OpenAI streams them: each call's name and arguments
        // count as separate runs of tokens.
        let mut t = UsageTracker::for_content_type("text/event-stream", 1 << 16).unwrap();
        t.feed(b"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"arguments\":\"\"}}]}}]}\n\n");
        t.feed(b"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"q\"}}]}}]}\n\n");
        t.feed(b"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"call_2\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}}]}\n\n");
        t.feed(b"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"}\"}}]}}]}\n\n");
        assert_eq!(t.output.segments.len(), 4);
        assert_eq!(counted(&mut t), 8 + 5 + 1 + 2);
        let mut t = UsageTracker::for_content_type("text/event-stream", 1 << 16).unwrap();
        t.feed(b"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"hello\"}\n\n");
        assert_eq!(counted(&mut t), 5);
    }

    #[test]
    fn a_json_answer_without_usage_is_counted_from_its_choices() {
        let mut t = UsageTracker::for_content_type("application/json", 1 << 16).unwrap();
        t.feed(br#"{"choices":[{"index":0,"message":{"content":"four"}},{"index":1,"message":{"content":"two"}}]}"#);
        assert_eq!(counted(&mut t), 7);
        let mut t = UsageTracker::for_content_type("application/json", 1 << 16).unwrap();
        t.feed(br#"{"choices":[{"index":0,"message":{"content":"cut"#);
        assert_eq!(counted(&mut t), 0);
    }

    #[test]
    fn usage_wins_and_overflow_is_unknown() {
        let mut t = UsageTracker::for_content_type("text/event-stream", 1 << 16).unwrap();
        t.feed(b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"abc\"}}]}\n\n");
        t.feed(
            b"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":9}}\n\n",
        );
        assert!(matches!(t.outcome(Some(chars)), Outcome::Reported(u) if u.completion_tokens == 9));
        let mut t = UsageTracker::for_content_type("text/event-stream", 64).unwrap();
        for _ in 0..10 {
            t.feed(b"data: {\"choices\":[{\"delta\":{\"content\":\"abcdefgh\"}}]}\n\n");
        }
        assert!(matches!(t.outcome(Some(chars)), Outcome::Unknown));
    }
}
