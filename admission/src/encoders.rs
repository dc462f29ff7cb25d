//! Sluice's own exact BPE tokenizers behind the [`Encoders`] trait: what the
//! Wasm filter and the ext_authz front door both count with.

use crate::admission::Encoders;
use crate::{BoundedCount, TokenCounter};
use sluice_tokenizer::{Encoding, Tokenizer};

struct Counter(Tokenizer);

impl TokenCounter for Counter {
    fn count(&self, text: &str) -> usize {
        self.0.count(text)
    }
    fn count_within(&self, text: &str, budget: &mut usize) -> BoundedCount {
        self.0.count_within(text, budget)
    }
    fn max_token_bytes(&self) -> Option<usize> {
        Some(self.0.max_token_bytes())
    }
}

/// Both OpenAI encodings, built once (tens of milliseconds): build it at
/// start-up, never per request.
pub struct BpeEncoders {
    o200k: Counter,
    cl100k: Counter,
}

impl BpeEncoders {
    pub fn new() -> Self {
        BpeEncoders {
            o200k: Counter(Tokenizer::new(Encoding::O200kBase)),
            cl100k: Counter(Tokenizer::new(Encoding::Cl100kBase)),
        }
    }
}

impl Default for BpeEncoders {
    fn default() -> Self {
        Self::new()
    }
}

impl Encoders for BpeEncoders {
    fn openai_encoding(&self, model: &str) -> Option<&'static str> {
        Encoding::for_model(model).map(Encoding::name)
    }

    fn counter(&self, encoding: &str) -> Option<&dyn TokenCounter> {
        match Encoding::from_name(encoding)? {
            Encoding::O200kBase => Some(&self.o200k),
            Encoding::Cl100kBase => Some(&self.cl100k),
        }
    }
}
