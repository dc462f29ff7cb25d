//! `sluice-rls`: the Sluice rate-limit service.
#![recursion_limit = "256"] // rocketmq-client futures are deeply nested

use anyhow::Context;
use clap::{Parser, Subcommand};
use sluice_ratelimit::config::LimitsConfig;
use sluice_ratelimit::deferral::caps::{self, BucketCaps, CapLimits, CapsMetrics};
use sluice_ratelimit::deferral::endpoint::EndpointMetrics;
use sluice_ratelimit::limiter::{Limiter, SystemClock};
use sluice_ratelimit::metrics::Metrics;
use sluice_ratelimit::server::{self, Deps};
use sluice_ratelimit::store::{
    CounterStore, CountingMode, MemoryStore, RedisStore, RedisStoreOptions,
};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

// glibc's malloc serialises on arena locks under many small, short-lived
// allocations (h2 frames, protobuf messages); mimalloc does not.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "sluice-rls",
    version,
    about = "Envoy rate limit service (RLS v3) with token-aware limits for LLM traffic"
)]
struct Cli {
    /// Check a limits file or directory, print what it holds, and exit (status 1 on error).
    #[arg(long, value_name = "FILE|DIR")]
    validate: Option<PathBuf>,

    #[command(flatten)]
    serve: ServeArgs,

    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(clap::Args)]
struct ServeArgs {
    /// Limits file, or a directory of *.yaml files (envoyproxy/ratelimit format).
    #[arg(long, env = "SLUICE_RLS_CONFIG", value_name = "FILE|DIR")]
    config: Option<PathBuf>,

    /// gRPC listen address (Envoy's rate_limit_service cluster points here).
    #[arg(long, env = "SLUICE_RLS_GRPC_ADDR", default_value = "0.0.0.0:8081")]
    grpc_addr: SocketAddr,

    /// Admin HTTP address: /metrics, /healthz, /readyz (read-only). Loopback
    /// by default: bind 0.0.0.0:9091 for Prometheus and kubelet probes.
    #[arg(long, env = "SLUICE_RLS_ADMIN_ADDR", default_value = "127.0.0.1:9091")]
    admin_addr: SocketAddr,

    /// Where counters live: `memory` (one instance) or `redis` (shared).
    #[arg(long, env = "SLUICE_RLS_STORE", value_enum, default_value = "memory")]
    store: StoreKind,

    /// Redis URL for `--store redis`: redis://[:password@]host:port[/db], rediss:// for TLS.
    #[arg(
        long,
        env = "SLUICE_REDIS_URL",
        default_value = "redis://127.0.0.1:6379",
        hide_env_values = true
    )]
    redis_url: String,

    /// Multiplexed Redis connections.
    #[arg(long, env = "SLUICE_REDIS_CONNECTIONS", default_value_t = 4)]
    redis_connections: usize,

    /// Deadline of one Redis round trip, in milliseconds.
    #[arg(long, env = "SLUICE_REDIS_TIMEOUT_MS", default_value_t = 250)]
    redis_timeout_ms: u64,

    /// `all-or-nothing`: an over-limit request moves no counter;
    /// `increment-all`: envoyproxy/ratelimit's behaviour.
    #[arg(
        long,
        env = "SLUICE_RLS_COUNTING",
        value_enum,
        default_value = "all-or-nothing"
    )]
    counting: CountingMode,

    /// How often to look for config changes, in milliseconds (0 disables hot reload).
    #[arg(long, env = "SLUICE_RLS_RELOAD_MS", default_value_t = 2000)]
    reload_ms: u64,

    /// Serve Envoy's ext_authz API too, with this admission config (the Wasm
    /// filter's JSON plugin configuration).
    #[arg(long, env = "SLUICE_EXT_AUTHZ_CONFIG", value_name = "FILE.json")]
    ext_authz_config: Option<PathBuf>,

    /// Serve the deferral endpoint (deferred requests wait here for their
    /// answer) on this address. Needs --namesrv and Redis (--redis-url).
    #[arg(long, env = "SLUICE_DEFERRAL_ADDR")]
    deferral_addr: Option<SocketAddr>,

    /// RocketMQ name server, for queuing deferred requests.
    #[arg(long, env = "SLUICE_NAMESRV", default_value = "127.0.0.1:9876")]
    namesrv: String,

    /// Parent topic of the per tenant × model LiteTopics.
    #[arg(long, env = "SLUICE_LITE_PARENT", default_value = "sluice-deferred")]
    lite_parent: String,

    /// Consumer group bound to the parent topic (created if missing).
    #[arg(long, env = "SLUICE_CONSUMER_GROUP", default_value = "sluice-consumer")]
    consumer_group: String,

    /// File of secrets shared with the filter / ext_authz, one per line (at
    /// least 32 bytes each): a deferred request is served only with a token
    /// signed by one of them. The first also signs resume tokens and
    /// ext_authz's deferrals; list the new one second while rotating.
    #[arg(long, env = "SLUICE_DEFERRAL_SECRET_FILE", value_name = "FILE")]
    deferral_secret_file: Option<PathBuf>,

    /// The same secrets, comma-separated, from the environment (after those
    /// of --deferral-secret-file).
    #[arg(long, env = "SLUICE_DEFERRAL_SECRETS", hide_env_values = true)]
    deferral_secrets: Option<String>,

    /// Oldest deferral token accepted, in seconds (also the clock skew
    /// allowed between Envoy and sluice-rls).
    #[arg(long, env = "SLUICE_DEFERRAL_TOKEN_MAX_AGE_S", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    deferral_token_max_age_s: u64,

    /// Longest a deferred request waits for its answer, in seconds.
    #[arg(long, env = "SLUICE_DEFERRAL_TIMEOUT_S", default_value_t = 600)]
    deferral_timeout_s: u64,

    /// Largest deferred request body; larger: 413 (same as the filter's max_body_bytes).
    #[arg(long, env = "SLUICE_DEFERRAL_MAX_BODY_BYTES", default_value_t = sluice_admission::config::DEFAULT_MAX_BODY_BYTES)]
    deferral_max_body_bytes: usize,

    /// A deferred request body not complete this long after its headers: 408.
    #[arg(long, env = "SLUICE_DEFERRAL_BODY_TIMEOUT_MS", default_value_t = sluice_admission::config::DEFAULT_BODY_TIMEOUT_MS)]
    deferral_body_timeout_ms: u64,

    /// Deferred requests held open at once; beyond it: 503.
    #[arg(long, env = "SLUICE_DEFERRAL_MAX_IN_FLIGHT", default_value_t = 10_000)]
    deferral_max_in_flight: usize,

    /// Low-priority requests fail fast (429, Retry-After) when their tenant ×
    /// model queue already holds this many unclaimed requests.
    #[arg(long, env = "SLUICE_LOW_PRIORITY_MAX_BACKLOG", default_value_t = 100)]
    low_priority_max_backlog: u64,

    /// Most deferral buckets (tenant × model queues) in all; a request that
    /// would open one more gets 503 `bucket_capacity`. At least 1.
    #[arg(long, env = "SLUICE_DEFERRAL_MAX_BUCKETS", default_value_t = caps::DEFAULT_MAX_BUCKETS, value_parser = clap::value_parser!(u64).range(1..))]
    deferral_max_buckets: u64,

    /// Most deferral buckets (models) per tenant; beyond: 429
    /// `tenant_bucket_limit`. At least 1, at most --deferral-max-buckets.
    #[arg(long, env = "SLUICE_DEFERRAL_MAX_BUCKETS_PER_TENANT", default_value_t = caps::DEFAULT_MAX_BUCKETS_PER_TENANT, value_parser = clap::value_parser!(u64).range(1..))]
    deferral_max_buckets_per_tenant: u64,

    /// New deferral buckets per minute, all tenants together; beyond: 429
    /// `bucket_rate_limit`. At least 1.
    #[arg(long, env = "SLUICE_DEFERRAL_MAX_NEW_BUCKETS_PER_MINUTE", default_value_t = caps::DEFAULT_MAX_NEW_BUCKETS_PER_MINUTE, value_parser = clap::value_parser!(u64).range(1..))]
    deferral_max_new_buckets_per_minute: u64,

    /// Redis connections reading response streams (each waits on many).
    #[arg(long, env = "SLUICE_STREAM_READERS", default_value_t = 4)]
    stream_readers: usize,

    /// In-process mode, for small installs: run the consumer in this process
    /// too; chunks of requests waiting here skip the Redis Stream. In-flight
    /// requests die with the process and streams cannot be resumed. Needs
    /// --deferral-addr.
    #[arg(long, env = "SLUICE_IN_PROCESS_CONSUMER", requires = "deferral_addr")]
    in_process_consumer: bool,

    /// In-process mode: the consumer's YAML (backend, pacing, limits; see consumer/README.md).
    #[arg(long, env = "SLUICE_CONSUMER_CONFIG", requires = "in_process_consumer")]
    consumer_config: Option<PathBuf>,

    /// In-process mode: backend base URL for models without their own entry.
    #[arg(long, env = "SLUICE_BACKEND_URL", requires = "in_process_consumer")]
    backend_url: Option<String>,

    /// In-process mode: the consumer's admin API (/metrics, rate changes).
    /// Loopback by default; bound elsewhere, writes need the admin token.
    #[arg(
        long,
        env = "SLUICE_CONSUMER_ADMIN_ADDR",
        default_value = "127.0.0.1:9092",
        requires = "in_process_consumer"
    )]
    consumer_admin_addr: SocketAddr,

    /// In-process mode: file holding the bearer token of the consumer admin
    /// API's writes (else $SLUICE_ADMIN_TOKEN). sluice-rls's own admin is read-only.
    #[arg(long, env = sluice_consumer::admin_auth::ADMIN_TOKEN_FILE_ENV)]
    admin_token_file: Option<PathBuf>,

    /// Log format.
    #[arg(long, env = "SLUICE_LOG_FORMAT", value_enum, default_value = "text")]
    log_format: LogFormat,
}

#[derive(Subcommand)]
enum Command {
    /// Ask a running service for one decision and print it (for operators and smoke tests).
    Query {
        /// gRPC address of the service.
        #[arg(long, default_value = "http://127.0.0.1:8081")]
        addr: String,
        #[arg(long)]
        domain: String,
        /// A descriptor as key=value[,key=value...]; repeat for several.
        #[arg(long = "descriptor", required = true)]
        descriptors: Vec<String>,
        /// Request-level hits_addend.
        #[arg(long, default_value_t = 1)]
        hits: u32,
    },
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum StoreKind {
    Memory,
    Redis,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    init_tracing(cli.serve.log_format);
    let result = if let Some(path) = &cli.validate {
        validate(path)
    } else {
        match cli.command {
            Some(Command::Query {
                addr,
                domain,
                descriptors,
                hits,
            }) => query(addr, domain, descriptors, hits).await,
            None => serve(cli.serve).await,
        }
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("sluice-rls: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn init_tracing(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

fn validate(path: &std::path::Path) -> anyhow::Result<()> {
    let config = LimitsConfig::load(path)?;
    let mut domains: Vec<&str> = config.domains().collect();
    domains.sort_unstable();
    println!(
        "{}: OK — {} file(s), {} domain(s) [{}], {} limit(s)",
        path.display(),
        config.files().len(),
        domains.len(),
        domains.join(", "),
        config.limit_count()
    );
    Ok(())
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let config_path = args
        .config
        .clone()
        .context("no limits configuration: pass --config FILE|DIR or set SLUICE_RLS_CONFIG")?;
    let config = LimitsConfig::load(&config_path).context("refusing to start")?;

    let store: Arc<dyn CounterStore> = match args.store {
        StoreKind::Memory => Arc::new(MemoryStore::new()),
        StoreKind::Redis => {
            // rustls needs a process-wide crypto provider for rediss:// URLs.
            let _ = rustls::crypto::ring::default_provider().install_default();
            let options = RedisStoreOptions {
                url: args.redis_url.clone(),
                connections: args.redis_connections,
                timeout: Duration::from_millis(args.redis_timeout_ms),
            };
            let store = RedisStore::new(&options)?;
            let redacted = sluice_ratelimit::store::redact_url(&args.redis_url);
            match store.preload().await {
                Ok(()) => tracing::info!(redis = %redacted, "connected to Redis"),
                // Start anyway: /readyz reports it and decisions answer UNAVAILABLE until Redis is back.
                Err(error) => tracing::warn!(redis = %redacted, %error, "Redis not reachable yet"),
            }
            Arc::new(store)
        }
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
    let mut metrics = Metrics::new();
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
    let secrets = sluice_ratelimit::deferral::secrets::load(
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
            Some(sluice_ratelimit::ext_authz::ExtAuthzService::new(
                limiter.clone(),
                config,
            ))
        }
        None => None,
    };
    let local = args
        .in_process_consumer
        .then(sluice_consumer::local::LocalBus::new);
    let deferral = match args.deferral_addr {
        Some(addr) => Some(
            deferral_endpoint(
                &args,
                addr,
                secrets,
                endpoint_metrics,
                caps_metrics,
                local.clone(),
            )
            .await?,
        ),
        None => None,
    };
    let (consumer_stop, consumer_task) = match local {
        Some(bus) => {
            let (stop, task) = in_process_consumer(&args, bus).await?;
            (Some(stop), Some(task))
        }
        None => (None, None),
    };
    let deps = Deps {
        limiter,
        config_path: Some(config_path),
        reload_interval: Duration::from_millis(args.reload_ms),
        ext_authz,
        deferral,
    };
    server::run(grpc, Some(admin), deps, shutdown_signal()).await?;
    if let (Some(stop), Some(task)) = (consumer_stop, consumer_task) {
        let _ = stop.send(());
        let _ = task.await;
    }
    tracing::info!("sluice-rls stopped");
    Ok(())
}

/// In-process mode: the consumer's pop loop and admin API in this process.
async fn in_process_consumer(
    args: &ServeArgs,
    bus: Arc<sluice_consumer::local::LocalBus>,
) -> anyhow::Result<(
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
)> {
    use sluice_consumer::admin_auth::{self, WritePolicy};
    use sluice_consumer::embedded::{self, FileConfig, StartOptions};
    let mut file = FileConfig::load(args.consumer_config.as_deref())?;
    let admin_token = admin_auth::load_token(args.admin_token_file.as_deref())?;
    if let Some(url) = &args.backend_url {
        file.consumer.backend.default.base_url = url.clone();
    }
    let started = embedded::start(StartOptions {
        file,
        namesrv: args.namesrv.clone(),
        parent: args.lite_parent.clone(),
        group: args.consumer_group.clone(),
        redis_url: args.redis_url.clone(),
        id: embedded::default_id(),
        runner: Default::default(),
        local: Some(bus),
    })
    .await
    .context("in-process consumer")?;
    let listener = tokio::net::TcpListener::bind(args.consumer_admin_addr)
        .await
        .with_context(|| {
            format!(
                "cannot listen on {} (consumer admin)",
                args.consumer_admin_addr
            )
        })?;
    let admin_addr = listener.local_addr()?;
    tracing::info!(admin = %admin_addr, "in-process consumer started");
    let writes = WritePolicy::for_listener(admin_addr, admin_token);
    writes.log_startup("consumer admin API", admin_addr);
    let router =
        sluice_consumer::admin::router(started.metrics.clone(), started.pacer.clone(), writes);
    tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, router).await {
            tracing::error!(%error, "consumer admin server stopped");
        }
    });
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        started
            .runner
            .clone()
            .run(async move {
                let _ = stopped.await;
            })
            .await;
        drop(started.client);
    });
    Ok((stop, task))
}

async fn deferral_endpoint(
    args: &ServeArgs,
    addr: SocketAddr,
    secrets: Vec<sluice_admission::deferral::Secret>,
    metrics: Arc<EndpointMetrics>,
    caps_metrics: CapsMetrics,
    local: Option<Arc<sluice_consumer::local::LocalBus>>,
) -> anyhow::Result<(tokio::net::TcpListener, axum::Router)> {
    use sluice_ratelimit::deferral::{endpoint, hub, publisher::LitePublisher};
    let caps = BucketCaps::new(
        CapLimits {
            max_buckets: args.deferral_max_buckets,
            max_buckets_per_tenant: args.deferral_max_buckets_per_tenant,
            max_new_buckets_per_minute: args.deferral_max_new_buckets_per_minute,
            ..Default::default()
        },
        caps_metrics,
    )
    .context("invalid deferral bucket caps")?;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let redacted = sluice_ratelimit::store::redact_url(&args.redis_url);
    let client = redis::Client::open(args.redis_url.as_str())
        .map_err(|e| anyhow::anyhow!("invalid Redis URL {redacted}: {:?}", e.kind()))?;
    let hub = hub::StreamHub::start(
        client.clone(),
        hub::HubOptions {
            readers: args.stream_readers,
            ..Default::default()
        },
    )?;
    let control = redis::aio::ConnectionManager::new_lazy_with_config(
        client,
        redis::aio::ConnectionManagerConfig::new()
            .set_response_timeout(Some(Duration::from_secs(2))),
    )?;
    let publisher = LitePublisher::connect(
        &args.namesrv,
        &args.lite_parent,
        &args.consumer_group,
        control.clone(),
    )
    .await
    .with_context(|| format!("cannot reach the RocketMQ name server at {}", args.namesrv))?
    .with_caps(caps);
    let options = endpoint::EndpointOptions {
        timeout: Duration::from_secs(args.deferral_timeout_s),
        max_in_flight: args.deferral_max_in_flight,
        max_body_bytes: args.deferral_max_body_bytes,
        body_timeout: Duration::from_millis(args.deferral_body_timeout_ms),
        low_priority_max_backlog: args.low_priority_max_backlog,
        secrets,
        token_max_age: Duration::from_secs(args.deferral_token_max_age_s),
        ..Default::default()
    };
    let router = endpoint::router_with_local(
        hub,
        std::sync::Arc::new(publisher),
        control,
        options,
        metrics,
        local,
    );
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr} (deferral endpoint)"))?;
    tracing::info!(addr = %listener.local_addr()?, namesrv = %args.namesrv, parent = %args.lite_parent, "deferral endpoint listening");
    Ok((listener, router))
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = terminate => {},
    }
    tracing::info!("shutting down: draining in-flight calls");
}

async fn query(
    addr: String,
    domain: String,
    descriptors: Vec<String>,
    hits: u32,
) -> anyhow::Result<()> {
    use sluice_proto::pb::envoy::extensions::common::ratelimit::v3::{
        rate_limit_descriptor::Entry, RateLimitDescriptor,
    };
    use sluice_proto::pb::envoy::service::ratelimit::v3::{
        rate_limit_service_client::RateLimitServiceClient, RateLimitRequest,
    };
    let descriptors = descriptors
        .iter()
        .map(|text| {
            let entries = text
                .split(',')
                .map(|pair| {
                    let (key, value) = pair
                        .split_once('=')
                        .with_context(|| format!("descriptor entry '{pair}' is not key=value"))?;
                    Ok(Entry {
                        key: key.to_string(),
                        value: value.to_string(),
                    })
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            Ok(RateLimitDescriptor {
                entries,
                ..Default::default()
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut client = RateLimitServiceClient::connect(addr.clone())
        .await
        .with_context(|| format!("cannot connect to {addr}"))?;
    let response = client
        .should_rate_limit(RateLimitRequest {
            domain,
            descriptors,
            hits_addend: hits,
        })
        .await?
        .into_inner();
    let code = |c: i32| match c {
        1 => "OK",
        2 => "OVER_LIMIT",
        _ => "UNKNOWN",
    };
    println!("overall: {}", code(response.overall_code));
    for (index, status) in response.statuses.iter().enumerate() {
        let limit = status
            .current_limit
            .as_ref()
            .map(|l| {
                let unit = sluice_ratelimit::window::Unit::from_proto(l.unit)
                    .map(|u| u.as_str())
                    .unwrap_or("?");
                format!("{} ({}/{unit})", l.name, l.requests_per_unit)
            })
            .unwrap_or_else(|| "no limit".into());
        let reset = status
            .duration_until_reset
            .as_ref()
            .map(|d| format!("{}.{:03}s", d.seconds, d.nanos / 1_000_000))
            .unwrap_or_else(|| "-".into());
        println!(
            "  descriptor {index}: {} limit={limit} remaining={} reset={reset}",
            code(status.code),
            status.limit_remaining
        );
    }
    for header in &response.response_headers_to_add {
        println!("  header {}: {}", header.key, header.value);
    }
    Ok(())
}
