//! A rolling migration from envoyproxy/ratelimit: the `sluice-rls` binary,
//! configured by upstream's own environment variables
//! (`SLUICE_RLS_UPSTREAM_ENV=true`, `REDIS_SOCKET_TYPE=tcp`, `REDIS_URL`,
//! `RUNTIME_ROOT`/`RUNTIME_SUBDIRECTORY`, `CACHE_KEY_PREFIX`,
//! `EXPIRATION_JITTER_MAX_SECONDS`), shares one Redis with a simulated
//! upstream instance that writes counters exactly as upstream's Redis cache
//! does (`src/redis/fixed_cache_impl.go`: a pipeline of `INCRBY key hits`
//! and `EXPIRE key <unit seconds + jitter>` per descriptor, over when the
//! `INCRBY` result is past the limit; keys from `src/limiter/cache_key.go`).
//! Each sees the other's hits: a tenant gets its limit once, not once per
//! implementation.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

// sluice-ratelimit's test helpers (requests).
#[path = "../../ratelimit-service/tests/common/mod.rs"]
mod common;
// What the binaries' tests share (upstream's placement variables).
mod support;

use sluice_proto::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use sluice_proto::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use sluice_proto::pb::envoy::service::ratelimit::v3::RateLimitResponse;
use sluice_testkit::{free_port, RedisServer};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const PREFIX: &str = "ratelimit:";
const JITTER_MAX_SECONDS: i64 = 300;
const LIMITS: &str = "domain: rl\ndescriptors:\n  - key: foo\n    rate_limit: { unit: minute, requests_per_unit: 3 }\n";

/// One simulated upstream instance: `DoLimit` of `fixed_cache_impl.go` for
/// one descriptor `foo=<value>` with a minute limit of 3.
struct Upstream {
    redis: redis::Connection,
}

impl Upstream {
    /// The key upstream's `GenerateCacheKey` writes now.
    fn key(value: &str) -> String {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        format!("{PREFIX}rl_foo_{value}_{}", now / 60 * 60)
    }

    /// `INCRBY` and `EXPIRE` pipelined, as upstream does; `true` when over.
    fn hit(&mut self, value: &str) -> bool {
        let key = Self::key(value);
        let jitter = (SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .subsec_nanos() as i64)
            % JITTER_MAX_SECONDS;
        let (after,): (u64,) = redis::pipe()
            .cmd("INCRBY")
            .arg(&key)
            .arg(1)
            .cmd("EXPIRE")
            .arg(&key)
            .arg(60 + jitter)
            .ignore()
            .query(&mut self.redis)
            .unwrap();
        after > 3
    }
}

struct SluiceRls {
    child: tokio::process::Child,
    grpc: u16,
    /// upstream's HTTP port (`PORT`): the admin listener.
    http: u16,
}

/// The binary, configured only by upstream's variables.
async fn start_sluice_rls(redis: &RedisServer, runtime_root: &std::path::Path) -> SluiceRls {
    let (grpc, http) = (free_port(), free_port());
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_sluice-rls"))
        .env_remove("SLUICE_RLS_CONFIG")
        .envs(support::upstream_placement(runtime_root, grpc, http))
        .env("REDIS_SOCKET_TYPE", "tcp")
        .env("REDIS_URL", format!("127.0.0.1:{}", redis.port()))
        .env("CACHE_KEY_PREFIX", PREFIX)
        .env(
            "EXPIRATION_JITTER_MAX_SECONDS",
            JITTER_MAX_SECONDS.to_string(),
        )
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let rls = SluiceRls { child, grpc, http };
    // Loaded machines start slowly: wait for answers, not for a fixed time.
    let started = std::time::Instant::now();
    while rls.try_ask("warm-up").await.is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "sluice-rls never answered"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    rls
}

impl SluiceRls {
    async fn try_ask(&self, value: &str) -> Result<RateLimitResponse, String> {
        let mut client = RateLimitServiceClient::connect(format!("http://127.0.0.1:{}", self.grpc))
            .await
            .map_err(|e| e.to_string())?;
        client
            .should_rate_limit(common::one_entry_request("rl", "foo", value))
            .await
            .map(|r| r.into_inner())
            .map_err(|e| e.to_string())
    }

    async fn ask(&self, value: &str) -> RateLimitResponse {
        self.try_ask(value).await.unwrap()
    }
}

/// Waits, when fewer than 15 s of the current minute are left, for the next
/// one: the test's hits must land in one window.
async fn away_from_a_minute_edge() {
    let into_minute = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis()
        % 60_000;
    if into_minute > 45_000 {
        tokio::time::sleep(Duration::from_millis(60_000 - into_minute as u64 + 100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sluice_rls_reads_and_increments_upstreams_counters() {
    let redis = RedisServer::start().unwrap();
    let root = tempfile::tempdir().unwrap();
    let config = root.path().join("ratelimit").join("config");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("config.yaml"), LIMITS).unwrap();
    let mut sluice_rls = start_sluice_rls(&redis, root.path()).await;
    let mut upstream = Upstream {
        redis: redis::Client::open(redis.url())
            .unwrap()
            .get_connection()
            .unwrap(),
    };
    away_from_a_minute_edge().await;

    // Upstream serves 2 of the 3; sluice-rls sees them and serves the third.
    assert!(!upstream.hit("bar"));
    assert!(!upstream.hit("bar"));
    let third = sluice_rls.ask("bar").await;
    assert_eq!(third.overall_code(), Code::Ok, "{third:?}");
    assert_eq!(third.statuses[0].limit_remaining, 0, "{third:?}");
    // The fourth is over on either side, and both keep counting (increment-all, as upstream).
    let fourth = sluice_rls.ask("bar").await;
    assert_eq!(fourth.overall_code(), Code::OverLimit, "{fourth:?}");
    assert!(upstream.hit("bar"), "upstream sees sluice-rls's hits");
    let key = Upstream::key("bar");
    let value: u64 = redis::cmd("GET")
        .arg(&key)
        .query(&mut upstream.redis)
        .unwrap();
    assert_eq!(value, 5, "one counter, {key}");
    let ttl: i64 = redis::cmd("TTL")
        .arg(&key)
        .query(&mut upstream.redis)
        .unwrap();
    assert!(
        (1..=60 + JITTER_MAX_SECONDS).contains(&ttl),
        "upstream's expiry kept: {ttl}"
    );

    // A counter sluice-rls creates: upstream's key, its expiry past the
    // window's end (correction grace, 1 s and the jitter at most), and
    // upstream counts on from it.
    let first = sluice_rls.ask("baz").await;
    assert_eq!(first.statuses[0].limit_remaining, 2, "{first:?}");
    let key = Upstream::key("baz");
    let ttl: i64 = redis::cmd("TTL")
        .arg(&key)
        .query(&mut upstream.redis)
        .unwrap();
    assert!(
        (1..=60 + 60 + 1 + JITTER_MAX_SECONDS).contains(&ttl),
        "{key}: {ttl}"
    );
    assert!(!upstream.hit("baz"));
    assert!(!upstream.hit("baz"));
    assert!(
        upstream.hit("baz"),
        "3 of 3 spent, one of them by sluice-rls"
    );
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query(&mut upstream.redis)
        .unwrap();
    assert!(keys.iter().all(|k| k.starts_with(PREFIX)), "{keys:?}");

    // Upstream's metric names, on by the same switch: sluice-rls's own 4
    // decisions on `foo` (warm-up, bar twice, baz), one of them over.
    let metrics = tokio::task::spawn_blocking({
        let admin: std::net::SocketAddr = ([127, 0, 0, 1], sluice_rls.http).into();
        move || sluice_testkit::http_request(admin, "GET", "/metrics", &[], b"").unwrap()
    })
    .await
    .unwrap();
    for line in [
        r#"ratelimit_service_rate_limit_total_hits{domain="rl",key1="foo"} 4"#,
        r#"ratelimit_service_rate_limit_within_limit{domain="rl",key1="foo"} 3"#,
        r#"ratelimit_service_rate_limit_over_limit{domain="rl",key1="foo"} 1"#,
    ] {
        assert!(
            metrics.body.contains(line),
            "{line} not in {}",
            metrics.body
        );
    }
    let _ = sluice_rls.child.kill().await;
}
