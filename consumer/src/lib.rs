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

// The rooms, bottom up: `keys` and `metrics` are leaves; `call` makes one
// model call; `pacing` decides whether a bucket may start one; `sharing`
// finds and splits the capacity; `queue` runs the pop loop over all of them;
// `admin` serves the operators; `embedded` and `cli` assemble the whole.
mod admin;
mod call;
mod cli;
mod embedded;
pub mod keys;
mod metrics;
mod pacing;
mod queue;
mod redis_conn;
mod sharing;

// The binaries (sluice-consumer, sluice-allinone) start it whole.
pub use admin::adaptive::{parse_override, parse_weight, ControllerView};
pub use admin::auth::{load_token, AdminToken, TokenError, WritePolicy, ADMIN_TOKEN_FILE_ENV};
pub use admin::listener::{serve_admin, AdminListenError};
pub use admin::rates::parse_rate;
pub use admin::router::router as admin_router;
pub use cli::{with_short_names, ConsumerFlags};
pub use embedded::{adaptive, default_id, start, FileConfig, StartError, StartOptions, Started};
pub use queue::runner::{Runner, RunnerOptions, RunnerParts};
pub use sharing::membership::DEFAULT_MEMBERSHIP_TTL;
// The parts, for tests, benchmarks and custom pop loops.
pub use call::idempotency::IdempotencyConfig;
pub use call::invoke::{
    BackendConfig, BackendTargetConfig, ConfigError, FailureKind, OutputObserver,
};
pub use call::processor::{CallOptions, Disposition, Outcome, Processor, ProcessorConfig};
pub use call::sent::OnSent;
pub use call::stream::{ErrorCode, StreamConfig, Terminal};
pub use call::usage::use_model_tokenizers;
pub use metrics::{Correction, Metrics};
pub use pacing::limits::{InFlightConfig, InFlightLimits, ModelPermit};
pub use pacing::pacer::{
    decision_from_reply, gcra, Limit, PaceDecision, PacePlan, Pacer, PacingConfig, PacingError,
    RateSetting, Rates, Scope,
};
pub use queue::gate::{gate, StartGate};
pub use redis_conn::{connect, RedisConn, RedisOptions, RedisOptionsError};
pub use sharing::{charge, control_loop, controller, fair, signals};
// The deferral contract, shared with the endpoint (see contract/).
pub use sluice_contract::{local, now_ms, work, Priority, WorkItem};
