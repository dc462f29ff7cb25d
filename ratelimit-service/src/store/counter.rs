//! What every counter store is: the ops a decision touches, the decision
//! rule and the [`CounterStore`] trait the stores implement.

use futures::future::BoxFuture;

/// One counter touched by a decision.
///
/// Rule, applied to every op from the value `before` the decision:
/// * `hits > 0` is over when `before + hits > limit`;
/// * `hits == 0` (check only) is over when nothing more fits: by Sluice's
///   rule when `before >= limit`, by envoyproxy/ratelimit's
///   (`before + 0 > limit`) only past it (see [`CountingMode::check_only_over`]);
/// * `hits < 0` (refund) is never over; the counter goes down, not below 0,
///   and only if the window's counter still exists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CounterOp {
    /// Full store key (see [`crate::store::KeyLayout`]); includes the window start.
    pub key: String,
    pub hits: i64,
    pub limit: u64,
    /// Shadow-mode limits are counted but never block a request.
    pub enforced: bool,
    /// Expiry for a counter this op creates.
    pub ttl_secs: u64,
}

impl CounterOp {
    /// Whether this op is over its limit given the counter's current value,
    /// by `mode`'s rule.
    pub fn is_over(&self, before: u64, mode: CountingMode) -> bool {
        match self.hits {
            h if h > 0 => before.saturating_add(h as u64) > self.limit,
            0 => mode.check_only_over(before, self.limit),
            _ => false,
        }
    }

    /// The counter's value after applying this op to `before`.
    pub fn apply_to(&self, before: u64) -> u64 {
        if self.hits >= 0 {
            before.saturating_add(self.hits as u64)
        } else {
            before.saturating_sub(self.hits.unsigned_abs())
        }
    }
}

/// How a request with several descriptors moves its counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum CountingMode {
    /// If any enforced op would go over, no counter of the request moves: a
    /// request that is deferred or rejected burns no quota.
    #[default]
    AllOrNothing,
    /// Every counter moves, over or not, and a check-only op is over only
    /// past its limit: envoyproxy/ratelimit's counting and decision rule.
    IncrementAll,
}

impl CountingMode {
    /// Whether a check-only op (`hits_addend: 0`) on a counter at `value` is
    /// over. Sluice: at the limit, since no further hit fits. Upstream
    /// (`base_limiter.go`: `limitAfterIncrease > overLimitThreshold`, with
    /// nothing added): only past it. Upstream's response-path quota pattern
    /// (check with 0 on the request, debit on the response) relies on
    /// upstream's: a quota at its limit still routes one more request.
    pub fn check_only_over(self, value: u64, limit: u64) -> bool {
        match self {
            CountingMode::AllOrNothing => value >= limit,
            CountingMode::IncrementAll => value > limit,
        }
    }
}

/// What the store saw and did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CounterOutcome {
    /// Whether the ops were applied (always true in [`CountingMode::IncrementAll`]).
    pub applied: bool,
    /// Each counter's value before the decision, in op order.
    pub before: Vec<u64>,
}

/// Store failure.
#[derive(Clone, Debug, thiserror::Error)]
pub enum StoreError {
    /// The store could not be reached or did not answer in time; a retry may work.
    #[error("counter store unavailable: {0}")]
    Unavailable(String),
    /// The store answered, but not as expected.
    #[error("counter store error: {0}")]
    Failed(String),
}

impl StoreError {
    pub fn is_transient(&self) -> bool {
        matches!(self, StoreError::Unavailable(_))
    }
}

/// A place to keep counters.
/// What one decision asks of a store: its `ops`, checked and applied
/// together under `mode`, at the decision's clock `now_millis` (the memory
/// store expires counters by it).
#[derive(Clone, Copy, Debug)]
pub struct Batch<'a> {
    pub ops: &'a [CounterOp],
    pub mode: CountingMode,
    pub now_millis: u64,
}

impl<'a> Batch<'a> {
    pub fn new(ops: &'a [CounterOp], mode: CountingMode, now_millis: u64) -> Self {
        Batch {
            ops,
            mode,
            now_millis,
        }
    }
}

pub trait CounterStore: Send + Sync + 'static {
    /// Atomically check and apply the batch's ops under its mode.
    fn apply<'a>(&'a self, batch: Batch<'a>) -> BoxFuture<'a, Result<CounterOutcome, StoreError>>;

    /// Cheap liveness probe for `/readyz`.
    fn ping(&self) -> BoxFuture<'_, Result<(), StoreError>>;

    /// Short name for logs and metrics.
    fn kind(&self) -> &'static str;
}

/// The rule both stores follow, for one consistent snapshot of `before` values.
/// Returns whether the ops are to be applied.
pub fn decide(ops: &[CounterOp], before: &[u64], mode: CountingMode) -> bool {
    match mode {
        CountingMode::IncrementAll => true,
        CountingMode::AllOrNothing => !ops
            .iter()
            .zip(before)
            .any(|(op, &b)| op.enforced && op.is_over(b, mode)),
    }
}
