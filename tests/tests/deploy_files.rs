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

/// The Kubernetes base (deploy/kubernetes): every manifest the
/// kustomization lists passes a real Kubernetes schema validator
/// (`kubernetes-validate --strict`, installed by ./scripts/setup from PyPI;
/// no cluster needed).
#[test]
fn kubernetes_manifests_pass_the_schema_validator() {
    let dir = workspace_root().join("deploy/kubernetes");
    let kustomization = &documents("deploy/kubernetes/kustomization.yaml")[0];
    let resources: Vec<String> = kustomization["resources"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap().to_string())
        .collect();
    let mut listed: Vec<&str> = resources.iter().map(String::as_str).collect();
    listed.sort();
    let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".yaml") && name != "kustomization.yaml")
        .collect();
    on_disk.sort();
    assert_eq!(listed, on_disk, "every manifest is in the kustomization");
    let validator = sluice_testkit::find_binary("KUBERNETES_VALIDATE", "kubernetes-validate")
        .expect(
            "kubernetes-validate not found: run ./scripts/setup (pip install kubernetes-validate)",
        );
    let output = std::process::Command::new(validator)
        .arg("--strict")
        .args(&resources)
        .current_dir(&dir)
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{report}");
    // Every resource was checked (a file with no documents passes silently).
    let checked = report.matches(" passed for resource ").count();
    let documents: usize = resources
        .iter()
        .map(|r| documents(&format!("deploy/kubernetes/{r}")).len())
        .sum();
    assert_eq!(checked, documents, "{report}");
}

/// The ConfigMaps carry the repository's example files unchanged.
#[test]
fn kubernetes_configmaps_match_the_example_files() {
    for (manifest, key, source) in [
        ("sluice-limits.yaml", "limits.yaml", "config/limits.yaml"),
        (
            "sluice-consumer-config.yaml",
            "consumer.yaml",
            "deploy/compose/consumer.yaml",
        ),
    ] {
        let doc = &documents(&format!("deploy/kubernetes/{manifest}"))[0];
        let expected = std::fs::read_to_string(workspace_root().join(source)).unwrap();
        assert_eq!(
            doc["data"][key].as_str(),
            Some(expected.as_str()),
            "{manifest}"
        );
    }
}

/// Every SLUICE_* variable the manifests set is one the binaries read.
#[test]
fn kubernetes_env_vars_exist() {
    let help = |binary: &str| {
        let output = std::process::Command::new(sluice_testkit::workspace_binary(binary).unwrap())
            .arg("--help")
            .output()
            .unwrap();
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let known = help("sluice-rls") + &help("sluice-consumer");
    let mut names = Vec::new();
    for file in [
        "sluice-rls.yaml",
        "sluice-consumer.yaml",
        "kustomization.yaml",
    ] {
        let text =
            std::fs::read_to_string(workspace_root().join("deploy/kubernetes").join(file)).unwrap();
        for word in text.split(|c: char| !(c.is_ascii_uppercase() || c == '_')) {
            if word.starts_with("SLUICE_") && !names.contains(&word.to_string()) {
                names.push(word.to_string());
            }
        }
    }
    assert!(names.len() > 10, "{names:?}");
    let unknown: Vec<&String> = names
        .iter()
        .filter(|n| !known.contains(&format!("env: {n}")) && !known.contains(&format!("env: {n}=")))
        .collect();
    assert!(unknown.is_empty(), "not read by any binary: {unknown:?}");
}

/// The Istio files address the Services the Kubernetes base creates.
#[test]
fn istio_files_point_at_the_kubernetes_services() {
    let namespace = documents("deploy/kubernetes/kustomization.yaml")[0]["namespace"]
        .as_str()
        .unwrap()
        .to_string();
    let services: Vec<String> = ["sluice-rls.yaml", "sluice-consumer.yaml"]
        .iter()
        .flat_map(|f| documents(&format!("deploy/kubernetes/{f}")))
        .filter(|d| d["kind"].as_str() == Some("Service"))
        .map(|d| {
            format!(
                "{}.{namespace}.svc.cluster.local",
                d["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect();
    let istio = [
        "sluice-filter-envoyfilter.yaml",
        "sluice-wasmplugin.yaml",
        "sluice-routes.yaml",
    ]
    .iter()
    .map(|f| std::fs::read_to_string(workspace_root().join("deploy/istio").join(f)).unwrap())
    .collect::<String>();
    for host in ["sluice-rls", "sluice-deferral"] {
        let full = format!("{host}.{namespace}.svc.cluster.local");
        assert!(services.contains(&full), "no Service {full}: {services:?}");
        assert!(istio.contains(&full), "deploy/istio does not use {full}");
    }
}
