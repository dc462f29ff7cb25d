//! Differential test of the Hugging Face tokenizer loader against PyPI
//! `tokenizers` (the implementation vLLM, TGI and SGLang count with).
//!
//! Needs `SLUICE_HF_TOKENIZERS_DIR`: a directory with one sub-directory per
//! model (`llama3`, `llama3_1`, `qwen3`, `deepseek_v3`, `gptoss`), each
//! holding the model's `tokenizer.json` and the `reference.bin` that
//! `tests/hf/reference.py` generates from it, and `mistral_tekken`, holding
//! a `tekken.json` and the `reference.bin` of `tests/hf/tekken_reference.py`
//! (`scripts/fetch-hf-tokenizers` does all). The vocabularies are not committed: see the README. Without
//! the variable the test says so loudly and passes.
//!
//! `cargo test --release -p sluice-tokenizer --features hf --test hf_reference -- --nocapture`
#![cfg(feature = "hf")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::time::Instant;

use sluice_tokenizer::HfTokenizer;

fn dir() -> Option<PathBuf> {
    match std::env::var_os("SLUICE_HF_TOKENIZERS_DIR") {
        Some(d) => Some(PathBuf::from(d)),
        None => {
            eprintln!(
                "\n*** SKIPPED: SLUICE_HF_TOKENIZERS_DIR is not set; the Hugging Face \
                 differential tests did not run (scripts/fetch-hf-tokenizers sets them up) ***\n"
            );
            None
        }
    }
}

struct Record {
    text: String,
    ids: Vec<u32>,
}

fn read_u32(b: &[u8], i: &mut usize) -> u32 {
    let v = u32::from_le_bytes(b[*i..*i + 4].try_into().unwrap());
    *i += 4;
    v
}

fn read_reference(path: &Path) -> Vec<Record> {
    let b = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(&b[..8], b"SLHFREF1", "{}", path.display());
    let mut i = 8;
    let n = read_u32(&b, &mut i) as usize;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let len = read_u32(&b, &mut i) as usize;
        let text = String::from_utf8(b[i..i + len].to_vec()).unwrap();
        i += len;
        let k = read_u32(&b, &mut i) as usize;
        let ids = (0..k).map(|_| read_u32(&b, &mut i)).collect();
        out.push(Record { text, ids });
    }
    assert_eq!(i, b.len());
    out
}

/// The tokenizer of `json`, or (`compact`) the one loaded back from its
/// compact vocabulary, which must write itself out again byte for byte;
/// with its load time.
fn load(model: &str, json: &[u8], compact: bool) -> (HfTokenizer, std::time::Duration) {
    let t0 = Instant::now();
    let tok = HfTokenizer::from_vocabulary_file(json).unwrap_or_else(|e| panic!("{model}: {e}"));
    if !compact {
        return (tok, t0.elapsed());
    }
    let bytes = tok.to_compact().unwrap();
    let t0 = Instant::now();
    let back = HfTokenizer::from_compact(&bytes).unwrap_or_else(|e| panic!("{model}: {e}"));
    let took = t0.elapsed();
    assert!(
        back.to_compact().unwrap() == bytes,
        "{model}: compact round trip differs"
    );
    eprintln!("{model}: compact vocabulary {} bytes", bytes.len());
    (back, took)
}

/// Compares every text of `model`'s reference; returns (texts, mismatches).
fn compare(model: &str, compact: bool) -> Option<(usize, usize)> {
    let d = dir()?.join(model);
    // A Mistral model directory holds a tekken.json instead.
    let file = ["tokenizer.json", "tekken.json"]
        .into_iter()
        .map(|f| d.join(f))
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("{}: no tokenizer.json or tekken.json", d.display()));
    let json = std::fs::read(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let (tok, load) = load(model, &json, compact);
    // tekken merges by tiktoken's rule: the linear merge of the OpenAI
    // encodings serves it, from the tekken.json and from the compact file.
    assert_eq!(
        tok.merges_linearly(),
        model == "mistral_tekken",
        "{model} (compact: {compact}): merge engine"
    );
    let records = read_reference(&d.join("reference.bin"));
    let t0 = Instant::now();
    let mut bad = 0;
    let mut tokens = 0;
    // A debug build (the workspace's `cargo test`) compares every 50th
    // text; scripts/test also runs this in release, where all are compared.
    let stride = if cfg!(debug_assertions) { 50 } else { 1 };
    let mut compared = 0;
    for r in records.iter().step_by(stride) {
        compared += 1;
        let ids = tok.encode(&r.text);
        let count = tok.count(&r.text);
        tokens += r.ids.len();
        // Where the linear merge serves, the heap merge (the engine of
        // before) must count the same.
        let heap = if tok.merges_linearly() {
            tok.count_with_heap_merge(&r.text)
        } else {
            count
        };
        if ids != r.ids || count != r.ids.len() || heap != count {
            bad += 1;
            if bad <= 15 {
                eprintln!(
                    "{model} MISMATCH {:?}\n  pieces {:?}\n  sluice {ids:?} (count {count}, heap merge {heap})\n  tokenizers {:?}",
                    r.text,
                    tok.split_pieces(&r.text),
                    r.ids
                );
            }
        }
    }
    eprintln!(
        "{model}: {compared} texts (of {}), {tokens} tokens, {bad} mismatches; load {:.0} ms, \
         tables {:.1} MiB, encode+count of all {:.2} s",
        records.len(),
        load.as_secs_f64() * 1e3,
        tok.memory_bytes() as f64 / (1 << 20) as f64,
        t0.elapsed().as_secs_f64()
    );
    Some((compared, bad))
}

fn check(model: &str) {
    for compact in [false, true] {
        check_one(model, compact);
    }
}

fn check_one(model: &str, compact: bool) {
    if let Some((n, bad)) = compare(model, compact) {
        assert!(n > 0);
        assert_eq!(
            bad, 0,
            "{model} (compact: {compact}): {bad} of {n} texts differ from tokenizers"
        );
    }
}

#[test]
fn llama3() {
    check("llama3");
}

#[test]
fn qwen3() {
    check("qwen3");
}

#[test]
fn gptoss() {
    check("gptoss");
}

#[test]
fn deepseek_v3() {
    check("deepseek_v3");
}

#[test]
fn llama3_1() {
    check("llama3_1");
}

/// Mistral NeMo / Pixtral's tekken (`tekken_240911.json` of mistral-common)
/// against mistral-common's `Tekkenizer` (tests/hf/tekken_reference.py).
#[test]
fn mistral_tekken() {
    check("mistral_tekken");
}
