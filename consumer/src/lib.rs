#![recursion_limit = "256"] // rocketmq-client futures are deeply nested
//! Sluice consumer core: everything between "a deferred message was popped"
//! and "ack it or run it again later", without the broker.
//!
//! The pop loop (wired to LiteTopics elsewhere) does, per message:
//!
//! 1. [`WorkItem::from_json`] (an invalid item is logged and acked);
//! 2. [`InFlightLimits::try_acquire`] for the model (local, cheap) — on
//!    `Busy`, suspend the LiteTopic briefly;
//! 3. [`Pacer::check`] for the bucket (one Redis script) — on `Wait`, drop
//!    the permit and suspend the LiteTopic (or wait locally below the
//!    suspend floor, see [`PaceDecision::plan`]). Acquiring the permit first
//!    means a paced slot is never burned by a message that then cannot run;
//! 4. spawn a task: [`Processor::process`] holding the permit, then act on
//!    [`Outcome::disposition`]: ack, or re-publish / let it come back later.
//!
//! See README.md for the Redis contract with the HTTP side.

mod admin;
mod admin_adaptive;
mod admin_auth;
mod cli;
pub mod control_loop;
pub mod controller;
mod embedded;
pub mod fair;
mod gate;
mod http_client;
mod idempotency;
mod invoke;
pub mod keys;
mod limits;
mod membership;
mod metrics;
mod pacing;
mod processor;
mod redis_conn;
mod runner;
pub mod signals;
mod sse;
mod stream;
mod usage;

// The binaries (sluice-consumer, sluice-allinone) start it whole.
pub use admin::{parse_rate, router as admin_router};
pub use admin_adaptive::{parse_override, parse_weight, ControllerView};
pub use admin_auth::{load_token, AdminToken, TokenError, WritePolicy, ADMIN_TOKEN_FILE_ENV};
pub use cli::{serve_admin, AdminListenError, ConsumerFlags};
pub use embedded::{adaptive, default_id, start, FileConfig, StartError, StartOptions, Started};
pub use runner::{Runner, RunnerOptions, RunnerParts, DEFAULT_MEMBERSHIP_TTL};
// The parts, for tests, benchmarks and custom pop loops.
pub use gate::{gate, StartGate};
pub use idempotency::IdempotencyConfig;
pub use invoke::{BackendConfig, BackendTargetConfig, ConfigError, FailureKind};
pub use limits::{InFlightConfig, InFlightLimits, ModelPermit};
pub use metrics::Metrics;
pub use pacing::{
    decision_from_reply, gcra, Limit, PaceDecision, PacePlan, Pacer, PacingConfig, PacingError,
    RateSetting, Rates, Scope,
};
pub use processor::{Disposition, Outcome, Processor, ProcessorConfig};
pub use redis_conn::{connect, RedisConn, RedisOptions, RedisOptionsError};
pub use stream::{codes, StreamConfig, Terminal};
pub use usage::{Correction, Usage};
// The deferral contract, shared with the endpoint (see contract/).
pub use sluice_contract::{local, now_ms, work, Priority, WorkItem};
