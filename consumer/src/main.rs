//! `sluice-consumer`: drains the deferred-request LiteTopics at each bucket's
//! pace and streams the model's answers into Redis.
#![recursion_limit = "256"] // rocketmq-client futures are deeply nested

use anyhow::Context;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{get, put};
use axum::Router;
use clap::Parser;
use serde::Deserialize;
use sluice_consumer::keys::Dimension;
use sluice_consumer::pacing::{RateSetting, Scope};
use sluice_consumer::runner::{Runner, RunnerOptions, RunnerParts};
use sluice_consumer::{
    connect, Consumer, ConsumerConfig, InFlightLimits, LimitsConfig, Metrics, Pacer, PacingConfig,
    RedisOptions,
};
use sluice_litetopic::{LiteAdmin, LiteClient, LiteConfig, LiteConsumer, LiteProducer};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "sluice-consumer",
    version,
    about = "Paced consumer of Sluice's deferred LLM requests"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// YAML file: backend, stream, idempotency, pacing, limits (see consumer/README.md).
    #[arg(long, env = "SLUICE_CONSUMER_CONFIG", global = true)]
    config: Option<PathBuf>,
    #[arg(long, env = "SLUICE_NAMESRV", default_value = "127.0.0.1:9876")]
    namesrv: String,
    #[arg(long, env = "SLUICE_LITE_PARENT", default_value = "sluice-deferred")]
    lite_parent: String,
    #[arg(long, env = "SLUICE_CONSUMER_GROUP", default_value = "sluice-consumer")]
    group: String,
    #[arg(
        long,
        env = "SLUICE_REDIS_URL",
        default_value = "redis://127.0.0.1:6379",
        hide_env_values = true,
        global = true
    )]
    redis_url: String,
    /// Backend base URL for models without their own entry in the config file.
    #[arg(long, env = "SLUICE_BACKEND_URL")]
    backend_url: Option<String>,
    /// Admin HTTP: /metrics, /healthz, and runtime rate changes.
    #[arg(
        long,
        env = "SLUICE_CONSUMER_ADMIN_ADDR",
        default_value = "0.0.0.0:9092"
    )]
    admin_addr: SocketAddr,
    /// Unique id of this instance in the group (default: host name + pid).
    #[arg(long, env = "SLUICE_CONSUMER_ID")]
    id: Option<String>,
    /// An instance silent for this long is gone and its buckets move to the others.
    #[arg(long, env = "SLUICE_MEMBERSHIP_TTL_MS", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(1_000..))]
    membership_ttl_ms: u64,
    /// Unsubscribe a bucket after this long without requests (and nothing queued).
    #[arg(long, env = "SLUICE_IDLE_TTL_S", default_value_t = 600,
          value_parser = clap::value_parser!(u64).range(1..))]
    idle_ttl_s: u64,
    /// At SIGTERM, held messages go back to the queue at once; running calls get this long.
    #[arg(long, env = "SLUICE_SHUTDOWN_GRACE_S", default_value_t = 30)]
    shutdown_grace_s: u64,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Show or change pacing rates at run time (in Redis: every consumer
    /// instance applies a change on its next admission, no restart).
    #[command(subcommand)]
    Rates(RatesCommand),
}

#[derive(clap::Subcommand)]
enum RatesCommand {
    /// Overrides of one model column, or of every column with overrides (JSON).
    Show { model: Option<String> },
    /// The rates one bucket runs at now (configured defaults, overrides, factor).
    Effective { model: String, tenant: String },
    /// Set the rates of a model column, or of one bucket with --tenant.
    Set {
        model: String,
        #[arg(long)]
        tenant: Option<String>,
        /// Requests per second, or `unlimited`.
        #[arg(long)]
        rps: Option<String>,
        /// Tokens per second, or `unlimited`.
        #[arg(long)]
        tps: Option<String>,
    },
    /// Remove overrides (the scope inherits again); both dimensions unless one is named.
    Clear {
        model: String,
        #[arg(long)]
        tenant: Option<String>,
        #[arg(long)]
        rps: bool,
        #[arg(long)]
        tps: bool,
    },
    /// Scale every bucket of a model column (0 pauses it, 1 is neutral); `--clear` resets.
    Factor {
        model: String,
        #[arg(required_unless_present = "clear")]
        factor: Option<f64>,
        #[arg(long)]
        clear: bool,
    },
}

#[derive(Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct FileConfig {
    #[serde(flatten)]
    consumer: ConsumerConfig,
    pacing: PacingConfig,
    limits: LimitsConfig,
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .try_init();
    match run(Cli::parse()).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("sluice-consumer: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    if let Some(Command::Rates(command)) = &cli.command {
        return rates(&cli, command).await;
    }
    let mut file = read_config(&cli)?;
    if let Some(url) = &cli.backend_url {
        file.consumer.backend.default.base_url = url.clone();
    }
    let id = cli.id.clone().unwrap_or_else(|| {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "consumer".into());
        format!("{host}-{}", std::process::id())
    });
    let metrics = Arc::new(Metrics::new(10_000, 1_000));
    let redis = connect(&RedisOptions {
        url: cli.redis_url.clone(),
        ..Default::default()
    })
    .context("invalid Redis URL")?;
    let consumer = Arc::new(Consumer::new(
        redis.clone(),
        &id,
        file.consumer,
        metrics.clone(),
    )?);
    let pacer = Arc::new(Pacer::new(
        redis.clone(),
        file.pacing,
        Some(metrics.clone()),
    )?);
    let limits = Arc::new(InFlightLimits::new(file.limits, Some(metrics.clone())));
    if let Err(error) = consumer.preload().await {
        tracing::warn!(%error, "Redis not reachable yet");
    }

    let client = LiteClient::connect(LiteConfig::new(cli.namesrv.clone()))?;
    let admin = LiteAdmin::new(&client)
        .await
        .context("cannot reach the RocketMQ name server")?;
    admin.ensure_parent_topic(&cli.lite_parent).await?;
    admin
        .ensure_consumer_group(&cli.group, &cli.lite_parent)
        .await?;
    admin.shutdown().await;
    let lite = Arc::new(LiteConsumer::new(&client, &cli.group, &cli.lite_parent).await?);
    let producer = Arc::new(LiteProducer::new(&client, "sluice-consumer-retry").await?);

    let admin_listener = tokio::net::TcpListener::bind(cli.admin_addr)
        .await
        .with_context(|| format!("cannot listen on {}", cli.admin_addr))?;
    tracing::info!(id = %id, namesrv = %cli.namesrv, admin = %admin_listener.local_addr()?, "sluice-consumer started");
    let router = admin_router(metrics.clone(), pacer.clone());
    tokio::spawn(async move {
        if let Err(error) = axum::serve(admin_listener, router).await {
            tracing::error!(%error, "admin server stopped");
        }
    });

    let runner = Runner::new(
        RunnerParts {
            lite,
            producer,
            consumer,
            pacer,
            limits,
            redis,
            metrics,
            id: id.clone(),
        },
        RunnerOptions {
            parent: cli.lite_parent.clone(),
            membership_ttl: Duration::from_millis(cli.membership_ttl_ms),
            idle_ttl: Duration::from_secs(cli.idle_ttl_s),
            retire_interval: Duration::from_secs(cli.idle_ttl_s.clamp(1, 30)),
            shutdown_grace: Duration::from_secs(cli.shutdown_grace_s),
            ..Default::default()
        },
    );
    runner.run(shutdown_signal()).await;
    drop(client);
    Ok(())
}

fn read_config(cli: &Cli) -> anyhow::Result<FileConfig> {
    Ok(match &cli.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            serde_yaml::from_str(&text)
                .with_context(|| format!("{}: invalid consumer config", path.display()))?
        }
        None => FileConfig::default(),
    })
}

/// `sluice-consumer rates ...`: the admin API's rate changes, straight in Redis.
async fn rates(cli: &Cli, command: &RatesCommand) -> anyhow::Result<()> {
    let file = read_config(cli)?;
    let redis = connect(&RedisOptions {
        url: cli.redis_url.clone(),
        ..Default::default()
    })
    .context("invalid Redis URL")?;
    let pacer = Pacer::new(redis, file.pacing, None)?;
    let parse = |key: &str, value: &Option<String>| -> anyhow::Result<Option<Option<f64>>> {
        let mut query = HashMap::new();
        if let Some(v) = value {
            query.insert(key.to_string(), v.clone());
        }
        Ok(setting(&query, key)
            .map_err(|e| {
                anyhow::anyhow!(
                    "--{}: {e}",
                    if key.starts_with('r') { "rps" } else { "tps" }
                )
            })?
            .map(|s| match s {
                RateSetting::Unlimited => None,
                RateSetting::PerSecond(r) => Some(r),
            }))
    };
    match command {
        RatesCommand::Show { model } => {
            let models = match model {
                Some(m) => vec![m.clone()],
                None => pacer.models_with_overrides().await?,
            };
            let mut out = serde_json::Map::new();
            for m in models {
                let overrides = pacer.column_overrides(&m).await?;
                out.insert(m, serde_json::to_value(overrides)?);
            }
            println!("{}", serde_json::to_string_pretty(&out)?);
        }
        RatesCommand::Effective { model, tenant } => {
            let rates = pacer.effective_rates(tenant, model).await?;
            println!("{}", serde_json::to_string_pretty(&rates)?);
        }
        RatesCommand::Set {
            model,
            tenant,
            rps,
            tps,
        } => {
            let (rps, tps) = (
                parse("requests_per_second", rps)?,
                parse("tokens_per_second", tps)?,
            );
            anyhow::ensure!(
                rps.is_some() || tps.is_some(),
                "give --rps and/or --tps (a number or `unlimited`)"
            );
            let scope = scope_of(model, tenant.as_deref());
            for (dimension, rate) in [(Dimension::Requests, rps), (Dimension::Tokens, tps)] {
                if let Some(rate) = rate {
                    pacer.set_rate(scope, dimension, rate).await?;
                }
            }
            println!("applied");
        }
        RatesCommand::Clear {
            model,
            tenant,
            rps,
            tps,
        } => {
            let scope = scope_of(model, tenant.as_deref());
            let both = !rps && !tps;
            if *rps || both {
                pacer.clear_rate(scope, Dimension::Requests).await?;
            }
            if *tps || both {
                pacer.clear_rate(scope, Dimension::Tokens).await?;
            }
            println!("cleared");
        }
        RatesCommand::Factor {
            model,
            factor,
            clear,
        } => {
            match (clear, factor) {
                (true, _) => pacer.clear_model_factor(model).await?,
                (false, Some(f)) => pacer.set_model_factor(model, *f).await?,
                (false, None) => anyhow::bail!("give a factor or --clear"),
            }
            println!("applied");
        }
    }
    Ok(())
}

fn scope_of<'a>(model: &'a str, tenant: Option<&'a str>) -> Scope<'a> {
    match tenant {
        Some(tenant) => Scope::Bucket { tenant, model },
        None => Scope::Column { model },
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! { _ = ctrl_c => {}, _ = terminate => {} }
}

#[derive(Clone)]
struct AdminState {
    metrics: Arc<Metrics>,
    pacer: Arc<Pacer>,
}

fn admin_router(metrics: Arc<Metrics>, pacer: Arc<Pacer>) -> Router {
    Router::new()
        .route(
            "/metrics",
            get(|State(s): State<AdminState>| async move { s.metrics.encode() }),
        )
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/rates", get(list_rates))
        .route("/rates/{model}", put(set_column))
        .route("/rates/{model}/{tenant}", put(set_bucket))
        .route("/factor/{model}", put(set_factor))
        .with_state(AdminState { metrics, pacer })
}

fn setting(query: &HashMap<String, String>, key: &str) -> Result<Option<RateSetting>, String> {
    match query.get(key).map(String::as_str) {
        None => Ok(None),
        Some("unlimited") => Ok(Some(RateSetting::Unlimited)),
        Some(v) => v
            .parse::<f64>()
            .ok()
            .filter(|r| r.is_finite() && *r >= 0.0)
            .map(|r| Some(RateSetting::PerSecond(r)))
            .ok_or_else(|| format!("{key} must be a non-negative number or 'unlimited'")),
    }
}

async fn apply(
    pacer: &Pacer,
    scope: Scope<'_>,
    query: &HashMap<String, String>,
) -> (StatusCode, String) {
    let (rps, tps) = match (
        setting(query, "requests_per_second"),
        setting(query, "tokens_per_second"),
    ) {
        (Ok(r), Ok(t)) => (r, t),
        (Err(e), _) | (_, Err(e)) => return (StatusCode::BAD_REQUEST, format!("{e}\n")),
    };
    if rps.is_none() && tps.is_none() {
        return (
            StatusCode::BAD_REQUEST,
            "set requests_per_second and/or tokens_per_second\n".into(),
        );
    }
    for (dimension, value) in [(Dimension::Requests, rps), (Dimension::Tokens, tps)] {
        let Some(value) = value else { continue };
        let rate = match value {
            RateSetting::Unlimited => None,
            RateSetting::PerSecond(r) => Some(r),
        };
        if let Err(e) = pacer.set_rate(scope, dimension, rate).await {
            return (StatusCode::BAD_REQUEST, format!("{e}\n"));
        }
    }
    (StatusCode::OK, "applied\n".into())
}

/// `GET /rates`: every model column's overrides, as JSON.
async fn list_rates(State(s): State<AdminState>) -> impl IntoResponse {
    let listing = async {
        let mut out = serde_json::Map::new();
        for model in s.pacer.models_with_overrides().await? {
            let overrides = s.pacer.column_overrides(&model).await?;
            out.insert(model, serde_json::to_value(overrides).unwrap_or_default());
        }
        Ok::<_, sluice_consumer::pacing::PacingError>(serde_json::Value::Object(out))
    };
    match listing.await {
        Ok(json) => (
            StatusCode::OK,
            [("content-type", "application/json")],
            format!("{json}\n"),
        ),
        Err(e) => (
            StatusCode::SERVICE_UNAVAILABLE,
            [("content-type", "text/plain")],
            format!("{e}\n"),
        ),
    }
}

/// `PUT /rates/<model>?requests_per_second=2&tokens_per_second=unlimited`
async fn set_column(
    State(s): State<AdminState>,
    Path(model): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> impl IntoResponse {
    apply(&s.pacer, Scope::Column { model: &model }, &q).await
}

/// `PUT /rates/<model>/<tenant>?requests_per_second=0.5`
async fn set_bucket(
    State(s): State<AdminState>,
    Path((model, tenant)): Path<(String, String)>,
    Query(q): Query<HashMap<String, String>>,
) -> impl IntoResponse {
    apply(
        &s.pacer,
        Scope::Bucket {
            tenant: &tenant,
            model: &model,
        },
        &q,
    )
    .await
}

/// `PUT /factor/<model>?factor=0.5`: tightens (or loosens) every bucket of the model.
async fn set_factor(
    State(s): State<AdminState>,
    Path(model): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> impl IntoResponse {
    let Some(factor) = q.get("factor").and_then(|f| f.parse::<f64>().ok()) else {
        return (
            StatusCode::BAD_REQUEST,
            "factor=<number> required\n".to_string(),
        );
    };
    match s.pacer.set_model_factor(&model, factor).await {
        Ok(()) => (StatusCode::OK, "applied\n".into()),
        Err(e) => (StatusCode::BAD_REQUEST, format!("{e}\n")),
    }
}
