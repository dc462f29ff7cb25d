//! Models' own tokenizers, so that the simulator reports the usage a real
//! server would: the chat rendered by the model's template, tokenized by
//! its `tokenizer.json` (the tokenizer and the templates are checked against
//! PyPI `tokenizers` and `apply_chat_template` by sluice-tokenizer's tests).
//! Models without one keep the simulator's approximate count.

use anyhow::Context;
use sluice_tokenizer::{ChatTemplate, HfTokenizer, Message};
use std::path::Path;
use std::sync::Arc;

/// One model's tokenizer and chat template.
#[derive(Clone)]
pub struct ModelTokenizer {
    /// The request's `model`, exactly.
    pub model: String,
    pub tokenizer: Arc<HfTokenizer>,
    pub template: ChatTemplate,
}

impl std::fmt::Debug for ModelTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelTokenizer")
            .field("model", &self.model)
            .field("template", &self.template)
            .finish_non_exhaustive()
    }
}

impl ModelTokenizer {
    /// `model`'s tokenizer from its `tokenizer.json` (or `tekken.json`, or
    /// compact vocabulary), with the chat template named `template`
    /// (`llama3`, `llama3_1`, `qwen3`, `deepseek_v3`, `gpt_oss`,
    /// `mistral_v3_tekken`).
    pub fn load(model: &str, path: &Path, template: &str) -> anyhow::Result<Self> {
        let bytes = std::fs::read(path).with_context(|| path.display().to_string())?;
        let tokenizer = if bytes.starts_with(sluice_tokenizer::COMPACT_MAGIC) {
            HfTokenizer::from_compact(&bytes)
        } else {
            HfTokenizer::from_vocabulary_file(&bytes)
        }
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        let template = ChatTemplate::from_name(template)
            .with_context(|| format!("unknown chat template {template:?}"))?;
        Ok(ModelTokenizer {
            model: model.to_string(),
            tokenizer: Arc::new(tokenizer),
            template,
        })
    }

    /// The prompt tokens of a chat of (role, text) messages, as the
    /// model server counts them: the rendered template with the generation
    /// prompt, tokenized (Mistral's control tokens one each).
    pub fn chat_tokens(&self, messages: &[(String, String)]) -> u64 {
        let messages: Vec<Message<'_>> = messages
            .iter()
            .map(|(role, content)| Message { role, content })
            .collect();
        self.template
            .count(&messages, true, |text| self.tokenizer.count(text)) as u64
    }
}
