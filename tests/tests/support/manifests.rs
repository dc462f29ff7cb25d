//! Kubernetes objects read from YAML, and the checks every set of them
//! passes: shared by deploy_files.rs (the files in deploy/) and chart.rs (the
//! Helm chart rendered with other values).
#![allow(dead_code)] // each test file uses its part

/// One Kubernetes object of a file under deploy/, with the namespace it is
/// created in (kustomize's for deploy/kubernetes, where the files leave it out).
pub struct Manifest {
    pub file: String,
    pub namespace: String,
    pub doc: serde_yaml::Value,
}

impl Manifest {
    pub fn kind(&self) -> &str {
        self.doc["kind"].as_str().unwrap_or("")
    }
    pub fn name(&self) -> &str {
        self.doc["metadata"]["name"].as_str().unwrap_or("")
    }
}

/// `kubernetes-validate --strict` (installed by scripts/install-test-tools from PyPI;
/// no cluster needed) on `files`, relative to `dir`: fails the test with its
/// report unless every document passes; returns how many resources it
/// checked, and the report.
pub fn validate_strict(dir: &std::path::Path, files: &[String], what: &str) -> (usize, String) {
    let validator = sluice_testkit::find_binary("KUBERNETES_VALIDATE", "kubernetes-validate")
        .expect("kubernetes-validate not found: run scripts/install-test-tools");
    let output = std::process::Command::new(validator)
        .arg("--strict")
        .args(files)
        .current_dir(dir)
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{what}: {report}");
    (report.matches(" passed for resource ").count(), report)
}

pub const WORKLOAD_KINDS: [&str; 4] = ["Deployment", "StatefulSet", "DaemonSet", "Job"];

/// Labels `selector` asks for (a Service's map, or `matchLabels`) all on `labels`.
fn selects(selector: &serde_yaml::Value, labels: &serde_yaml::Value) -> bool {
    let selector = selector.as_mapping().unwrap();
    !selector.is_empty() && selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

fn workloads_selected<'a>(
    manifests: &'a [Manifest],
    namespace: &str,
    selector: &serde_yaml::Value,
) -> Vec<&'a Manifest> {
    manifests
        .iter()
        .filter(|m| WORKLOAD_KINDS.contains(&m.kind()) && m.namespace == namespace)
        .filter(|m| selects(selector, &m.doc["spec"]["template"]["metadata"]["labels"]))
        .collect()
}

pub fn service_for_host<'a>(manifests: &'a [Manifest], host: &str) -> Option<&'a Manifest> {
    manifests.iter().find(|m| {
        m.kind() == "Service" && host == format!("{}.{}.svc.cluster.local", m.name(), m.namespace)
    })
}

pub fn has_port(service: &Manifest, port: u64) -> bool {
    service.doc["spec"]["ports"]
        .as_sequence()
        .unwrap()
        .iter()
        .any(|p| p["port"].as_u64() == Some(port))
}

/// Checks a set of objects and answers how many selectors it checked: a
/// Service, PodDisruptionBudget or NetworkPolicy (by `matchLabels`) is
/// defined once and selects the pods of exactly one workload, every
/// workload's selector matches its own pod template, and a Service's named
/// target ports exist on the pods it selects.
pub fn check_selectors(manifests: &[Manifest]) -> usize {
    let mut seen = std::collections::HashSet::new();
    let mut checked = 0;
    for m in manifests {
        let id = format!("{}/{}/{}", m.kind(), m.namespace, m.name());
        assert!(
            seen.insert(id.clone()),
            "{id} is defined twice (again in {})",
            m.file
        );
        let selector = match m.kind() {
            "Service" => m.doc["spec"]["selector"].clone(),
            "PodDisruptionBudget" => m.doc["spec"]["selector"]["matchLabels"].clone(),
            "NetworkPolicy" if m.doc["spec"]["podSelector"]["matchLabels"].is_mapping() => {
                m.doc["spec"]["podSelector"]["matchLabels"].clone()
            }
            kind if WORKLOAD_KINDS.contains(&kind) => {
                let own = &m.doc["spec"]["selector"]["matchLabels"];
                let labels = &m.doc["spec"]["template"]["metadata"]["labels"];
                assert!(selects(own, labels), "{id} ({})", m.file);
                continue;
            }
            _ => continue,
        };
        let selected = workloads_selected(manifests, &m.namespace, &selector);
        let names: Vec<String> = selected
            .iter()
            .map(|w| format!("{} ({})", w.name(), w.file))
            .collect();
        assert_eq!(
            selected.len(),
            1,
            "{id} ({}) selects {names:?} with {selector:?}",
            m.file
        );
        checked += 1;
        if m.kind() == "Service" {
            check_target_ports(m, selected[0]);
        }
    }
    checked
}

fn check_target_ports(service: &Manifest, workload: &Manifest) {
    let containers = workload.doc["spec"]["template"]["spec"]["containers"]
        .as_sequence()
        .unwrap();
    for port in service.doc["spec"]["ports"].as_sequence().unwrap() {
        if let Some(target) = port["targetPort"].as_str() {
            let named = |c: &serde_yaml::Value| {
                c["ports"]
                    .as_sequence()
                    .is_some_and(|ps| ps.iter().any(|p| p["name"].as_str() == Some(target)))
            };
            assert!(
                containers.iter().any(named),
                "{}: no container port named {target}",
                service.name()
            );
        }
    }
}

/// The objects of a YAML stream (`---`-separated), in `namespace` unless
/// they name theirs.
pub fn parse(file: &str, text: &str, namespace: &str) -> Vec<Manifest> {
    use serde::Deserialize;
    serde_yaml::Deserializer::from_str(text)
        .map(|doc| serde_yaml::Value::deserialize(doc).unwrap())
        .filter(|doc| {
            doc["apiVersion"].as_str().is_some() && doc["kind"].as_str() != Some("Kustomization")
        })
        .map(|doc| Manifest {
            file: file.to_string(),
            namespace: doc["metadata"]["namespace"]
                .as_str()
                .unwrap_or(namespace)
                .to_string(),
            doc,
        })
        .collect()
}
