//! Open models' vocabularies for the Wasm filter: the reference
//! `tokenizer.json` files (`scripts/fetch-hf-tokenizers`; never committed),
//! the bundle `sluice-vocab bundle` makes of them, and the Envoy config
//! edits that hand a bundle to the filter as its VM configuration and point
//! `model_tokenizers` at the files.

use anyhow::{bail, Context};
use sluice_llm_sim::text::base64_encode;
use sluice_tokenizer::{write_bundle, HfTokenizer};
use std::path::PathBuf;

/// The directory of the reference tokenizers: `SLUICE_HF_TOKENIZERS_DIR`,
/// else `~/.cache/sluice/hf-tokenizers` (scripts/common.sh's default);
/// `None`, with a loud message, when `model`'s `tokenizer.json` is not
/// there (the caller skips).
pub fn hf_tokenizer_json(model: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("SLUICE_HF_TOKENIZERS_DIR")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .map(|home| PathBuf::from(home).join(".cache/sluice/hf-tokenizers"))
        })?;
    let path = dir.join(model).join("tokenizer.json");
    if path.is_file() {
        return Some(path);
    }
    eprintln!(
        "\n*** SKIPPED: {} is absent (run ./scripts/fetch-hf-tokenizers) ***\n",
        path.display()
    );
    None
}

/// The bundle of the compact vocabularies of `paths` (each a
/// `tokenizer.json`), named by their paths as `model_tokenizers` names them.
pub fn vocab_bundle(paths: &[PathBuf]) -> anyhow::Result<Vec<u8>> {
    let mut compacts = Vec::new();
    for path in paths {
        let json = std::fs::read(path).with_context(|| path.display().to_string())?;
        let tokenizer = HfTokenizer::from_json(&json)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        compacts.push((path.display().to_string(), tokenizer.to_compact()?));
    }
    Ok(write_bundle(
        compacts.iter().map(|(p, c)| (p.as_str(), c.as_slice())),
    ))
}

/// `config` (envoy/sluice-filter.yaml, edited) with `bundle` as the Wasm
/// VM's configuration (`vm_config.configuration`, a `BytesValue`).
pub fn with_vm_vocabularies(config: &str, bundle: &[u8]) -> anyhow::Result<String> {
    let anchor = "runtime: envoy.wasm.runtime.v8\n";
    let Some(at) = config.find(anchor) else {
        bail!("no `{anchor}` in the Envoy config");
    };
    let line_start = config[..at].rfind('\n').map_or(0, |i| i + 1);
    let pad = " ".repeat(at - line_start);
    let insert = format!(
        "{pad}configuration:\n{pad}  \"@type\": type.googleapis.com/google.protobuf.BytesValue\n{pad}  value: {}\n",
        base64_encode(bundle)
    );
    let end = at + anchor.len();
    Ok(format!("{}{insert}{}", &config[..end], &config[end..]))
}

/// `config` with `model_tokenizers` (model pattern, `tokenizer.json`
/// path, chat template) added to the filter's plugin configuration.
pub fn with_model_tokenizers(
    config: &str,
    entries: &[(&str, &PathBuf, Option<&str>)],
) -> anyhow::Result<String> {
    // Both the filter's plugin configuration and config/ext-authz.json
    // name the tenant source once.
    let anchor = "\"tenant\":";
    if !config.contains(anchor) {
        bail!("no `{anchor}` in the plugin configuration");
    }
    let map: serde_json::Map<String, serde_json::Value> = entries
        .iter()
        .map(|(model, path, template)| {
            let mut entry = serde_json::json!({"tokenizer_json": path.display().to_string()});
            if let Some(template) = template {
                entry["chat_template"] = (*template).into();
            }
            (model.to_string(), entry)
        })
        .collect();
    let map = serde_json::Value::Object(map);
    Ok(config.replacen(anchor, &format!("\"model_tokenizers\": {map}, {anchor}"), 1))
}
