//! The chat templates against Jinja + PyPI tokenizers: `chat.jsonl` of each
//! model directory under `SLUICE_HF_TOKENIZERS_DIR` (written by
//! `tests/hf/chat_reference.py`, which `scripts/fetch-hf-tokenizers` runs)
//! holds random text conversations, their rendering as `transformers`'
//! `apply_chat_template` renders it, and the token ids of that (gpt-oss's:
//! openai-harmony's rendering and ids, and the conversation date it used).
//! Without the variable the test says so loudly and passes.
#![cfg(feature = "hf")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use sluice_tokenizer::{ChatTemplate, HfTokenizer, Message, GPT_OSS_DATE};

/// The vocabulary in `dir`: its `tokenizer.json`, else its `tekken.json`.
fn load(dir: &Path) -> HfTokenizer {
    let file = ["tokenizer.json", "tekken.json"]
        .map(|name| dir.join(name))
        .into_iter()
        .find(|path| path.is_file())
        .unwrap_or_else(|| panic!("no vocabulary in {}", dir.display()));
    HfTokenizer::from_vocabulary_file(&std::fs::read(file).unwrap()).unwrap()
}

fn check(model: &str, template: ChatTemplate) {
    let Some(dir) = std::env::var_os("SLUICE_HF_TOKENIZERS_DIR").map(PathBuf::from) else {
        eprintln!(
            "\n*** SKIPPED: SLUICE_HF_TOKENIZERS_DIR is not set; chat templates not compared ***\n"
        );
        return;
    };
    let d = dir.join(model);
    let lines = std::fs::read_to_string(d.join("chat.jsonl")).unwrap_or_default();
    if lines.is_empty() {
        // Llama 3.1's template is not redistributed (scripts/fetch-hf-tokenizers).
        eprintln!(
            "\n*** SKIPPED: {model}: no reference conversations in {} ***\n",
            d.display()
        );
        return;
    }
    let tok = load(&d);
    let (mut n, mut bad) = (0, 0);
    // Every 20th conversation in a debug build; all in release (scripts/test).
    let stride = if cfg!(debug_assertions) { 20 } else { 1 };
    for line in lines.lines().step_by(stride) {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let msgs: Vec<Message> = v["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| Message {
                role: m["role"].as_str().unwrap(),
                content: m["content"].as_str().unwrap(),
            })
            .collect();
        let agp = v["add_generation_prompt"].as_bool().unwrap();
        let want: Vec<u32> = v["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as u32)
            .collect();
        let counted = template.count(&msgs, agp, |text| tok.count(text));
        // Mistral's references are ids only (its control tokens are no text).
        let Some(reference_text) = v["text"].as_str() else {
            n += 1;
            if counted != want.len() {
                bad += 1;
                if bad <= 5 {
                    eprintln!(
                        "{model} MISMATCH {msgs:?}: {counted} tokens, reference {}",
                        want.len()
                    );
                }
            }
            continue;
        };
        // gpt-oss's references carry their conversation date.
        let date = v["date"].as_str();
        let text = template.render_dated(&msgs, agp, date.unwrap_or(GPT_OSS_DATE));
        n += 1;
        // The count does not depend on the date.
        let undated = date.is_some_and(|_| tok.count(&template.render(&msgs, agp)) != want.len());
        if text != reference_text
            || tok.count(&text) != want.len()
            || counted != want.len()
            || tok.encode(&text) != want
            || undated
        {
            bad += 1;
            if bad <= 5 {
                eprintln!(
                    "{model} MISMATCH {msgs:?} agp={agp}\n  sluice  {text:?}\n  jinja   {:?}",
                    v["text"]
                );
            }
        }
    }
    // The overhead of one user message, for the record.
    let content = "Hello, world!";
    let one = [Message {
        role: "user",
        content,
    }];
    let total = template.count(&one, true, |text| tok.count(text));
    eprintln!(
        "{model}: {n} conversations, {bad} mismatches; one user message of {} tokens renders as {total} tokens (overhead {})",
        tok.count(content),
        total - tok.count(content)
    );
    assert_eq!(bad, 0, "{model}: {bad} of {n} conversations differ");
}

#[test]
fn llama3() {
    check("llama3", ChatTemplate::Llama3);
}

#[test]
fn qwen3() {
    check("qwen3", ChatTemplate::Qwen3);
}

#[test]
fn deepseek_v3() {
    check("deepseek_v3", ChatTemplate::DeepSeekV3);
}

/// Llama 3.1's template (its system block with the knowledge and today
/// dates; references made from LLAMA3_1_CHAT_TEMPLATE), and gpt-oss against
/// openai-harmony (chat_reference.py --harmony).
#[test]
fn llama3_1_and_gptoss() {
    check("llama3_1", ChatTemplate::Llama31);
    check("gptoss", ChatTemplate::GptOss);
}

/// Mistral's v3 format over the tekken vocabulary against mistral-common
/// (chat_reference.py --mistral): the conversations it accepts, as counts.
#[test]
fn mistral_v3_tekken() {
    check("mistral_tekken", ChatTemplate::MistralV3Tekken);
}
