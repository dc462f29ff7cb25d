//! Every Envoy config in the repository passes `envoy --mode validate`, and
//! the ones with a deferral route let as many clients wait as the endpoint holds.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

use sluice_testkit::{filter_wasm, validate_envoy_config, workspace_root};

#[test]
fn every_envoy_config_in_the_repo_validates() {
    let mut checked = Vec::new();
    let mut failures = Vec::new();
    for path in envoy_yaml_files() {
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
        workspace_root().join("envoy").display()
    );
}

/// Deferred clients wait on the route to the deferral endpoint for as long
/// as their queue takes; Envoy's default circuit breaker (1,024 requests,
/// connections and pending requests per cluster) would answer the 1,025th
/// with a plain 503 long before the endpoint's own bound (a JSON 503
/// `deferral_busy`) is reached. The soak hit it when the deferred path
/// slowed for a few seconds.
#[test]
fn the_deferral_cluster_lets_as_many_clients_wait_as_the_endpoint_holds() {
    let wanted = sluice_deferral::endpoint::DEFAULT_MAX_IN_FLIGHT as u64;
    let mut checked = Vec::new();
    for path in envoy_yaml_files() {
        let config: serde_yaml::Value =
            serde_yaml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let clusters = config["static_resources"]["clusters"].as_sequence();
        let Some(deferral) = clusters
            .into_iter()
            .flatten()
            .find(|cluster| cluster["name"].as_str() == Some("sluice_deferral"))
        else {
            continue;
        };
        let thresholds = deferral["circuit_breakers"]["thresholds"]
            .as_sequence()
            .unwrap_or_else(|| {
                panic!(
                    "{}: sluice_deferral has no circuit_breakers",
                    path.display()
                )
            });
        let default = thresholds
            .iter()
            .find(|t| matches!(t["priority"].as_str(), None | Some("DEFAULT")))
            .unwrap_or_else(|| panic!("{}: no DEFAULT-priority thresholds", path.display()));
        for field in ["max_connections", "max_pending_requests", "max_requests"] {
            let value = default[field].as_u64().unwrap_or(1024);
            assert!(
                value >= wanted,
                "{}: sluice_deferral {field} is {value}, below the endpoint's {wanted}",
                path.display()
            );
        }
        checked.push(path);
    }
    assert!(
        checked.len() >= 3,
        "expected the filter, ext_authz and compose configs to route to sluice_deferral, found {checked:?}"
    );
}

fn envoy_yaml_files() -> Vec<std::path::PathBuf> {
    let dir = workspace_root().join("envoy");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|path| path.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .collect();
    files.sort();
    files
}
