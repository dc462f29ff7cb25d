//! Sluice's own exact BPE tokenizers behind the [`Encoders`] trait: what the
//! Wasm filter and the ext_authz front door both count with.

#[cfg(feature = "hf")]
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::admission::Encoders;
use crate::config::FilterConfig;
#[cfg(feature = "hf")]
use crate::config::CHAT_TEMPLATES;
#[cfg(feature = "hf")]
use crate::ChatMessage;
use crate::{BoundedCount, TokenCounter};
#[cfg(feature = "hf")]
use sluice_tokenizer::{read_bundle, ChatTemplate, HfTokenizer, Message, COMPACT_MAGIC};
use sluice_tokenizer::{Encoding, Tokenizer};

/// An OpenAI encoding; `true` when it stands in for a missing vocabulary.
struct Counter(Arc<Tokenizer>, bool);

/// The counts of a [`TokenCounter`] whose field `$field` is one of
/// sluice-tokenizer's tokenizers (they answer them alike).
macro_rules! counts_of_the_tokenizer {
    ($field:tt) => {
        fn count(&self, text: &str) -> usize {
            self.$field.count(text)
        }
        fn count_within(&self, text: &str, budget: &mut usize) -> BoundedCount {
            self.$field.count_within(text, budget)
        }
        fn max_token_bytes(&self) -> Option<usize> {
            Some(self.$field.max_token_bytes())
        }
    };
}

impl TokenCounter for Counter {
    counts_of_the_tokenizer!(0);
    fn is_fallback(&self) -> bool {
        self.1
    }
}

/// A Hugging Face tokenizer (`model_tokenizers`), its chat template if
/// configured, and the framing that stands in for the template where it
/// cannot render a chat (messages with parts, names or tool calls).
#[cfg(feature = "hf")]
struct HfCounter {
    tokenizer: HfTokenizer,
    template: Option<ChatTemplate>,
    framing: (u64, u64),
}

#[cfg(feature = "hf")]
impl HfCounter {
    fn new(tokenizer: HfTokenizer, template: Option<ChatTemplate>) -> Self {
        let framing = framing(&tokenizer, template);
        HfCounter {
            tokenizer,
            template,
            framing,
        }
    }
}

/// The estimate a `chat_template` of `model_tokenizers` counts a chat by
/// when it cannot render it (tokens per message besides the role's own,
/// tokens to prime the reply), never below OpenAI's (3, 3): Llama 3
/// `<|start_header_id|>` role `<|end_header_id|>` `\n\n` … `<|eot_id|>`
/// (4), primed by `<|begin_of_text|>` and the assistant's header (5); Qwen3
/// `<|im_start|>` role `\n` … `<|im_end|>` `\n` (4), primed by
/// `<|im_start|>assistant\n` (3); Llama 3.1 as Llama 3, primed by its
/// system block; gpt-oss `<|start|>` role `<|message|>` … `<|end|>` (4; an
/// assistant's channel adds 2), primed by harmony's system message and
/// `<|start|>assistant`; DeepSeek V3 primed by its begin and
/// `<｜Assistant｜>`; Mistral's `[INST]` `[/INST]` and `<s>` within OpenAI's.
/// The primings that hold text are counted with the
/// model's tokenizer (the template rendering no message).
#[cfg(feature = "hf")]
fn framing(tokenizer: &HfTokenizer, template: Option<ChatTemplate>) -> (u64, u64) {
    let empty = |t: ChatTemplate| (tokenizer.count(&t.render(&[], true)) as u64).max(3);
    match template {
        Some(ChatTemplate::Llama3) => (4, 5),
        Some(ChatTemplate::Qwen3) => (4, 3),
        Some(t @ (ChatTemplate::Llama31 | ChatTemplate::GptOss)) => (4, empty(t)),
        Some(t @ ChatTemplate::DeepSeekV3) => (3, empty(t)),
        Some(ChatTemplate::MistralV3Tekken) | None => (3, 3),
    }
}

#[cfg(feature = "hf")]
impl TokenCounter for HfCounter {
    counts_of_the_tokenizer!(tokenizer);
    fn chat_framing(&self) -> (u64, u64) {
        self.framing
    }
    /// The rendered chat, counted as the model server tokenizes it (its
    /// added tokens recognised): exact for text messages.
    fn chat_tokens(
        &self,
        messages: &[ChatMessage<'_>],
        budget: &mut usize,
    ) -> Option<BoundedCount> {
        let template = self.template?;
        let messages: Vec<Message<'_>> = messages
            .iter()
            .map(|m| Message {
                role: m.role,
                content: m.content,
            })
            .collect();
        let mut exact = true;
        let tokens = template.count(&messages, true, |text| {
            let counted = self.tokenizer.count_within(text, budget);
            exact &= counted.exact;
            counted.tokens
        });
        Some(BoundedCount { tokens, exact })
    }
}

/// The chat template `model_tokenizers` names (config validation has
/// refused unknown names; this says so again for the public loaders).
#[cfg(feature = "hf")]
fn chat_template(path: &str, name: Option<&str>) -> Result<Option<ChatTemplate>, String> {
    name.map(|name| {
        ChatTemplate::from_name(name).ok_or_else(|| {
            format!("{path}: unknown chat_template '{name}' (use one of {CHAT_TEMPLATES:?})")
        })
    })
    .transpose()
}

/// Both OpenAI encodings, built once (tens of milliseconds), and the
/// Hugging Face tokenizers the configuration names (hundreds of
/// milliseconds each): build it at start-up, never per request.
pub struct BpeEncoders {
    o200k: Counter,
    cl100k: Counter,
    /// By `tokenizer_json` path (the encoding name
    /// [`FilterConfig::configured_encoding`] gives their models).
    #[cfg(feature = "hf")]
    hf: BTreeMap<String, HfCounter>,
    /// `tokenizer_json` paths whose vocabulary did not arrive (the Wasm
    /// filter's bundle lacks them): counted by `fallback`, the documented
    /// estimate (o200k_base, OpenAI's chat recipe), with a metric.
    #[cfg(feature = "hf")]
    missing: BTreeSet<String>,
    #[cfg(feature = "hf")]
    fallback: Counter,
}

impl BpeEncoders {
    pub fn new() -> Self {
        let o200k = Arc::new(Tokenizer::new(Encoding::O200kBase));
        BpeEncoders {
            #[cfg(feature = "hf")]
            fallback: Counter(o200k.clone(), true),
            o200k: Counter(o200k, false),
            cl100k: Counter(Arc::new(Tokenizer::new(Encoding::Cl100kBase)), false),
            #[cfg(feature = "hf")]
            hf: BTreeMap::new(),
            #[cfg(feature = "hf")]
            missing: BTreeSet::new(),
        }
    }

    #[cfg(feature = "hf")]
    fn insert(&mut self, path: &str, template: Option<ChatTemplate>, tokenizer: HfTokenizer) {
        self.hf
            .insert(path.to_string(), HfCounter::new(tokenizer, template));
    }

    /// With the vocabularies of a bundle (`sluice-vocab bundle`: compact
    /// vocabularies named by the `tokenizer_json` paths of
    /// `config.model_tokenizers`), as the Wasm filter is handed them. A
    /// file the bundle lacks, or holds damaged, is counted with the
    /// fallback; the warnings say which. A bundle that is not one (or
    /// empty bytes with `model_tokenizers` set) is not an error: every
    /// model of `model_tokenizers` then falls back.
    #[cfg(feature = "hf")]
    pub fn from_bundle(config: &FilterConfig, bundle: &[u8]) -> (Self, Vec<String>) {
        let mut encoders = BpeEncoders::new();
        let mut warnings = Vec::new();
        let entries = if bundle.is_empty() {
            Vec::new()
        } else {
            read_bundle(bundle).unwrap_or_else(|e| {
                warnings.push(format!("the vocabulary bundle is unusable: {e}"));
                Vec::new()
            })
        };
        for (path, template) in config.tokenizer_files() {
            let found = entries.iter().find(|(name, _)| *name == path);
            let loaded = match found {
                Some((_, compact)) => HfTokenizer::from_compact(compact).map_err(|e| e.to_string()),
                None => Err("not in the vocabulary bundle".to_string()),
            };
            let loaded = loaded.and_then(|t| Ok((t, chat_template(path, template)?)));
            match loaded {
                Ok((tokenizer, template)) => encoders.insert(path, template, tokenizer),
                Err(why) => {
                    warnings.push(format!(
                        "model_tokenizers {path}: {why}; its models are counted with the \
                         fallback estimate (o200k_base), see sluice_tokenizer_fallback_total"
                    ));
                    encoders.missing.insert(path.to_string());
                }
            }
        }
        (encoders, warnings)
    }

    #[cfg(feature = "hf")]
    /// With the tokenizers of `model_tokenizers`, given as (path, chat
    /// template, contents of the `tokenizer.json` or of its compact
    /// vocabulary); the error names the file
    /// and what is unsupported in it.
    pub fn with_tokenizers<'a>(
        files: impl IntoIterator<Item = (&'a str, Option<&'a str>, &'a [u8])>,
    ) -> Result<Self, String> {
        let mut encoders = BpeEncoders::new();
        for (path, template, bytes) in files {
            // A compact vocabulary (`sluice-vocab compile`) loads faster; a
            // tokenizer.json or a Mistral tekken.json is told by its shape.
            let tokenizer = if bytes.starts_with(COMPACT_MAGIC) {
                HfTokenizer::from_compact(bytes)
            } else {
                HfTokenizer::from_vocabulary_file(bytes)
            }
            .map_err(|e| format!("{path}: {e}"))?;
            encoders.insert(path, chat_template(path, template)?, tokenizer);
        }
        Ok(encoders)
    }

    /// With the tokenizers `config.model_tokenizers` names, read from their
    /// files (native front doors only: the Wasm filter has no files).
    /// Without the `hf` feature, a config that names any is refused.
    #[cfg(not(feature = "hf"))]
    pub fn load(config: &FilterConfig) -> Result<Self, String> {
        match config.tokenizer_files().next() {
            Some((path, _)) => Err(format!(
                "{path}: model_tokenizers needs sluice-admission's hf feature"
            )),
            None => Ok(Self::new()),
        }
    }

    /// With the tokenizers `config.model_tokenizers` names, read from their
    /// files (native front doors only: the Wasm filter has no files).
    #[cfg(feature = "hf")]
    pub fn load(config: &FilterConfig) -> Result<Self, String> {
        let mut files = Vec::new();
        for (path, template) in config.tokenizer_files() {
            let json = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
            files.push((path, template, json));
        }
        Self::with_tokenizers(files.iter().map(|(p, t, j)| (*p, *t, j.as_slice())))
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
            #[cfg(feature = "hf")]
            None => match self.hf.get(encoding) {
                Some(c) => Some(c as &dyn TokenCounter),
                None if self.missing.contains(encoding) => Some(&self.fallback),
                None => None,
            },
            #[cfg(not(feature = "hf"))]
            None => None,
        }
    }
}

#[cfg(all(test, feature = "hf"))]
#[allow(clippy::indexing_slicing)] // tests fail loudly
mod tests {
    use super::*;

    #[test]
    fn a_bad_tokenizer_json_is_refused_with_its_path() {
        let Err(e) = BpeEncoders::with_tokenizers([(
            "/t/x.json",
            None,
            &b"{\"model\": {\"type\": \"Unigram\"}}"[..],
        )]) else {
            panic!("loaded a Unigram model");
        };
        assert!(e.contains("/t/x.json") && e.contains("Unigram"), "{e}");
    }

    /// A configuration whose `model_tokenizers` maps `pattern` to `path`
    /// (with `template`, if any).
    fn one_tokenizer(
        pattern: &str,
        path: &str,
        template: Option<&str>,
    ) -> Result<FilterConfig, String> {
        let mut entry = serde_json::json!({"tokenizer_json": path});
        if let Some(template) = template {
            entry["chat_template"] = template.into();
        }
        let config =
            serde_json::json!({"tenant": {"header": "t"}, "model_tokenizers": {pattern: entry}});
        FilterConfig::from_json(config.to_string().as_bytes())
    }

    /// `model`'s reference `tokenizer.json` (scripts/fetch-hf-tokenizers),
    /// `None` (the test skips, loudly) without `SLUICE_HF_TOKENIZERS_DIR`.
    fn reference_file(model: &str) -> Option<std::path::PathBuf> {
        let Some(dir) = std::env::var_os("SLUICE_HF_TOKENIZERS_DIR") else {
            eprintln!("*** SKIPPED: SLUICE_HF_TOKENIZERS_DIR is not set ***");
            return None;
        };
        Some(
            std::path::Path::new(&dir)
                .join(model)
                .join("tokenizer.json"),
        )
    }

    /// A `model_tokenizers` file the filter's bundle lacks: its models are
    /// counted with the fallback (o200k_base), flagged, with a warning.
    #[test]
    fn a_vocabulary_missing_from_the_bundle_falls_back_and_says_so() {
        let config = FilterConfig::from_json(
            br#"{"tenant": {"header": "t"}, "model_tokenizers": {"m*": {"tokenizer_json": "/t/absent.json"}}}"#,
        )
        .unwrap();
        for bundle in [
            &b""[..],
            &sluice_tokenizer::write_bundle([])[..],
            b"garbage",
        ] {
            let (encoders, warnings) = BpeEncoders::from_bundle(&config, bundle);
            assert!(
                warnings.iter().any(|w| w.contains("/t/absent.json")),
                "{warnings:?}"
            );
            let counter = encoders
                .counter(config.configured_encoding("m1").unwrap())
                .unwrap();
            assert!(counter.is_fallback());
            assert_eq!(counter.count("hello world"), 2);
            assert!(!encoders.counter("o200k_base").unwrap().is_fallback());
        }
    }

    /// A bundle holding the file's compact vocabulary: exact, no fallback.
    #[test]
    fn a_bundled_vocabulary_counts_exactly() {
        let Some(path) = reference_file("qwen3") else {
            return;
        };
        let json = std::fs::read(&path).unwrap();
        let compact = HfTokenizer::from_json(&json).unwrap().to_compact().unwrap();
        let path = path.to_string_lossy();
        let bundle = sluice_tokenizer::write_bundle([(&*path, compact.as_slice())]);
        let config = one_tokenizer("qwen3*", &path, None).unwrap();
        let (encoders, warnings) = BpeEncoders::from_bundle(&config, &bundle);
        assert!(warnings.is_empty(), "{warnings:?}");
        let counter = encoders
            .counter(config.configured_encoding("qwen3-8b").unwrap())
            .unwrap();
        assert!(!counter.is_fallback());
        assert_eq!(counter.count("1234567"), 7);
    }

    /// With the files of scripts/fetch-hf-tokenizers: a model of
    /// `model_tokenizers` counts with its own tokenizer.
    #[test]
    fn model_tokenizers_count_with_their_tokenizer() {
        let Some(path) = reference_file("qwen3") else {
            return;
        };
        let path = path.to_string_lossy();
        let config = one_tokenizer("qwen3*", &path, None).unwrap();
        let encoders = BpeEncoders::load(&config).unwrap();
        let encoding = config.configured_encoding("qwen3-8b").unwrap();
        let counter = encoders.counter(encoding).unwrap();
        // Qwen splits digits one by one; cl100k_base takes three at a time.
        assert_eq!(counter.count("1234567"), 7);
        assert_eq!(encoders.counter("cl100k_base").unwrap().count("1234567"), 3);
    }

    /// A chat request of text messages counts as the model server counts
    /// it, for every offered `chat_template`: the reference conversations
    /// of scripts/fetch-hf-tokenizers (`chat.jsonl`: rendered by Jinja as
    /// `transformers` renders them, gpt-oss's by openai-harmony; their ids
    /// by PyPI `tokenizers`; Mistral's ids by mistral-common), those with
    /// the generation prompt, as a chat
    /// completion asks. Their texts start and end with whitespace, spell
    /// special tokens, `<think>` blocks, later system messages.
    #[test]
    fn chat_templates_count_chats_as_the_model_server_does() {
        let Some(dir) = std::env::var_os("SLUICE_HF_TOKENIZERS_DIR") else {
            eprintln!("*** SKIPPED: SLUICE_HF_TOKENIZERS_DIR is not set ***");
            return;
        };
        let dir = std::path::Path::new(&dir);
        for (model, template) in [
            ("llama3", "llama3"),
            ("llama3_1", "llama3_1"),
            ("qwen3", "qwen3"),
            ("deepseek_v3", "deepseek_v3"),
            ("gptoss", "gpt_oss"),
            ("mistral_tekken", "mistral_v3_tekken"),
        ] {
            let vocabulary = match model {
                "mistral_tekken" => "tekken.json",
                _ => "tokenizer.json",
            };
            let path = dir.join(model).join(vocabulary);
            let path = path.to_string_lossy();
            let config = one_tokenizer("m*", &path, Some(template)).unwrap();
            let encoders = BpeEncoders::load(&config).unwrap();
            let counter = encoders
                .counter(config.configured_encoding("m1").unwrap())
                .unwrap();
            let references =
                std::fs::read_to_string(dir.join(model).join("chat.jsonl")).unwrap_or_default();
            if references.is_empty() {
                // Llama 3.1's template is not redistributed (scripts/fetch-hf-tokenizers).
                eprintln!("*** SKIPPED: {model}: no reference conversations ***");
                continue;
            }
            let mut compared = 0;
            for line in references.lines().take(400) {
                let reference: serde_json::Value = serde_json::from_str(line).unwrap();
                if reference["add_generation_prompt"] != true {
                    continue;
                }
                let body = serde_json::json!({"model": "m1", "messages": reference["messages"]});
                let request = crate::openai::parse(
                    crate::openai::Endpoint::ChatCompletions,
                    body.to_string().as_bytes(),
                )
                .unwrap();
                let want = reference["ids"].as_array().unwrap().len() as u64;
                assert_eq!(
                    request.prompt_tokens(counter, 0),
                    want,
                    "{model}: {}",
                    reference["messages"]
                );
                compared += 1;
            }
            assert!(compared > 200, "{model}: {compared} conversations");
        }
    }

    /// Every name `model_tokenizers` offers is a template sluice-tokenizer
    /// renders.
    #[test]
    fn every_offered_chat_template_is_known() {
        for name in CHAT_TEMPLATES {
            assert!(ChatTemplate::from_name(name).is_some(), "{name}");
        }
    }

    /// A chat the template cannot render (a message with a name, or tools)
    /// is counted by the template's framing, never below OpenAI's recipe.
    #[test]
    fn chats_with_names_or_tools_are_framed() {
        let Some(path) = reference_file("llama3_1") else {
            return;
        };
        let path = path.to_string_lossy();
        let config = one_tokenizer("m*", &path, Some("llama3_1")).unwrap();
        let encoders = BpeEncoders::load(&config).unwrap();
        let counter = encoders
            .counter(config.configured_encoding("m1").unwrap())
            .unwrap();
        let count = |body: serde_json::Value| {
            crate::openai::parse(
                crate::openai::Endpoint::ChatCompletions,
                body.to_string().as_bytes(),
            )
            .unwrap()
            .prompt_tokens(counter, 0)
        };
        let plain = count(
            serde_json::json!({"model": "m1", "messages": [{"role": "user", "content": "Hi"}]}),
        );
        let named = count(
            serde_json::json!({"model": "m1", "messages": [{"role": "user", "content": "Hi", "name": "ann"}]}),
        );
        // The system block the template always writes is in both.
        let (per_message, priming) = counter.chat_framing();
        assert!(per_message >= 3 && priming > 20, "{per_message}, {priming}");
        assert_eq!(
            named,
            per_message + 1 + 1 + 1 + 1 + priming,
            "user, Hi, name, ann"
        );
        assert_eq!(plain, priming + per_message + 1 + 1);
    }
}
