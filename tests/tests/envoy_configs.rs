//! Every Envoy config in the repository passes `envoy --mode validate`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

use sluice_testkit::{filter_wasm, validate_envoy_config, workspace_root};

#[test]
fn every_envoy_config_in_the_repo_validates() {
    let dir = workspace_root().join("envoy");
    let mut checked = Vec::new();
    let mut failures = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for path in entries {
        let is_yaml = path.extension().is_some_and(|e| e == "yaml" || e == "yml");
        if !is_yaml {
            continue;
        }
        // Configs that load the Wasm filter name its install path; validate
        // them against the freshly built module.
        let text = std::fs::read_to_string(&path).unwrap();
        let scratch = tempfile::Builder::new().suffix(".yaml").tempfile().unwrap();
        let target = if text.contains("/etc/sluice/sluice_filter.wasm") {
            let wasm = filter_wasm().unwrap();
            std::fs::write(
                scratch.path(),
                text.replace(
                    "/etc/sluice/sluice_filter.wasm",
                    &wasm.display().to_string(),
                ),
            )
            .unwrap();
            scratch.path().to_path_buf()
        } else {
            path.clone()
        };
        match validate_envoy_config(&target).map_err(|e| e.context(path.display().to_string())) {
            Ok(()) => checked.push(path),
            Err(error) => failures.push(format!("{error:#}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(
        !checked.is_empty(),
        "no Envoy configs found in {}",
        dir.display()
    );
}
