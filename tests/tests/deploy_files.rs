//! The mesh integration files in deploy/ stay in step with the code: every
//! plugin configuration they carry is accepted by the filter's own parser.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

use serde::Deserialize;
use sluice_admission::config::FilterConfig;
use sluice_testkit::workspace_root;

#[path = "support/manifests.rs"]
mod manifests;
use manifests::{check_selectors, has_port, service_for_host, Manifest};

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
    let virtual_service = docs
        .iter()
        .find(|d| d["kind"].as_str() == Some("VirtualService"))
        .unwrap();
    let first_route = &virtual_service["spec"]["http"][0];
    assert_eq!(
        first_route["match"][0]["headers"][&marker]["exact"].as_str(),
        Some("1")
    );
    assert_eq!(first_route["timeout"].as_str(), Some("0s"));
    // The deferred route goes to the deferral Service on the sluice-rls pods,
    // and Istio speaks HTTP/2 to the RLS port (its name or appProtocol).
    let manifests = manifests();
    let destination = &first_route["route"][0]["destination"];
    let host = destination["host"].as_str().unwrap();
    let deferral =
        service_for_host(&manifests, host).unwrap_or_else(|| panic!("no Service {host}"));
    let rls = service_for_host(&manifests, "sluice-rls.sluice-system.svc.cluster.local").unwrap();
    assert_eq!(
        deferral.doc["spec"]["selector"],
        rls.doc["spec"]["selector"]
    );
    assert!(has_port(
        deferral,
        destination["port"]["number"].as_u64().unwrap()
    ));
    let grpc = rls.doc["spec"]["ports"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|p| p["port"].as_u64() == Some(8081))
        .unwrap();
    assert!(
        grpc["appProtocol"].as_str() == Some("grpc")
            || grpc["name"].as_str().is_some_and(|n| n.starts_with("grpc")),
        "{grpc:?}"
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
    // Deferral through Istio's provider needs the route re-matched after the
    // check (Envoy's clear_route_cache, which envoy/ext-authz.yaml sets).
    let text = std::fs::read_to_string(workspace_root().join("deploy/istio/sluice-ext-authz.yaml"))
        .unwrap();
    assert!(
        text.contains("clearRouteCache: true"),
        "sluice-ext-authz.yaml"
    );
    let envoy = std::fs::read_to_string(workspace_root().join("envoy/ext-authz.yaml")).unwrap();
    assert!(
        envoy.contains("clear_route_cache: true"),
        "envoy/ext-authz.yaml"
    );
}

/// Istio's gateways get the same per-tenant labels as plain Envoy: the
/// bootstrap patch carries envoy/sluice-filter.yaml's stats_tags unchanged,
/// and the file names the stats prefix Istio must keep.
#[test]
fn istio_stats_tags_match_the_envoy_example() {
    let envoy = &documents("envoy/sluice-filter.yaml")[0]["stats_config"]["stats_tags"];
    let istio = &documents("deploy/istio/sluice-stats.yaml")[0];
    let patch = &istio["spec"]["configPatches"][0];
    assert_eq!(patch["applyTo"].as_str(), Some("BOOTSTRAP"));
    assert_eq!(
        &patch["patch"]["value"]["stats_config"]["stats_tags"],
        envoy
    );
    let text =
        std::fs::read_to_string(workspace_root().join("deploy/istio/sluice-stats.yaml")).unwrap();
    assert!(text.contains(r#"inclusionPrefixes: ["wasmcustom.sluice_"]"#));
}

/// The limits EnvoyFilter changes only the LLM traffic: every patch names
/// the LLM server's listener port, its SNI or its virtual host, as the
/// Gateway and the VirtualService of sluice-routes.yaml define them.
#[test]
fn limits_envoyfilter_is_scoped_to_the_llm_routes() {
    let routes = documents("deploy/istio/sluice-routes.yaml");
    let gateway = routes
        .iter()
        .find(|d| d["kind"].as_str() == Some("Gateway"))
        .unwrap();
    let server = &gateway["spec"]["servers"][0];
    let host = server["hosts"][0].as_str().unwrap();
    let port = server["port"]["number"].as_u64().unwrap();
    let vhost = format!("{host}:{port}");
    let virtual_service = routes
        .iter()
        .find(|d| d["kind"].as_str() == Some("VirtualService"))
        .unwrap();
    assert_eq!(virtual_service["spec"]["hosts"][0].as_str(), Some(host));
    let filter = &documents("deploy/istio/sluice-limits-envoyfilter.yaml")[0];
    // Istio's ingress gateway listens on 8443 for its Service's 443.
    let listener_port = if port == 443 { 8443 } else { port };
    for patch in filter["spec"]["configPatches"].as_sequence().unwrap() {
        let target = patch["applyTo"].as_str().unwrap();
        let matched = &patch["match"];
        match target {
            "LISTENER" => assert_eq!(
                matched["listener"]["portNumber"].as_u64(),
                Some(listener_port)
            ),
            "NETWORK_FILTER" => {
                assert_eq!(
                    matched["listener"]["portNumber"].as_u64(),
                    Some(listener_port)
                );
                assert_eq!(
                    matched["listener"]["filterChain"]["sni"].as_str(),
                    Some(host)
                );
            }
            "VIRTUAL_HOST" | "HTTP_ROUTE" => assert_eq!(
                matched["routeConfiguration"]["vhost"]["name"].as_str(),
                Some(vhost.as_str()),
                "{target}"
            ),
            other => panic!("unexpected patch {other}"),
        }
    }
}

/// The Kubernetes base (deploy/kubernetes): every manifest the
/// kustomization lists passes a real Kubernetes schema validator
/// (`kubernetes-validate --strict`, installed by scripts/install-test-tools from PyPI;
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
    let (checked, report) = manifests::validate_strict(&dir, &resources, "deploy/kubernetes");
    // Every resource was checked (a file with no documents passes silently).
    let documents: usize = resources
        .iter()
        .map(|r| documents(&format!("deploy/kubernetes/{r}")).len())
        .sum();
    assert_eq!(checked, documents, "{report}");
}

/// The chart carries the repository's example files unchanged, and its
/// rendering in deploy/kubernetes puts them in the ConfigMaps.
#[test]
fn kubernetes_configmaps_match_the_example_files() {
    let rendered =
        &std::fs::read_to_string(workspace_root().join("deploy/kubernetes/sluice.yaml")).unwrap();
    let objects = manifests::parse("sluice.yaml", rendered, "sluice-system");
    for (configmap, key, source) in [
        ("sluice-limits", "limits.yaml", "config/limits.yaml"),
        (
            "sluice-consumer-config",
            "consumer.yaml",
            "deploy/compose/consumer.yaml",
        ),
        (
            "sluice-ext-authz",
            "ext-authz.json",
            "config/ext-authz.json",
        ),
    ] {
        let expected = std::fs::read_to_string(workspace_root().join(source)).unwrap();
        let carried =
            std::fs::read_to_string(workspace_root().join("charts/sluice/files").join(key))
                .unwrap();
        assert_eq!(
            carried, expected,
            "charts/sluice/files/{key} differs from {source}"
        );
        let doc = objects
            .iter()
            .find(|m| m.kind() == "ConfigMap" && m.name() == configmap)
            .unwrap_or_else(|| panic!("no ConfigMap {configmap}"));
        assert_eq!(
            doc.doc["data"][key].as_str(),
            Some(expected.as_str()),
            "{configmap}"
        );
    }
}

/// Every SLUICE_* variable the chart sets is one the binaries read.
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
    let mut files = Vec::new();
    yaml_files(
        &workspace_root().join("charts/sluice/templates"),
        &mut files,
    );
    files.push(workspace_root().join("deploy/kubernetes/sluice.yaml"));
    for file in files {
        let text = std::fs::read_to_string(file).unwrap();
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

fn yaml_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            yaml_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(path);
        }
    }
}

/// Every Kubernetes object in every file under deploy/ (deploy/kubernetes/
/// in kustomize's namespace).
fn manifests() -> Vec<Manifest> {
    let root = workspace_root();
    let base_namespace = documents("deploy/kubernetes/kustomization.yaml")[0]["namespace"]
        .as_str()
        .unwrap()
        .to_string();
    let mut files = Vec::new();
    yaml_files(&root.join("deploy"), &mut files);
    files.sort();
    let mut out = Vec::new();
    for path in files {
        let file = path
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        let namespace = if file.starts_with("deploy/kubernetes/") {
            base_namespace.as_str()
        } else {
            ""
        };
        for m in manifests::parse(&file, &text, namespace) {
            assert!(
                !m.namespace.is_empty(),
                "{file}: {} has no namespace",
                m.name()
            );
            out.push(m);
        }
    }
    assert!(out.len() > 10, "deploy/ read as {} objects", out.len());
    out
}

/// The `<name>.<namespace>.svc.cluster.local` hosts in `text`, with the port
/// written beside one: `outbound|<port>||<host>` (Istio's cluster name) or
/// `<host>:<port>` (a URL).
fn cluster_hosts(text: &str) -> Vec<(String, Option<u64>)> {
    const SUFFIX: &str = ".svc.cluster.local";
    let word = |c: char| c.is_ascii_alphanumeric() || "-.|:/".contains(c);
    let mut out = Vec::new();
    for token in text
        .split(|c: char| !word(c))
        .filter(|t| t.contains(SUFFIX))
    {
        let (before, after) = token.split_once(SUFFIX).unwrap();
        let mut port = after
            .strip_prefix(':')
            .and_then(|p| p.split('/').next()?.parse().ok());
        let name = match before.rsplit_once("||") {
            Some((cluster, name)) => {
                port = cluster.rsplit('|').next().and_then(|p| p.parse().ok());
                name
            }
            None => before.rsplit('/').next().unwrap(),
        };
        out.push((format!("{name}{SUFFIX}"), port));
    }
    out
}

/// The bug of issue 27: two files defined the same Services with different
/// selectors, one matching no pod, and the filter's `failure_mode: allow`
/// then let every request through uncounted. Across every file in deploy/
/// (the chart's rendering, deploy/kubernetes/sluice.yaml, included).
#[test]
fn every_selector_matches_exactly_one_workload() {
    let checked = check_selectors(&manifests());
    assert!(checked >= 4, "only {checked} selectors checked");
}

/// Every in-cluster host the Istio files name (a destination, the filter's
/// `outbound|port||host` cluster, the ext_authz provider, the Wasm module's
/// URL) is a Service of deploy/ with that port; hosts outside Sluice's
/// namespace are the user's (the model server) and listed here. The Envoy
/// file for docker-compose names compose services with their ports.
#[test]
fn every_host_the_mesh_files_name_is_a_service() {
    let manifests = manifests();
    let users_hosts = ["vllm.llm.svc.cluster.local"];
    let mut checked = Vec::new();
    for m in manifests
        .iter()
        .filter(|m| m.file.starts_with("deploy/istio/"))
    {
        let text = serde_yaml::to_string(&m.doc).unwrap();
        for (host, port) in cluster_hosts(&text) {
            if users_hosts.contains(&host.as_str()) {
                continue;
            }
            let service = service_for_host(&manifests, &host).unwrap_or_else(|| {
                panic!("{} names {host}, which is no Service in deploy/", m.file)
            });
            if let Some(port) = port {
                assert!(
                    has_port(service, port),
                    "{}: {host} has no port {port}",
                    m.file
                );
            }
            checked.push(host);
        }
        // VirtualService destinations carry their port beside the host.
        for route in m.doc["spec"]["http"].as_sequence().into_iter().flatten() {
            for dest in route["route"].as_sequence().unwrap() {
                let host = dest["destination"]["host"].as_str().unwrap();
                let port = dest["destination"]["port"]["number"].as_u64().unwrap();
                if let Some(service) = service_for_host(&manifests, host) {
                    assert!(
                        has_port(service, port),
                        "{}: {host} has no port {port}",
                        m.file
                    );
                }
            }
        }
    }
    // The ext_authz provider lives in the mesh config, a comment of its file.
    let ext_authz =
        std::fs::read_to_string(workspace_root().join("deploy/istio/sluice-ext-authz.yaml"))
            .unwrap();
    let provider = ext_authz
        .lines()
        .find_map(|l| l.trim_start_matches(['#', ' ']).strip_prefix("service: "))
        .unwrap();
    let service = service_for_host(&manifests, provider.trim())
        .unwrap_or_else(|| panic!("ext_authz provider {provider} is no Service"));
    assert!(has_port(service, 8081));
    checked.push(provider.to_string());
    for host in [
        "sluice-rls.sluice-system.svc.cluster.local",
        "sluice-deferral.sluice-system.svc.cluster.local",
    ] {
        assert!(
            checked.iter().any(|h| h == host),
            "deploy/istio does not use {host}: {checked:?}"
        );
    }
    // envoy/compose.yaml's upstreams are services of docker-compose.yml.
    let compose = &documents("docker-compose.yml")[0]["services"];
    let envoy = &documents("envoy/compose.yaml")[0];
    for cluster in envoy["static_resources"]["clusters"].as_sequence().unwrap() {
        for group in cluster["load_assignment"]["endpoints"]
            .as_sequence()
            .unwrap()
        {
            for endpoint in group["lb_endpoints"].as_sequence().unwrap() {
                let address = &endpoint["endpoint"]["address"]["socket_address"];
                let host = address["address"].as_str().unwrap();
                assert!(
                    compose.get(host).is_some(),
                    "envoy/compose.yaml names {host}, no compose service"
                );
            }
        }
    }
}

/// The dashboard works for an Istio gateway as for plain Envoy: the Envoy
/// scrape job and the listener's stat prefix are variables, never written
/// into a query.
#[test]
fn dashboard_queries_take_the_envoy_job_and_listener_from_variables() {
    let text =
        std::fs::read_to_string(workspace_root().join("deploy/grafana/sluice-dashboard.json"))
            .unwrap();
    let dashboard: serde_json::Value = serde_json::from_str(&text).unwrap();
    let variables: Vec<&str> = dashboard["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(variables, ["datasource", "envoy_job", "stat_prefix"]);
    let mut exprs = Vec::new();
    let mut stack = vec![&dashboard["panels"]];
    while let Some(value) = stack.pop() {
        match value {
            serde_json::Value::Object(map) => {
                if let Some(expr) = map.get("expr").and_then(|e| e.as_str()) {
                    exprs.push(expr);
                }
                stack.extend(map.values());
            }
            serde_json::Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
    assert!(exprs.len() > 20, "{} queries", exprs.len());
    for expr in &exprs {
        assert!(!expr.contains("job=\""), "a fixed job in {expr}");
        assert!(
            !expr.contains("envoy_http_conn_manager_prefix=\""),
            "a fixed listener in {expr}"
        );
    }
    assert!(exprs.iter().any(|e| e.contains("job=~\"$envoy_job\"")));
    assert!(exprs
        .iter()
        .any(|e| e.contains("envoy_http_conn_manager_prefix=~\"$stat_prefix\"")));
}
