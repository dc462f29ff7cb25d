//! envoyproxy/ratelimit's quota patterns through real Envoy, as upstream's
//! own integration tests run them (`integration-test/scripts/quota.sh`,
//! `token-quota.sh`, `multiservice-tokenquota.sh`): upstream's example limits
//! (`examples/ratelimit/config/example.yaml`, domain `rl`: `service_1` 1 a
//! minute, `service_2` 2 a minute, both in quota mode with `metadata`) and the
//! three routes of its `examples/envoy/proxy.yaml`, ports rewritten:
//!
//! * `/quota`: both services charged 1 on the request path;
//! * `/tokenquota`: `service_2` checked with `hits_addend: 0` on the request
//!   path, debited 1 when the stream is done (`apply_on_stream_done`);
//! * `/multiservice-tokenquota`: both checked with 0; the answer's dynamic
//!   metadata names the service that still has quota, a header mutation and
//!   `header_to_metadata` turn it into the subset load balancer's key, and the
//!   service that served the request is debited 1 when the stream is done
//!   (its locality name).
//!
//! Its other scripts (`simple-get.sh`, `trigger-ratelimit.sh`,
//! `replaces.sh`, `trigger-shadow-mode-key.sh`) run over the `/twoheader` and
//! `/fourheader` routes of the same file.
//!
//! With `--counting increment-all` (what `SLUICE_RLS_UPSTREAM_ENV=true` sets)
//! sluice-rls gives upstream's counts; Sluice's default rule, also shown,
//! refuses a check-only call one request earlier.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

use sluice_ratelimit::config::LimitsConfig;
use sluice_ratelimit::limiter::{Clock, Limiter, ManualClock, ResponseOptions, SystemClock};
use sluice_ratelimit::metrics::Metrics;
use sluice_ratelimit::store::{
    CounterStore, CountingMode, MemoryStore, RedisStore, RedisStoreOptions,
};
use sluice_testkit::stack::{start_envoy, start_rls, Rls, RlsParts};
use sluice_testkit::{
    free_port, http_request, workspace_root, Envoy, HttpResponse, RedisServer, StaticHttpServer,
};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// upstream's `examples/envoy/proxy.yaml`, reduced to the quota routes and
/// their filters, with loopback addresses and `@…@` ports.
const ENVOY: &str = include_str!("../fixtures/upstream_quota_envoy.yaml");

struct Proxy {
    envoy: Envoy,
    listener: SocketAddr,
    rls: Rls,
    _services: [StaticHttpServer; 2],
}

/// upstream's example limits (the fixture copied from its repository).
fn example_limits() -> LimitsConfig {
    let path = workspace_root()
        .join("ratelimit-service/tests/fixtures/envoyproxy-ratelimit/examples/example.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    LimitsConfig::from_sources(&[(path, text)]).unwrap()
}

/// sluice-rls counting in `mode` on `store`, with upstream's
/// `RESPONSE_DYNAMIC_METADATA=true`, and Envoy in front. The clock stands
/// 1 s into a minute so that no window ends during the test.
async fn proxy(mode: CountingMode, store: Arc<dyn CounterStore>) -> Proxy {
    let minute_start = SystemClock.now_millis() / 60_000 * 60_000;
    let limiter = Limiter::new(
        example_limits(),
        store,
        mode,
        Arc::new(ManualClock::new(minute_start + 1_000)),
        Arc::new(Metrics::new()),
    )
    .with_response_options(ResponseOptions {
        dynamic_metadata: true,
        ..Default::default()
    });
    let rls = start_rls(Arc::new(limiter), RlsParts::default()).await;
    let services = [
        StaticHttpServer::start("Hello World from Service 1\n").unwrap(),
        StaticHttpServer::start("Hello World from Service 2\n").unwrap(),
    ];
    let (admin, listener) = (free_port(), free_port());
    let config = ENVOY
        .replace("@ADMIN@", &admin.to_string())
        .replace("@LISTENER@", &listener.to_string())
        .replace("@RLS@", &rls.port.to_string())
        .replace("@SERVICE_1@", &services[0].addr.port().to_string())
        .replace("@SERVICE_2@", &services[1].addr.port().to_string());
    let envoy = start_envoy(config, admin, listener).await;
    Proxy {
        envoy,
        listener: ([127, 0, 0, 1], listener).into(),
        rls,
        _services: services,
    }
}

impl Proxy {
    async fn get(&self, path: &'static str) -> HttpResponse {
        self.get_with(path, &[]).await
    }

    async fn get_with(
        &self,
        path: &'static str,
        headers: &'static [(&'static str, &'static str)],
    ) -> HttpResponse {
        let listener = self.listener;
        tokio::task::spawn_blocking(move || {
            http_request(listener, "GET", path, headers, b"").unwrap()
        })
        .await
        .unwrap()
    }

    /// The statuses of `count` requests to `path` with `headers`, in order.
    async fn statuses(
        &self,
        path: &'static str,
        headers: &'static [(&'static str, &'static str)],
        count: usize,
    ) -> Vec<u16> {
        let mut statuses = Vec::new();
        for _ in 0..count {
            statuses.push(self.get_with(path, headers).await.status);
        }
        statuses
    }

    /// The decisions sluice-rls has made (request-path and stream-done calls).
    fn decisions(&self) -> u64 {
        self.rls
            .limiter
            .metrics()
            .encode()
            .lines()
            .filter(|line| line.starts_with("sluice_rls_decisions_total{"))
            .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    }

    /// Waits until sluice-rls has made `count` decisions: Envoy sends the
    /// stream-done debit after the client has its answer, and the next
    /// request must see it, as upstream's scripts (a curl process apiece) do.
    async fn await_decisions(&self, count: u64) {
        let started = Instant::now();
        while self.decisions() < count {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "{} of {count} decisions\n{}",
                self.decisions(),
                self.envoy.log_text()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Sends requests to `path` until one is refused (at most 10); each
    /// allowed request's body, with its stream-done debit (when the route
    /// has one) counted in before the next is sent.
    async fn served_until_429(
        &self,
        path: &'static str,
        debits_on_stream_done: bool,
    ) -> Vec<String> {
        let mut served = Vec::new();
        for _ in 0..10 {
            let before = self.decisions();
            let response = self.get(path).await;
            if response.status == 429 {
                return served;
            }
            assert_eq!(
                response.status,
                200,
                "{response:?}\n{}",
                self.envoy.log_text()
            );
            served.push(response.body.trim().to_string());
            self.await_decisions(before + 1 + u64::from(debits_on_stream_done))
                .await;
        }
        panic!("never refused: {served:?}");
    }
}

/// What `path` serves until refused (see [`Proxy::served_until_429`]),
/// through a proxy of its own over fresh in-memory counters.
async fn served_in_memory(
    mode: CountingMode,
    path: &'static str,
    debits_on_stream_done: bool,
) -> Vec<String> {
    proxy(mode, Arc::new(MemoryStore::new()))
        .await
        .served_until_429(path, debits_on_stream_done)
        .await
}

fn from_services(served: &[String]) -> Vec<u8> {
    served
        .iter()
        .map(|body| match body.as_str() {
            "Hello World from Service 1" => 1,
            "Hello World from Service 2" => 2,
            other => panic!("unexpected body {other:?}"),
        })
        .collect()
}

fn redis_store(redis: &RedisServer) -> Arc<dyn CounterStore> {
    Arc::new(
        RedisStore::new(&RedisStoreOptions {
            redis: sluice_redis::RedisOptions::from_url(redis.url()),
            ..Default::default()
        })
        .unwrap(),
    )
}

/// upstream's counts: `multiservice-tokenquota.sh` expects requests 1–2 from
/// service 1, 3–5 from service 2, the 6th refused; `token-quota.sh` 3
/// allowed, the 4th refused; `quota.sh` 2 allowed, the 3rd refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_quota_patterns_give_upstreams_counts() {
    let redis = RedisServer::start().unwrap();
    let proxy = proxy(CountingMode::IncrementAll, redis_store(&redis)).await;
    let served = proxy
        .served_until_429("/multiservice-tokenquota", true)
        .await;
    assert_eq!(from_services(&served), [1, 1, 2, 2, 2], "{served:?}");

    // Fresh counters for the next pattern: a new minute for the same limits.
    let redis = RedisServer::start().unwrap();
    let proxy = self::proxy(CountingMode::IncrementAll, redis_store(&redis)).await;
    let served = proxy.served_until_429("/tokenquota", true).await;
    assert_eq!(served.len(), 3, "{served:?}");

    let served = served_in_memory(CountingMode::IncrementAll, "/quota", false).await;
    assert_eq!(served.len(), 2, "{served:?}");
}

/// Sluice's default rule refuses a check-only call once its counter is at the
/// limit (nothing more fits), so each quota serves its limit and no more:
/// one request from service 1 and two from service 2; on `/tokenquota`, 2.
/// Difference 15 of docs/ratelimit-service.md.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sluice_default_rule_serves_each_quota_exactly() {
    let served =
        served_in_memory(CountingMode::AllOrNothing, "/multiservice-tokenquota", true).await;
    assert_eq!(from_services(&served), [1, 2, 2], "{served:?}");

    let served = served_in_memory(CountingMode::AllOrNothing, "/tokenquota", true).await;
    assert_eq!(served.len(), 2, "{served:?}");
}

type Headers = &'static [(&'static str, &'static str)];

/// `/fourheader`'s headers: the values of `foo` and `bar`, and from the
/// proxy to `destination`.
const fn four_headers(
    foo_value: &'static str,
    bar_value: &'static str,
    destination: &'static str,
) -> [(&'static str, &'static str); 4] {
    [
        ("foo", foo_value),
        ("bar", bar_value),
        ("source_cluster", "proxy"),
        ("destination_cluster", destination),
    ]
}

/// upstream's other integration scripts over the same limits and routes
/// (`simple-get.sh`, `trigger-ratelimit.sh`, `replaces.sh`,
/// `trigger-shadow-mode-key.sh`): the answers they expect, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_integration_scripts_give_upstreams_answers() {
    const SIMPLE: Headers = &[("foo", "test"), ("baz", "shady")];
    // foo=pelle, baz=not-so-shady: 3 a minute.
    const PELLE: Headers = &[("foo", "pelle"), ("baz", "not-so-shady")];
    // replaces.sh's requests.
    const BANNED: Headers = &[("foo", "bkthomps"), ("bar", "banned")];
    const TO_MOCK: Headers = &four_headers("bkthomps", "banned", "mock");
    const OVERRIDE: Headers = &four_headers("bkthomps", "banned", "override");
    const BKTHOMPS: Headers = &four_headers("my_foo", "bkthomps", "bkthomps");
    const NOT_BKTHOMPS: Headers = &four_headers("my_foo", "bkthomps", "not_bkthomps");
    // baz=shady is in shadow mode: over its 3 a minute, still allowed.
    const SHADY: Headers = &[("foo", "pelle"), ("baz", "shady")];
    // (route, headers, the answers in order), script by script.
    let steps: [(&str, Headers, &[u16]); 8] = [
        ("/twoheader", SIMPLE, &[200]),
        ("/twoheader", PELLE, &[200, 200, 200, 429, 429]),
        ("/twoheader", BANNED, &[429]),
        ("/fourheader", TO_MOCK, &[429]),
        ("/fourheader", OVERRIDE, &[200, 200, 429]),
        ("/fourheader", BKTHOMPS, &[200, 200, 429]),
        ("/fourheader", NOT_BKTHOMPS, &[200]),
        ("/twoheader", SHADY, &[200; 6]),
    ];
    let proxy = proxy(CountingMode::IncrementAll, Arc::new(MemoryStore::new())).await;
    for (route, headers, expected) in steps {
        let statuses = proxy.statuses(route, headers, expected.len()).await;
        assert_eq!(statuses, expected, "{route} {headers:?}");
    }
}
