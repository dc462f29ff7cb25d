//! The end-to-end stack, built once for every test: sluice-rls (RLS on Redis,
//! optional admin port, ext_authz and deferral endpoint), the simulated model
//! server, the consumer's pop loop, and Envoy with the built Wasm filter.
//! Each part has its own starter so a test takes only what it needs; the
//! [`StackBuilder`] wires the whole path for the tests that want all of it.
//!
//! Starters panic on failure: they run only inside tests, where a part that
//! does not start is the test's failure.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test scaffolding fails loudly

use crate::redis_topologies::{RedisDeployment, RedisKind};
use crate::{
    example_deferral_secret, free_port, sluice_filter_envoy_config, Envoy, RedisServer, RocketMq,
    SluiceFilterPorts,
};
use anyhow::Context;
use sluice_consumer::{
    connect, InFlightConfig, InFlightLimits, Metrics as ConsumerMetrics, Pacer, PacingConfig,
    Processor, ProcessorConfig, Rates, RedisOptions, WorkItem,
};
use sluice_consumer::{Runner, RunnerOptions, RunnerParts};
use sluice_deferral::endpoint::EndpointMetrics;
use sluice_deferral::listener::DeferralListener;
pub use sluice_deferral::listener::{serve as serve_deferral, ListenerLimits, ListenerMetrics};
use sluice_deferral::{Endpoint, EndpointConfig};
use sluice_litetopic::{LiteClient, LiteConfig, LiteConsumer, LiteProducer};
use sluice_ratelimit::config::LimitsConfig;
use sluice_ratelimit::ext_authz::ExtAuthzService;
use sluice_ratelimit::guard::CallGuard;
use sluice_ratelimit::limiter::{Limiter, SystemClock};
use sluice_ratelimit::metrics::Metrics;
use sluice_ratelimit::server::{run, Deps};
use sluice_ratelimit::store::{CounterStore, CountingMode, RedisStore, RedisStoreOptions};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The LiteTopic parent topic the deferral endpoint publishes under.
pub const PARENT: &str = "sluice-deferred";
/// The consumer group the endpoint and the consumers share.
pub const GROUP: &str = "sluice-consumer";

/// Limits files for the end-to-end tests: per tenant, a requests-per-hour
/// and a tokens-per-hour limit on every model, named `<tenant>-rph` and
/// `<tenant>-tph` (`rph`, `tph` for the catch-all tenant).
pub mod limits {
    /// What the tokens limit does when it is over.
    #[derive(Clone, Copy, Debug)]
    pub enum OverLimit {
        /// Count only (no `sluice` block).
        Count,
        Reject,
        /// Defer at this priority (`high`, `normal`, `low`).
        Defer(&'static str),
    }

    /// One tenant's limits (any tenant where `tenant` is `None`).
    pub fn tenant(
        tenant: Option<&str>,
        requests_per_hour: u64,
        tokens_per_hour: u64,
        over: OverLimit,
    ) -> String {
        let (value, prefix) = match tenant {
            Some(name) => (format!("    value: {name}\n"), format!("{name}-")),
            None => (String::new(), String::new()),
        };
        let tokens = match over {
            OverLimit::Count => {
                format!("{{ unit: hour, requests_per_unit: {tokens_per_hour}, name: {prefix}tph }}")
            }
            OverLimit::Reject => format!(
                "{{ unit: hour, requests_per_unit: {tokens_per_hour}, name: {prefix}tph,\n                          sluice: {{ over_limit: reject }} }}"
            ),
            OverLimit::Defer(priority) => format!(
                "{{ unit: hour, requests_per_unit: {tokens_per_hour}, name: {prefix}tph,\n                          sluice: {{ over_limit: defer, priority: {priority} }} }}"
            ),
        };
        format!(
            "  - key: tenant\n{value}    descriptors:\n      - key: model\n        rate_limit: {{ unit: hour, requests_per_unit: {requests_per_hour}, name: {prefix}rph }}\n        descriptors:\n          - key: tokens\n            rate_limit: {tokens}\n"
        )
    }

    /// The limits file of domain `sluice` with `tenants`.
    pub fn file(tenants: &[String]) -> String {
        format!("domain: sluice\ndescriptors:\n{}", tenants.concat())
    }

    /// `patient` gets 50 tokens an hour and defers the rest; other tenants
    /// are unlimited.
    pub fn patient_defers() -> String {
        file(&[tenant(
            Some("patient"),
            1000,
            50,
            OverLimit::Defer("normal"),
        )])
    }

    /// [`patient_defers`], and `other` with the same budget.
    pub fn patient_and_other_defer() -> String {
        file(&[
            tenant(Some("patient"), 1000, 50, OverLimit::Defer("normal")),
            tenant(Some("other"), 1000, 50, OverLimit::Defer("normal")),
        ])
    }
}

/// Pacing with no rate at all: every popped item goes straight to the model.
pub fn unpaced() -> PacingConfig {
    pacing_at(None, None)
}

/// Pacing at `per_second` requests per bucket.
pub fn paced(per_second: f64) -> PacingConfig {
    pacing_at(Some(per_second), None)
}

/// Pacing at `tokens_per_second` tokens per bucket (no request rate).
pub fn token_paced(tokens_per_second: f64) -> PacingConfig {
    pacing_at(None, Some(tokens_per_second))
}

fn pacing_at(requests_per_second: Option<f64>, tokens_per_second: Option<f64>) -> PacingConfig {
    PacingConfig {
        default_rates: Rates {
            requests_per_second,
            tokens_per_second,
        },
        ..Default::default()
    }
}

/// The RocketMQ broker (its start blocks, so off the runtime's threads).
pub async fn start_broker() -> RocketMq {
    tokio::task::spawn_blocking(RocketMq::start)
        .await
        .unwrap()
        .unwrap()
}

/// Test logs on, then a Redis and a broker of the test's own.
pub async fn redis_and_broker() -> (RedisServer, RocketMq) {
    crate::init_test_tracing();
    let redis = RedisServer::start_off_runtime().await.unwrap();
    (redis, start_broker().await)
}

/// A consumer-side Redis connection to `redis`.
pub fn redis_connection(redis: &RedisServer) -> sluice_redis::RedisConn {
    redis_connection_at(&redis.url())
}

/// A consumer-side Redis connection to the Redis at `url` (any deployment).
pub fn redis_connection_at(url: &str) -> sluice_redis::RedisConn {
    connect(&RedisOptions::from_url(url)).unwrap()
}

/// The simulated model server on a loopback port; returns its address.
pub async fn start_llm_sim(sim: sluice_llm_sim::SimConfig) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(sluice_llm_sim::run(
        listener,
        sim,
        std::future::pending::<()>(),
    ));
    addr
}

/// A streamed chat request ("hi") as the endpoint queues it, estimated at
/// `estimated_tokens`.
pub fn work_item(tenant: &str, model: &str, req_id: &str, estimated_tokens: u64) -> WorkItem {
    WorkItem {
        req_id: req_id.into(),
        tenant: tenant.into(),
        model: model.into(),
        priority: Default::default(),
        path: "/v1/chat/completions".into(),
        body: serde_json::json!({
            "model": model,
            "stream": true,
            "messages": [{"role": "user", "content": "hi"}]
        }),
        enqueued_at_ms: sluice_contract::now_ms(),
        estimated_tokens,
        attempt: 0,
        trace: None,
    }
}

/// How many times the model server at `backend` was called for `request_id`
/// (llm-sim's `/sim/calls`).
pub async fn model_calls(backend: SocketAddr, request_id: &str) -> u64 {
    let json = sim_calls(backend, request_id)
        .await
        .expect("llm-sim answers /sim/calls");
    json["calls"].as_u64().unwrap()
}

/// What llm-sim at `backend` recorded under ledger key `key` (the
/// `x-sim-ledger` header its callers sent); zeros before the first call.
pub async fn sim_ledger(backend: SocketAddr, key: &str) -> sluice_llm_sim::ledger::LedgerEntry {
    let answer = crate::get(backend, "/sim/ledger")
        .await
        .expect("llm-sim answers /sim/ledger");
    let ledger: std::collections::BTreeMap<String, sluice_llm_sim::ledger::LedgerEntry> =
        serde_json::from_str(&answer.body).unwrap();
    ledger.get(key).copied().unwrap_or_default()
}

/// The place of `request_id`'s first call among all first calls that
/// reached the model server at `backend` (llm-sim's `/sim/calls`); `None`
/// if it never reached it.
pub async fn model_arrival(backend: SocketAddr, request_id: &str) -> Option<u64> {
    let json = sim_calls(backend, request_id)
        .await
        .expect("llm-sim answers /sim/calls");
    json["arrival"].as_u64()
}

/// llm-sim's `/sim/calls` answer for `request_id`; `None` when it could
/// not be asked or did not answer JSON.
pub(crate) async fn sim_calls(sim: SocketAddr, request_id: &str) -> Option<serde_json::Value> {
    let path = format!("/sim/calls?request_id={request_id}");
    let response =
        tokio::task::spawn_blocking(move || crate::http_request(sim, "GET", &path, &[], b""))
            .await
            .ok()?
            .ok()?;
    serde_json::from_str(&response.body).ok()
}

/// Tenant `patient` asks `gpt-4o` through `envoy` for 30 tokens on a
/// 40-word prompt, streamed or not.
pub fn patient_chat(envoy: SocketAddr, stream: bool) -> anyhow::Result<crate::HttpResponse> {
    let body = serde_json::json!({
        "model": "gpt-4o",
        "max_tokens": 30,
        "stream": stream,
        "messages": [{"role": "user", "content": "hello ".repeat(40)}]
    });
    tenant_chat(envoy, "patient", &body)
}

/// A chat of `model` for `tenant` through `envoy`: `max_tokens` on a
/// prompt of `words` words, not streamed.
pub fn chat_of(
    envoy: SocketAddr,
    tenant: &str,
    model: &str,
    (words, max_tokens): (usize, u64),
) -> anyhow::Result<crate::HttpResponse> {
    let body = serde_json::json!({
        "model": model,
        "max_tokens": max_tokens,
        "messages": [{"role": "user", "content": "hello ".repeat(words)}]
    });
    tenant_chat(envoy, tenant, &body)
}

/// POSTs `body` to `envoy`'s chat completions as `tenant`.
fn tenant_chat(
    envoy: SocketAddr,
    tenant: &str,
    body: &serde_json::Value,
) -> anyhow::Result<crate::HttpResponse> {
    crate::http_request(
        envoy,
        "POST",
        "/v1/chat/completions",
        &[("x-tenant-id", tenant)],
        body.to_string().as_bytes(),
    )
}

/// Fast llm-sim answers of `completion_tokens` tokens from its GPU model:
/// `max_batch` requests at once sharing `tokens_per_s` (prompt and answer;
/// no speed limit per answer).
pub fn gpu_sim(
    tokens_per_s: f64,
    max_batch: usize,
    completion_tokens: u64,
) -> sluice_llm_sim::SimConfig {
    let mut sim = sluice_llm_sim::SimConfig::fast();
    sim.default_completion_tokens = completion_tokens;
    sim.tokens_per_second = 0.0;
    sim.gpu = Some(sluice_llm_sim::gpu::GpuConfig {
        capacity: sluice_llm_sim::gpu::Capacity {
            tokens_per_s,
            kv_cache_tokens: 32_768,
            max_batch,
        },
        ..Default::default()
    });
    sim
}

/// The `data:` payloads of an SSE body, in order.
pub fn sse_data(body: &str) -> Vec<&str> {
    body.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .collect()
}

/// The text of chat-completion chunks: their `delta.content`s joined.
pub fn chunk_content(data: &[&str]) -> String {
    data.iter()
        .filter_map(|d| serde_json::from_str::<serde_json::Value>(d).ok())
        .filter_map(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_string)
        })
        .collect()
}

/// Changes the simulated GPU's capacity (`POST /admin/capacity`); an
/// answer other than 200 is an error.
pub async fn change_sim_capacity(
    backend: SocketAddr,
    change: &sluice_llm_sim::gpu::CapacityChange,
) -> anyhow::Result<()> {
    let body = serde_json::to_vec(change)?;
    let answer = tokio::task::spawn_blocking(move || {
        crate::http_request(
            backend,
            "POST",
            sluice_llm_sim::ADMIN_CAPACITY_PATH,
            &[("content-type", "application/json")],
            &body,
        )
    })
    .await??;
    anyhow::ensure!(
        answer.status == 200,
        "capacity change refused: {} {}",
        answer.status,
        answer.body
    );
    Ok(())
}

/// [`start_llm_sim`] with fast answers of `completion_tokens` tokens.
pub async fn start_fast_llm_sim(completion_tokens: u64) -> SocketAddr {
    let mut sim = sluice_llm_sim::SimConfig::fast();
    sim.default_completion_tokens = completion_tokens;
    start_llm_sim(sim).await
}

/// The limiter sluice-rls builds: `limits_yaml` on `store`.
pub fn limiter(limits_yaml: &str, store: Arc<dyn CounterStore>, metrics: Metrics) -> Arc<Limiter> {
    let limits =
        LimitsConfig::from_sources(&[(PathBuf::from("limits.yaml"), limits_yaml.into())]).unwrap();
    Arc::new(Limiter::new(
        limits,
        store,
        CountingMode::AllOrNothing,
        Arc::new(SystemClock),
        Arc::new(metrics),
    ))
}

/// Tokens left in `tenant` × `model`'s token window of `limiter`, without
/// charging anything.
pub async fn tokens_left(limiter: &Limiter, tenant: &str, model: &str) -> u32 {
    let request = crate::rls::tokens_probe(tenant, model, "total");
    limiter.should_rate_limit(&request).await.unwrap().statuses[0].limit_remaining
}

/// What `probe` (a request charging nothing) has used of its first
/// descriptor's limit in the windows of `window_ms` from `since_ms` to now:
/// one window, or two when one turned in between. A request is charged,
/// and its correction lands, in the window it was admitted in, so the
/// window of now alone reads 0 after a turn. Tests last less than a window.
pub async fn used_since(
    limiter: &Limiter,
    probe: &sluice_proto::pb::envoy::service::ratelimit::v3::RateLimitRequest,
    since_ms: u64,
    window_ms: u64,
) -> anyhow::Result<u64> {
    let now = sluice_contract::now_ms();
    let mut used = used_in_window_at(limiter, probe, since_ms).await?;
    if now / window_ms != since_ms / window_ms {
        used += used_in_window_at(limiter, probe, now).await?;
    }
    Ok(used)
}

/// What `probe` has used of its first descriptor's limit in the window
/// holding `at_ms` (a correction of no hits: it charges nothing).
pub async fn used_in_window_at(
    limiter: &Limiter,
    probe: &sluice_proto::pb::envoy::service::ratelimit::v3::RateLimitRequest,
    at_ms: u64,
) -> anyhow::Result<u64> {
    let response = limiter.correct(probe, Some(at_ms)).await?;
    let status = response
        .statuses
        .first()
        .context("no status in the answer")?;
    let limit = status
        .current_limit
        .as_ref()
        .context("the probe matched no limit")?
        .requests_per_unit;
    Ok(u64::from(limit.saturating_sub(status.limit_remaining)))
}

/// [`limiter`] on the Redis at `redis_url`.
pub fn redis_limiter(limits_yaml: &str, redis_url: &str, metrics: Metrics) -> Arc<Limiter> {
    let store = RedisStore::new(&RedisStoreOptions {
        redis: sluice_redis::RedisOptions::from_url(redis_url),
        ..Default::default()
    })
    .unwrap();
    limiter(limits_yaml, Arc::new(store), metrics)
}

/// `limiter` (not shared yet) routing by the saturation state in the Redis
/// at `url`, as `sluice-rls --route-in-quota-when-saturated` does.
fn with_saturation_routing(limiter: Arc<Limiter>, url: &str) -> Arc<Limiter> {
    use sluice_ratelimit::saturation::{RedisSaturation, RoutingOptions, SaturationRouter};
    reshaped(limiter, |limiter| {
        let source = RedisSaturation::new(redis_connection_at(url), Duration::from_millis(250));
        let metrics = limiter.metrics().saturation.clone();
        let router =
            SaturationRouter::start(Arc::new(source), RoutingOptions::default(), metrics).unwrap();
        limiter.with_saturation_routing(router)
    })
}

/// `limiter` (not shared yet) changed by `change`.
fn reshaped(limiter: Arc<Limiter>, change: impl FnOnce(Limiter) -> Limiter) -> Arc<Limiter> {
    let Ok(limiter) = Arc::try_unwrap(limiter) else {
        panic!("the limiter is already shared");
    };
    Arc::new(change(limiter))
}

/// The deferral endpoint's config as the tests share it: [`PARENT`],
/// [`GROUP`], `redis` and `broker`, defaults otherwise.
pub fn endpoint_config(redis: &RedisServer, broker: &RocketMq) -> EndpointConfig {
    endpoint_config_at(&redis.url(), broker)
}

/// [`endpoint_config`] for the Redis at `url` (any deployment).
pub fn endpoint_config_at(url: &str, broker: &RocketMq) -> EndpointConfig {
    EndpointConfig {
        parent: PARENT.into(),
        consumer_group: GROUP.into(),
        ..EndpointConfig::new(url, broker.namesrv_addr())
    }
}

/// The deferral endpoint's router as sluice-rls builds it, signing with the
/// example secret unless `config` names secrets.
pub async fn deferral_endpoint(mut config: EndpointConfig) -> axum::Router {
    if config.options.secrets.is_empty() {
        config.options.secrets = vec![example_deferral_secret()];
    }
    Endpoint::build(config).await.unwrap()
}

/// [`deferral_endpoint`] served on a loopback port as sluice-rls serves it
/// (its listener's default bounds); returns its address.
pub async fn start_deferral_endpoint(config: EndpointConfig) -> SocketAddr {
    start_deferral_endpoint_with(
        config,
        ListenerLimits::default(),
        ListenerMetrics::default(),
    )
    .await
}

/// [`start_deferral_endpoint`] with the listener bounded by `limits`.
pub async fn start_deferral_endpoint_with(
    config: EndpointConfig,
    limits: ListenerLimits,
    metrics: ListenerMetrics,
) -> SocketAddr {
    let router = deferral_endpoint(config).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve_deferral(
        listener,
        router,
        limits,
        metrics,
        std::future::pending(),
    ));
    addr
}

/// Serves `app` on a loopback port; returns its address.
pub async fn serve_http(app: axum::Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// What sluice-rls serves besides the RLS itself.
#[derive(Default)]
pub struct RlsParts {
    /// Serve the admin port (metrics, health).
    pub admin: bool,
    /// Limits file to hot-reload every 100 ms.
    pub limits_file: Option<PathBuf>,
    pub ext_authz: Option<ExtAuthzService>,
    /// The deferral endpoint, on its own HTTP port.
    pub deferral: Option<axum::Router>,
    /// The RLS's call checks; default: [`example_call_guard`].
    pub guard: Option<CallGuard>,
}

impl RlsParts {
    /// The RLS with `ext_authz` beside it on the same port.
    pub fn ext_authz(ext_authz: Option<ExtAuthzService>) -> RlsParts {
        RlsParts {
            ext_authz,
            ..Default::default()
        }
    }
}

/// The call checks sluice-rls runs with the example secret: refunds and
/// forced charges signed by a filter of the example configs are accepted.
pub fn example_call_guard() -> CallGuard {
    CallGuard {
        secrets: vec![example_deferral_secret()],
        ..Default::default()
    }
}

/// A running sluice-rls; it stops when this drops.
pub struct Rls {
    pub limiter: Arc<Limiter>,
    /// The gRPC port (RLS and ext_authz).
    pub port: u16,
    pub admin: Option<SocketAddr>,
    pub deferral: Option<SocketAddr>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

/// Serves `limiter` as sluice-rls does, with `parts`.
pub async fn start_rls(limiter: Arc<Limiter>, parts: RlsParts) -> Rls {
    let bind = || tokio::net::TcpListener::bind("127.0.0.1:0");
    let grpc = bind().await.unwrap();
    let port = grpc.local_addr().unwrap().port();
    let admin = match parts.admin {
        true => Some(bind().await.unwrap()),
        false => None,
    };
    let admin_addr = admin.as_ref().map(|l| l.local_addr().unwrap());
    let deferral = match parts.deferral {
        Some(app) => Some((bind().await.unwrap(), app)),
        None => None,
    };
    let deferral_addr = deferral.as_ref().map(|(l, _)| l.local_addr().unwrap());
    let deferral = deferral.map(|parts| DeferralListener::from(parts).side_server());
    let reload_interval = match parts.limits_file {
        Some(_) => Duration::from_millis(100),
        None => Duration::ZERO,
    };
    let deps = Deps {
        limiter: limiter.clone(),
        guard: parts.guard.unwrap_or_else(example_call_guard),
        config_path: parts.limits_file,
        reload_interval,
        ext_authz: parts.ext_authz,
        deferral,
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(run(grpc, admin, deps, async {
        let _ = stopped.await;
    }));
    Rls {
        limiter,
        port,
        admin: admin_addr,
        deferral: deferral_addr,
        _stop: stop,
    }
}

/// One consumer instance: what to build it from.
pub struct ConsumerSpec {
    /// Its instance id (also names its retry producer).
    pub id: String,
    /// Its config; the default backend is set to the model server.
    pub config: ProcessorConfig,
    pub pacing: PacingConfig,
    /// `parent` is always [`PARENT`].
    pub options: RunnerOptions,
    /// The per-model in-flight caps.
    pub limits: InFlightConfig,
    /// Adaptive controllers (default: none).
    pub controller: sluice_consumer::controller::ControllerConfig,
    /// Fair sharing (default: only the controlled models).
    pub fair: sluice_consumer::fair::FairConfig,
}

impl ConsumerSpec {
    /// Default config, pacing and runner options.
    pub fn new(id: &str) -> Self {
        ConsumerSpec {
            id: id.into(),
            config: ProcessorConfig::default(),
            pacing: PacingConfig::default(),
            options: RunnerOptions::default(),
            limits: InFlightConfig::default(),
            controller: Default::default(),
            fair: Default::default(),
        }
    }
}

/// A running consumer pop loop; [`ConsumerInstance::stop`] shuts it down
/// gracefully, [`ConsumerInstance::crash`] kills it; dropping it leaves it
/// running until the runtime ends.
pub struct ConsumerInstance {
    pub runner: Arc<Runner>,
    pub pacer: Arc<Pacer>,
    pub metrics: Arc<ConsumerMetrics>,
    /// Its LiteTopic consumer (for the broker client's figures).
    pub lite: Arc<LiteConsumer>,
    /// Its own broker client, as a separate process would have.
    pub client: LiteClient,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl ConsumerInstance {
    /// SIGTERM: the graceful path. Returns how long the runner took to stop.
    pub async fn stop(mut self) -> Duration {
        let started = std::time::Instant::now();
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.task.await.unwrap();
        let took = started.elapsed();
        drop(self.runner);
        // The broker client's own shutdown waits for its idle connections to
        // time out: not part of what is measured here.
        tokio::spawn(self.client.shutdown());
        took
    }

    /// kill -9 as far as the group can tell: the loop and its broker
    /// connection vanish without leaving the member set.
    pub async fn crash(self) {
        self.task.abort();
        let _ = self.task.await;
        drop(self.runner);
        tokio::spawn(self.client.shutdown());
    }

    /// The sum of the samples of the consumer metric `name`.
    pub fn counter(&self, name: &str) -> f64 {
        let text = self.metrics.encode();
        text.lines()
            .filter(|l| l.starts_with(name) && !l.starts_with('#'))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }
}

/// Starts a consumer pop loop on `redis` and `broker` that calls `backend`.
pub async fn start_consumer(
    redis: &sluice_redis::RedisConn,
    broker: &RocketMq,
    backend: SocketAddr,
    spec: ConsumerSpec,
) -> ConsumerInstance {
    let ConsumerSpec {
        id,
        mut config,
        pacing,
        options,
        limits,
        controller,
        fair,
    } = spec;
    let metrics = Arc::new(ConsumerMetrics::new(1000, 100));
    config.backend.default.base_url = format!("http://{backend}");
    let consumer = Arc::new(Processor::new(redis.clone(), &id, config, metrics.clone()).unwrap());
    let pacer = Arc::new(Pacer::new(redis.clone(), pacing, Some(metrics.clone())).unwrap());
    let client = LiteClient::connect(LiteConfig::new(broker.namesrv_addr())).unwrap();
    let lite = Arc::new(LiteConsumer::new(&client, GROUP, PARENT).await.unwrap());
    let limits = Arc::new(InFlightLimits::new(limits, Some(metrics.clone())));
    let adaptive = sluice_consumer::adaptive(
        &controller,
        &fair,
        (redis, &limits, &metrics),
        options.membership_ttl,
    );
    let runner = Runner::new(
        RunnerParts {
            lite: lite.clone(),
            producer: Arc::new(
                LiteProducer::new(&client, &format!("{id}-retry"))
                    .await
                    .unwrap(),
            ),
            processor: consumer,
            pacer: pacer.clone(),
            limits,
            redis: redis.clone(),
            metrics: metrics.clone(),
            id,
            adaptive,
        },
        RunnerOptions {
            parent: PARENT.into(),
            ..options
        },
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(runner.clone().run(async move {
        let _ = stopped.await;
    }));
    ConsumerInstance {
        runner,
        pacer,
        metrics,
        lite,
        client,
        stop: Some(stop),
        task,
    }
}

/// Envoy with the built Wasm filter (the repository's config, ports
/// rewritten).
pub struct FilterEnvoy {
    pub envoy: Envoy,
    /// Where clients send requests.
    pub listener: SocketAddr,
    pub admin: SocketAddr,
}

/// Envoy with `config` (its start blocks, so off the runtime's threads).
pub async fn start_envoy(config: String, admin: u16, listener: u16) -> Envoy {
    tokio::task::spawn_blocking(move || Envoy::start(&config, admin, listener))
        .await
        .unwrap()
        .unwrap()
}

/// Starts Envoy with the filter in front of `backend`, asking the RLS on
/// `rls_port` and deferring to `deferral`.
pub async fn start_filter_envoy(rls_port: u16, backend: u16, deferral: u16) -> FilterEnvoy {
    start_filter_envoy_edited(rls_port, backend, deferral, |config| config).await
}

/// [`start_filter_envoy`] with `edit` applied to the config first.
pub async fn start_filter_envoy_edited(
    rls_port: u16,
    backend: u16,
    deferral: u16,
    edit: impl FnOnce(String) -> String,
) -> FilterEnvoy {
    let (admin, listener) = (free_port(), free_port());
    let config = sluice_filter_envoy_config(&SluiceFilterPorts {
        admin,
        listener,
        rls: rls_port,
        backend,
        deferral,
    })
    .unwrap();
    FilterEnvoy {
        envoy: start_envoy(edit(config), admin, listener).await,
        listener: ([127, 0, 0, 1], listener).into(),
        admin: ([127, 0, 0, 1], admin).into(),
    }
}

/// [`start_filter_envoy`] with several sluice-rls instances: Envoy's RLS
/// and deferral clusters hold every instance (round robin).
pub async fn start_filter_envoy_over(
    rls_ports: &[u16],
    backend: u16,
    deferral_ports: &[u16],
) -> FilterEnvoy {
    start_filter_envoy_edited(rls_ports[0], backend, deferral_ports[0], |config| {
        with_more_endpoints(&with_more_endpoints(&config, rls_ports), deferral_ports)
    })
    .await
}

/// The cluster endpoint on `ports[0]` followed by one on each other port.
fn with_more_endpoints(config: &str, ports: &[u16]) -> String {
    let line = format!(
        "socket_address: {{ address: 127.0.0.1, port_value: {} }}",
        ports[0]
    );
    let Some(at) = config.find(&line) else {
        panic!("no endpoint on port {} in the Envoy config", ports[0]);
    };
    let line_start = config[..at].rfind('\n').map_or(0, |i| i + 1);
    // `- endpoint:` sits two lines above, four columns left of `address:`.
    let indent = at - line_start;
    let pad = |n: usize| " ".repeat(n);
    let mut extra = String::new();
    for port in &ports[1..] {
        extra.push_str(&format!(
            "\n{}- endpoint:\n{}address:\n{}socket_address: {{ address: 127.0.0.1, port_value: {port} }}",
            pad(indent - 6),
            pad(indent - 2),
            pad(indent),
        ));
    }
    let end = at + line.len();
    format!("{}{}{}", &config[..end], extra, &config[end..])
}

/// The whole deferral path: Redis, the broker, sluice-rls with its deferral
/// endpoint, the model server, one consumer, and Envoy with the filter.
pub struct StackBuilder {
    limits: String,
    sim: sluice_llm_sim::SimConfig,
    consumer: ConsumerSpec,
    rls_admin: bool,
    hot_reload: bool,
    redis: RedisKind,
    route_in_quota: bool,
    over_quota_memory_ms: Option<u64>,
    envoy_edit: Option<EnvoyEdit>,
}

/// An edit of the filter's Envoy config before Envoy starts.
type EnvoyEdit = Box<dyn FnOnce(String) -> String + Send>;

/// A started [`StackBuilder`]; everything stops when it drops.
pub struct Stack {
    pub envoy: FilterEnvoy,
    pub consumer: ConsumerInstance,
    /// The model server.
    pub backend: SocketAddr,
    pub rls: Rls,
    /// The endpoint's metrics (registered in the RLS registry).
    pub endpoint_metrics: Arc<EndpointMetrics>,
    /// The limits file sluice-rls watches, with `hot_reload`.
    pub limits_file: Option<PathBuf>,
    pub broker: RocketMq,
    pub redis: RedisDeployment,
    _config_dir: tempfile::TempDir,
}

impl Stack {
    /// A stack with `limits` and otherwise the defaults: fast model answers,
    /// default consumer, no RLS admin port, no hot reload.
    pub fn builder(limits: String) -> StackBuilder {
        StackBuilder {
            limits,
            sim: sluice_llm_sim::SimConfig::fast(),
            consumer: ConsumerSpec::new("e2e-consumer"),
            rls_admin: false,
            hot_reload: false,
            redis: RedisKind::Single,
            route_in_quota: false,
            over_quota_memory_ms: None,
            envoy_edit: None,
        }
    }

    /// Writes `model`'s saturation into its controller hash, now, as the
    /// consumers' controller does each interval (the contract's fields).
    pub async fn controller_says(&self, model: &str, saturated: bool) {
        let state = sluice_contract::saturation::Saturation {
            saturated,
            at_ms: sluice_contract::now_ms(),
        };
        let mut conn = redis_connection_at(&self.redis.url());
        let mut write = redis::pipe();
        for (field, value) in state.fields() {
            write.hset(sluice_contract::keys::controller(model), field, value);
        }
        write.query_async::<()>(&mut conn).await.unwrap();
    }

    /// Waits until sluice-rls (`route_in_quota_when_saturated`) routes
    /// `model`'s in-quota requests as `want`: its background read has seen
    /// the state. The first call tracks the model, as a first request
    /// would.
    pub async fn rls_routes(&self, model: &str, want: sluice_contract::saturation::Route) {
        let Some(router) = self.rls.limiter.saturation_router() else {
            panic!("sluice-rls does not route by saturation");
        };
        let asked = std::time::Instant::now();
        while router.route(model, sluice_contract::now_ms()) != want {
            assert!(
                asked.elapsed() < Duration::from_secs(30),
                "sluice-rls never routed {model} as {want:?}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

impl StackBuilder {
    /// The model server's behaviour.
    pub fn sim(mut self, sim: sluice_llm_sim::SimConfig) -> Self {
        self.sim = sim;
        self
    }

    /// The consumer instance.
    pub fn consumer(mut self, consumer: ConsumerSpec) -> Self {
        self.consumer = consumer;
        self
    }

    /// Which Redis everything runs on (default: one server).
    pub fn redis(mut self, kind: RedisKind) -> Self {
        self.redis = kind;
        self
    }

    /// sluice-rls with `--route-in-quota-when-saturated`: in-quota requests
    /// of a saturated model go into the fair queue.
    pub fn route_in_quota_when_saturated(mut self) -> Self {
        self.route_in_quota = true;
        self
    }

    /// sluice-rls with `--route-in-quota-after-over-quota-ms`: in-quota
    /// requests of a bucket over quota within `memory_ms` go into the fair
    /// queue.
    pub fn route_in_quota_after_over_quota(mut self, memory_ms: u64) -> Self {
        self.over_quota_memory_ms = Some(memory_ms);
        self
    }

    /// Envoy's config (envoy/sluice-filter.yaml, ports set) edited by
    /// `edit` before Envoy starts.
    pub fn envoy_config(mut self, edit: impl FnOnce(String) -> String + Send + 'static) -> Self {
        self.envoy_edit = Some(Box::new(edit));
        self
    }

    /// Serve sluice-rls's admin port and reload the limits from a file,
    /// as the binary does.
    pub fn as_binary(mut self) -> Self {
        self.rls_admin = true;
        self.hot_reload = true;
        self
    }

    pub async fn start(self) -> Stack {
        let kind = self.redis;
        let redis = tokio::task::spawn_blocking(move || RedisDeployment::start(kind))
            .await
            .unwrap()
            .unwrap();
        let url = redis.url();
        let broker = start_broker().await;
        let config_dir = tempfile::tempdir().unwrap();
        let limits_file = self.hot_reload.then(|| {
            let file = config_dir.path().join("limits.yaml");
            std::fs::write(&file, &self.limits).unwrap();
            file
        });

        // sluice-rls: the endpoint's metrics in the service's registry.
        let mut rls_metrics = Metrics::new();
        let endpoint_metrics = Arc::new(EndpointMetrics::default());
        endpoint_metrics.register(&mut rls_metrics.registry);
        let mut limiter = redis_limiter(&self.limits, &url, rls_metrics);
        if self.route_in_quota {
            limiter = with_saturation_routing(limiter, &url);
        }
        if let Some(memory_ms) = self.over_quota_memory_ms {
            limiter = reshaped(limiter, |l| l.with_over_quota_routing(memory_ms));
        }
        let app = deferral_endpoint(EndpointConfig {
            metrics: endpoint_metrics.clone(),
            ..endpoint_config_at(&url, &broker)
        })
        .await;
        let rls = start_rls(
            limiter,
            RlsParts {
                admin: self.rls_admin,
                limits_file: limits_file.clone(),
                ext_authz: None,
                deferral: Some(app),
                guard: None,
            },
        )
        .await;

        let backend = start_llm_sim(self.sim).await;
        let consumer =
            start_consumer(&redis_connection_at(&url), &broker, backend, self.consumer).await;
        let deferral = rls
            .deferral
            .expect("the stack serves the deferral endpoint");
        let edit = self.envoy_edit.unwrap_or_else(|| Box::new(|config| config));
        let envoy =
            start_filter_envoy_edited(rls.port, backend.port(), deferral.port(), edit).await;
        Stack {
            envoy,
            consumer,
            backend,
            rls,
            endpoint_metrics,
            limits_file,
            broker,
            redis,
            _config_dir: config_dir,
        }
    }
}
