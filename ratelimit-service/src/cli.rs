//! The RLS's command line (`ServeArgs`) and its serve loop, which the
//! binaries (sluice-bins: `sluice-rls`, `sluice-allinone`) assemble with the
//! Redis settings and the deferral endpoint. This is the binaries' edge:
//! errors are `anyhow`.

use crate::config::{LimitsConfig, LoadOptions};
use crate::guard::{self, CallGuard, CounterWritePolicy, RequestBounds};
use crate::limiter::{HeaderStyle, Limiter, ResponseOptions, SystemClock, UpstreamHeaderNames};
use crate::metrics::Metrics;
use crate::saturation::{RedisSaturation, RoutingOptions, SaturationRouter};
use crate::server::{self, Deps, SideServer};
use crate::store::{
    CounterStore, CountingMode, LocalCacheStore, MemoryStore, RedisStore, RedisStoreOptions,
};
use crate::xds::{XdsClient, XdsOptions, XdsTls};
use anyhow::Context;
use sluice_admission::deferral::Secret;
use sluice_redis::RedisOptions;
use sluice_runtime::LogFormat;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tonic::transport::{Certificate, Identity, ServerTlsConfig};

/// The RLS's own flags (the binaries add the Redis URL, the broker and the
/// deferral endpoint's).
#[derive(clap::Args)]
pub struct ServeArgs {
    /// Limits file, or a directory of *.yaml files (envoyproxy/ratelimit format).
    #[arg(long, env = "SLUICE_RLS_CONFIG", value_name = "FILE|DIR")]
    pub config: Option<PathBuf>,

    /// Also (or only) take limits from this xDS management server
    /// (`host:port` or `http://host:port`): state-of-the-world ADS,
    /// RateLimitConfig resources, as envoyproxy/ratelimit's
    /// CONFIG_TYPE=GRPC_XDS_SOTW and Envoy Gateway.
    #[arg(long, env = "SLUICE_RLS_XDS_SERVER", value_name = "HOST:PORT")]
    pub xds_server: Option<String>,

    /// `node.id` sent to the xDS server (CONFIG_GRPC_XDS_NODE_ID).
    #[arg(long, env = "SLUICE_RLS_XDS_NODE_ID", default_value = "default")]
    pub xds_node_id: String,

    /// `node.metadata` for the xDS server: `k=v,k2=v2` (CONFIG_GRPC_XDS_NODE_METADATA).
    #[arg(long, env = "SLUICE_RLS_XDS_NODE_METADATA", default_value = "")]
    pub xds_node_metadata: String,

    /// First wait before reconnecting to the xDS server, in milliseconds;
    /// doubles (with jitter) up to --xds-backoff-max-ms.
    #[arg(long, env = "SLUICE_RLS_XDS_BACKOFF_INITIAL_MS", default_value_t = 1000)]
    pub xds_backoff_initial_ms: u64,

    #[arg(long, env = "SLUICE_RLS_XDS_BACKOFF_MAX_MS", default_value_t = 60_000)]
    pub xds_backoff_max_ms: u64,

    /// Largest xDS response accepted, in bytes (XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES).
    #[arg(long, env = "SLUICE_RLS_XDS_MAX_MESSAGE_BYTES")]
    pub xds_max_message_bytes: Option<usize>,

    /// TLS to the xDS server: the CA its certificate must chain to
    /// (CONFIG_GRPC_XDS_SERVER_USE_TLS + CONFIG_GRPC_XDS_SERVER_TLS_CACERT).
    #[arg(long, env = "SLUICE_RLS_XDS_TLS_CA", value_name = "PEM")]
    pub xds_tls_ca: Option<PathBuf>,

    /// Client certificate for the xDS server (CONFIG_GRPC_XDS_CLIENT_TLS_CERT); needs --xds-tls-key.
    #[arg(long, env = "SLUICE_RLS_XDS_TLS_CERT", value_name = "PEM", requires = "xds_tls_key")]
    pub xds_tls_cert: Option<PathBuf>,

    /// (CONFIG_GRPC_XDS_CLIENT_TLS_KEY)
    #[arg(long, env = "SLUICE_RLS_XDS_TLS_KEY", value_name = "PEM", requires = "xds_tls_cert")]
    pub xds_tls_key: Option<PathBuf>,

    /// Name the xDS server's certificate must carry, if not the host of
    /// --xds-server (CONFIG_GRPC_XDS_SERVER_TLS_SAN).
    #[arg(long, env = "SLUICE_RLS_XDS_TLS_SERVER_NAME")]
    pub xds_tls_server_name: Option<String>,

    /// TLS on the gRPC listener: certificate (GRPC_SERVER_USE_TLS +
    /// GRPC_SERVER_TLS_CERT); needs --grpc-tls-key.
    #[arg(long, env = "SLUICE_RLS_GRPC_TLS_CERT", value_name = "PEM", requires = "grpc_tls_key")]
    pub grpc_tls_cert: Option<PathBuf>,

    /// (GRPC_SERVER_TLS_KEY)
    #[arg(long, env = "SLUICE_RLS_GRPC_TLS_KEY", value_name = "PEM", requires = "grpc_tls_cert")]
    pub grpc_tls_key: Option<PathBuf>,

    /// Require client certificates signed by this CA on the gRPC listener
    /// (GRPC_SERVER_TLS_CA_CERT).
    #[arg(
        long,
        env = "SLUICE_RLS_GRPC_TLS_CLIENT_CA",
        value_name = "PEM",
        requires = "grpc_tls_cert"
    )]
    pub grpc_tls_client_ca: Option<PathBuf>,

    /// With --xds-server and no --config: serve before the first config
    /// arrives (every domain unknown, so every answer OK) instead of waiting
    /// for it (FORCE_START_WITHOUT_INITIAL_CONFIG).
    #[arg(long, env = "SLUICE_RLS_XDS_START_WITHOUT_CONFIG")]
    pub xds_start_without_config: bool,

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

    /// Multiplexed Redis connections.
    #[arg(long, env = "SLUICE_REDIS_CONNECTIONS", default_value_t = 4)]
    pub redis_connections: usize,

    /// Deadline of one Redis round trip, in milliseconds.
    #[arg(long, env = "SLUICE_REDIS_TIMEOUT_MS", default_value_t = 250)]
    pub redis_timeout_ms: u64,

    /// Most decisions one Redis script call carries: decisions that arrive
    /// while every connection has a call in flight share the next one
    /// (standalone and Sentinel). 1: a call per decision.
    #[arg(long, env = "SLUICE_REDIS_MAX_DECISIONS_PER_CALL", default_value_t = 32,
          value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub redis_max_decisions_per_call: u64,

    /// Remember counters that reached their limit, up to this many bytes, and
    /// answer requests whose every counter is over without asking the store
    /// until the window ends (LOCAL_CACHE_SIZE_IN_BYTES). 0: off.
    #[arg(long, env = "SLUICE_RLS_LOCAL_CACHE_BYTES", default_value_t = 0)]
    pub local_cache_bytes: usize,

    /// `all-or-nothing`: an over-limit request moves no counter;
    /// `increment-all`: envoyproxy/ratelimit's behaviour.
    #[arg(long, env = "SLUICE_RLS_COUNTING", value_enum, default_value = "all-or-nothing")]
    pub counting: CountingMode,

    /// Counter key layout, CACHE_KEY_PREFIX and expiry jitter.
    #[command(flatten)]
    pub keys: crate::store::KeyArgs,

    /// envoyproxy/ratelimit's metric names and NEAR_LIMIT_RATIO.
    #[command(flatten)]
    pub upstream_stats: crate::metrics::UpstreamStatsArgs,

    /// Several files may describe one domain: their descriptors are merged
    /// (envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG). Off: one domain, one file.
    #[arg(long, env = "SLUICE_RLS_MERGE_DOMAINS")]
    pub merge_domains: bool,

    /// Answer OK where the answer would be OVER_LIMIT (statuses still say
    /// which descriptor is over); envoyproxy/ratelimit's SHADOW_MODE.
    #[arg(long, env = "SLUICE_RLS_GLOBAL_SHADOW_MODE")]
    pub global_shadow_mode: bool,

    /// Every limit in quota mode; envoyproxy/ratelimit's QUOTA_MODE.
    #[arg(long, env = "SLUICE_RLS_GLOBAL_QUOTA_MODE")]
    pub global_quota_mode: bool,

    /// Saturation-aware admission (issue 28): while a model's server is
    /// saturated with deferred work (the consumers' controller state in
    /// Redis, `--redis-url`), answer an in-quota request under a limit
    /// that says `over_limit: defer` with `route: queue`, so Sluice's
    /// filter (or ext_authz) sends it into the token-fair queue instead of
    /// the server's queue. Off by default (docs/operations.md,
    /// "Saturation-aware admission").
    #[arg(long, env = "SLUICE_RLS_ROUTE_IN_QUOTA_WHEN_SATURATED")]
    pub route_in_quota_when_saturated: bool,

    /// Answer an in-quota request with `route: queue` when one of its
    /// buckets under a limit that says `over_limit: defer` was answered
    /// over quota by this instance within this many ms (issue 28): a
    /// tenant × model deferring its overflow sends its in-quota requests
    /// after that backlog through the token-fair queue, instead of ahead
    /// of it at the model server. 0 (the default): off. Beside
    /// `--route-in-quota-when-saturated` or alone (no Redis needed).
    #[arg(long, env = "SLUICE_RLS_ROUTE_IN_QUOTA_AFTER_OVER_QUOTA_MS", default_value_t = 0,
          value_parser = clap::value_parser!(u64).range(0..=3_600_000))]
    pub route_in_quota_after_over_quota_ms: u64,

    /// Oldest controller state the route acts on, ms (older: not
    /// saturated). The state is read in the background every half of it.
    #[arg(long, env = "SLUICE_RLS_SATURATION_MAX_AGE_MS", default_value_t = 1500,
          value_parser = clap::value_parser!(u64).range(20..=600_000))]
    pub saturation_max_age_ms: u64,

    /// Most models whose saturation state is tracked (model names come
    /// from clients); a new model past it goes straight to the server.
    #[arg(long, env = "SLUICE_RLS_SATURATION_MAX_MODELS", default_value_t = 1024,
          value_parser = clap::value_parser!(u64).range(1..=RoutingOptions::MAX_MODELS as u64))]
    pub saturation_max_models: u64,

    /// Rate-limit headers in answers: `sluice` (RateLimit-Limit/-Remaining/
    /// -Reset/-Policy, Retry-After), `upstream` (envoyproxy/ratelimit's
    /// LIMIT_RESPONSE_HEADERS_ENABLED), `off`.
    #[arg(long, env = "SLUICE_RLS_RESPONSE_HEADERS", value_enum, default_value = "sluice")]
    pub response_headers: HeaderStyleKind,

    /// Header names of `--response-headers upstream` (LIMIT_LIMIT_HEADER).
    #[arg(long, env = "SLUICE_RLS_LIMIT_HEADER", default_value = "RateLimit-Limit")]
    pub limit_header: String,

    /// (LIMIT_REMAINING_HEADER)
    #[arg(long, env = "SLUICE_RLS_REMAINING_HEADER", default_value = "RateLimit-Remaining")]
    pub remaining_header: String,

    /// (LIMIT_RESET_HEADER)
    #[arg(long, env = "SLUICE_RLS_RESET_HEADER", default_value = "RateLimit-Reset")]
    pub reset_header: String,

    /// Add envoyproxy/ratelimit's response dynamic metadata (domain,
    /// descriptors, hitsAddend, the passing limits' `metadata`);
    /// RESPONSE_DYNAMIC_METADATA.
    #[arg(long, env = "SLUICE_RLS_RESPONSE_DYNAMIC_METADATA")]
    pub response_dynamic_metadata: bool,

    /// How often to look for config changes, in milliseconds (0 disables hot reload).
    #[arg(long, env = "SLUICE_RLS_RELOAD_MS", default_value_t = 2000)]
    pub reload_ms: u64,

    /// Serve Envoy's ext_authz API too, with this admission config (the Wasm
    /// filter's JSON plugin configuration).
    #[arg(long, env = "SLUICE_EXT_AUTHZ_CONFIG", value_name = "FILE.json")]
    pub ext_authz_config: Option<PathBuf>,

    /// Who may refund (`is_negative_hits`) or charge past a limit
    /// (`x-sluice-charge: force`): `signed`, only calls the Sluice filter
    /// signed with a deferral secret (`x-sluice-charge-auth`); `any`, anyone
    /// who reaches the gRPC port, as envoyproxy/ratelimit (for migrations).
    /// Plain decisions (Envoy's own rate-limit filter) need no signature.
    #[arg(long, env = "SLUICE_RLS_COUNTER_WRITES", value_enum, default_value = "signed")]
    pub counter_writes: CounterWritePolicy,

    /// Oldest counter-write signature accepted, in seconds (also the clock
    /// skew allowed between Envoy and sluice-rls).
    #[arg(long, env = "SLUICE_RLS_COUNTER_WRITE_MAX_AGE_S", default_value_t = guard::DEFAULT_COUNTER_WRITE_MAX_AGE.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub counter_write_max_age_s: u64,

    /// Most descriptors in one ShouldRateLimit call; more: INVALID_ARGUMENT.
    #[arg(long, env = "SLUICE_RLS_MAX_DESCRIPTORS", default_value_t = guard::DEFAULT_MAX_DESCRIPTORS as u64,
          value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub max_descriptors: u64,

    /// Most entries in one descriptor; more: INVALID_ARGUMENT.
    #[arg(long, env = "SLUICE_RLS_MAX_DESCRIPTOR_ENTRIES", default_value_t = guard::DEFAULT_MAX_ENTRIES as u64,
          value_parser = clap::value_parser!(u64).range(1..=1_000))]
    pub max_descriptor_entries: u64,

    /// Longest domain, descriptor key or value, in bytes; longer: INVALID_ARGUMENT.
    #[arg(long, env = "SLUICE_RLS_MAX_DESCRIPTOR_ENTRY_BYTES", default_value_t = guard::DEFAULT_MAX_ENTRY_BYTES as u64,
          value_parser = clap::value_parser!(u64).range(1..=1_048_576))]
    pub max_descriptor_entry_bytes: u64,

    /// Log format.
    #[arg(long, env = "SLUICE_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,

    /// OpenTelemetry trace export (off by default).
    #[command(flatten)]
    pub traces: sluice_runtime::TraceArgs,
}

impl ServeArgs {
    /// Logs in `--log-format` and, with `--otlp-endpoint`, trace export as
    /// `service` (inside a Tokio runtime); keep the handle until exit.
    pub fn init_telemetry(
        &self,
        service: &'static str,
    ) -> Result<sluice_runtime::Traces, sluice_runtime::TraceExportError> {
        sluice_runtime::init_telemetry(
            self.log_format,
            &self.traces,
            service,
            sluice_contract::TRACE_TARGET,
        )
    }

    pub fn load_options(&self) -> LoadOptions {
        LoadOptions {
            merge_domains: self.merge_domains,
        }
    }

    pub fn xds_options(&self) -> anyhow::Result<Option<XdsOptions>> {
        let Some(server) = self.xds_server.clone() else {
            return Ok(None);
        };
        let tls = match &self.xds_tls_ca {
            None => None,
            Some(ca) => Some(XdsTls {
                ca: read_pem(ca)?,
                identity: match (&self.xds_tls_cert, &self.xds_tls_key) {
                    (Some(cert), Some(key)) => Some((read_pem(cert)?, read_pem(key)?)),
                    _ => None,
                },
                server_name: self.xds_tls_server_name.clone(),
            }),
        };
        let node_metadata = self
            .xds_node_metadata
            .split(',')
            .filter_map(|pair| pair.split_once('='))
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .collect();
        Ok(Some(XdsOptions {
            server,
            node_id: self.xds_node_id.clone(),
            node_metadata,
            backoff_initial: Duration::from_millis(self.xds_backoff_initial_ms.max(1)),
            backoff_max: Duration::from_millis(
                self.xds_backoff_max_ms.max(self.xds_backoff_initial_ms),
            ),
            max_message_bytes: self.xds_max_message_bytes,
            tls,
        }))
    }

    /// TLS of the gRPC listener, if asked for.
    pub fn grpc_tls(&self) -> anyhow::Result<Option<ServerTlsConfig>> {
        let (Some(cert), Some(key)) = (&self.grpc_tls_cert, &self.grpc_tls_key) else {
            return Ok(None);
        };
        let mut config =
            ServerTlsConfig::new().identity(Identity::from_pem(read_pem(cert)?, read_pem(key)?));
        if let Some(ca) = &self.grpc_tls_client_ca {
            config = config.client_ca_root(Certificate::from_pem(read_pem(ca)?));
        }
        Ok(Some(config))
    }

    /// The gRPC front's checks, verifying counter writes with `secrets`.
    pub fn call_guard(&self, secrets: Vec<Secret>) -> CallGuard {
        CallGuard {
            bounds: RequestBounds {
                max_descriptors: self.max_descriptors as usize,
                max_entries: self.max_descriptor_entries as usize,
                max_entry_bytes: self.max_descriptor_entry_bytes as usize,
            },
            policy: self.counter_writes,
            secrets,
            max_age: Duration::from_secs(self.counter_write_max_age_s),
        }
    }

    pub fn response_options(&self) -> ResponseOptions {
        ResponseOptions {
            global_shadow_mode: self.global_shadow_mode,
            global_quota_mode: self.global_quota_mode,
            headers: match self.response_headers {
                HeaderStyleKind::Sluice => HeaderStyle::Sluice,
                HeaderStyleKind::Upstream => HeaderStyle::Upstream(UpstreamHeaderNames {
                    limit: self.limit_header.clone(),
                    remaining: self.remaining_header.clone(),
                    reset: self.reset_header.clone(),
                }),
                HeaderStyleKind::Off => HeaderStyle::Off,
            },
            dynamic_metadata: self.response_dynamic_metadata,
        }
    }
}

fn read_pem(path: &std::path::Path) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum HeaderStyleKind {
    Sluice,
    Upstream,
    Off,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum StoreKind {
    Memory,
    Redis,
}

async fn redis_store(
    args: &ServeArgs,
    redis: RedisOptions,
    metrics: &Metrics,
) -> anyhow::Result<RedisStore> {
    let options = RedisStoreOptions {
        redis,
        connections: args.redis_connections,
        timeout: Duration::from_millis(args.redis_timeout_ms),
        // At most 1024 by its parser.
        max_decisions_per_call: args.redis_max_decisions_per_call as usize,
    };
    let store = RedisStore::new(&options)
        .context("--redis-url")?
        .with_cross_slot_counter(metrics.cross_slot_decisions.clone())
        .with_decisions_per_call_histogram(metrics.redis_decisions_per_call.clone());
    let redis = store.describe().to_string();
    match store.preload().await {
        Ok(()) => tracing::info!(%redis, "connected to Redis"),
        // Start anyway: /readyz reports it and decisions answer UNAVAILABLE until Redis is back.
        Err(error) => tracing::warn!(%redis, %error, "Redis not reachable yet"),
    }
    Ok(store)
}

/// The limiter routing in-quota requests by their model's saturation,
/// when `--route-in-quota-when-saturated` is on.
fn with_saturation_routing(
    args: &ServeArgs,
    limiter: Limiter,
    redis: &RedisOptions,
) -> anyhow::Result<Limiter> {
    if !args.route_in_quota_when_saturated {
        return Ok(limiter);
    }
    let connection = sluice_redis::RedisClient::new(redis)
        .and_then(|client| client.connect())
        .context("--redis-url (for --route-in-quota-when-saturated)")?;
    let source = RedisSaturation::new(connection, Duration::from_millis(args.redis_timeout_ms));
    let options = RoutingOptions {
        max_models: args.saturation_max_models as usize,
        ..RoutingOptions::with_max_age(args.saturation_max_age_ms)
    };
    let metrics = limiter.metrics().saturation.clone();
    let router = SaturationRouter::start(Arc::new(source), options, metrics)
        .context("--saturation-max-age-ms / --saturation-max-models")?;
    tracing::info!(
        max_age_ms = options.max_age_ms,
        refresh_ms = options.refresh_ms,
        max_models = options.max_models,
        "routing in-quota requests into the fair queue while their model's server is saturated"
    );
    Ok(limiter.with_saturation_routing(router))
}

/// The limiter routing in-quota requests of buckets over quota lately,
/// when `--route-in-quota-after-over-quota-ms` is above 0.
fn with_over_quota_routing(args: &ServeArgs, limiter: Limiter) -> Limiter {
    let memory_ms = args.route_in_quota_after_over_quota_ms;
    if memory_ms == 0 {
        return limiter;
    }
    tracing::info!(
        memory_ms,
        "routing in-quota requests of buckets over quota lately into the fair queue"
    );
    limiter.with_over_quota_routing(memory_ms)
}

/// A server to start beside the RLS once its limiter is up (sluice-rls's
/// deferral endpoint): awaited where the RLS would have built it itself, so
/// the start-up order and its errors stay the RLS's.
pub type PendingSideServer =
    std::pin::Pin<Box<dyn std::future::Future<Output = anyhow::Result<SideServer>> + Send>>;

/// What the binary brings to the RLS besides its flags.
pub struct Wiring {
    /// Redis, for `--store redis`.
    pub redis: RedisOptions,
    /// The deferral secrets: counter writes are verified with them and
    /// ext_authz signs with them unless its config names its own.
    pub secrets: Vec<Secret>,
    /// The process's metrics, served on the admin port (the deferral
    /// endpoint's already registered in them).
    pub metrics: Metrics,
    /// The deferral endpoint, when configured.
    pub deferral: Option<PendingSideServer>,
}

/// The limits the flags name (a file or directory, or none yet with xDS),
/// their warnings logged.
fn initial_config(args: &ServeArgs, xds: Option<&XdsOptions>) -> anyhow::Result<LimitsConfig> {
    if args.config.is_none() && xds.is_none() {
        anyhow::bail!(
            "no limits configuration: pass --config FILE|DIR (SLUICE_RLS_CONFIG) and/or --xds-server HOST:PORT (SLUICE_RLS_XDS_SERVER)"
        );
    }
    let load_options = args.load_options();
    let config = match &args.config {
        Some(path) => LimitsConfig::load_with(path, load_options).context("refusing to start")?,
        None => LimitsConfig::from_domains(Vec::new(), load_options)?,
    };
    config.log_warnings();
    Ok(config)
}

/// Runs the service until `shutdown` resolves.
pub async fn serve(
    args: ServeArgs,
    wiring: Wiring,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let xds = args.xds_options()?;
    let grpc_tls = args.grpc_tls()?;
    let config = initial_config(&args, xds.as_ref())?;
    let Wiring {
        redis,
        secrets,
        metrics,
        deferral,
    } = wiring;
    let store: Arc<dyn CounterStore> = match args.store {
        StoreKind::Memory => Arc::new(MemoryStore::new()),
        StoreKind::Redis => Arc::new(redis_store(&args, redis.clone(), &metrics).await?),
    };
    let (grpc, admin) = bind_listeners(&args).await?;
    tracing::info!(
        grpc = %grpc.local_addr()?,
        admin = %admin.local_addr()?,
        store = store.kind(),
        counting = ?args.counting,
        limits = config.limit_count(),
        config = ?args.config,
        xds = ?args.xds_server,
        "sluice-rls listening"
    );
    let store = with_local_cache(&args, store, &metrics);
    let limiter = Limiter::new(
        config,
        store,
        args.counting,
        Arc::new(SystemClock),
        Arc::new(metrics),
    )
    .with_response_options(args.response_options())
    .with_key_options(args.keys.options());
    let limiter = with_saturation_routing(&args, limiter, &redis)?;
    let limiter = Arc::new(with_over_quota_routing(&args, limiter));
    let guard = args.call_guard(secrets.clone());
    if let Some(warning) = guard.startup_warning() {
        tracing::warn!("{warning}");
    }
    let ext_authz = match &args.ext_authz_config {
        Some(path) => Some(ext_authz_service(path, limiter.clone(), secrets)?),
        None => None,
    };
    let deferral = match deferral {
        Some(pending) => Some(pending.await?),
        None => None,
    };
    let shutdown = match xds {
        Some(options) => {
            let wait = args.config.is_none() && !args.xds_start_without_config;
            start_xds(options, limiter.clone(), wait, shutdown).await?
        }
        None => Box::pin(shutdown),
    };
    let deps = Deps {
        limiter,
        guard,
        config_path: args.config.clone(),
        reload_interval: Duration::from_millis(args.reload_ms),
        ext_authz,
        deferral,
    };
    server::run_with_tls(grpc, Some(admin), deps, grpc_tls, shutdown).await?;
    tracing::info!("sluice-rls stopped");
    Ok(())
}

/// The gRPC and admin listeners, bound before anything is served.
async fn bind_listeners(
    args: &ServeArgs,
) -> anyhow::Result<(tokio::net::TcpListener, tokio::net::TcpListener)> {
    let grpc = tokio::net::TcpListener::bind(args.grpc_addr)
        .await
        .with_context(|| format!("cannot listen on {} (gRPC)", args.grpc_addr))?;
    let admin = tokio::net::TcpListener::bind(args.admin_addr)
        .await
        .with_context(|| format!("cannot listen on {} (admin)", args.admin_addr))?;
    Ok((grpc, admin))
}

/// `store` behind the local cache of over-limit answers, when it has bytes.
fn with_local_cache(
    args: &ServeArgs,
    store: Arc<dyn CounterStore>,
    metrics: &Metrics,
) -> Arc<dyn CounterStore> {
    if args.local_cache_bytes == 0 {
        return store;
    }
    Arc::new(LocalCacheStore::new(
        store,
        args.local_cache_bytes,
        metrics.local_cache_answers.clone(),
    ))
}

/// The ext_authz front door with the admission config at `path`.
fn ext_authz_service(
    path: &std::path::Path,
    limiter: Arc<Limiter>,
    secrets: Vec<Secret>,
) -> anyhow::Result<crate::ext_authz::ExtAuthzService> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut config = sluice_admission::config::FilterConfig::from_json(&bytes)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    // ext_authz lives next to the endpoint: it signs with the same secrets
    // unless its own config names others.
    if config.deferral.secrets.is_empty() {
        config.deferral.secrets = secrets;
    }
    for warning in config.warnings() {
        tracing::warn!(config = %path.display(), "{warning}");
    }
    // The Hugging Face tokenizers of model_tokenizers, loaded now: a file
    // that is missing or unsupported stops the start with its reason.
    let started = std::time::Instant::now();
    let encoders = sluice_admission::encoders::BpeEncoders::load(&config)
        .map_err(|e| anyhow::anyhow!("{}: model_tokenizers: {e}", path.display()))?;
    tracing::info!(
        config = %path.display(),
        tokenizers = config.tokenizer_files().count(),
        load_ms = started.elapsed().as_millis() as u64,
        "ext_authz front door enabled"
    );
    Ok(crate::ext_authz::ExtAuthzService::with_encoders(
        limiter, config, encoders,
    ))
}

/// Starts the xDS client (waiting for its first config if `wait`); returns
/// the shutdown future that also stops it.
async fn start_xds(
    options: XdsOptions,
    limiter: Arc<Limiter>,
    wait: bool,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>> {
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let (client, mut versions) = XdsClient::new(options.clone(), limiter);
    tokio::spawn(client.run(async move {
        let mut stopped = stopped;
        let _ = stopped.wait_for(|stop| *stop).await;
    }));
    let mut shutdown = Box::pin(shutdown);
    if wait {
        tracing::info!(server = %options.server, "waiting for the first limits from xDS");
        tokio::select! {
            _ = &mut shutdown => {
                let _ = stop.send(true);
                anyhow::bail!("stopped before the first limits arrived from xDS");
            }
            first = versions.wait_for(Option::is_some) => {
                first.map_err(|_| anyhow::anyhow!("the xDS client stopped"))?;
            }
        }
    }
    Ok(Box::pin(async move {
        shutdown.await;
        let _ = stop.send(true);
    }))
}
