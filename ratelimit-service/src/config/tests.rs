use super::*;

fn load(text: &str) -> Result<LimitsConfig, ConfigError> {
    LimitsConfig::from_sources(&[(PathBuf::from("limits.yaml"), text.to_string())])
}

/// What `entries` under `domain` match, if anything.
fn matched<'a>(
    config: &'a LimitsConfig,
    domain: &str,
    entries: &[(&str, &str)],
) -> Option<&'a Matched> {
    config
        .lookup(domain, entries.iter().copied())
        .map(|found| found.matched)
}

fn limit_name(config: &LimitsConfig, domain: &str, entries: &[(&str, &str)]) -> Option<String> {
    matched(config, domain, entries).map(|matched| matched.name().to_string())
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
        value: gpt-4*
        rate_limit: { unit: minute, requests_per_unit: 30, name: acme-gpt4-any }
      - key: model
        value: gpt-*
        rate_limit: { unit: minute, requests_per_unit: 20, name: acme-gpt-any }
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
    match matched(&config, "llm", &[("tenant", "t"), ("model", "m")]) {
        Some(Matched::Limited(limit)) => {
            assert_eq!(limit.unit, Unit::Second);
            assert_eq!(limit.sluice.over_limit, OverLimitAction::Defer);
            assert_eq!(limit.sluice.priority, Priority::Low);
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(matches!(
        matched(&config, "llm", &[("internal", "anything")]),
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
            "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {requests_per_unit: 3}\n",
            "rate_limit has no 'unit'",
        ),
        (
            "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: fortnight, requests_per_unit: 3}\n",
            "invalid rate limit unit 'fortnight'",
        ),
        (
            "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unlimited: true, unit: second}\n",
            "must not set a unit",
        ),
        (
            "domain: d\ndescriptors:\n  - key: a\n    value: x\n    share_threshold: true\n",
            "share_threshold needs a wildcard value",
        ),
        (
            "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1, name: n, replaces: [{name: n}]}\n",
            "replaces itself",
        ),
        (
            "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1, replaces: [{name: ~}]}\n",
            "non-empty name",
        ),
        (
            "domain: d\ndescriptors:\n  - key: a\n    metadata: [1, 2]\n",
            "metadata must be a map",
        ),
        (
            "domain: d\ndescriptors:\n  - key: a\n    ratelimit: {unit: second, requests_per_unit: 1}\n",
            "unknown field `ratelimit`",
        ),
        (
            "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requestsperunit: 1}\n",
            "unknown field `requestsperunit`",
        ),
        (
            "domain: d\ndescriptors:\n  - value: v\n",
            "empty 'key'",
        ),
        (
            "domain: d\ndescriptors:\n  - key: a\n  - key: a\n",
            "'a' is defined twice",
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

fn limit_of(config: &LimitsConfig, domain: &str, entries: &[(&str, &str)]) -> Arc<Limit> {
    match matched(config, domain, entries) {
        Some(Matched::Limited(limit)) => limit.clone(),
        other => panic!("expected a limit for {entries:?}, got {other:?}"),
    }
}

#[test]
fn wildcards_match_anywhere_in_config_order() {
    let config = load(
        r#"
domain: d
descriptors:
  - { key: path, value: "/api/*/v1", rate_limit: { unit: second, requests_per_unit: 1, name: mid } }
  - { key: path, value: "svc*ep*rpc", rate_limit: { unit: second, requests_per_unit: 1, name: multi } }
  - { key: path, value: "*.json", rate_limit: { unit: second, requests_per_unit: 1, name: leading } }
  - { key: path, value: "/api/*", rate_limit: { unit: second, requests_per_unit: 1, name: first-wins } }
  - { key: path, value: "/api/users*", rate_limit: { unit: second, requests_per_unit: 1, name: never-reached } }
  - { key: path, value: "/api/users", rate_limit: { unit: second, requests_per_unit: 1, name: exact } }
  - { key: any, value: "*", rate_limit: { unit: second, requests_per_unit: 1, name: star } }
"#,
    )
    .unwrap();
    let name = |value: &str| limit_name(&config, "d", &[("path", value)]);
    assert_eq!(name("/api/x/v1").as_deref(), Some("mid"));
    assert_eq!(
        name("/api//v1").as_deref(),
        Some("mid"),
        "* matches nothing too"
    );
    assert_eq!(name("svc-a-ep-b-rpc").as_deref(), Some("multi"));
    assert_eq!(name("svceprpc").as_deref(), Some("multi"));
    assert_eq!(
        name("svc-rpc-ep").as_deref(),
        None,
        "parts must come in order"
    );
    assert_eq!(name("a/b.json").as_deref(), Some("leading"));
    assert_eq!(name("/api/users/1").as_deref(), Some("first-wins"));
    assert_eq!(
        name("/api/users").as_deref(),
        Some("exact"),
        "exact beats wildcards"
    );
    assert_eq!(name("/other").as_deref(), None);
    assert_eq!(
        limit_name(&config, "d", &[("any", "")]).as_deref(),
        Some("star")
    );
    assert!(
        !wildcard_match(&["ab".into(), "ba".into()], "aba"),
        "parts may not overlap"
    );
}

#[test]
fn share_threshold_reports_the_shared_entries() {
    let config = load(
        r#"
domain: d
descriptors:
  - key: user
    value: "user/*"
    share_threshold: true
    descriptors:
      - key: file
        value: "file/*"
        descriptors:
          - key: action
            rate_limit: { unit: minute, requests_per_unit: 150 }
"#,
    )
    .unwrap();
    let found = config
        .lookup(
            "d",
            [
                ("user", "user/alice"),
                ("file", "file/a"),
                ("action", "read"),
            ],
        )
        .unwrap();
    assert_eq!(found.shared, vec![(0, "user/*")]);
}

#[test]
fn upstream_keys_are_parsed() {
    let config = load(
        r#"
domain: d
descriptors:
  - key: service
    value: 200
    quota_mode: true
    value_to_metric: true
    metadata:
      service_with_quota: { name: "service_1", weight: 2, tags: [a, b] }
    rate_limit: { unit: MINUTE, requests_per_unit: 1, name: q }
  - key: empty
    value: ""
    rate_limit: { unit: Second }
  - key: free
    rate_limit: { unlimited: true, requests_per_unit: 5, replaces: [{ name: q }] }
  - key: nothing
    descriptors:
"#,
    )
    .unwrap();
    let quota = limit_of(&config, "d", &[("service", "200")]);
    assert!(quota.quota_mode && quota.detailed_metric && quota.named);
    assert_eq!(quota.unit, Unit::Minute);
    let metadata = quota.metadata.as_ref().unwrap();
    assert!(metadata.fields.contains_key("service_with_quota"));
    // An empty value is no value; a missing requests_per_unit is 0.
    let empty = limit_of(&config, "d", &[("empty", "anything")]);
    assert_eq!((empty.requests_per_unit, empty.unit), (0, Unit::Second));
    assert!(config
        .warnings()
        .iter()
        .any(|w| w.contains("no requests_per_unit")));
    let free = matched(&config, "d", &[("free", "x")]);
    assert!(
        matches!(free, Some(Matched::Unlimited { replaces, .. }) if replaces == &["q"]),
        "{free:?}"
    );
}

#[test]
fn accepted_oddities_are_warnings() {
    let config = load(
        r#"
domain: d
descriptors:
  - key: a
    shadow_mode: true
  - key: b
    rate_limit: { unit: second, requests_per_unit: 1, name: n, replaces: [{ name: ghost }] }
  - key: c
    rate_limit: { unit: second, requests_per_unit: 1, name: n }
"#,
    )
    .unwrap();
    let warnings = config.warnings().join("\n");
    assert!(
        warnings.contains("sets shadow_mode but has no rate_limit"),
        "{warnings}"
    );
    assert!(warnings.contains("replaces 'ghost'"), "{warnings}");
    assert!(warnings.contains("'n' is also used"), "{warnings}");
    assert!(warnings.starts_with("limits.yaml: "), "{warnings}");
}

#[test]
fn merge_domains_joins_files_but_not_duplicates() {
    let a = (PathBuf::from("a.yaml"), "domain: d\ndescriptors:\n  - { key: a, rate_limit: { unit: second, requests_per_unit: 1 } }\n".to_string());
    let b = (PathBuf::from("b.yaml"), "domain: d\ndescriptors:\n  - { key: b, rate_limit: { unit: second, requests_per_unit: 2 } }\n".to_string());
    let merge = LoadOptions {
        merge_domains: true,
    };
    let config = LimitsConfig::from_sources_with(&[a.clone(), b], merge).unwrap();
    assert_eq!(
        limit_name(&config, "d", &[("a", "x")]).as_deref(),
        Some("a")
    );
    assert_eq!(
        limit_name(&config, "d", &[("b", "x")]).as_deref(),
        Some("b")
    );
    assert_eq!(config.limit_count(), 2);
    let err = LimitsConfig::from_sources_with(&[a.clone(), a], merge).unwrap_err();
    assert!(err.message.contains("defined twice"), "{err}");
}
