//! Embeds a bundle of compact vocabularies into the module when
//! `SLUICE_VOCAB_BUNDLE` names one (`scripts/build-wasm --vocab-bundle`,
//! made by `sluice-vocab bundle`); otherwise an empty one, and the filter
//! takes its vocabularies from the VM configuration.
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-env-changed=SLUICE_VOCAB_BUNDLE");
    let Some(out) = std::env::var_os("OUT_DIR").map(PathBuf::from) else {
        println!("cargo:warning=OUT_DIR is not set");
        std::process::exit(1);
    };
    let target = out.join("vocab.bundle");
    let bytes = match std::env::var_os("SLUICE_VOCAB_BUNDLE").filter(|p| !p.is_empty()) {
        Some(path) => {
            println!("cargo:rerun-if-changed={}", PathBuf::from(&path).display());
            match std::fs::read(&path) {
                Ok(bytes) => bytes,
                Err(e) => {
                    println!("cargo:warning=SLUICE_VOCAB_BUNDLE {path:?}: {e}");
                    std::process::exit(1);
                }
            }
        }
        None => Vec::new(),
    };
    if let Err(e) = std::fs::write(&target, bytes) {
        println!("cargo:warning={}: {e}", target.display());
        std::process::exit(1);
    }
}
