//! `--upstream-metrics`: envoyproxy/ratelimit's per-descriptor stats, checked
//! against upstream's own Prometheus mapping. The test writes the statsd
//! names upstream would emit for the decisions it makes
//! (`ratelimit.service.rate_limit.<domain>.<key_value>....<stat>`, from
//! `src/stats/manager_impl.go` and the config's descriptor path), runs them
//! through the mapping copied from upstream (`src/stats/prom/default_mapper.yaml`,
//! read as statsd_exporter reads it: globs, then regexes, first match wins),
//! and finds each resulting series, with upstream's count, in `/metrics`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

use sluice_proto::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use sluice_ratelimit::config::LimitsConfig;
use sluice_ratelimit::limiter::{Limiter, ManualClock};
use sluice_ratelimit::metrics::{Metrics, UpstreamStatsOptions};
use sluice_ratelimit::store::{CountingMode, MemoryStore};
use sluice_testkit::rls::descriptor;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

mod common;
use common::T0;

const LIMITS: &str = r#"
domain: rl
descriptors:
  - key: foo
    value: bar
    rate_limit: { unit: minute, requests_per_unit: 5 }
  - key: tenant
    descriptors:
      - key: model
        value: m
        rate_limit: { unit: minute, requests_per_unit: 3 }
        descriptors:
          - key: tokens
            shadow_mode: true
            rate_limit: { unit: minute, requests_per_unit: 1 }
  - key: remote_address
    value: 10.0.0.1
    rate_limit: { unit: hour, requests_per_unit: 100 }
"#;

/// One mapping of statsd_exporter's config.
#[derive(serde::Deserialize)]
struct Mapping {
    #[serde(rename = "match")]
    pattern: String,
    #[serde(default)]
    match_type: Option<String>,
    name: String,
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

#[derive(serde::Deserialize)]
struct MapperConfig {
    mappings: Vec<Mapping>,
}

struct Mapper(Vec<(regex::Regex, Mapping)>);

impl Mapper {
    fn upstreams() -> Self {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/envoyproxy-ratelimit/prom/default_mapper.yaml");
        let config: MapperConfig =
            serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let mut globs = Vec::new();
        let mut regexes = Vec::new();
        for mapping in config.mappings {
            if mapping.match_type.as_deref() == Some("regex") {
                let compiled = regex::Regex::new(&format!("^{}$", mapping.pattern)).unwrap();
                regexes.push((compiled, mapping));
            } else {
                // A glob `*` is one dot-free component.
                let pattern = regex::escape(&mapping.pattern).replace(r"\*", "([^.]+)");
                globs.push((regex::Regex::new(&format!("^{pattern}$")).unwrap(), mapping));
            }
        }
        // statsd_exporter tries the glob mappings first, then the regexes.
        globs.extend(regexes);
        Mapper(globs)
    }

    /// The Prometheus series (name and sorted labels, as client_golang
    /// writes them) of one statsd name.
    fn series(&self, statsd_name: &str) -> String {
        let (captures, mapping) = self
            .0
            .iter()
            .find_map(|(re, mapping)| re.captures(statsd_name).map(|c| (c, mapping)))
            .unwrap_or_else(|| panic!("no mapping for {statsd_name}"));
        let labels: Vec<String> = mapping
            .labels
            .iter()
            .map(|(name, template)| {
                let mut value = String::new();
                captures.expand(template, &mut value);
                format!("{name}=\"{value}\"")
            })
            .collect();
        format!("{}{{{}}}", mapping.name, labels.join(","))
    }
}

fn limiter() -> Limiter {
    let config =
        LimitsConfig::from_sources(&[(PathBuf::from("limits.yaml"), LIMITS.into())]).unwrap();
    let metrics = Metrics::new().with_upstream_stats(UpstreamStatsOptions {
        enabled: true,
        near_limit_ratio: 0.8,
    });
    Limiter::new(
        config,
        Arc::new(MemoryStore::new()),
        CountingMode::IncrementAll,
        Arc::new(ManualClock::new(T0)),
        Arc::new(metrics),
    )
}

async fn ask(limiter: &Limiter, entries: &[(&str, &str)]) {
    let request = RateLimitRequest {
        domain: "rl".into(),
        descriptors: vec![descriptor(entries)],
        hits_addend: 0,
    };
    limiter.should_rate_limit(&request).await.unwrap();
}

#[tokio::test]
async fn upstream_names_as_upstreams_mapping_gives_them() {
    let limiter = limiter();
    // foo=bar, 5 a minute, near from 4: 7 requests.
    for _ in 0..7 {
        ask(&limiter, &[("foo", "bar")]).await;
    }
    // tenant > model=m (3) > tokens (1, shadow mode): 2 requests each.
    for _ in 0..2 {
        ask(&limiter, &[("tenant", "a"), ("model", "m")]).await;
        ask(
            &limiter,
            &[("tenant", "a"), ("model", "m"), ("tokens", "t")],
        )
        .await;
    }
    // An IPv4 value: upstream's SanitizeStatName turns its dots into `_`.
    ask(&limiter, &[("remote_address", "10.0.0.1")]).await;

    // Upstream's stats keys are the config path (`key` or `key_value`,
    // sanitized), not the request's values; each level's counts as
    // base_limiter.go makes them: [total_hits, within_limit, near_limit,
    // over_limit, shadow_mode].
    let expected: &[(&str, [u64; 5])] = &[
        // 5 a minute, near from 4: the 5th hit is near (4 → 5), 6 and 7 over.
        ("rl.foo_bar", [7, 5, 1, 2, 0]),
        // 3 a minute, near from floor(2.4) = 2: neither request passes 2.
        ("rl.tenant.model_m", [2, 2, 0, 0, 0]),
        // 1 a minute, shadow mode, near from 0: the 1st is within and near,
        // the 2nd over (in shadow mode).
        ("rl.tenant.model_m.tokens", [2, 1, 1, 1, 1]),
        ("rl.remote_address_10_0_0_1", [1, 1, 0, 0, 0]),
    ];
    const STATS: [&str; 5] = [
        "total_hits",
        "within_limit",
        "near_limit",
        "over_limit",
        "shadow_mode",
    ];
    let text = limiter.metrics().encode();
    let mapper = Mapper::upstreams();
    // The mapping keeps `domain`, `key1` and `key2` and drops deeper levels,
    // so the tokens level adds to the model's series, as in statsd_exporter.
    let mut totals: BTreeMap<String, u64> = BTreeMap::new();
    for (stats_key, counts) in expected {
        for (stat, count) in STATS.iter().zip(counts) {
            let series = mapper.series(&format!("ratelimit.service.rate_limit.{stats_key}.{stat}"));
            *totals.entry(series).or_default() += count;
        }
    }
    assert_eq!(totals.len(), 3 * STATS.len(), "{totals:?}");
    for (series, count) in &totals {
        let line = format!("{series} {count}\n");
        assert!(text.contains(&line), "{line:?} not in\n{text}");
    }
    assert_eq!(
        totals[r#"ratelimit_service_rate_limit_total_hits{domain="rl",key1="tenant",key2="model_m"}"#],
        4
    );
    assert_eq!(
        totals[r#"ratelimit_service_rate_limit_near_limit{domain="rl",key1="remote_address_10_0_0_1"}"#],
        0
    );
    assert!(
        text.contains("# TYPE ratelimit_service_rate_limit_total_hits unknown"),
        "bare names, no _total: {text}"
    );
    assert!(text.contains("sluice_rls_hits_total"), "Sluice's own stay");
    assert!(text.trim_end().ends_with("# EOF"), "{text}");
}

#[tokio::test]
async fn off_by_default() {
    let config =
        LimitsConfig::from_sources(&[(PathBuf::from("limits.yaml"), LIMITS.into())]).unwrap();
    let limiter = Limiter::new(
        config,
        Arc::new(MemoryStore::new()),
        CountingMode::IncrementAll,
        Arc::new(ManualClock::new(T0)),
        Arc::new(Metrics::new()),
    );
    ask(&limiter, &[("foo", "bar")]).await;
    let text = limiter.metrics().encode();
    assert!(!text.contains("ratelimit_service_"), "{text}");
}
