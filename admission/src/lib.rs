//! Sluice admission: everything the Wasm filter decides, as plain Rust.
//!
//! * [`config`] — the plugin configuration (JSON), validated once per VM;
//! * [`openai`] — OpenAI-compatible request parsing and token estimates
//!   (what answers carry, usage and stream chunks, is `sluice-openai`'s);
//! * [`descriptors`] — tenant/model sanitizing and the RLS request;
//! * [`counter_write`] — the filter's signature on refunds and forced charges;
//! * [`stream_usage`] — asking a stream for usage the client did not ask for;
//! * [`admission`] — the per-request state machine over a small [`host::Host`] trait;
//! * [`over_limit`] — what a VM remembers of OVER_LIMIT answers.
//!
//! Nothing here touches the proxy-wasm ABI, so it all runs in native unit tests
//! (and in the sidecar's ext_authz front door).
// The filter runs inside Envoy: an index past the end would be a panic there.
#![warn(clippy::indexing_slicing)]

pub mod admission;
pub mod config;
pub mod counter_write;
pub mod deferral;
pub mod descriptors;
pub mod encoders;
pub mod errors;
pub mod host;
pub mod openai;
pub mod over_limit;
pub mod stream_usage;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use sluice_tokenizer::BoundedCount;

/// A chat message of text: its role and content.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChatMessage<'a> {
    pub role: &'a str,
    pub content: &'a str,
}

/// Counts tokens of ordinary text with one BPE encoding.
pub trait TokenCounter {
    fn count(&self, text: &str) -> usize;

    /// Counts `text` exactly if its work fits in `budget` (bytes), else
    /// bounds it from above by its length (a byte-level BPE token covers at
    /// least one byte); takes what it used from `budget`. This default
    /// counts whole texts only; Sluice's tokenizer counts piece by piece.
    fn count_within(&self, text: &str, budget: &mut usize) -> BoundedCount {
        if text.len() <= *budget {
            *budget -= text.len();
            BoundedCount {
                tokens: self.count(text),
                exact: true,
            }
        } else {
            *budget = 0;
            BoundedCount {
                tokens: text.len(),
                exact: false,
            }
        }
    }

    /// Tokens a chat prompt adds around each message (besides the fields'
    /// own tokens, the role's included) and to prime the reply: OpenAI's
    /// recipe (3 and 3), unless the counter knows the model's chat template.
    /// Never below OpenAI's: the body scan's lower bound assumes them.
    fn chat_framing(&self) -> (u64, u64) {
        (3, 3)
    }

    /// The prompt tokens of a chat of text messages (role, content) as the
    /// model's chat template renders it with the generation prompt and the
    /// model server tokenizes it, counted within `budget` as
    /// [`TokenCounter::count_within`] counts; `None` when the counter knows
    /// no template (the caller then frames each message with
    /// [`TokenCounter::chat_framing`]).
    fn chat_tokens(
        &self,
        _messages: &[ChatMessage<'_>],
        _budget: &mut usize,
    ) -> Option<BoundedCount> {
        None
    }

    /// Length in bytes of the encoding's longest token, when known: a text
    /// of `n` bytes has at least `n / max_token_bytes` tokens.
    fn max_token_bytes(&self) -> Option<usize> {
        None
    }

    /// True when this counter stands in for a model's own tokenizer that
    /// is missing (`sluice_tokenizer_fallback_total`).
    fn is_fallback(&self) -> bool {
        false
    }
}

impl<F: Fn(&str) -> usize> TokenCounter for F {
    fn count(&self, text: &str) -> usize {
        self(text)
    }
}
