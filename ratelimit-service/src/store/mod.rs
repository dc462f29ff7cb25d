//! Counter stores: where fixed-window counters live.
//!
//! Both stores implement the same decision rule ([`CounterOp`] docs) so the
//! scenario suite runs unchanged against each of them.

mod coalesce;
mod counter;
mod keys;
mod local_cache;
mod memory;
mod redis;
mod script_call;
pub mod scripts;

pub use self::redis::{redact_url, RedisStore, RedisStoreOptions};
pub use counter::{
    decide, Batch, CounterOp, CounterOutcome, CounterStore, CountingMode, StoreError,
};
pub use keys::{counter_key, upstream_key, KeyArgs, KeyLayout, KeyLayoutName, KeyOptions};
pub use local_cache::LocalCacheStore;
pub use memory::MemoryStore;
