//! sluice-rls against envoyproxy/ratelimit's own configurations: every file
//! upstream accepts loads, every file it rejects is rejected, and the
//! decisions its tests and README document are the ones sluice-rls gives.
//!
//! The fixtures under `tests/fixtures/envoyproxy-ratelimit/` are copied from
//! the upstream repository (Apache-2.0); each names its source on line 1.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

use sluice_proto::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use sluice_proto::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use sluice_proto::pb::google::protobuf::{value::Kind, Value};
use sluice_ratelimit::config::{LimitsConfig, LoadOptions};
use sluice_ratelimit::limiter::{
    HeaderStyle, Limiter, ManualClock, ResponseOptions, UpstreamHeaderNames,
};
use sluice_ratelimit::metrics::Metrics;
use sluice_ratelimit::store::{CountingMode, MemoryStore};
use sluice_testkit::rls::descriptor;
use std::path::{Path, PathBuf};
use std::sync::Arc;

mod common;
use common::T0;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/envoyproxy-ratelimit")
}

fn fixture(name: &str) -> PathBuf {
    fixtures().join(name)
}

fn load(names: &[&str], options: LoadOptions) -> Result<LimitsConfig, String> {
    let sources: Vec<_> = names
        .iter()
        .map(|name| {
            let path = fixture(name);
            let text = std::fs::read_to_string(&path).unwrap();
            (path, text)
        })
        .collect();
    LimitsConfig::from_sources_with(&sources, options).map_err(|e| e.to_string())
}

/// Upstream's `test/config/config_test.go` expects these to panic, with these
/// messages (Sluice's wording differs; the file must be refused).
const REJECTED_ALONE: &[&str] = &[
    "config-test/bad_limit_unit.yaml",  // invalid rate limit unit 'foo'
    "config-test/bad_yaml.yaml",        // error loading config file
    "config-test/duplicate_key.yaml",   // duplicate descriptor composite key
    "config-test/empty_domain.yaml",    // config file cannot have empty domain
    "config-test/empty_key.yaml",       // descriptor has empty key
    "config-test/misspelled_key.yaml",  // unknown key 'ratelimit'
    "config-test/misspelled_key2.yaml", // unknown key 'requestsperunit'
    "config-test/non_map_list.yaml",    // list of type other than map
    "config-test/non_string_key.yaml",  // key is not of type string
    "config-test/replaces_empty.yaml",  // should not have an empty replaces entry
    "config-test/replaces_self.yaml",   // replaces should not contain name of same descriptor
    "config-test/unlimited_with_unit.yaml", // should not specify rate limit unit when unlimited
];

fn all_fixture_files() -> Vec<String> {
    let mut files = Vec::new();
    for dir in ["examples", "config-test", "integration", "readme"] {
        for entry in std::fs::read_dir(fixtures().join(dir)).unwrap() {
            let name = entry.unwrap().file_name().into_string().unwrap();
            files.push(format!("{dir}/{name}"));
        }
    }
    files.sort();
    files
}

#[test]
fn every_file_upstream_accepts_loads() {
    let accepted: Vec<String> = all_fixture_files()
        .into_iter()
        .filter(|f| !REJECTED_ALONE.contains(&f.as_str()))
        .collect();
    assert!(accepted.len() >= 30, "fixtures missing: {accepted:?}");
    for file in &accepted {
        if let Err(error) = load(&[file], LoadOptions::default()) {
            panic!("{file} is accepted by envoyproxy/ratelimit but refused: {error}");
        }
    }
    // TestDomainMerge: two files of one domain, with MERGE_DOMAIN_CONFIG.
    let merge = LoadOptions {
        merge_domains: true,
    };
    load(
        &[
            "config-test/merge_domain_key1.yaml",
            "config-test/merge_domain_key2.yaml",
        ],
        merge,
    )
    .unwrap();
    // The integration suite's runtime directory, as one directory.
    load(
        &[
            "integration/another.yaml",
            "integration/basic.yaml",
            "integration/share_threshold.yaml",
        ],
        LoadOptions::default(),
    )
    .unwrap();
}

#[test]
fn every_file_upstream_rejects_is_rejected() {
    for file in REJECTED_ALONE {
        assert!(
            load(&[file], LoadOptions::default()).is_err(),
            "{file} is rejected by envoyproxy/ratelimit but loads"
        );
    }
    // TestDuplicateDomain.
    let err = load(
        &[
            "config-test/basic_config.yaml",
            "config-test/duplicate_domain.yaml",
        ],
        LoadOptions::default(),
    )
    .unwrap_err();
    assert!(err.contains("duplicate_domain.yaml"), "{err}");
    // TestDuplicateKeyDomainMerge.
    let merge = LoadOptions {
        merge_domains: true,
    };
    let err = load(
        &[
            "config-test/merge_domain_key1.yaml",
            "config-test/merge_domain_key1.yaml",
        ],
        merge,
    )
    .unwrap_err();
    assert!(err.contains("defined twice"), "{err}");
    // Without merging, two files of one domain are refused, as upstream.
    assert!(load(
        &[
            "config-test/merge_domain_key1.yaml",
            "config-test/merge_domain_key2.yaml",
        ],
        LoadOptions::default(),
    )
    .is_err());
}

struct Service {
    limiter: Limiter,
    domain: String,
}

fn service(files: &[&str], mode: CountingMode, options: ResponseOptions) -> Service {
    let config = load(files, LoadOptions::default()).unwrap();
    let domain = config.domains().next().unwrap().to_string();
    let limiter = Limiter::new(
        config,
        Arc::new(MemoryStore::new()),
        mode,
        Arc::new(ManualClock::new(T0)),
        Arc::new(Metrics::new()),
    )
    .with_response_options(options);
    Service { limiter, domain }
}

/// `file`'s limits, all or nothing, with the matched descriptors'
/// metadata in the answer.
fn with_metadata(file: &str) -> Service {
    service(
        &[file],
        CountingMode::AllOrNothing,
        ResponseOptions {
            dynamic_metadata: true,
            ..Default::default()
        },
    )
}

fn upstream_like(files: &[&str]) -> Service {
    service(
        files,
        CountingMode::IncrementAll,
        ResponseOptions::default(),
    )
}

impl Service {
    async fn ask(&self, descriptors: &[&[(&str, &str)]]) -> RateLimitResponse {
        let request = RateLimitRequest {
            domain: self.domain.clone(),
            descriptors: descriptors.iter().map(|d| descriptor(d)).collect(),
            hits_addend: 0,
        };
        self.limiter.should_rate_limit(&request).await.unwrap()
    }

    /// (requests_per_unit, unit name) of the limit one descriptor matches.
    async fn limit_of(&self, entries: &[(&str, &str)]) -> Option<(u32, i32)> {
        let response = self.ask(&[entries]).await;
        response.statuses[0]
            .current_limit
            .as_ref()
            .map(|l| (l.requests_per_unit, l.unit))
    }
}

fn overall(response: &RateLimitResponse) -> Code {
    response.overall_code()
}

fn codes(response: &RateLimitResponse) -> Vec<Code> {
    response.statuses.iter().map(|s| s.code()).collect()
}

const SECOND: i32 = 1;
const MINUTE: i32 = 2;
const HOUR: i32 = 3;
const DAY: i32 = 4;

/// TestBasicConfig's lookups.
#[tokio::test]
async fn basic_config_limits() {
    let s = upstream_like(&["config-test/basic_config.yaml"]);
    assert_eq!(s.limit_of(&[("key1", "value1")]).await, None);
    assert_eq!(
        s.limit_of(&[("key1", "value1"), ("subkey1", "something")])
            .await,
        Some((5, SECOND))
    );
    assert_eq!(
        s.limit_of(&[("key1", "value1"), ("subkey1", "subvalue1")])
            .await,
        Some((10, SECOND))
    );
    assert_eq!(
        s.limit_of(&[("key2", "something")]).await,
        Some((20, MINUTE))
    );
    assert_eq!(s.limit_of(&[("key2", "value2")]).await, Some((30, MINUTE)));
    assert_eq!(s.limit_of(&[("key2", "value3")]).await, None, "whitelisted");
    assert_eq!(s.limit_of(&[("key3", "foo")]).await, Some((1, HOUR)));
    assert_eq!(s.limit_of(&[("key5", "value5")]).await, Some((15, DAY)));
    assert_eq!(
        s.limit_of(&[("key5", "value5"), ("subkey5", "subvalue5")])
            .await,
        Some((25, DAY))
    );
    let named = s.ask(&[&[("key4", "x")]]).await;
    assert_eq!(
        named.statuses[0].current_limit.as_ref().unwrap().name,
        "key4_rate_limit"
    );
    let unlimited = s.ask(&[&[("key6", "x")]]).await;
    assert_eq!(unlimited.statuses[0].limit_remaining, u32::MAX);
    assert!(unlimited.statuses[0].current_limit.is_none());
}

/// TestWildcardConfig's matches.
#[tokio::test]
async fn wildcard_matches() {
    let s = upstream_like(&["config-test/wildcard.yaml"]);
    for (entries, expected) in [
        (&[("noVal", "foo1")][..], Some((20, MINUTE))),
        (&[("wild", "foo1")], Some((20, MINUTE))),
        (&[("wild", "foo2")], Some((20, MINUTE))),
        (
            &[("nestedWild", "val1"), ("wild", "goo2")],
            Some((20, MINUTE)),
        ),
        (&[("wild", "bar")], None),
        (&[("noWild", "foo1")], None),
        (&[("midWild", "barab")], Some((20, MINUTE))),
        (&[("midWild", "bar123b")], Some((20, MINUTE))),
        (&[("midWild", "barb")], Some((20, MINUTE))),
        (&[("midWild", "bara")], None),
        (&[("midWild", "xbarb")], None),
        (&[("multiWild", "foo123bar456baz")], Some((10, MINUTE))),
        (&[("multiWild", "foobarbaz")], Some((10, MINUTE))),
        (&[("multiWild", "foo123baz")], None),
        (&[("multiWild", "bar456baz")], None),
    ] {
        assert_eq!(s.limit_of(entries).await, expected, "{entries:?}");
    }
}

/// README example 11: `share_threshold: true` shares one counter among the
/// values of a wildcard; without it each value has its own.
#[tokio::test]
async fn share_threshold_shares_one_counter() {
    let s = upstream_like(&["readme/example-16.yaml"]);
    for file in ["files/a.pdf", "files/b.csv"] {
        for _ in 0..5 {
            assert_eq!(overall(&s.ask(&[&[("files", file)]]).await), Code::Ok);
        }
    }
    let c = s.ask(&[&[("files", "files/c.txt")]]).await;
    assert_eq!(overall(&c), Code::OverLimit, "the shared 10/hour is spent");
    for _ in 0..10 {
        let a = s
            .ask(&[&[("files_no_share", "files_no_share/a.pdf")]])
            .await;
        assert_eq!(overall(&a), Code::Ok);
    }
    let a = s
        .ask(&[&[("files_no_share", "files_no_share/a.pdf")]])
        .await;
    assert_eq!(overall(&a), Code::OverLimit);
    let b = s
        .ask(&[&[("files_no_share", "files_no_share/b.csv")]])
        .await;
    assert_eq!(overall(&b), Code::Ok, "b.csv has its own counter");
}

/// share_threshold.yaml: an explicit value beats the shared wildcard, and a
/// nested share_threshold shares across the parent's values too.
#[tokio::test]
async fn share_threshold_fixture() {
    let s = upstream_like(&["config-test/share_threshold.yaml"]);
    assert_eq!(s.limit_of(&[("file", "test1")]).await, Some((50, MINUTE)));
    assert_eq!(s.limit_of(&[("file", "test2")]).await, Some((100, MINUTE)));
    assert_eq!(
        s.limit_of(&[("midpath", "/api/x/v1")]).await,
        Some((100, MINUTE))
    );
    assert_eq!(
        s.limit_of(&[("multiroute", "svc-a-ep-b-rpc")]).await,
        Some((50, MINUTE))
    );
    assert_eq!(
        s.limit_of(&[("tenant", "t1prod"), ("resource", "res-a-v2")])
            .await,
        Some((60, MINUTE))
    );
    // user/* and res/* both share: 150 hits spread over many users and resources exhaust it.
    for i in 0..150 {
        let user = format!("user/{i}");
        let resource = format!("res/{}", i % 7);
        let r = s
            .ask(&[&[("user", &user), ("resource", &resource), ("action", "read")]])
            .await;
        assert_eq!(overall(&r), Code::Ok, "request {i}");
    }
    // A new user's read is over; a different action is a different counter
    // (action is matched by key only).
    for (action, code) in [("read", Code::OverLimit), ("write", Code::Ok)] {
        let r = s
            .ask(&[&[
                ("user", "user/new"),
                ("resource", "res/new"),
                ("action", action),
            ]])
            .await;
        assert_eq!(overall(&r), code, "{action}");
    }
}

/// examples/ratelimit/config/example.yaml, as the README's walkthrough uses it.
#[tokio::test]
async fn example_config_decisions() {
    let s = upstream_like(&["examples/example.yaml"]);
    // bar=banned: 0 per minute.
    let banned = s.ask(&[&[("foo", "x"), ("bar", "banned")]]).await;
    assert_eq!(overall(&banned), Code::OverLimit);
    // baz=shady is in shadow mode: never limited.
    for _ in 0..5 {
        let shady = s.ask(&[&[("foo", "x"), ("baz", "shady")]]).await;
        assert_eq!(overall(&shady), Code::Ok);
        assert_eq!(codes(&shady), [Code::Ok]);
    }
    // baz=not-so-shady: 3 per minute.
    for _ in 0..3 {
        let r = s.ask(&[&[("foo", "x"), ("baz", "not-so-shady")]]).await;
        assert_eq!(overall(&r), Code::Ok);
    }
    let r = s.ask(&[&[("foo", "x"), ("baz", "not-so-shady")]]).await;
    assert_eq!(overall(&r), Code::OverLimit);
    // bay and qux are unlimited.
    for _ in 0..5 {
        let r = s
            .ask(&[&[("foo", "x"), ("bay", "y")], &[("qux", "q")]])
            .await;
        assert_eq!(overall(&r), Code::Ok);
    }
    // destination_cluster=bkthomps replaces the limit named bkthomps (1/min):
    // together they get 2 per minute, not 1.
    let both: [&[(&str, &str)]; 2] = [
        &[
            ("source_cluster", "proxy"),
            ("destination_cluster", "bkthomps"),
        ],
        &[("foo", "z"), ("bar", "bkthomps")],
    ];
    for _ in 0..2 {
        let r = s.ask(&both).await;
        assert_eq!(overall(&r), Code::Ok);
        assert!(r.statuses[1].current_limit.is_none(), "replaced");
    }
    assert_eq!(overall(&s.ask(&both).await), Code::OverLimit);
    // destination_cluster=override replaces banned_limit: the banned bar passes.
    let override_banned: [&[(&str, &str)]; 2] = [
        &[
            ("source_cluster", "proxy"),
            ("destination_cluster", "override"),
        ],
        &[("foo", "x"), ("bar", "banned")],
    ];
    assert_eq!(overall(&s.ask(&override_banned).await), Code::Ok);
}

/// example.yaml's quota-mode services (1 and 2 per minute) with their
/// metadata: a request naming both passes while either has quota left; the
/// passing one's metadata tells Envoy which.
#[tokio::test]
async fn quota_mode_and_metadata() {
    let s = with_metadata("examples/example.yaml");
    let both: [&[(&str, &str)]; 2] = [&[("service", "service_1")], &[("service", "service_2")]];
    let first = s.ask(&both).await;
    assert_eq!(overall(&first), Code::Ok);
    assert_eq!(
        quota_name(&first).as_deref(),
        Some("service_1"),
        "first wins on a clash"
    );
    let second = s.ask(&both).await;
    assert_eq!(overall(&second), Code::Ok, "service_2 still has quota");
    assert_eq!(codes(&second), [Code::OverLimit, Code::Ok]);
    assert_eq!(quota_name(&second).as_deref(), Some("service_2"));
    let third = s.ask(&both).await;
    assert_eq!(overall(&third), Code::OverLimit, "every quota is spent");
    assert_eq!(quota_name(&third), None);
    // Upstream's other fields.
    let fields = &third.dynamic_metadata.as_ref().unwrap().fields;
    assert_eq!(string(fields.get("domain")), Some("rl".into()));
    let Some(Kind::ListValue(descriptors)) = &fields["descriptors"].kind else {
        panic!("descriptors is a list")
    };
    assert_eq!(descriptors.values.len(), 2);
}

/// metadata.yaml (TestMetadata): the matched descriptor's metadata.
#[tokio::test]
async fn metadata_fixture() {
    let s = with_metadata("config-test/metadata.yaml");
    let r = s.ask(&[&[("key1", "value1"), ("subkey1", "x")]]).await;
    let metadata = metadata_of(&r).unwrap();
    assert_eq!(
        string(metadata.fields.get("name")),
        Some("service_1".into())
    );
    let r = s
        .ask(&[&[("key1", "value1"), ("subkey1", "subvalue1")]])
        .await;
    assert!(metadata_of(&r).is_none(), "no metadata on that descriptor");
    // Without the switch, no upstream metadata at all.
    let plain = upstream_like(&["config-test/metadata.yaml"]);
    let r = plain.ask(&[&[("key2", "x")]]).await;
    // (Nor Sluice's own block: a caller that does not say when it asked,
    // as Envoy's rate limit filter, is never told when it was charged.)
    assert_eq!(r.dynamic_metadata, None);
}

fn string(value: Option<&Value>) -> Option<String> {
    match value?.kind.as_ref()? {
        Kind::StringValue(s) => Some(s.clone()),
        _ => None,
    }
}

fn metadata_of(
    response: &RateLimitResponse,
) -> Option<&sluice_proto::pb::google::protobuf::Struct> {
    match response
        .dynamic_metadata
        .as_ref()?
        .fields
        .get("metadata")?
        .kind
        .as_ref()?
    {
        Kind::StructValue(s) => Some(s),
        _ => None,
    }
}

fn quota_name(response: &RateLimitResponse) -> Option<String> {
    let quota = metadata_of(response)?.fields.get("service_with_quota")?;
    match quota.kind.as_ref()? {
        Kind::StructValue(s) => string(s.fields.get("name")),
        _ => None,
    }
}

/// Global shadow mode (SHADOW_MODE): the answer is OK, statuses still tell.
#[tokio::test]
async fn global_shadow_mode() {
    let s = service(
        &["examples/example.yaml"],
        CountingMode::AllOrNothing,
        ResponseOptions {
            global_shadow_mode: true,
            ..Default::default()
        },
    );
    let banned = s.ask(&[&[("foo", "x"), ("bar", "banned")]]).await;
    assert_eq!(overall(&banned), Code::Ok);
    assert_eq!(codes(&banned), [Code::OverLimit]);
    assert!(
        banned.dynamic_metadata.is_none(),
        "nothing for the filter to act on"
    );
    assert!(banned
        .response_headers_to_add
        .iter()
        .all(|h| h.key != "Retry-After"));
}

/// LIMIT_RESPONSE_HEADERS_ENABLED: limit, remaining, reset of the tightest.
#[tokio::test]
async fn upstream_response_headers() {
    let s = service(
        &["config-test/basic_config.yaml"],
        CountingMode::IncrementAll,
        ResponseOptions {
            headers: HeaderStyle::Upstream(UpstreamHeaderNames {
                limit: "X-RateLimit-Limit".into(),
                ..Default::default()
            }),
            ..Default::default()
        },
    );
    let r = s.ask(&[&[("key2", "a")], &[("key3", "b")]]).await;
    let headers: Vec<(&str, &str)> = r
        .response_headers_to_add
        .iter()
        .map(|h| (h.key.as_str(), h.value.as_str()))
        .collect();
    // key3 (1/hour, none left) is tighter than key2 (20/minute, 19 left).
    assert_eq!(
        headers,
        [
            ("X-RateLimit-Limit", "1"),
            ("RateLimit-Remaining", "0"),
            ("RateLimit-Reset", "3475"),
        ]
    );
    let off = service(
        &["config-test/basic_config.yaml"],
        CountingMode::IncrementAll,
        ResponseOptions {
            headers: HeaderStyle::Off,
            ..Default::default()
        },
    );
    assert!(off
        .ask(&[&[("key2", "a")]])
        .await
        .response_headers_to_add
        .is_empty());
}

/// The deliberate difference: by default an over-limit request moves no
/// counter (all-or-nothing); `--counting increment-all` gives upstream's
/// answer, where the other counters of a refused request still move.
#[tokio::test]
async fn counting_mode_is_the_compatibility_switch() {
    let request: [&[(&str, &str)]; 2] = [&[("unspec", "u")], &[("foo", "x"), ("bar", "banned")]];
    for (mode, expected_after) in [
        (CountingMode::AllOrNothing, Code::Ok),
        (CountingMode::IncrementAll, Code::OverLimit),
    ] {
        let s = service(&["examples/example.yaml"], mode, ResponseOptions::default());
        for _ in 0..2 {
            assert_eq!(overall(&s.ask(&request).await), Code::OverLimit);
        }
        // unspec is 2 per minute: spent only if the refused requests counted.
        let alone = s.ask(&[&[("unspec", "u")]]).await;
        assert_eq!(overall(&alone), expected_after, "{mode:?}");
    }
}
