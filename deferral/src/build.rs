//! [`Endpoint::build`]: the endpoint wired from an [`EndpointConfig`].

use crate::caps::{BucketCaps, CapLimits, CapsError, CapsMetrics};
use crate::endpoint::{EndpointMetrics, EndpointOptions};
use crate::hub::{HubOptions, StreamHub};
use crate::publisher::LitePublisher;
use sluice_contract::LocalBus;
use sluice_redis::{RedisClient, RedisOptions};
use std::sync::Arc;
use std::time::Duration;

/// Everything the endpoint needs from outside.
pub struct EndpointConfig {
    /// Redis: response streams, request keys, bucket bookkeeping.
    pub redis: RedisOptions,
    /// RocketMQ name server.
    pub namesrv: String,
    /// Parent topic of the per tenant × model LiteTopics.
    pub parent: String,
    /// Consumer group bound to the parent topic (created if missing).
    pub consumer_group: String,
    /// Caps on new buckets.
    pub caps: CapLimits,
    pub caps_metrics: CapsMetrics,
    pub hub: HubOptions,
    pub options: EndpointOptions,
    pub metrics: Arc<EndpointMetrics>,
    /// In-process mode: chunks from a consumer running in this process.
    pub local: Option<Arc<LocalBus>>,
}

impl EndpointConfig {
    /// Defaults for everything but the stores: parent `sluice-deferred`,
    /// group `sluice-consumer`, default caps, options and metrics.
    pub fn new(redis_url: impl Into<String>, namesrv: impl Into<String>) -> Self {
        EndpointConfig {
            redis: RedisOptions::from_url(redis_url),
            namesrv: namesrv.into(),
            parent: "sluice-deferred".into(),
            consumer_group: "sluice-consumer".into(),
            caps: CapLimits::default(),
            caps_metrics: CapsMetrics::default(),
            hub: HubOptions::default(),
            options: EndpointOptions::default(),
            metrics: Arc::new(EndpointMetrics::default()),
            local: None,
        }
    }
}

/// Why the endpoint could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("invalid deferral bucket caps: {0}")]
    Caps(#[from] CapsError),
    /// Never echoes the URL: it may hold a password.
    #[error("Redis settings: {0}")]
    Redis(#[from] sluice_redis::OptionsError),
    #[error("cannot reach the RocketMQ name server at {namesrv}: {source}")]
    Broker {
        namesrv: String,
        source: sluice_litetopic::LiteError,
    },
}

/// The deferral endpoint's constructor.
pub struct Endpoint;

impl Endpoint {
    /// Connects the stream hub, a control connection (2 s response
    /// timeout; connects lazily) and the LiteTopic publisher, and returns
    /// the endpoint's router.
    pub async fn build(config: EndpointConfig) -> Result<axum::Router, BuildError> {
        let caps = BucketCaps::new(config.caps, config.caps_metrics)?;
        let client = RedisClient::new(&config.redis)?;
        let control = client
            .with_response_timeout(Duration::from_secs(2))
            .connect()?;
        let hub = StreamHub::start_with_control(client, control.clone(), config.hub)?;
        let publisher = LitePublisher::connect(
            &config.namesrv,
            &config.parent,
            &config.consumer_group,
            control.clone(),
        )
        .await
        .map_err(|source| BuildError::Broker {
            namesrv: config.namesrv.clone(),
            source,
        })?
        .with_caps(caps);
        Ok(crate::endpoint::router_with_local(
            hub,
            Arc::new(publisher),
            control,
            config.options,
            config.metrics,
            config.local,
        ))
    }
}
