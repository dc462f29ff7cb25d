//! The `sluice-rls` command line and its serve loop, shared with
//! `sluice-allinone` (which adds a consumer in the same process). This is
//! the binaries' edge: errors are `anyhow`.

use crate::config::LimitsConfig;
use crate::deferral::caps::{self, CapLimits, CapsMetrics};
use crate::deferral::endpoint::{EndpointMetrics, EndpointOptions};
use crate::deferral::hub::HubOptions;
use crate::deferral::{Endpoint, EndpointConfig};
use crate::limiter::{Limiter, SystemClock};
use crate::metrics::Metrics;
use crate::server::{self, Deps};
use crate::store::{CounterStore, CountingMode, MemoryStore, RedisStore, RedisStoreOptions};
use anyhow::Context;
use sluice_contract::{ClaimTiming, LocalBus};
use sluice_redis::RedisOptions;
use sluice_runtime::LogFormat;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// A consumer running in this process (`sluice-allinone`).
pub struct InProcess {
    /// Its chunks for requests waiting here skip the Redis Stream.
    pub local: Arc<LocalBus>,
    /// Its heartbeat settings: when the endpoint gives a claim up for dead.
    pub claim_timing: ClaimTiming,
}

/// The flags of `sluice-rls` (and of `sluice-allinone`, which adds the
/// consumer's).
#[derive(clap::Args)]
pub struct ServeArgs {
    /// Limits file, or a directory of *.yaml files (envoyproxy/ratelimit format).
    #[arg(long, env = "SLUICE_RLS_CONFIG", value_name = "FILE|DIR")]
    pub config: Option<PathBuf>,

    /// gRPC listen address (Envoy's rate_limit_service cluster points here).
    #[arg(long, env = "SLUICE_RLS_GRPC_ADDR", default_value = "0.0.0.0:8081")]
    pub grpc_addr: SocketAddr,

    /// Admin HTTP address: /metrics, /healthz, /readyz (read-only). Loopback
    /// by default: bind 0.0.0.0:9091 for Prometheus and kubelet probes.
    #[arg(long, env = "SLUICE_RLS_ADMIN_ADDR", default_value = "127.0.0.1:9091")]
    pub admin_addr: SocketAddr,

    /// Where counters live: `memory` (one instance) or `redis` (shared).
    #[arg(long, env = "SLUICE_RLS_STORE", value_enum, default_value = "memory")]
    pub store: StoreKind,

    /// Redis for `--store redis` and the deferral endpoint:
    /// redis://[user:password@]host:port[/db] (one server),
    /// redis+cluster://host:port,host:port (Redis Cluster seeds),
    /// redis+sentinel://host:port,host:port/master[/db] (Sentinel);
    /// rediss… for TLS. See docs/configuration.md.
    #[arg(
        long,
        env = "SLUICE_REDIS_URL",
        default_value = "redis://127.0.0.1:6379",
        hide_env_values = true
    )]
    pub redis_url: String,

    /// File holding the Redis password (wins over one in --redis-url).
    #[arg(long, env = "SLUICE_REDIS_PASSWORD_FILE")]
    pub redis_password_file: Option<PathBuf>,

    /// Multiplexed Redis connections.
    #[arg(long, env = "SLUICE_REDIS_CONNECTIONS", default_value_t = 4)]
    pub redis_connections: usize,

    /// Deadline of one Redis round trip, in milliseconds.
    #[arg(long, env = "SLUICE_REDIS_TIMEOUT_MS", default_value_t = 250)]
    pub redis_timeout_ms: u64,

    /// `all-or-nothing`: an over-limit request moves no counter;
    /// `increment-all`: envoyproxy/ratelimit's behaviour.
    #[arg(
        long,
        env = "SLUICE_RLS_COUNTING",
        value_enum,
        default_value = "all-or-nothing"
    )]
    pub counting: CountingMode,

    /// How often to look for config changes, in milliseconds (0 disables hot reload).
    #[arg(long, env = "SLUICE_RLS_RELOAD_MS", default_value_t = 2000)]
    pub reload_ms: u64,

    /// Serve Envoy's ext_authz API too, with this admission config (the Wasm
    /// filter's JSON plugin configuration).
    #[arg(long, env = "SLUICE_EXT_AUTHZ_CONFIG", value_name = "FILE.json")]
    pub ext_authz_config: Option<PathBuf>,

    /// Serve the deferral endpoint (deferred requests wait here for their
    /// answer) on this address. Needs --namesrv and Redis (--redis-url).
    #[arg(long, env = "SLUICE_DEFERRAL_ADDR")]
    pub deferral_addr: Option<SocketAddr>,

    /// RocketMQ name server, for queuing deferred requests.
    #[arg(long, env = "SLUICE_NAMESRV", default_value = "127.0.0.1:9876")]
    pub namesrv: String,

    /// Parent topic of the per tenant × model LiteTopics.
    #[arg(long, env = "SLUICE_LITE_PARENT", default_value = "sluice-deferred")]
    pub lite_parent: String,

    /// Consumer group bound to the parent topic (created if missing).
    #[arg(long, env = "SLUICE_CONSUMER_GROUP", default_value = "sluice-consumer")]
    pub consumer_group: String,

    /// File of secrets shared with the filter / ext_authz, one per line (at
    /// least 32 bytes each): a deferred request is served only with a token
    /// signed by one of them. The first also signs resume tokens and
    /// ext_authz's deferrals; list the new one second while rotating.
    #[arg(long, env = "SLUICE_DEFERRAL_SECRET_FILE", value_name = "FILE")]
    pub deferral_secret_file: Option<PathBuf>,

    /// The same secrets, comma-separated, from the environment (after those
    /// of --deferral-secret-file).
    #[arg(long, env = "SLUICE_DEFERRAL_SECRETS", hide_env_values = true)]
    pub deferral_secrets: Option<String>,

    /// Oldest deferral token accepted, in seconds (also the clock skew
    /// allowed between Envoy and sluice-rls).
    #[arg(long, env = "SLUICE_DEFERRAL_TOKEN_MAX_AGE_S", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub deferral_token_max_age_s: u64,

    /// The marker header the filter sets on deferred requests (the filter's
    /// `deferral.marker_header`).
    #[arg(long, env = "SLUICE_DEFERRAL_MARKER_HEADER", default_value = sluice_admission::deferral::DEFAULT_MARKER_HEADER,
          value_parser = parse_marker_header)]
    pub deferral_marker_header: String,

    /// Longest a deferred request waits for its answer, in seconds.
    #[arg(long, env = "SLUICE_DEFERRAL_TIMEOUT_S", default_value_t = 600)]
    pub deferral_timeout_s: u64,

    /// Largest deferred request body; larger: 413 (same as the filter's max_body_bytes).
    #[arg(long, env = "SLUICE_DEFERRAL_MAX_BODY_BYTES", default_value_t = sluice_admission::config::DEFAULT_MAX_BODY_BYTES)]
    pub deferral_max_body_bytes: usize,

    /// A deferred request body not complete this long after its headers: 408.
    #[arg(long, env = "SLUICE_DEFERRAL_BODY_TIMEOUT_MS", default_value_t = sluice_admission::config::DEFAULT_BODY_TIMEOUT_MS)]
    pub deferral_body_timeout_ms: u64,

    /// How often a waiting deferred request, silent meanwhile, checks that
    /// its consumer still lives (lease and claim); at most the claim's stale
    /// bound (--claim-lease-ms + --claim-heartbeat-interval-ms).
    #[arg(long, env = "SLUICE_DEFERRAL_LEASE_CHECK_MS", default_value_t = crate::deferral::endpoint::DEFAULT_LEASE_CHECK_MS,
          value_parser = clap::value_parser!(u64).range(10..))]
    pub deferral_lease_check_ms: u64,

    /// The consumers' `idempotency.lease_ms`: a claim heartbeat older than
    /// this plus one interval belongs to a dead consumer. Must match the
    /// consumers' config (sluice-allinone takes its own consumer's).
    #[arg(long, env = "SLUICE_CLAIM_LEASE_MS", default_value_t = sluice_contract::claim::DEFAULT_LEASE_MS)]
    pub claim_lease_ms: u64,

    /// The consumers' `idempotency.heartbeat_interval_ms` (claim heartbeat
    /// and pop-lease refresh). Must match the consumers' config.
    #[arg(long, env = "SLUICE_CLAIM_HEARTBEAT_INTERVAL_MS", default_value_t = sluice_contract::claim::DEFAULT_HEARTBEAT_INTERVAL_MS)]
    pub claim_heartbeat_interval_ms: u64,

    /// Deferred requests held open at once; beyond it: 503.
    #[arg(long, env = "SLUICE_DEFERRAL_MAX_IN_FLIGHT", default_value_t = 10_000)]
    pub deferral_max_in_flight: usize,

    /// Low-priority requests fail fast (429, Retry-After) when their tenant ×
    /// model queue already holds this many unclaimed requests.
    #[arg(long, env = "SLUICE_LOW_PRIORITY_MAX_BACKLOG", default_value_t = 100)]
    pub low_priority_max_backlog: u64,

    /// Most deferral buckets (tenant × model queues) in all; a request that
    /// would open one more gets 503 `bucket_capacity`. At least 1.
    #[arg(long, env = "SLUICE_DEFERRAL_MAX_BUCKETS", default_value_t = caps::DEFAULT_MAX_BUCKETS, value_parser = clap::value_parser!(u64).range(1..))]
    pub deferral_max_buckets: u64,

    /// Most deferral buckets (models) per tenant; beyond: 429
    /// `tenant_bucket_limit`. At least 1, at most --deferral-max-buckets.
    #[arg(long, env = "SLUICE_DEFERRAL_MAX_BUCKETS_PER_TENANT", default_value_t = caps::DEFAULT_MAX_BUCKETS_PER_TENANT, value_parser = clap::value_parser!(u64).range(1..))]
    pub deferral_max_buckets_per_tenant: u64,

    /// New deferral buckets per minute, all tenants together; beyond: 429
    /// `bucket_rate_limit`. At least 1.
    #[arg(long, env = "SLUICE_DEFERRAL_MAX_NEW_BUCKETS_PER_MINUTE", default_value_t = caps::DEFAULT_MAX_NEW_BUCKETS_PER_MINUTE, value_parser = clap::value_parser!(u64).range(1..))]
    pub deferral_max_new_buckets_per_minute: u64,

    /// Redis connections reading response streams (each waits on many).
    #[arg(long, env = "SLUICE_STREAM_READERS", default_value_t = 4)]
    pub stream_readers: usize,

    /// Log format.
    #[arg(long, env = "SLUICE_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum StoreKind {
    Memory,
    Redis,
}

/// The Redis settings every Redis user of sluice-rls shares.
pub fn redis_options(args: &ServeArgs) -> RedisOptions {
    RedisOptions {
        password_file: args.redis_password_file.clone(),
        ..RedisOptions::from_url(args.redis_url.as_str())
    }
}

async fn redis_store(args: &ServeArgs, metrics: &Metrics) -> anyhow::Result<RedisStore> {
    // rustls needs a process-wide crypto provider for rediss:// URLs.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let options = RedisStoreOptions {
        redis: redis_options(args),
        connections: args.redis_connections,
        timeout: Duration::from_millis(args.redis_timeout_ms),
    };
    let store = RedisStore::new(&options)
        .context("--redis-url")?
        .with_cross_slot_counter(metrics.cross_slot_decisions.clone());
    let redis = options
        .redis
        .topology()
        .map(|t| format!("{t:?}"))
        .unwrap_or_default();
    match store.preload().await {
        Ok(()) => tracing::info!(%redis, "connected to Redis"),
        // Start anyway: /readyz reports it and decisions answer UNAVAILABLE until Redis is back.
        Err(error) => tracing::warn!(%redis, %error, "Redis not reachable yet"),
    }
    Ok(store)
}

/// Runs the service until `shutdown` resolves. `in_process`: a consumer
/// runs in this process (`sluice-allinone`); the endpoint takes its chunks
/// from it.
pub async fn serve(
    args: ServeArgs,
    in_process: Option<InProcess>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let config_path = args
        .config
        .clone()
        .context("no limits configuration: pass --config FILE|DIR or set SLUICE_RLS_CONFIG")?;
    let config = LimitsConfig::load(&config_path).context("refusing to start")?;

    let mut metrics = Metrics::new();
    let store: Arc<dyn CounterStore> = match args.store {
        StoreKind::Memory => Arc::new(MemoryStore::new()),
        StoreKind::Redis => Arc::new(redis_store(&args, &metrics).await?),
    };
    let grpc = tokio::net::TcpListener::bind(args.grpc_addr)
        .await
        .with_context(|| format!("cannot listen on {} (gRPC)", args.grpc_addr))?;
    let admin = tokio::net::TcpListener::bind(args.admin_addr)
        .await
        .with_context(|| format!("cannot listen on {} (admin)", args.admin_addr))?;
    tracing::info!(
        grpc = %grpc.local_addr()?,
        admin = %admin.local_addr()?,
        store = store.kind(),
        counting = ?args.counting,
        limits = config.limit_count(),
        config = %config_path.display(),
        "sluice-rls listening"
    );
    let endpoint_metrics = Arc::new(EndpointMetrics::default());
    let caps_metrics = CapsMetrics::default();
    if args.deferral_addr.is_some() {
        endpoint_metrics.register(&mut metrics.registry);
        caps_metrics.register(&mut metrics.registry);
    }
    let limiter = Arc::new(Limiter::new(
        config,
        store,
        args.counting,
        Arc::new(SystemClock),
        Arc::new(metrics),
    ));
    let secrets = crate::deferral::secrets::load(
        args.deferral_secret_file.as_deref(),
        args.deferral_secrets.as_deref(),
    )?;
    if secrets.iter().any(|s| s.is_example()) {
        tracing::warn!(
            "the deferral secret is the public example (config/deferral-secret.example): \
             anyone can sign deferrals with it; generate your own outside a test setup"
        );
    }
    if args.deferral_addr.is_some() && secrets.is_empty() {
        anyhow::bail!(
            "the deferral endpoint needs the secret the filter signs deferred requests with: \
             pass --deferral-secret-file FILE (or set SLUICE_DEFERRAL_SECRETS)"
        );
    }
    let ext_authz = match &args.ext_authz_config {
        Some(path) => {
            let bytes =
                std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
            let mut config = sluice_admission::config::FilterConfig::from_json(&bytes)
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            // ext_authz lives next to the endpoint: it signs with the same secrets
            // unless its own config names others.
            if config.deferral.secrets.is_empty() {
                config.deferral.secrets = secrets.clone();
            }
            for warning in config.warnings() {
                tracing::warn!(config = %path.display(), "{warning}");
            }
            tracing::info!(config = %path.display(), "ext_authz front door enabled");
            Some(crate::ext_authz::ExtAuthzService::new(
                limiter.clone(),
                config,
            ))
        }
        None => None,
    };
    let deferral = match args.deferral_addr {
        Some(addr) => Some(
            deferral_endpoint(
                &args,
                addr,
                secrets,
                endpoint_metrics,
                caps_metrics,
                in_process,
            )
            .await?,
        ),
        None => None,
    };
    let deps = Deps {
        limiter,
        config_path: Some(config_path),
        reload_interval: Duration::from_millis(args.reload_ms),
        ext_authz,
        deferral,
    };
    server::run(grpc, Some(admin), deps, shutdown).await?;
    tracing::info!("sluice-rls stopped");
    Ok(())
}

/// The claim timing can tell a live consumer from a dead one, and the lease
/// watch looks often enough to act within its bound.
fn check_liveness(options: &EndpointOptions) -> anyhow::Result<()> {
    let timing = &options.claim_timing;
    timing.validate().map_err(|why| {
        anyhow::anyhow!("--claim-lease-ms / --claim-heartbeat-interval-ms: {why}")
    })?;
    if options.lease_check > timing.stale_after() {
        anyhow::bail!(
            "--deferral-lease-check-ms ({} ms) must be at most the claim's stale bound ({} ms): \
             a dead consumer's requests would wait for the next check",
            options.lease_check.as_millis(),
            timing.stale_after_ms()
        );
    }
    Ok(())
}

async fn deferral_endpoint(
    args: &ServeArgs,
    addr: SocketAddr,
    secrets: Vec<sluice_admission::deferral::Secret>,
    metrics: Arc<EndpointMetrics>,
    caps_metrics: CapsMetrics,
    in_process: Option<InProcess>,
) -> anyhow::Result<(tokio::net::TcpListener, axum::Router)> {
    let mut options = EndpointOptions {
        timeout: Duration::from_secs(args.deferral_timeout_s),
        max_in_flight: args.deferral_max_in_flight,
        max_body_bytes: args.deferral_max_body_bytes,
        body_timeout: Duration::from_millis(args.deferral_body_timeout_ms),
        low_priority_max_backlog: args.low_priority_max_backlog,
        secrets,
        token_max_age: Duration::from_secs(args.deferral_token_max_age_s),
        marker_header: args.deferral_marker_header.clone(),
        lease_check: Duration::from_millis(args.deferral_lease_check_ms),
        claim_timing: ClaimTiming {
            lease_ms: args.claim_lease_ms,
            heartbeat_interval_ms: args.claim_heartbeat_interval_ms,
        },
        ..Default::default()
    };
    let local = in_process.map(|in_process| {
        options.claim_timing = in_process.claim_timing;
        in_process.local
    });
    check_liveness(&options)?;
    let router = Endpoint::build(EndpointConfig {
        parent: args.lite_parent.clone(),
        consumer_group: args.consumer_group.clone(),
        caps: CapLimits {
            max_buckets: args.deferral_max_buckets,
            max_buckets_per_tenant: args.deferral_max_buckets_per_tenant,
            max_new_buckets_per_minute: args.deferral_max_new_buckets_per_minute,
            ..Default::default()
        },
        caps_metrics,
        hub: HubOptions {
            readers: args.stream_readers,
            ..Default::default()
        },
        options,
        metrics,
        local,
        redis: redis_options(args),
        ..EndpointConfig::new(&args.redis_url, &args.namesrv)
    })
    .await?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr} (deferral endpoint)"))?;
    tracing::info!(addr = %listener.local_addr()?, namesrv = %args.namesrv, parent = %args.lite_parent, "deferral endpoint listening");
    Ok((listener, router))
}

/// `--deferral-marker-header`: a lowercase header name, as the filter requires.
fn parse_marker_header(value: &str) -> Result<String, String> {
    if sluice_admission::config::valid_header_name(value) {
        Ok(value.to_string())
    } else {
        Err(format!("'{value}' is not a lowercase header name"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn liveness_defaults_act_within_the_bound() {
        assert!(check_liveness(&EndpointOptions::default()).is_ok());
    }

    #[test]
    fn liveness_that_cannot_tell_dead_from_slow_is_refused() {
        let too_short = EndpointOptions {
            claim_timing: ClaimTiming {
                lease_ms: 1_000,
                heartbeat_interval_ms: 1_000,
            },
            ..Default::default()
        };
        assert!(check_liveness(&too_short).is_err());
        let too_rare = EndpointOptions {
            lease_check: Duration::from_secs(10),
            ..Default::default()
        };
        let why = check_liveness(&too_rare).unwrap_err().to_string();
        assert!(why.contains("--deferral-lease-check-ms"), "{why}");
    }
}
