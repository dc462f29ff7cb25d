//! The whole consumer as one library call: `sluice-consumer` runs it, and so
//! does `sluice-rls` in in-process mode (deferral endpoint and consumer in
//! one process, chunks over [`crate::local::LocalBus`]).

use crate::local::LocalBus;
use crate::queue::runner::{Runner, RunnerOptions, RunnerParts};
use crate::sharing::control_loop::{Adaptive, Controls, PrometheusSource, SCRAPE_TIMEOUT};
use crate::sharing::controller::{ControllerConfig, SignalConfig};
use crate::sharing::fair::{FairConfig, FairShare, Weights};
use crate::{
    connect, ConfigError, InFlightConfig, InFlightLimits, Metrics, Pacer, PacingConfig, Processor,
    ProcessorConfig, RedisOptions,
};
use serde::Deserialize;
use sluice_litetopic::{LiteAdmin, LiteClient, LiteConfig, LiteConsumer, LiteError, LiteProducer};
use std::path::Path;
use std::sync::Arc;

/// The consumer's YAML file: `backend`, `stream`, `idempotency`, `pacing`,
/// `limits` (consumer/README.md).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FileConfig {
    #[serde(flatten)]
    pub processor: ProcessorConfig,
    pub pacing: PacingConfig,
    pub limits: InFlightConfig,
    /// Adaptive concurrency per model (docs/operations.md).
    pub controller: ControllerConfig,
    /// Fair sharing of a model between tenants.
    pub fair: FairConfig,
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: invalid consumer config: {source}")]
    Parse {
        path: String,
        source: serde_yaml::Error,
    },
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Controller(#[from] crate::sharing::controller::ControlConfigError),
    #[error(transparent)]
    Weight(#[from] crate::sharing::fair::WeightError),
    #[error("Redis settings: {0}")]
    Redis(#[from] crate::RedisOptionsError),
    #[error(transparent)]
    Pacing(#[from] crate::pacing::pacer::PacingError),
    #[error("RocketMQ: {0}")]
    Broker(#[from] LiteError),
}

impl FileConfig {
    /// The file at `path`, or the built-in defaults without one.
    pub fn load(path: Option<&Path>) -> Result<Self, StartError> {
        let Some(path) = path else {
            return Ok(FileConfig::default());
        };
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| StartError::Read {
            path: shown.clone(),
            source,
        })?;
        serde_yaml::from_str(&text).map_err(|source| StartError::Parse {
            path: shown,
            source,
        })
    }
}

pub struct StartOptions {
    pub file: FileConfig,
    pub namesrv: String,
    pub parent: String,
    pub group: String,
    pub redis: RedisOptions,
    /// This instance's id in the consumer group.
    pub id: String,
    pub runner: RunnerOptions,
    /// In-process mode: chunks for clients waiting in this process.
    pub local: Option<Arc<LocalBus>>,
}

/// A consumer ready to run: `runner.run(shutdown)`.
pub struct Started {
    pub runner: Arc<Runner>,
    pub metrics: Arc<Metrics>,
    pub pacer: Arc<Pacer>,
    /// The broker connection the runner's consumer and producer live on.
    pub client: LiteClient,
}

/// Connects to Redis and the broker, makes sure the parent topic and the
/// consumer group exist (idempotent), and builds the runner.
pub async fn start(options: StartOptions) -> Result<Started, StartError> {
    options.file.controller.validate()?;
    options.file.fair.validate()?;
    let metrics = Arc::new(Metrics::new(10_000, 1_000));
    let redis = connect(&options.redis)?;
    let mut processor = Processor::new(
        redis.clone(),
        &options.id,
        options.file.processor,
        metrics.clone(),
    )?;
    if let Some(bus) = options.local {
        processor = processor.with_local_bus(bus);
    }
    if processor.claims_wait_for_replicas() {
        processor = processor.with_claim_connection(connect(&options.redis)?);
    }
    let processor = Arc::new(processor);
    let pacer = Arc::new(Pacer::new(
        redis.clone(),
        options.file.pacing,
        Some(metrics.clone()),
    )?);
    let limits = Arc::new(InFlightLimits::new(
        options.file.limits,
        Some(metrics.clone()),
    ));
    let adaptive = adaptive(
        &options.file.controller,
        &options.file.fair,
        (&redis, &limits, &metrics),
        options.runner.membership_ttl,
    );
    if let Err(error) = processor.preload().await {
        tracing::warn!(%error, "Redis not reachable yet");
    }
    let client = LiteClient::connect(LiteConfig::new(options.namesrv.clone()))?;
    let admin = LiteAdmin::new(&client).await?;
    admin
        .ensure_setup(
            &options.parent,
            &options.group,
            sluice_litetopic::SETUP_PATIENCE,
        )
        .await?;
    admin.shutdown().await;
    let lite = Arc::new(LiteConsumer::new(&client, &options.group, &options.parent).await?);
    let producer = Arc::new(LiteProducer::new(&client, "sluice-consumer-retry").await?);
    let runner = Runner::new(
        RunnerParts {
            lite,
            producer,
            processor,
            pacer: pacer.clone(),
            limits,
            redis,
            metrics: metrics.clone(),
            id: options.id,
            adaptive,
        },
        RunnerOptions {
            parent: options.parent,
            ..options.runner
        },
    );
    Ok(Started {
        runner,
        metrics,
        pacer,
        client,
    })
}

/// Fair sharing and controllers as configured (fair sharing is on for every
/// controlled model; weights refresh from Redis once a controller runs).
pub fn adaptive(
    controller: &ControllerConfig,
    fair: &FairConfig,
    (redis, limits, metrics): (&crate::RedisConn, &Arc<InFlightLimits>, &Arc<Metrics>),
    membership_ttl: std::time::Duration,
) -> Adaptive {
    let controlled: Vec<String> = controller
        .models
        .iter()
        .filter(|(_, c)| c.enabled())
        .map(|(m, _)| m.clone())
        .collect();
    let fair_models = fair.models(controlled.iter().cloned());
    let weights = Arc::new(Weights::new(fair.weights.clone()));
    let fair = (!matches!(fair_models, crate::sharing::fair::FairModels::None)).then(|| {
        Arc::new(
            FairShare::new(fair_models, weights.clone())
                .with_order(fair.order.into(), fair.service_cost)
                .with_server_priority_levels(fair.server_priority_levels),
        )
    });
    let controls = Controls::new(
        controller.clone(),
        redis.clone(),
        limits.clone(),
        metrics.clone(),
    )
    .with_membership_ttl(membership_ttl);
    let controls = with_server_gauges(controls, controller);
    let controls = match &fair {
        Some(_) => Some(Arc::new(controls.with_weights(weights))),
        None if !controlled.is_empty() => Some(Arc::new(controls)),
        None => None,
    };
    Adaptive { fair, controls }
}

/// Models whose signal is the server's Prometheus gauges get them scraped.
fn with_server_gauges(controls: Controls, controller: &ControllerConfig) -> Controls {
    let scraped = controller
        .models
        .values()
        .any(|c| matches!(c.signal, SignalConfig::Prometheus { .. }));
    if !scraped {
        return controls;
    }
    match PrometheusSource::new(SCRAPE_TIMEOUT) {
        Ok(source) => controls.with_source(Arc::new(source)),
        Err(error) => {
            // Only the TLS set-up can fail here; the controllers then step
            // on the answers alone, which is still safe (it only cuts).
            tracing::error!(%error, "cannot scrape model servers: controllers use answers only");
            controls
        }
    }
}

/// Default instance id: host name and pid.
pub fn default_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "consumer".into());
    format!("{host}-{}", std::process::id())
}
