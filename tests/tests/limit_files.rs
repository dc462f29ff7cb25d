//! Every shipped Envoy / Istio config carries the deadlines and Sluice's one
//! maximum body (docs/security.md); none turns a deadline off.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

use serde::Deserialize;
use serde_yaml::Value;
use sluice_admission::config::{FilterConfig, DEFAULT_MAX_BODY_BYTES};
use sluice_testkit::workspace_root;

fn documents(path: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(workspace_root().join(path)).unwrap();
    serde_yaml::Deserializer::from_str(&text)
        .map(|doc| Value::deserialize(doc).unwrap())
        .collect()
}

fn envoy_configs() -> Vec<String> {
    let mut files: Vec<String> = std::fs::read_dir(workspace_root().join("envoy"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml"))
        .map(|n| format!("envoy/{n}"))
        .collect();
    files.sort();
    assert!(files.len() >= 4, "{files:?}");
    files
}

fn seconds(value: &Value) -> f64 {
    let text = value
        .as_str()
        .unwrap_or_else(|| panic!("{value:?} is not a duration"));
    text.strip_suffix('s').unwrap().parse().unwrap()
}

/// Envoy buffers more than Sluice's maximum (so the filter answers), not
/// unboundedly more.
fn assert_buffer(path: &str, buffer: &Value) {
    let buffer = buffer
        .as_u64()
        .unwrap_or_else(|| panic!("{path}: no per_connection_buffer_limit_bytes"))
        as usize;
    assert!(
        buffer > DEFAULT_MAX_BODY_BYTES && buffer <= 2 * DEFAULT_MAX_BODY_BYTES,
        "{path}: buffer {buffer}"
    );
}

#[test]
fn every_envoy_config_has_deadlines_and_the_body_buffer() {
    for path in envoy_configs() {
        let doc = &documents(&path)[0];
        let listener = &doc["static_resources"]["listeners"][0];
        assert_buffer(&path, &listener["per_connection_buffer_limit_bytes"]);
        let hcm = &listener["filter_chains"][0]["filters"][0]["typed_config"];
        for key in [
            "request_headers_timeout",
            "request_timeout",
            "stream_idle_timeout",
        ] {
            let value = seconds(&hcm[key]);
            assert!(value > 0.0 && value <= 60.0, "{path}: {key} = {value}");
        }
        for host in hcm["route_config"]["virtual_hosts"].as_sequence().unwrap() {
            for route in host["routes"].as_sequence().unwrap() {
                let idle = seconds(&route["route"]["idle_timeout"]);
                assert!(idle > 0.0, "{path}: a route without an idle timeout");
            }
        }
        for filter in hcm["http_filters"].as_sequence().unwrap() {
            let config = &filter["typed_config"];
            if let Some(json) = config["config"]["configuration"]["value"].as_str() {
                let plugin = FilterConfig::from_json(json.as_bytes()).unwrap();
                assert_eq!(plugin.max_body_bytes, DEFAULT_MAX_BODY_BYTES, "{path}");
            }
            if let Some(bytes) = config["with_request_body"]["max_request_bytes"].as_u64() {
                assert_eq!(bytes as usize, DEFAULT_MAX_BODY_BYTES, "{path}");
            }
        }
    }
    let ext_authz = std::fs::read(workspace_root().join("config/ext-authz.json")).unwrap();
    assert_eq!(
        FilterConfig::from_json(&ext_authz).unwrap().max_body_bytes,
        DEFAULT_MAX_BODY_BYTES
    );
}

#[test]
fn istio_limits_match_the_envoy_example_and_the_routes() {
    let limits = &documents("deploy/istio/sluice-limits-envoyfilter.yaml")[0];
    let patches = limits["spec"]["configPatches"].as_sequence().unwrap();
    let reference = &documents("envoy/sluice-filter.yaml")[0]["static_resources"]["listeners"][0];
    let listener = patches.iter().find(|p| p["applyTo"] == "LISTENER").unwrap();
    assert_eq!(
        listener["patch"]["value"]["per_connection_buffer_limit_bytes"],
        reference["per_connection_buffer_limit_bytes"]
    );
    let hcm = &patches
        .iter()
        .find(|p| p["applyTo"] == "NETWORK_FILTER")
        .unwrap()["patch"]["value"]["typed_config"];
    let reference_hcm = &reference["filter_chains"][0]["filters"][0]["typed_config"];
    for key in [
        "request_headers_timeout",
        "request_timeout",
        "stream_idle_timeout",
    ] {
        assert_eq!(hcm[key], reference_hcm[key], "{key}");
    }
    // Each route patch names a route of the VirtualService.
    let routes = documents("deploy/istio/sluice-routes.yaml");
    let virtual_service = routes
        .iter()
        .find(|d| d["kind"] == "VirtualService")
        .unwrap();
    let names: Vec<&str> = virtual_service["spec"]["http"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    let patched: Vec<&str> = patches
        .iter()
        .filter(|p| p["applyTo"] == "HTTP_ROUTE")
        .map(|p| {
            assert!(seconds(&p["patch"]["value"]["route"]["idle_timeout"]) > 0.0);
            p["match"]["routeConfiguration"]["vhost"]["route"]["name"]
                .as_str()
                .unwrap()
        })
        .collect();
    assert_eq!(patched, names);
    // The Istio ext_authz provider buffers Sluice's maximum too.
    let text = std::fs::read_to_string(workspace_root().join("deploy/istio/sluice-ext-authz.yaml"))
        .unwrap();
    assert!(
        text.contains(&format!("maxRequestBytes: {DEFAULT_MAX_BODY_BYTES}")),
        "sluice-ext-authz.yaml"
    );
}

/// The Wasm filter configs shipped in `path`: Envoy's (a JSON string value)
/// and Istio's WasmPlugin (`pluginConfig`, YAML).
fn shipped_filter_configs(path: &str) -> Vec<FilterConfig> {
    fn walk(value: &Value, found: &mut Vec<FilterConfig>) {
        match value {
            Value::Mapping(map) => {
                if let Some(json) = map
                    .get("configuration")
                    .and_then(|c| c["value"].as_str())
                    .filter(|json| json.contains("\"tenant\""))
                {
                    found.push(FilterConfig::from_json(json.as_bytes()).unwrap());
                }
                if let Some(plugin) = map.get("pluginConfig") {
                    let json = serde_json::to_vec(plugin).unwrap();
                    found.push(FilterConfig::from_json(&json).unwrap());
                }
                map.values().for_each(|v| walk(v, found));
            }
            Value::Sequence(items) => items.iter().for_each(|v| walk(v, found)),
            _ => {}
        }
    }
    let mut found = Vec::new();
    documents(path).iter().for_each(|doc| walk(doc, &mut found));
    found
}

/// sluice-rls accepts the filter's refunds and corrections only when signed
/// (`--counter-writes signed`, its default): every shipped filter that
/// reconciles holds a secret to sign with, and every shipped sluice-rls is
/// given one to verify with.
#[test]
fn every_shipped_filter_signs_its_reconciliation() {
    let mut paths = envoy_configs();
    paths.extend(
        [
            "deploy/istio/sluice-filter-envoyfilter.yaml",
            "deploy/istio/sluice-wasmplugin.yaml",
        ]
        .map(String::from),
    );
    let mut filters = 0;
    for path in &paths {
        for config in shipped_filter_configs(path) {
            filters += 1;
            if config.reconcile {
                assert!(
                    !config.deferral.secrets.is_empty(),
                    "{path}: a filter that reconciles without deferral.secrets"
                );
            }
        }
    }
    // envoy/sluice-filter.yaml, envoy/compose.yaml and the two Istio files.
    assert!(filters >= 4, "found {filters} filter configs");
    for (path, secret_setting) in [
        ("docker-compose.yml", "SLUICE_DEFERRAL_SECRET_FILE"),
        (
            "deploy/kubernetes/sluice.yaml",
            "SLUICE_DEFERRAL_SECRET_FILE",
        ),
        (
            "charts/sluice/templates/rls.yaml",
            "SLUICE_DEFERRAL_SECRET_FILE",
        ),
    ] {
        let text = std::fs::read_to_string(workspace_root().join(path)).unwrap();
        assert!(text.contains(secret_setting), "{path}: no {secret_setting}");
        assert!(
            !text.contains("SLUICE_RLS_COUNTER_WRITES"),
            "{path}: counter writes opened"
        );
    }
}
