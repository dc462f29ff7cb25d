//! The `sluice-rls` command line and its serve loop, shared with
//! `sluice-allinone` (which adds a consumer in the same process). This is
//! the binaries' edge: errors are `anyhow`.

use crate::config::{LimitsConfig, LoadOptions};
use crate::deferral::budget::BudgetLimits;
use crate::deferral::caps::{self, CapLimits, CapsMetrics};
use crate::deferral::endpoint::{self, EndpointMetrics, EndpointOptions};
use crate::deferral::hub::HubOptions;
use crate::deferral::listener::{DeferralListener, ListenerLimits, ListenerMetrics};
use crate::deferral::{Endpoint, EndpointConfig};
use crate::guard::{self, CallGuard, CounterWritePolicy, RequestBounds};
use crate::limiter::{HeaderStyle, Limiter, ResponseOptions, SystemClock, UpstreamHeaderNames};
use crate::metrics::Metrics;
use crate::server::{self, Deps};
use crate::store::{
    CounterStore, CountingMode, LocalCacheStore, MemoryStore, RedisStore, RedisStoreOptions,
};
use crate::xds::{XdsClient, XdsOptions, XdsTls};
use anyhow::Context;
use sluice_contract::{ClaimTiming, LocalBus};
use sluice_redis::RedisOptions;
use sluice_runtime::LogFormat;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tonic::transport::{Certificate, Identity, ServerTlsConfig};

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
    #[arg(
        long,
        env = "SLUICE_RLS_XDS_BACKOFF_INITIAL_MS",
        default_value_t = 1000
    )]
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
    #[arg(
        long,
        env = "SLUICE_RLS_XDS_TLS_CERT",
        value_name = "PEM",
        requires = "xds_tls_key"
    )]
    pub xds_tls_cert: Option<PathBuf>,

    /// (CONFIG_GRPC_XDS_CLIENT_TLS_KEY)
    #[arg(
        long,
        env = "SLUICE_RLS_XDS_TLS_KEY",
        value_name = "PEM",
        requires = "xds_tls_cert"
    )]
    pub xds_tls_key: Option<PathBuf>,

    /// Name the xDS server's certificate must carry, if not the host of
    /// --xds-server (CONFIG_GRPC_XDS_SERVER_TLS_SAN).
    #[arg(long, env = "SLUICE_RLS_XDS_TLS_SERVER_NAME")]
    pub xds_tls_server_name: Option<String>,

    /// TLS on the gRPC listener: certificate (GRPC_SERVER_USE_TLS +
    /// GRPC_SERVER_TLS_CERT); needs --grpc-tls-key.
    #[arg(
        long,
        env = "SLUICE_RLS_GRPC_TLS_CERT",
        value_name = "PEM",
        requires = "grpc_tls_key"
    )]
    pub grpc_tls_cert: Option<PathBuf>,

    /// (GRPC_SERVER_TLS_KEY)
    #[arg(
        long,
        env = "SLUICE_RLS_GRPC_TLS_KEY",
        value_name = "PEM",
        requires = "grpc_tls_cert"
    )]
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

    /// Remember counters that reached their limit, up to this many bytes, and
    /// answer requests whose every counter is over without asking the store
    /// until the window ends (LOCAL_CACHE_SIZE_IN_BYTES). 0: off.
    #[arg(long, env = "SLUICE_RLS_LOCAL_CACHE_BYTES", default_value_t = 0)]
    pub local_cache_bytes: usize,

    /// `all-or-nothing`: an over-limit request moves no counter;
    /// `increment-all`: envoyproxy/ratelimit's behaviour.
    #[arg(
        long,
        env = "SLUICE_RLS_COUNTING",
        value_enum,
        default_value = "all-or-nothing"
    )]
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

    /// Rate-limit headers in answers: `sluice` (RateLimit-Limit/-Remaining/
    /// -Reset/-Policy, Retry-After), `upstream` (envoyproxy/ratelimit's
    /// LIMIT_RESPONSE_HEADERS_ENABLED), `off`.
    #[arg(
        long,
        env = "SLUICE_RLS_RESPONSE_HEADERS",
        value_enum,
        default_value = "sluice"
    )]
    pub response_headers: HeaderStyleKind,

    /// Header names of `--response-headers upstream` (LIMIT_LIMIT_HEADER).
    #[arg(
        long,
        env = "SLUICE_RLS_LIMIT_HEADER",
        default_value = "RateLimit-Limit"
    )]
    pub limit_header: String,

    /// (LIMIT_REMAINING_HEADER)
    #[arg(
        long,
        env = "SLUICE_RLS_REMAINING_HEADER",
        default_value = "RateLimit-Remaining"
    )]
    pub remaining_header: String,

    /// (LIMIT_RESET_HEADER)
    #[arg(
        long,
        env = "SLUICE_RLS_RESET_HEADER",
        default_value = "RateLimit-Reset"
    )]
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
    #[arg(
        long,
        env = "SLUICE_DEFERRAL_HIGH_PRIORITY_TIMEOUT_S",
        default_value_t = 1800
    )]
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
    #[arg(long, env = "SLUICE_DEFERRAL_MAX_HELD_BYTES", default_value_t = crate::deferral::budget::DEFAULT_MAX_HELD_BYTES,
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
    #[arg(long, env = "SLUICE_DEFERRAL_MAX_TENANT_BYTES_PER_MINUTE", default_value_t = crate::deferral::quota::DEFAULT_MAX_TENANT_BYTES_PER_MINUTE,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub deferral_max_tenant_bytes_per_minute: u64,

    /// A request head on the deferral port (or the next one on a kept-alive
    /// connection) not complete this long after it may start closes the
    /// connection.
    #[arg(long, env = "SLUICE_DEFERRAL_HEADER_TIMEOUT_MS", default_value_t = crate::deferral::listener::DEFAULT_HEADER_TIMEOUT_MS,
          value_parser = clap::value_parser!(u64).range(100..))]
    pub deferral_header_timeout_ms: u64,

    /// Open connections to the deferral port; beyond: closed at once with a
    /// 503. At least --deferral-max-in-flight (one per waiting request).
    #[arg(long, env = "SLUICE_DEFERRAL_MAX_CONNECTIONS", default_value_t = crate::deferral::listener::DEFAULT_MAX_CONNECTIONS)]
    pub deferral_max_connections: usize,

    /// Connections to the deferral port that have not yet presented a valid
    /// deferral token; beyond: closed at once with a 503.
    #[arg(long, env = "SLUICE_DEFERRAL_MAX_UNAUTHENTICATED_CONNECTIONS", default_value_t = crate::deferral::listener::DEFAULT_MAX_UNAUTHENTICATED)]
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

    /// Who may refund (`is_negative_hits`) or charge past a limit
    /// (`x-sluice-charge: force`): `signed`, only calls the Sluice filter
    /// signed with a deferral secret (`x-sluice-charge-auth`); `any`, anyone
    /// who reaches the gRPC port, as envoyproxy/ratelimit (for migrations).
    /// Plain decisions (Envoy's own rate-limit filter) need no signature.
    #[arg(
        long,
        env = "SLUICE_RLS_COUNTER_WRITES",
        value_enum,
        default_value = "signed"
    )]
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
}

impl ServeArgs {
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
    pub fn call_guard(&self, secrets: Vec<sluice_admission::deferral::Secret>) -> CallGuard {
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

/// Logs what the config accepts but is probably a mistake.
pub fn log_warnings(config: &LimitsConfig) {
    for warning in config.warnings() {
        tracing::warn!("{warning}");
    }
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
    // rediss:// URLs use rustls.
    crate::install_rustls_provider();
    let options = RedisStoreOptions {
        redis: redis_options(args),
        connections: args.redis_connections,
        timeout: Duration::from_millis(args.redis_timeout_ms),
    };
    let store = RedisStore::new(&options)
        .context("--redis-url")?
        .with_cross_slot_counter(metrics.cross_slot_decisions.clone());
    let redis = store.describe().to_string();
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
    let xds = args.xds_options()?;
    let grpc_tls = args.grpc_tls()?;
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
    log_warnings(&config);

    let mut metrics = Metrics::new().with_upstream_stats(args.upstream_stats.options());
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
        config = ?args.config,
        xds = ?args.xds_server,
        "sluice-rls listening"
    );
    let endpoint_metrics = Arc::new(EndpointMetrics::default());
    let caps_metrics = CapsMetrics::default();
    let listener_metrics = ListenerMetrics::default();
    if args.deferral_addr.is_some() {
        endpoint_metrics.register(&mut metrics.registry);
        caps_metrics.register(&mut metrics.registry);
        listener_metrics.register(&mut metrics.registry);
    }
    let store: Arc<dyn CounterStore> = if args.local_cache_bytes > 0 {
        Arc::new(LocalCacheStore::new(
            store,
            args.local_cache_bytes,
            metrics.local_cache_answers.clone(),
        ))
    } else {
        store
    };
    let limiter = Arc::new(
        Limiter::new(
            config,
            store,
            args.counting,
            Arc::new(SystemClock),
            Arc::new(metrics),
        )
        .with_response_options(args.response_options())
        .with_key_options(args.keys.options()),
    );
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
    let guard = args.call_guard(secrets.clone());
    if let Some(warning) = guard.startup_warning() {
        tracing::warn!("{warning}");
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
                DeferralMetrics {
                    endpoint: endpoint_metrics,
                    caps: caps_metrics,
                    listener: listener_metrics,
                },
                in_process,
            )
            .await?,
        ),
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

/// The deferral endpoint's metrics, registered by [`serve`].
struct DeferralMetrics {
    endpoint: Arc<EndpointMetrics>,
    caps: CapsMetrics,
    listener: ListenerMetrics,
}

/// The waiting room's budgets from the flags, checked for consistency.
fn budget_limits(args: &ServeArgs) -> anyhow::Result<BudgetLimits> {
    let limits = BudgetLimits::for_endpoint(
        args.deferral_max_held_bytes,
        args.deferral_max_tenant_held_bytes,
        args.deferral_max_in_flight,
        args.deferral_max_in_flight_per_tenant
            .map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
    );
    let largest_body = args.deferral_max_body_bytes as u64;
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

async fn deferral_endpoint(
    args: &ServeArgs,
    addr: SocketAddr,
    secrets: Vec<sluice_admission::deferral::Secret>,
    metrics: DeferralMetrics,
    in_process: Option<InProcess>,
) -> anyhow::Result<DeferralListener> {
    let mut options = EndpointOptions {
        timeout: Duration::from_secs(args.deferral_timeout_s),
        max_in_flight: args.deferral_max_in_flight,
        max_body_bytes: args.deferral_max_body_bytes,
        body_timeout: Duration::from_millis(args.deferral_body_timeout_ms),
        low_priority_max_backlog: args.low_priority_max_backlog,
        secrets,
        token_max_age: Duration::from_secs(args.deferral_token_max_age_s),
        owner_ttl: Duration::from_secs(args.deferral_owner_ttl_s),
        high_priority_timeout: Duration::from_secs(args.deferral_high_priority_timeout_s),
        marker_header: args.deferral_marker_header.clone(),
        lease_check: Duration::from_millis(args.deferral_lease_check_ms),
        budget: budget_limits(args)?,
        max_tenant_bytes_per_minute: args.deferral_max_tenant_bytes_per_minute,
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
    check_owner_ttl(&options)?;
    if args.deferral_max_connections < args.deferral_max_in_flight {
        anyhow::bail!(
            "--deferral-max-connections ({}) is below --deferral-max-in-flight ({}): every waiting request holds a connection",
            args.deferral_max_connections,
            args.deferral_max_in_flight
        );
    }
    let router = Endpoint::build(EndpointConfig {
        parent: args.lite_parent.clone(),
        consumer_group: args.consumer_group.clone(),
        caps: CapLimits {
            max_buckets: args.deferral_max_buckets,
            max_buckets_per_tenant: args.deferral_max_buckets_per_tenant,
            max_new_buckets_per_minute: args.deferral_max_new_buckets_per_minute,
            ..Default::default()
        },
        caps_metrics: metrics.caps,
        hub: HubOptions {
            readers: args.stream_readers,
            ..Default::default()
        },
        options,
        metrics: metrics.endpoint,
        local,
        redis: redis_options(args),
        ..EndpointConfig::new(&args.redis_url, &args.namesrv)
    })
    .await?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr} (deferral endpoint)"))?;
    tracing::info!(addr = %listener.local_addr()?, namesrv = %args.namesrv, parent = %args.lite_parent, "deferral endpoint listening");
    Ok(DeferralListener {
        listener,
        router,
        limits: ListenerLimits {
            header_timeout: Duration::from_millis(args.deferral_header_timeout_ms),
            max_connections: args.deferral_max_connections,
            max_unauthenticated: args.deferral_max_unauthenticated_connections.max(1),
        },
        metrics: metrics.listener,
    })
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
