use super::*;

fn load(text: &str) -> Result<LimitsConfig, ConfigError> {
    LimitsConfig::from_sources(&[(PathBuf::from("limits.yaml"), text.to_string())])
}

fn limit_name(config: &LimitsConfig, domain: &str, entries: &[(&str, &str)]) -> Option<String> {
    config
        .lookup(domain, entries.iter().copied())
        .map(|m| m.name().to_string())
}

const NESTED: &str = r#"
domain: llm
descriptors:
  - key: tenant
    value: acme
    rate_limit: { unit: minute, requests_per_unit: 100, name: acme }
    descriptors:
      - key: model
        value: gpt-4o
        rate_limit: { unit: minute, requests_per_unit: 10, name: acme-gpt4o }
      - key: model
        value: gpt-*
        rate_limit: { unit: minute, requests_per_unit: 20, name: acme-gpt-any }
      - key: model
        value: gpt-4*
        rate_limit: { unit: minute, requests_per_unit: 30, name: acme-gpt4-any }
      - key: model
        rate_limit: { unit: minute, requests_per_unit: 40, name: acme-other-model }
  - key: tenant
    descriptors:
      - key: model
        rate_limit:
          unit: second
          requests_per_unit: 5
          name: default-tenant-model
          sluice: { over_limit: defer, priority: low }
  - key: internal
    rate_limit: { unlimited: true, name: internal-unlimited }
"#;

#[test]
fn most_specific_match_wins() {
    let config = load(NESTED).unwrap();
    let acme = |model| limit_name(&config, "llm", &[("tenant", "acme"), ("model", model)]);
    assert_eq!(acme("gpt-4o").as_deref(), Some("acme-gpt4o"));
    assert_eq!(acme("gpt-4.1").as_deref(), Some("acme-gpt4-any"));
    assert_eq!(acme("gpt-3.5").as_deref(), Some("acme-gpt-any"));
    assert_eq!(acme("llama").as_deref(), Some("acme-other-model"));
    assert_eq!(
        limit_name(&config, "llm", &[("tenant", "acme")]).as_deref(),
        Some("acme")
    );
    assert_eq!(
        limit_name(&config, "llm", &[("tenant", "zeta"), ("model", "x")]).as_deref(),
        Some("default-tenant-model")
    );
}

#[test]
fn only_the_last_entry_decides() {
    let config = load(NESTED).unwrap();
    // The default tenant node has no limit of its own.
    assert_eq!(limit_name(&config, "llm", &[("tenant", "zeta")]), None);
    // Extra entries below a leaf match nothing.
    assert_eq!(
        limit_name(
            &config,
            "llm",
            &[("tenant", "acme"), ("model", "gpt-4o"), ("x", "y")]
        ),
        None
    );
    assert_eq!(limit_name(&config, "nope", &[("tenant", "acme")]), None);
    assert_eq!(limit_name(&config, "llm", &[]), None);
}

#[test]
fn extensions_and_unlimited_are_parsed() {
    let config = load(NESTED).unwrap();
    match config.lookup("llm", [("tenant", "t"), ("model", "m")]) {
        Some(Matched::Limited(limit)) => {
            assert_eq!(limit.unit, Unit::Second);
            assert_eq!(limit.sluice.over_limit, OverLimitAction::Defer);
            assert_eq!(limit.sluice.priority, Priority::Low);
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(matches!(
        config.lookup("llm", [("internal", "anything")]),
        Some(Matched::Unlimited { .. })
    ));
    assert_eq!(config.limit_count(), 7);
}

#[test]
fn default_name_is_the_descriptor_path() {
    let config = load(
        "domain: d\ndescriptors:\n  - key: a\n    value: b\n    descriptors:\n      - key: c\n        rate_limit: {unit: hour, requests_per_unit: 1}\n",
    )
    .unwrap();
    assert_eq!(
        limit_name(&config, "d", &[("a", "b"), ("c", "z")]).as_deref(),
        Some("a=b.c")
    );
}

fn error_of(text: &str) -> String {
    load(text).unwrap_err().to_string()
}

#[test]
fn bad_configs_name_file_and_problem() {
    let cases = [
        ("", "file is empty"),
        ("domain: [", "invalid YAML"),
        ("domain: ''\n", "'domain' must not be empty"),
        ("domain: 'a{b}'\n", "must not contain braces"),
        ("domain: d\nfoo: 1\n", "unknown field `foo`"),
        (
            "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: minute}\n",
            "rate_limit has no 'requests_per_unit'",
        ),
        (
            "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {requests_per_unit: 3}\n",
            "rate_limit has no 'unit'",
        ),
        (
            "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: fortnight, requests_per_unit: 3}\n",
            "unknown variant `fortnight`",
        ),
        (
            "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unlimited: true, unit: second}\n",
            "must not set unit",
        ),
        (
            "domain: d\ndescriptors:\n  - key: a\n  - key: a\n",
            "'a' is defined twice",
        ),
        (
            "domain: d\ndescriptors:\n  - key: a\n    value: x*y\n",
            "only allowed at the end",
        ),
        (
            "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1, replaces: [{name: ghost}]}\n",
            "replaces 'ghost'",
        ),
        (
            "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1, name: n}\n  - key: b\n    rate_limit: {unit: second, requests_per_unit: 1, name: n}\n",
            "limit name 'n' is already used",
        ),
        (
            "domain: d\ndescriptors:\n  - key: a\n    shadow_mode: true\n",
            "shadow_mode but has no rate_limit",
        ),
        (
            "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1, sluice: {over_limit: drop}}\n",
            "unknown variant `drop`",
        ),
    ];
    for (text, expected) in cases {
        let message = error_of(text);
        assert!(message.starts_with("limits.yaml: "), "{message}");
        assert!(
            message.contains(expected),
            "expected '{expected}' in '{message}'"
        );
    }
}

#[test]
fn duplicate_domain_across_files_is_refused() {
    let err = LimitsConfig::from_sources(&[
        (PathBuf::from("a.yaml"), "domain: d\n".into()),
        (PathBuf::from("b.yaml"), "domain: d\n".into()),
    ])
    .unwrap_err();
    assert_eq!(err.file, PathBuf::from("b.yaml"));
    assert!(err.message.contains("already defined in a.yaml"), "{err}");
}

#[test]
fn directory_loading_reads_yaml_files_only() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("one.yaml"), "domain: one\n").unwrap();
    std::fs::write(dir.path().join("two.yml"), "domain: two\n").unwrap();
    std::fs::write(dir.path().join("notes.txt"), "not yaml").unwrap();
    std::fs::write(dir.path().join(".hidden.yaml"), "garbage: [").unwrap();
    let config = LimitsConfig::load(dir.path()).unwrap();
    let mut domains: Vec<_> = config.domains().collect();
    domains.sort();
    assert_eq!(domains, ["one", "two"]);

    let empty = tempfile::tempdir().unwrap();
    let err = LimitsConfig::load(empty.path()).unwrap_err();
    assert!(err.message.contains("no .yaml"), "{err}");
    let err = LimitsConfig::load(&dir.path().join("missing.yaml")).unwrap_err();
    assert!(err.to_string().contains("missing.yaml"), "{err}");
}
