//! What a call used: the model's `usage` object, or, for an answer without
//! one, the prompt and the streamed output counted with the model's
//! tokenizer as the filter counts them.

use sluice_admission::admission::Encoders;
use sluice_admission::config::FilterConfig;
use sluice_admission::encoders::BpeEncoders;
use sluice_admission::openai::{self, Endpoint};
use sluice_admission::TokenCounter;
use sluice_contract::WorkItem;
use sluice_openai::usage::{Outcome as TrackerOutcome, UsageTracker, USAGE_BUFFER_LIMIT};
use sluice_openai::{Usage, DEFAULT_IMAGE_TOKENS};
use std::sync::OnceLock;

/// The streamed output of a call, kept to count it with the model's
/// tokenizer when the answer carries no usage (some servers omit it).
#[derive(Debug, Default)]
pub(crate) struct OutputCounter(Option<UsageTracker>);

impl OutputCounter {
    /// Keeps the output only when `model` has a tokenizer to count it with:
    /// for other models the stream is not parsed a second time for nothing.
    pub(crate) fn for_model(model: &str) -> Self {
        let countable = counter_for(model).is_some();
        OutputCounter(
            countable
                .then(|| UsageTracker::for_content_type("text/event-stream", USAGE_BUFFER_LIMIT))
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
        let counter = counter_for(model)?;
        match self
            .0
            .as_mut()?
            .outcome(Some(|text: &str| counter.count(text)))
        {
            TrackerOutcome::Counted { output_tokens } => Some(output_tokens),
            // Usage in the stream after all: the caller has it.
            TrackerOutcome::Reported(_) | TrackerOutcome::Unknown => None,
        }
    }
}

/// What the consumer counts with: OpenAI's encodings, and the models of
/// the admission configuration given to [`use_model_tokenizers`] (its
/// `model_tokenizers`, `model_encodings`, `default_encoding`), so that it
/// counts each model as the filter and ext_authz do.
struct Counting {
    config: Option<FilterConfig>,
    encoders: BpeEncoders,
}

static COUNTING: OnceLock<Counting> = OnceLock::new();

impl Counting {
    /// With the tokenizers `config` names (its files read now).
    fn with_config(config: FilterConfig) -> Result<Counting, String> {
        let encoders = BpeEncoders::load(&config)?;
        Ok(Counting {
            config: Some(config),
            encoders,
        })
    }

    /// See [`prompt_estimate`].
    fn prompt_estimate(&self, item: &WorkItem) -> u64 {
        let requested = Endpoint::from_path(&item.path)
            .and_then(|endpoint| openai::requested_output(endpoint, item.body.as_object()?));
        let output = match &self.config {
            Some(config) => Some(config.output_estimate(&item.model, requested)),
            None => requested,
        };
        match output {
            Some(output) if output < item.estimated_tokens => item.estimated_tokens - output,
            // No bound, or one at or above the estimate (the filter capped
            // it, at a cap this consumer does not know): the split is
            // unknown, so the whole estimate. Not 0: a tenant asking for a
            // huge `max_tokens` would otherwise start calls uncharged.
            _ => item.estimated_tokens,
        }
    }

    /// The tokenizer of `model`, as the filter picks it.
    fn counter_for(&self, model: &str) -> Option<&dyn TokenCounter> {
        let openai = self.encoders.openai_encoding(model);
        let encoding = match &self.config {
            Some(config) => config.encoding_for(model, openai),
            None => openai,
        };
        self.encoders.counter(encoding?)
    }
}

/// Counts with the models of `config` (the filter's / ext_authz's JSON),
/// its `tokenizer.json` files read now. Once, before the first call; the
/// error names the file.
pub fn use_model_tokenizers(config: FilterConfig) -> Result<(), String> {
    COUNTING
        .set(Counting::with_config(config)?)
        .map_err(|_| "the consumer's tokenizers are already set".to_string())
}

/// The tokenizer of `model` (OpenAI's table only unless
/// [`use_model_tokenizers`] was called first).
fn counter_for(model: &str) -> Option<&'static dyn TokenCounter> {
    counting().counter_for(model)
}

fn counting() -> &'static Counting {
    COUNTING.get_or_init(|| Counting {
        config: None,
        encoders: BpeEncoders::new(),
    })
}

/// The prompt's tokens in the filter's estimate: the message's estimate
/// less its output part, which the filter took from the request's bound
/// (`max_tokens` …), or the admission config's `output_tokens` default
/// and cap when the consumer has that config (`--admission-config`,
/// [`use_model_tokenizers`]).
/// A request that names no bound, or one the estimate cannot hold, read
/// without that config: the whole estimate (its call's usage settles the
/// difference).
pub(crate) fn prompt_estimate(item: &WorkItem) -> u64 {
    counting().prompt_estimate(item)
}

/// The usage of an answer without one: the prompt counted as the filter
/// counts it, plus `output_tokens` counted from the stream.
pub(crate) fn counted_usage(item: &WorkItem, output_tokens: u64) -> Option<Usage> {
    let counter = counter_for(&item.model)?;
    let endpoint = Endpoint::from_path(&item.path)?;
    let body = serde_json::to_vec(&item.body).ok()?;
    let request = openai::parse(endpoint, &body).ok()?;
    Some(Usage {
        prompt_tokens: request.prompt_tokens(counter, DEFAULT_IMAGE_TOKENS),
        completion_tokens: output_tokens,
        cached_tokens: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With an admission config's `model_tokenizers`, a Qwen3 model counts
    /// with Qwen3's tokenizer (digits one by one), others as before.
    #[test]
    fn model_tokenizers_of_the_admission_config_count_their_models() {
        let Some(dir) = std::env::var_os("SLUICE_HF_TOKENIZERS_DIR") else {
            eprintln!("*** SKIPPED: SLUICE_HF_TOKENIZERS_DIR is not set ***");
            return;
        };
        let path = std::path::Path::new(&dir).join("qwen3/tokenizer.json");
        let config = FilterConfig::from_json(
            format!(
                r#"{{"tenant": {{"header": "t"}}, "model_tokenizers": {{"qwen3*": {{"tokenizer_json": "{}"}}}}}}"#,
                path.display()
            )
            .as_bytes(),
        )
        .unwrap();
        let counting = Counting::with_config(config).unwrap();
        assert_eq!(
            counting.counter_for("qwen3-8b").unwrap().count("1234567"),
            7
        );
        assert_eq!(counting.counter_for("gpt-4o").unwrap().count("1234567"), 3);
        assert!(counting.counter_for("llama-3").is_none());
    }

    /// The prompt is the estimate less its output part, taken as the
    /// filter took it: the request's bound (times `n`), else, with the
    /// admission config, its default; with neither, the whole estimate.
    #[test]
    fn the_prompt_estimate_is_the_estimate_less_the_output_bound() {
        let bare = Counting {
            config: None,
            encoders: BpeEncoders::new(),
        };
        let bounded = crate::call::test_item(serde_json::json!({"max_tokens": 100, "n": 2}), 500);
        assert_eq!(bare.prompt_estimate(&bounded), 300);
        let newer = crate::call::test_item(
            serde_json::json!({"max_completion_tokens": 50, "max_tokens": 9}),
            500,
        );
        assert_eq!(bare.prompt_estimate(&newer), 450);
        let unbounded = crate::call::test_item(serde_json::json!({}), 500);
        assert_eq!(bare.prompt_estimate(&unbounded), 500);
        let over = crate::call::test_item(serde_json::json!({"max_tokens": 9000}), 500);
        assert_eq!(
            bare.prompt_estimate(&over),
            500,
            "a bound the estimate cannot hold tells nothing: charged whole, not free"
        );
        let configured = FilterConfig::from_json(
            br#"{"tenant": {"header": "t"}, "output_tokens": {"default": 120, "max": 1000}}"#,
        )
        .unwrap();
        let with_config = Counting::with_config(configured).unwrap();
        assert_eq!(with_config.prompt_estimate(&unbounded), 380);
        assert_eq!(
            with_config.prompt_estimate(&over),
            500,
            "capped at 1000, still over"
        );
        assert_eq!(with_config.prompt_estimate(&bounded), 300);
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
