//! What a call used: the model's `usage` object, or, for an answer without
//! one, the prompt and the streamed output counted with the model's
//! tokenizer as the filter counts them.

use serde::Deserialize;
use sluice_admission::admission::Encoders;
use sluice_admission::encoders::BpeEncoders;
use sluice_admission::openai::{self, Endpoint};
use sluice_admission::usage::{Outcome as TrackerOutcome, UsageTracker};
use sluice_contract::WorkItem;
use std::sync::OnceLock;

/// Output text kept to count an answer without usage (the filter's bound).
const OUTPUT_TEXT_LIMIT: usize = 4 << 20;
/// Tokens per image part of a prompt counted here (the filter's default).
const IMAGE_TOKENS: u64 = 765;

/// The token counts of a model's `usage` object.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Prompt tokens served from the backend's cache (part of `prompt_tokens`).
    pub cached_tokens: u64,
}

/// `usage` as chat/completions, completions and the Responses API send it.
#[derive(Deserialize)]
struct UsageWire {
    #[serde(alias = "input_tokens")]
    prompt_tokens: u64,
    #[serde(default, alias = "output_tokens")]
    completion_tokens: Option<u64>,
    #[serde(default)]
    total_tokens: Option<u64>,
    #[serde(default, alias = "input_tokens_details")]
    prompt_tokens_details: Option<CachedWire>,
}

#[derive(Deserialize)]
struct CachedWire {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

impl Usage {
    /// `None` when `value` carries no prompt count.
    pub fn from_value(value: &serde_json::Value) -> Option<Usage> {
        let wire = UsageWire::deserialize(value).ok()?;
        let completion = wire
            .completion_tokens
            .or_else(|| {
                wire.total_tokens
                    .map(|t| t.saturating_sub(wire.prompt_tokens))
            })
            .unwrap_or(0);
        let cached = wire
            .prompt_tokens_details
            .and_then(|d| d.cached_tokens)
            .unwrap_or(0);
        Some(Usage {
            prompt_tokens: wire.prompt_tokens,
            completion_tokens: completion,
            cached_tokens: cached.min(wire.prompt_tokens),
        })
    }

    /// What the model processed: prompt (cached included) plus completion.
    /// Pacing protects the model's throughput, so a cached token counts in
    /// full here (the filter's `cached_tokens_weight` is a billing choice).
    pub fn total(&self) -> u64 {
        self.prompt_tokens.saturating_add(self.completion_tokens)
    }
}

/// The streamed output of a call, kept to count it with the model's
/// tokenizer when the answer carries no usage (some servers omit it).
#[derive(Debug, Default)]
pub(crate) struct OutputCounter(Option<UsageTracker>);

impl OutputCounter {
    /// Keeps the output only when `model` has a tokenizer to count it with:
    /// for other models the stream is not parsed a second time for nothing.
    pub(crate) fn for_model(model: &str) -> Self {
        let encoders = encoders();
        let countable = encoders
            .openai_encoding(model)
            .and_then(|encoding| encoders.counter(encoding))
            .is_some();
        OutputCounter(
            countable
                .then(|| UsageTracker::for_content_type("text/event-stream", OUTPUT_TEXT_LIMIT))
                .flatten(),
        )
    }

    /// Bytes of the event stream, as read.
    pub(crate) fn feed(&mut self, bytes: &[u8]) {
        if let Some(tracker) = self.0.as_mut() {
            tracker.feed(bytes);
        }
    }

    /// Output tokens of what was read, with `model`'s tokenizer; `None` when
    /// the model has no known tokenizer or the text overflowed the bound.
    pub(crate) fn output_tokens(&mut self, model: &str) -> Option<u64> {
        let encoders = encoders();
        let counter = encoders
            .openai_encoding(model)
            .and_then(|encoding| encoders.counter(encoding))?;
        match self.0.as_mut()?.outcome(Some(counter)) {
            TrackerOutcome::Counted { output_tokens } => Some(output_tokens),
            // Usage in the stream after all: the caller has it.
            TrackerOutcome::Reported(_) | TrackerOutcome::Unknown => None,
        }
    }
}

/// The tokenizers, built on first use (tens of milliseconds).
fn encoders() -> &'static BpeEncoders {
    static ENCODERS: OnceLock<BpeEncoders> = OnceLock::new();
    ENCODERS.get_or_init(BpeEncoders::new)
}

/// The usage of an answer without one: the prompt counted as the filter
/// counts it, plus `output_tokens` counted from the stream.
pub(crate) fn counted_usage(item: &WorkItem, output_tokens: u64) -> Option<Usage> {
    let encoders = encoders();
    let counter = encoders
        .openai_encoding(&item.model)
        .and_then(|encoding| encoders.counter(encoding))?;
    let endpoint = Endpoint::from_path(&item.path)?;
    let body = serde_json::to_vec(&item.body).ok()?;
    let request = openai::parse(endpoint, &body).ok()?;
    Some(Usage {
        prompt_tokens: request.prompt_tokens(counter, IMAGE_TOKENS),
        completion_tokens: output_tokens,
        cached_tokens: 0,
    })
}

#[cfg(test)]
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
    fn an_answer_without_usage_is_counted_with_the_tokenizer() {
        let mut output = OutputCounter::for_model("gpt-4o");
        output.feed(b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hello\"}}]}\n\ndata: {\"choices\":[{\"index\":0,\"del");
        output.feed(b"ta\":{\"content\":\" world\"}}]}\n\ndata: [DONE]\n\n");
        assert_eq!(output.output_tokens("gpt-4o"), Some(2));
        assert_eq!(
            OutputCounter::for_model("llama-3").output_tokens("llama-3"),
            None
        );
        let item = WorkItem::from_json(
            br#"{"req_id":"r","tenant":"t","model":"gpt-4o","priority":"normal","path":"/v1/chat/completions",
                "body":{"model":"gpt-4o","messages":[{"role":"user","content":"Hello world"}]},
                "enqueued_at_ms":1,"estimated_tokens":100,"attempt":0}"#,
        );
        let item = item.unwrap();
        // 3 per message + "user" (1) + "Hello world" (2) + 3 to prime the reply.
        assert_eq!(
            counted_usage(&item, 2),
            Some(Usage {
                prompt_tokens: 3 + 1 + 2 + 3,
                completion_tokens: 2,
                cached_tokens: 0
            })
        );
    }
}
