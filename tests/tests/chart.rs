//! The Helm chart (charts/sluice) lints, renders and passes a strict
//! Kubernetes schema validator with its default values and with every
//! optional part on; its rendering is the kustomize base in deploy/kubernetes,
//! and every selector in it matches exactly one workload. Helm here is PyPI's
//! helm-python-sdk (the Helm v4 library) behind scripts/helm; the validator
//! is kubernetes-validate; both are installed by scripts/install-test-tools
//! (scripts/test runs it). No cluster.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

use sluice_testkit::workspace_root;
use std::process::Command;

#[path = "support/manifests.rs"]
mod manifests;

const CHART: &str = "charts/sluice";
const EVERYTHING: &str = "charts/sluice/ci/everything-values.yaml";
/// prometheus-operator's kinds: no schema in the validator (it warns).
const CRD_KINDS: [&str; 2] = ["ServiceMonitor", "PrometheusRule"];

fn helm(args: &[&str]) -> String {
    let output = Command::new(workspace_root().join("scripts/helm"))
        .args(args)
        .current_dir(workspace_root())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "scripts/helm {args:?}: {stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

fn render(values: Option<&str>) -> String {
    let mut args = vec!["template", CHART];
    if let Some(values) = values {
        args.extend(["-f", values]);
    }
    helm(&args)
}

#[test]
fn chart_lints_strictly() {
    for values in [None, Some(EVERYTHING)] {
        let mut args = vec!["lint", CHART];
        if let Some(values) = values {
            args.extend(["-f", values]);
        }
        let report = helm(&args);
        assert!(
            report.contains("1 chart(s) linted, 0 chart(s) failed"),
            "{report}"
        );
    }
}

/// values.schema.json refuses a misspelt key and a value out of its set,
/// rather than rendering defaults silently.
#[test]
fn chart_values_are_checked_against_the_schema() {
    let dir = tempfile::tempdir().unwrap();
    for (bad, complaint) in [
        (
            "rls:\n  replica: 3\n",
            "additional properties 'replica' not allowed",
        ),
        ("logFormat: xml\n", "value must be one of"),
    ] {
        let path = dir.path().join("bad-values.yaml");
        std::fs::write(&path, bad).unwrap();
        let output = Command::new(workspace_root().join("scripts/helm"))
            .args(["template", CHART, "-f"])
            .arg(&path)
            .current_dir(workspace_root())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{bad:?} rendered");
        assert!(stderr.contains(complaint), "{bad:?}: {stderr}");
    }
}

/// Every object of both renderings passes `kubernetes-validate --strict`
/// (unknown fields rejected), and the selectors hold.
#[test]
fn chart_renders_valid_manifests() {
    let dir = tempfile::tempdir().unwrap();
    for (name, values) in [("default", None), ("everything", Some(EVERYTHING))] {
        let text = render(values);
        let objects = manifests::parse(name, &text, "sluice-system");
        let file = format!("{name}.yaml");
        std::fs::write(dir.path().join(&file), &text).unwrap();
        let (checked, report) = manifests::validate_strict(dir.path(), &[file], name);
        let expected = objects
            .iter()
            .filter(|m| !CRD_KINDS.contains(&m.kind()))
            .count();
        assert_eq!(checked, expected, "{name}: {report}");
        let selectors = manifests::check_selectors(&objects);
        assert!(selectors >= 8, "{name}: {selectors} selectors");
        let kinds: Vec<&str> = objects.iter().map(|m| m.kind()).collect();
        for kind in [
            "Deployment",
            "StatefulSet",
            "Service",
            "ConfigMap",
            "PodDisruptionBudget",
        ] {
            assert!(kinds.contains(&kind), "{name}: no {kind}");
        }
        if values.is_some() {
            for kind in [
                "Secret",
                "NetworkPolicy",
                "HorizontalPodAutoscaler",
                "ServiceMonitor",
                "PrometheusRule",
            ] {
                assert!(kinds.contains(&kind), "{name}: no {kind}");
            }
        }
    }
}

/// deploy/kubernetes/sluice.yaml is what the chart renders now
/// (scripts/render-kubernetes writes it).
#[test]
fn kustomize_base_is_the_chart_rendering() {
    let committed =
        std::fs::read_to_string(workspace_root().join("deploy/kubernetes/sluice.yaml")).unwrap();
    let body: String = committed
        .lines()
        .skip_while(|l| l.starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(
        body == render(None),
        "deploy/kubernetes/sluice.yaml is stale: run scripts/render-kubernetes"
    );
}

#[test]
fn chart_version_is_the_workspace_version() {
    // The crates' version: env!("CARGO_PKG_VERSION") is the workspace's.
    let version = env!("CARGO_PKG_VERSION");
    let chart: serde_yaml::Value = serde_yaml::from_str(
        &std::fs::read_to_string(workspace_root().join("charts/sluice/Chart.yaml")).unwrap(),
    )
    .unwrap();
    assert_eq!(chart["version"].as_str(), Some(version));
    assert_eq!(chart["appVersion"].as_str(), Some(version));
}

/// The chart's objects with every option on.
fn everything() -> Vec<manifests::Manifest> {
    manifests::parse("everything", &render(Some(EVERYTHING)), "sluice-system")
}

fn one_of_kind<'a>(objects: &'a [manifests::Manifest], kind: &str) -> &'a manifests::Manifest {
    objects.iter().find(|m| m.kind() == kind).unwrap()
}

/// The alerts query metrics docs/operations.md documents.
#[test]
fn alerts_use_documented_metrics() {
    let objects = everything();
    let rule = one_of_kind(&objects, "PrometheusRule");
    let operations = std::fs::read_to_string(workspace_root().join("docs/operations.md")).unwrap();
    let mut alerts = 0;
    for rule in rule.doc["spec"]["groups"][0]["rules"]
        .as_sequence()
        .unwrap()
    {
        let expr = rule["expr"].as_str().unwrap();
        let metrics: Vec<&str> = expr
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| w.starts_with("sluice_"))
            .collect();
        for metric in metrics {
            let documented = metric.trim_end_matches("_bucket");
            assert!(
                operations.contains(documented),
                "{}: {metric} is not in docs/operations.md",
                rule["alert"].as_str().unwrap()
            );
        }
        alerts += 1;
    }
    assert!(alerts >= 6, "{alerts} alerts");
}

/// The ServiceMonitor finds both admin Services by its label expressions,
/// and the port it scrapes is named on each.
#[test]
fn service_monitor_scrapes_both_admin_ports() {
    let objects = everything();
    let monitor = one_of_kind(&objects, "ServiceMonitor");
    let port = monitor.doc["spec"]["endpoints"][0]["port"]
        .as_str()
        .unwrap();
    let expressions = monitor.doc["spec"]["selector"]["matchExpressions"]
        .as_sequence()
        .unwrap();
    let matches = |labels: &serde_yaml::Value| {
        expressions.iter().all(|e| {
            assert_eq!(e["operator"].as_str(), Some("In"));
            let key = e["key"].as_str().unwrap();
            e["values"]
                .as_sequence()
                .unwrap()
                .iter()
                .any(|v| labels.get(key) == Some(v))
        })
    };
    let scraped: Vec<&str> = objects
        .iter()
        .filter(|m| m.kind() == "Service" && matches(&m.doc["metadata"]["labels"]))
        .map(|m| {
            let ports = m.doc["spec"]["ports"].as_sequence().unwrap();
            assert!(
                ports.iter().any(|p| p["name"].as_str() == Some(port)),
                "{}: no port {port}",
                m.name()
            );
            m.name()
        })
        .collect();
    assert_eq!(scraped, ["sluice-consumer", "sluice-rls"]);
}
