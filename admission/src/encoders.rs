//! Sluice's own exact BPE tokenizers behind the [`Encoders`] trait: what the
//! Wasm filter and the ext_authz front door both count with.

use std::collections::BTreeMap;

use crate::admission::Encoders;
use crate::config::FilterConfig;
use crate::{BoundedCount, TokenCounter};
use sluice_tokenizer::{Encoding, HfTokenizer, Tokenizer};

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

/// A Hugging Face tokenizer (`model_tokenizers`).
struct HfCounter(HfTokenizer);

impl TokenCounter for HfCounter {
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

/// Both OpenAI encodings, built once (tens of milliseconds), and the
/// Hugging Face tokenizers the configuration names (hundreds of
/// milliseconds each): build it at start-up, never per request.
pub struct BpeEncoders {
    o200k: Counter,
    cl100k: Counter,
    /// By `tokenizer_json` path (the encoding name
    /// [`FilterConfig::configured_encoding`] gives their models).
    hf: BTreeMap<String, HfCounter>,
}

impl BpeEncoders {
    pub fn new() -> Self {
        BpeEncoders {
            o200k: Counter(Tokenizer::new(Encoding::O200kBase)),
            cl100k: Counter(Tokenizer::new(Encoding::Cl100kBase)),
            hf: BTreeMap::new(),
        }
    }

    /// With the tokenizers of `model_tokenizers`, given as (path, contents
    /// of the `tokenizer.json`); the error names the file and what is
    /// unsupported in it.
    pub fn with_tokenizers<'a>(
        files: impl IntoIterator<Item = (&'a str, &'a [u8])>,
    ) -> Result<Self, String> {
        let mut encoders = BpeEncoders::new();
        for (path, json) in files {
            let tokenizer = HfTokenizer::from_json(json).map_err(|e| format!("{path}: {e}"))?;
            encoders.hf.insert(path.to_string(), HfCounter(tokenizer));
        }
        Ok(encoders)
    }

    /// With the tokenizers `config.model_tokenizers` names, read from their
    /// files (native front doors only: the Wasm filter has no files).
    pub fn load(config: &FilterConfig) -> Result<Self, String> {
        let mut files = Vec::new();
        for path in config.tokenizer_files() {
            let json = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
            files.push((path, json));
        }
        Self::with_tokenizers(files.iter().map(|(p, j)| (*p, j.as_slice())))
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
        match Encoding::from_name(encoding) {
            Some(Encoding::O200kBase) => Some(&self.o200k),
            Some(Encoding::Cl100kBase) => Some(&self.cl100k),
            None => self.hf.get(encoding).map(|c| c as &dyn TokenCounter),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_tokenizer_json_is_refused_with_its_path() {
        let Err(e) = BpeEncoders::with_tokenizers([(
            "/t/x.json",
            &b"{\"model\": {\"type\": \"Unigram\"}}"[..],
        )]) else {
            panic!("loaded a Unigram model");
        };
        assert!(e.contains("/t/x.json") && e.contains("Unigram"), "{e}");
    }

    /// With the files of scripts/fetch-hf-tokenizers: a model of
    /// `model_tokenizers` counts with its own tokenizer.
    #[test]
    fn model_tokenizers_count_with_their_tokenizer() {
        let Some(dir) = std::env::var_os("SLUICE_HF_TOKENIZERS_DIR") else {
            eprintln!("*** SKIPPED: SLUICE_HF_TOKENIZERS_DIR is not set ***");
            return;
        };
        let path = std::path::Path::new(&dir).join("qwen3/tokenizer.json");
        let path = path.to_string_lossy();
        let config = FilterConfig::from_json(
            format!(
                r#"{{"tenant": {{"header": "t"}}, "model_tokenizers": {{"qwen3*": {{"tokenizer_json": "{path}"}}}}}}"#
            )
            .as_bytes(),
        )
        .unwrap();
        let encoders = BpeEncoders::load(&config).unwrap();
        let encoding = config.configured_encoding("qwen3-8b").unwrap();
        let counter = encoders.counter(encoding).unwrap();
        // Qwen splits digits one by one; cl100k_base takes three at a time.
        assert_eq!(counter.count("1234567"), 7);
        assert_eq!(encoders.counter("cl100k_base").unwrap().count("1234567"), 3);
    }
}
