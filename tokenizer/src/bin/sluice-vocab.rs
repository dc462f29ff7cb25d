//! `sluice-vocab`: turns a model's Hugging Face `tokenizer.json` into
//! Sluice's compact vocabulary, and compact vocabularies into the bundle the
//! Wasm filter is handed (compiled into the module by `scripts/build-wasm`,
//! or given as the VM configuration). See docs/configuration.md.
//!
//! ```text
//! sluice-vocab compile tokenizer.json out.svocab
//! sluice-vocab bundle -o vocab.bundle /etc/sluice/llama3/tokenizer.json ...
//! sluice-vocab inspect out.svocab|vocab.bundle|tokenizer.json
//! ```
use std::process::ExitCode;
use std::time::Instant;

use sluice_tokenizer::{read_bundle, write_bundle, HfTokenizer, COMPACT_MAGIC};

const USAGE: &str = "usage:
  sluice-vocab compile TOKENIZER_JSON OUT        the compact vocabulary of one tokenizer.json
  sluice-vocab bundle -o OUT PATH...             a bundle for the Wasm filter: each PATH (a
                                                 tokenizer.json or a compact vocabulary) under
                                                 its name as given, which must be the
                                                 tokenizer_json of model_tokenizers
  sluice-vocab inspect FILE                      load FILE (any of the three), say what it holds";

fn read(path: &str) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("{path}: {e}"))
}

/// A tokenizer.json or a compact vocabulary, with its load time in ms.
fn load(path: &str, bytes: &[u8]) -> Result<(HfTokenizer, f64), String> {
    let t0 = Instant::now();
    let tok = if bytes.starts_with(COMPACT_MAGIC) {
        HfTokenizer::from_compact(bytes)
    } else {
        HfTokenizer::from_json(bytes)
    }
    .map_err(|e| format!("{path}: {e}"))?;
    Ok((tok, t0.elapsed().as_secs_f64() * 1e3))
}

fn compact_of(path: &str) -> Result<Vec<u8>, String> {
    let bytes = read(path)?;
    let (tok, _) = load(path, &bytes)?;
    tok.to_compact().map_err(|e| format!("{path}: {e}"))
}

fn write(path: &str, bytes: &[u8]) -> Result<(), String> {
    std::fs::write(path, bytes).map_err(|e| format!("{path}: {e}"))?;
    eprintln!("wrote {path} ({} bytes)", bytes.len());
    Ok(())
}

fn describe(path: &str, bytes: &[u8]) -> Result<(), String> {
    let (tok, ms) = load(path, bytes)?;
    println!(
        "{path}: {} bytes, loaded in {ms:.1} ms, tables {:.1} MiB, longest token {} bytes",
        bytes.len(),
        tok.memory_bytes() as f64 / (1 << 20) as f64,
        tok.max_token_bytes()
    );
    Ok(())
}

fn inspect(path: &str) -> Result<(), String> {
    let bytes = read(path)?;
    match read_bundle(&bytes) {
        Ok(entries) => {
            println!("{path}: bundle of {} vocabularies", entries.len());
            entries
                .iter()
                .try_for_each(|(name, compact)| describe(name, compact))
        }
        Err(_) => describe(path, &bytes),
    }
}

fn run(args: &[String]) -> Result<(), String> {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args.as_slice() {
        ["compile", input, out] => write(out, &compact_of(input)?),
        ["bundle", "-o", out, paths @ ..] if !paths.is_empty() => {
            let compacts = paths
                .iter()
                .map(|p| compact_of(p))
                .collect::<Result<Vec<_>, _>>()?;
            let entries = paths.iter().zip(&compacts).map(|(p, c)| (*p, c.as_slice()));
            write(out, &write_bundle(entries))
        }
        ["inspect", path] => inspect(path),
        _ => Err(USAGE.to_string()),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("sluice-vocab: {message}");
            ExitCode::FAILURE
        }
    }
}
