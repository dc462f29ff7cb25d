//! The mesh integration files in deploy/ stay in step with the code: every
//! plugin configuration they carry is accepted by the filter's own parser.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

use serde::Deserialize;
use sluice_admission::config::FilterConfig;
use sluice_testkit::workspace_root;

fn documents(path: &str) -> Vec<serde_yaml::Value> {
    let text = std::fs::read_to_string(workspace_root().join(path)).unwrap();
    serde_yaml::Deserializer::from_str(&text)
        .map(|doc| serde_yaml::Value::deserialize(doc).unwrap())
        .collect()
}

#[test]
fn envoyfilter_plugin_config_parses() {
    let docs = documents("deploy/istio/sluice-filter-envoyfilter.yaml");
    let config = &docs[0]["spec"]["configPatches"][0]["patch"]["value"]["typed_config"]["config"];
    assert_eq!(
        config["allow_on_headers_stop_iteration"],
        serde_yaml::Value::Bool(true)
    );
    let json = config["configuration"]["value"].as_str().unwrap();
    let parsed = FilterConfig::from_json(json.as_bytes()).unwrap();
    assert!(parsed.rls_cluster.starts_with("outbound|8081||sluice-rls."));
}

#[test]
fn wasmplugin_plugin_config_parses() {
    let docs = documents("deploy/istio/sluice-wasmplugin.yaml");
    let plugin_config = serde_json::to_vec(&docs[0]["spec"]["pluginConfig"]).unwrap();
    FilterConfig::from_json(&plugin_config).unwrap();
}

#[test]
fn deferral_route_matches_the_marker_the_filter_sets() {
    let docs = documents("deploy/istio/sluice-routes.yaml");
    let filter_docs = documents("deploy/istio/sluice-filter-envoyfilter.yaml");
    let json = filter_docs[0]["spec"]["configPatches"][0]["patch"]["value"]["typed_config"]
        ["config"]["configuration"]["value"]
        .as_str()
        .unwrap();
    let marker = FilterConfig::from_json(json.as_bytes())
        .unwrap()
        .deferral
        .marker_header;
    let first_route = &docs[0]["spec"]["http"][0];
    assert_eq!(
        first_route["match"][0]["headers"][&marker]["exact"].as_str(),
        Some("1")
    );
    assert_eq!(first_route["timeout"].as_str(), Some("0s"));
    assert_eq!(
        docs[1]["spec"]["ports"][0]["appProtocol"].as_str(),
        Some("grpc")
    );
    // The deferred route's destination is a Service of this file, on the
    // sluice-rls pods.
    let destination = &first_route["route"][0]["destination"];
    let host = destination["host"].as_str().unwrap();
    let deferral = docs
        .iter()
        .find(|d| {
            d["kind"].as_str() == Some("Service")
                && host.starts_with(&format!(
                    "{}.{}.",
                    d["metadata"]["name"].as_str().unwrap(),
                    d["metadata"]["namespace"].as_str().unwrap()
                ))
        })
        .unwrap_or_else(|| panic!("no Service for {host}"));
    assert_eq!(deferral["spec"]["selector"], docs[1]["spec"]["selector"]);
    assert_eq!(
        deferral["spec"]["ports"][0]["port"],
        destination["port"]["number"]
    );
}

#[test]
fn envoy_examples_carry_a_valid_plugin_config() {
    let docs = documents("envoy/sluice-filter.yaml");
    let filters = &docs[0]["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]
        ["typed_config"]["http_filters"];
    let wasm = &filters[0]["typed_config"]["config"];
    assert_eq!(
        wasm["allow_on_headers_stop_iteration"],
        serde_yaml::Value::Bool(true)
    );
    FilterConfig::from_json(wasm["configuration"]["value"].as_str().unwrap().as_bytes()).unwrap();
}

#[test]
fn ext_authz_files_agree_with_the_code() {
    let docs = documents("deploy/istio/sluice-ext-authz.yaml");
    assert_eq!(docs[0]["spec"]["action"].as_str(), Some("CUSTOM"));
    let paths = docs[0]["spec"]["rules"][0]["to"][0]["operation"]["paths"]
        .as_sequence()
        .unwrap();
    for path in paths {
        let path = path.as_str().unwrap();
        assert!(
            sluice_admission::openai::Endpoint::from_path(path).is_some(),
            "{path} is not an endpoint the admission understands"
        );
    }
    let json = std::fs::read(workspace_root().join("config/ext-authz.json")).unwrap();
    FilterConfig::from_json(&json).unwrap();
}
