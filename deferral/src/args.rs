//! The deferral endpoint's flags (`DeferralArgs`, the `--deferral-*` ones
//! and the claim timing it judges consumers by) and its assembly from them:
//! the binaries' edge, so errors are `anyhow`. The broker and Redis settings
//! it shares with the consumer are the binaries' (`sluice-bins`).

use crate::budget::BudgetLimits;
use crate::build::{Endpoint, EndpointConfig};
use crate::caps::{self, CapLimits, CapsMetrics};
use crate::endpoint::{self, EndpointMetrics, EndpointOptions};
use crate::hub::HubOptions;
use crate::listener::{DeferralListener, ListenerLimits, ListenerMetrics};
use anyhow::Context;
use sluice_admission::deferral::Secret;
use sluice_contract::{ClaimTiming, LocalBus};
use sluice_redis::RedisOptions;
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

/// Where deferred requests are queued: the RocketMQ name server, the parent
/// topic of the tenant × model LiteTopics and the consumer group bound to it.
pub struct Broker {
    pub namesrv: String,
    pub parent: String,
    pub consumer_group: String,
}

/// The deferral endpoint's flags.
#[derive(clap::Args)]
#[command(next_help_heading = "Deferral endpoint")]
pub struct DeferralArgs {
    /// Serve the deferral endpoint (deferred requests wait here for their
    /// answer) on this address. Needs --namesrv and Redis (--redis-url).
    #[arg(long, env = "SLUICE_DEFERRAL_ADDR")]
    pub deferral_addr: Option<SocketAddr>,

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

    /// How long a deferred request id stays bound to its tenant
    /// (`owner:{id}` in Redis): replays of its id are refused and its answer
    /// can be resumed that long. At least the longest wait (of every
    /// priority) plus --deferral-token-max-age-s; cover the consumers'
    /// `stream.ttl_after_end_secs` too, or a finished answer cannot be
    /// resumed. Redis holds one key per deferred request this long.
    #[arg(long, env = "SLUICE_DEFERRAL_OWNER_TTL_S", default_value_t = 86_400,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub deferral_owner_ttl_s: u64,

    /// Longest a high-priority deferred request waits for its answer, in seconds.
    #[arg(long, env = "SLUICE_DEFERRAL_HIGH_PRIORITY_TIMEOUT_S", default_value_t = 1800)]
    pub deferral_high_priority_timeout_s: u64,

    /// Largest deferred request body; larger: 413 (same as the filter's max_body_bytes).
    #[arg(long, env = "SLUICE_DEFERRAL_MAX_BODY_BYTES", default_value_t = sluice_admission::config::DEFAULT_MAX_BODY_BYTES)]
    pub deferral_max_body_bytes: usize,

    /// A deferred request body not complete this long after its headers: 408.
    #[arg(long, env = "SLUICE_DEFERRAL_BODY_TIMEOUT_MS", default_value_t = sluice_admission::config::DEFAULT_BODY_TIMEOUT_MS)]
    pub deferral_body_timeout_ms: u64,

    /// How often a waiting deferred request, silent meanwhile, checks that
    /// its consumer still lives (lease and claim); at most the claim's stale
    /// bound (--claim-lease-ms + --claim-heartbeat-interval-ms).
    #[arg(long, env = "SLUICE_DEFERRAL_LEASE_CHECK_MS", default_value_t = crate::endpoint::DEFAULT_LEASE_CHECK_MS,
          value_parser = clap::value_parser!(u64).range(10..))]
    pub deferral_lease_check_ms: u64,

    /// A waiting deferred request that no consumer has picked up (no lease,
    /// no claim) this many seconds after its publish is published again,
    /// once: the broker can leave a message out of its queue (rocketmq-store
    /// 1.0.0, two sends on one offset). 0 (the default): never; set it above
    /// the longest queue wait (a request still queued is published again too).
    #[arg(long, env = "SLUICE_DEFERRAL_UNCLAIMED_REPUBLISH_S", default_value_t = crate::endpoint::DEFAULT_UNCLAIMED_REPUBLISH_S)]
    pub deferral_unclaimed_republish_s: u64,

    /// The consumers' `idempotency.lease_ms`: a claim heartbeat older than
    /// this plus one interval belongs to a dead consumer. Must match the
    /// consumers' config (sluice-allinone takes its own consumer's).
    #[arg(long, env = "SLUICE_CLAIM_LEASE_MS", default_value_t = sluice_contract::claim::DEFAULT_LEASE_MS)]
    pub claim_lease_ms: u64,

    /// The consumers' `idempotency.heartbeat_interval_ms` (claim heartbeat
    /// and pop-lease refresh). Must match the consumers' config.
    #[arg(long, env = "SLUICE_CLAIM_HEARTBEAT_INTERVAL_MS", default_value_t = sluice_contract::claim::DEFAULT_HEARTBEAT_INTERVAL_MS)]
    pub claim_heartbeat_interval_ms: u64,

    /// Deferred requests held open at once; beyond it: 503 `deferral_busy`.
    /// Envoy's circuit breaker on the route to the endpoint must allow as
    /// many (per sluice-rls instance behind it).
    #[arg(long, env = "SLUICE_DEFERRAL_MAX_IN_FLIGHT", default_value_t = endpoint::DEFAULT_MAX_IN_FLIGHT)]
    pub deferral_max_in_flight: usize,

    /// Waiting deferred requests of one tenant (every priority band); beyond:
    /// 429 `tenant_deferral_busy`, while other tenants are still served.
    /// Default: a quarter of --deferral-max-in-flight.
    #[arg(long, env = "SLUICE_DEFERRAL_MAX_IN_FLIGHT_PER_TENANT", value_parser = clap::value_parser!(u64).range(1..))]
    pub deferral_max_in_flight_per_tenant: Option<u64>,

    /// Body bytes all deferred requests being read or waiting may hold in
    /// this process (the one copy kept for a re-publish); beyond: 503
    /// `deferral_memory_full`. Sizes sluice-rls's memory: see
    /// docs/operations.md.
    #[arg(long, env = "SLUICE_DEFERRAL_MAX_HELD_BYTES", default_value_t = crate::budget::DEFAULT_MAX_HELD_BYTES,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub deferral_max_held_bytes: u64,

    /// Body bytes one tenant's deferred requests may hold; beyond: 429
    /// `tenant_deferral_bytes`. Default: a quarter of
    /// --deferral-max-held-bytes. At least --deferral-max-body-bytes.
    #[arg(long, env = "SLUICE_DEFERRAL_MAX_TENANT_HELD_BYTES", value_parser = clap::value_parser!(u64).range(1..))]
    pub deferral_max_tenant_held_bytes: Option<u64>,

    /// Body bytes one tenant may defer (publish to the broker) per clock
    /// minute; beyond: 429 `tenant_broker_bytes`. Bounds the broker's disk
    /// per tenant to this times its retention (in minutes).
    #[arg(long, env = "SLUICE_DEFERRAL_MAX_TENANT_BYTES_PER_MINUTE", default_value_t = crate::quota::DEFAULT_MAX_TENANT_BYTES_PER_MINUTE,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub deferral_max_tenant_bytes_per_minute: u64,

    /// A request head on the deferral port (or the next one on a kept-alive
    /// connection) not complete this long after it may start closes the
    /// connection.
    #[arg(long, env = "SLUICE_DEFERRAL_HEADER_TIMEOUT_MS", default_value_t = crate::listener::DEFAULT_HEADER_TIMEOUT_MS,
          value_parser = clap::value_parser!(u64).range(100..))]
    pub deferral_header_timeout_ms: u64,

    /// Open connections to the deferral port; beyond: closed at once with a
    /// 503. At least --deferral-max-in-flight (one per waiting request).
    #[arg(long, env = "SLUICE_DEFERRAL_MAX_CONNECTIONS", default_value_t = crate::listener::DEFAULT_MAX_CONNECTIONS)]
    pub deferral_max_connections: usize,

    /// Connections to the deferral port that have not yet presented a valid
    /// deferral token; beyond: closed at once with a 503.
    #[arg(long, env = "SLUICE_DEFERRAL_MAX_UNAUTHENTICATED_CONNECTIONS", default_value_t = crate::listener::DEFAULT_MAX_UNAUTHENTICATED)]
    pub deferral_max_unauthenticated_connections: usize,

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

/// A request id stays bound to its tenant while its token can be replayed
/// and its client waits.
fn check_owner_ttl(options: &EndpointOptions) -> anyhow::Result<()> {
    let longest_wait = options
        .timeout
        .max(options.high_priority_timeout)
        .max(options.low_priority_timeout);
    let request_life = longest_wait + options.token_max_age;
    if options.owner_ttl < request_life {
        anyhow::bail!(
            "--deferral-owner-ttl-s ({} s) must be at least the longest wait (of every \
             priority) + --deferral-token-max-age-s ({} s): a request id must stay bound \
             while its token can be replayed and its client waits",
            options.owner_ttl.as_secs(),
            request_life.as_secs()
        );
    }
    Ok(())
}

/// The deferral endpoint's metrics: registered in the process's registry
/// (sluice-rls's admin `/metrics`) before [`DeferralArgs::listener`] uses them.
#[derive(Default)]
pub struct DeferralMetrics {
    pub endpoint: Arc<EndpointMetrics>,
    pub caps: CapsMetrics,
    pub listener: ListenerMetrics,
}

impl DeferralMetrics {
    pub fn register(&self, registry: &mut prometheus_client::registry::Registry) {
        self.endpoint.register(registry);
        self.caps.register(registry);
        self.listener.register(registry);
    }
}

impl DeferralArgs {
    /// The secrets of --deferral-secret-file and --deferral-secrets (the RLS
    /// verifies counter writes with them even without the endpoint). The
    /// endpoint cannot run without one.
    pub fn secrets(&self) -> anyhow::Result<Vec<Secret>> {
        let secrets = crate::secrets::load(
            self.deferral_secret_file.as_deref(),
            self.deferral_secrets.as_deref(),
        )?;
        if secrets.iter().any(|s| s.is_example()) {
            tracing::warn!(
                "the deferral secret is the public example (config/deferral-secret.example): \
                 anyone can sign deferrals with it; generate your own outside a test setup"
            );
        }
        if self.deferral_addr.is_some() && secrets.is_empty() {
            anyhow::bail!(
                "the deferral endpoint needs the secret the filter signs deferred requests with: \
                 pass --deferral-secret-file FILE (or set SLUICE_DEFERRAL_SECRETS)"
            );
        }
        Ok(secrets)
    }

    /// The waiting room's budgets from the flags, checked for consistency.
    fn budget_limits(&self) -> anyhow::Result<BudgetLimits> {
        let limits = BudgetLimits::for_endpoint(
            self.deferral_max_held_bytes,
            self.deferral_max_tenant_held_bytes,
            self.deferral_max_in_flight,
            self.deferral_max_in_flight_per_tenant
                .map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
        );
        let largest_body = self.deferral_max_body_bytes as u64;
        if limits.max_tenant_held_bytes > limits.max_held_bytes {
            anyhow::bail!(
                "--deferral-max-tenant-held-bytes ({}) is above --deferral-max-held-bytes ({})",
                limits.max_tenant_held_bytes,
                limits.max_held_bytes
            );
        }
        if limits.max_tenant_held_bytes < largest_body {
            anyhow::bail!(
                "a tenant's share of held bytes ({}; --deferral-max-tenant-held-bytes, by default a \
                 quarter of --deferral-max-held-bytes) is below --deferral-max-body-bytes ({largest_body}): \
                 the largest bodies could never be deferred",
                limits.max_tenant_held_bytes
            );
        }
        Ok(limits)
    }

    /// The endpoint's options from the flags (the claim timing an in-process
    /// consumer's own, when there is one), checked.
    fn endpoint_options(
        &self,
        secrets: Vec<Secret>,
        claim_timing: Option<ClaimTiming>,
    ) -> anyhow::Result<EndpointOptions> {
        let options = EndpointOptions {
            timeout: Duration::from_secs(self.deferral_timeout_s),
            max_in_flight: self.deferral_max_in_flight,
            max_body_bytes: self.deferral_max_body_bytes,
            body_timeout: Duration::from_millis(self.deferral_body_timeout_ms),
            low_priority_max_backlog: self.low_priority_max_backlog,
            secrets,
            token_max_age: Duration::from_secs(self.deferral_token_max_age_s),
            owner_ttl: Duration::from_secs(self.deferral_owner_ttl_s),
            high_priority_timeout: Duration::from_secs(self.deferral_high_priority_timeout_s),
            marker_header: self.deferral_marker_header.clone(),
            lease_check: Duration::from_millis(self.deferral_lease_check_ms),
            unclaimed_republish_after: (self.deferral_unclaimed_republish_s > 0)
                .then(|| Duration::from_secs(self.deferral_unclaimed_republish_s)),
            budget: self.budget_limits()?,
            max_tenant_bytes_per_minute: self.deferral_max_tenant_bytes_per_minute,
            claim_timing: claim_timing.unwrap_or(ClaimTiming {
                lease_ms: self.claim_lease_ms,
                heartbeat_interval_ms: self.claim_heartbeat_interval_ms,
            }),
            ..Default::default()
        };
        check_liveness(&options)?;
        check_owner_ttl(&options)?;
        if self.deferral_max_connections < self.deferral_max_in_flight {
            anyhow::bail!(
                "--deferral-max-connections ({}) is below --deferral-max-in-flight ({}): every waiting request holds a connection",
                self.deferral_max_connections,
                self.deferral_max_in_flight
            );
        }
        Ok(options)
    }

    /// The endpoint on `addr` (--deferral-addr): checked, connected to Redis
    /// and the broker, bound; `in_process`, a consumer in this process.
    pub async fn listener(
        &self,
        addr: SocketAddr,
        redis: RedisOptions,
        broker: Broker,
        secrets: Vec<Secret>,
        metrics: DeferralMetrics,
        in_process: Option<InProcess>,
    ) -> anyhow::Result<DeferralListener> {
        let (local, claim_timing) = match in_process {
            Some(InProcess {
                local,
                claim_timing,
            }) => (Some(local), Some(claim_timing)),
            None => (None, None),
        };
        let options = self.endpoint_options(secrets, claim_timing)?;
        let router = Endpoint::build(EndpointConfig {
            redis,
            namesrv: broker.namesrv.clone(),
            parent: broker.parent.clone(),
            consumer_group: broker.consumer_group,
            caps: CapLimits {
                max_buckets: self.deferral_max_buckets,
                max_buckets_per_tenant: self.deferral_max_buckets_per_tenant,
                max_new_buckets_per_minute: self.deferral_max_new_buckets_per_minute,
                ..Default::default()
            },
            caps_metrics: metrics.caps,
            hub: HubOptions {
                readers: self.stream_readers,
                ..Default::default()
            },
            options,
            metrics: metrics.endpoint,
            local,
        })
        .await?;
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("cannot listen on {addr} (deferral endpoint)"))?;
        tracing::info!(addr = %listener.local_addr()?, namesrv = %broker.namesrv, parent = %broker.parent, "deferral endpoint listening");
        Ok(DeferralListener {
            listener,
            router,
            limits: ListenerLimits {
                header_timeout: Duration::from_millis(self.deferral_header_timeout_ms),
                max_connections: self.deferral_max_connections,
                max_unauthenticated: self.deferral_max_unauthenticated_connections.max(1),
            },
            metrics: metrics.listener,
        })
    }
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

    #[test]
    fn an_owner_ttl_shorter_than_a_request_life_is_refused() {
        assert!(check_owner_ttl(&EndpointOptions::default()).is_ok());
        let short = EndpointOptions {
            timeout: Duration::from_secs(60),
            high_priority_timeout: Duration::from_secs(120),
            token_max_age: Duration::from_secs(30),
            owner_ttl: Duration::from_secs(150),
            ..Default::default()
        };
        assert!(check_owner_ttl(&short).is_ok());
        let too_short = EndpointOptions {
            owner_ttl: Duration::from_secs(149),
            ..short
        };
        let why = check_owner_ttl(&too_short).unwrap_err().to_string();
        assert!(why.contains("--deferral-owner-ttl-s (149 s)"), "{why}");
    }
}
