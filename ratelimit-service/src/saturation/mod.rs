//! Saturation-aware admission (issue 28): where an in-quota request goes
//! while its model's server is saturated with deferred work.
//!
//! The consumers' controller writes the model's saturation into its
//! controller hash ([`sluice_contract::saturation`]). sluice-rls keeps the
//! last state of each model it was asked about in memory ([`Snapshot`]), and
//! **a decision reads only that snapshot**: it never waits on Redis. A
//! background task ([`SaturationRouter::start`]) reads every tracked model
//! in one pipelined round trip each `refresh_ms` (half the max age by
//! default), and within [`NEW_MODEL_GAP`] of a model first asked about (at
//! most one extra round trip per gap, however many new models arrive).
//!
//! The route is the contract's own rule ([`saturation::route_in_quota`]):
//! a fresh "saturated" sends the request into the token-fair queue (the
//! limiter marks the OK answer with `route: queue`); anything else sends it
//! straight to the server, as before this existed:
//! - a model not read yet (first asked, or refused by a full snapshot)
//!   counts as not saturated;
//! - a failed read keeps the last snapshot; a state counts only while the
//!   controller's write is at most `max_age_ms` old, so through an outage
//!   it stops counting `max_age_ms` after the controller's last write
//!   (fail-open: the queue is an optimisation, the quota still holds).

mod snapshot;
mod source;

pub use snapshot::{Ask, Snapshot};
pub use source::{RedisSaturation, SaturationSource};

use crate::metrics::SaturationMetrics;
use sluice_contract::saturation::{self, Route};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::Notify;

/// The soonest a model first asked about is read after the previous read:
/// new models wait at most this long (plus the round trip), and a client
/// sending a new model name with every request costs one round trip per
/// gap, not one per request.
pub const NEW_MODEL_GAP: Duration = Duration::from_millis(50);

/// The routing knobs (`sluice-rls --route-in-quota-when-saturated`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoutingOptions {
    /// Oldest state acted on, ms (the controller's write time): older
    /// means "not saturated".
    pub max_age_ms: u64,
    /// How often the background task reads every tracked model, ms.
    pub refresh_ms: u64,
    /// Most models tracked (model names come from clients).
    pub max_models: usize,
    /// A model not asked about for this long leaves the snapshot, ms.
    pub idle_ms: u64,
}

impl Default for RoutingOptions {
    fn default() -> Self {
        // Three controller steps at its default 500 ms interval: one
        // missed step does not flip the route.
        RoutingOptions::with_max_age(1_500)
    }
}

/// Options the router refuses.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RoutingError {
    #[error("the saturation refresh ({refresh_ms} ms) must be at least 10 ms and below the max age ({max_age_ms} ms), or a fresh state is judged old between two reads")]
    Refresh { refresh_ms: u64, max_age_ms: u64 },
    #[error("at most {max} saturation models, at least 1 (got {got})")]
    Models { got: usize, max: usize },
    #[error("a model's idle time ({idle_ms} ms) must be at least twice the refresh ({refresh_ms} ms), or it leaves before it is read")]
    Idle { idle_ms: u64, refresh_ms: u64 },
}

impl RoutingOptions {
    /// Most models a snapshot may be configured to track.
    pub const MAX_MODELS: usize = 100_000;

    /// `max_age_ms`, read every half of it; 1,024 models, a minute idle.
    pub fn with_max_age(max_age_ms: u64) -> Self {
        RoutingOptions {
            max_age_ms,
            refresh_ms: max_age_ms / 2,
            max_models: 1_024,
            idle_ms: 60_000,
        }
    }

    pub fn validate(&self) -> Result<(), RoutingError> {
        if self.refresh_ms < 10 || self.refresh_ms >= self.max_age_ms {
            return Err(RoutingError::Refresh {
                refresh_ms: self.refresh_ms,
                max_age_ms: self.max_age_ms,
            });
        }
        if self.max_models == 0 || self.max_models > Self::MAX_MODELS {
            return Err(RoutingError::Models {
                got: self.max_models,
                max: Self::MAX_MODELS,
            });
        }
        if self.idle_ms < self.refresh_ms.saturating_mul(2) {
            return Err(RoutingError::Idle {
                idle_ms: self.idle_ms,
                refresh_ms: self.refresh_ms,
            });
        }
        Ok(())
    }
}

/// Routes in-quota requests by their model's saturation, from memory.
pub struct SaturationRouter {
    source: Arc<dyn SaturationSource>,
    options: RoutingOptions,
    snapshot: Mutex<Snapshot>,
    /// Woken when a model is first tracked.
    new_model: Arc<Notify>,
    metrics: SaturationMetrics,
    /// The last read failed (to log the first failure and the recovery).
    failing: AtomicBool,
}

impl SaturationRouter {
    /// A router that reads only when [`refresh`](Self::refresh) is called.
    pub fn new(
        source: Arc<dyn SaturationSource>,
        options: RoutingOptions,
        metrics: SaturationMetrics,
    ) -> Result<Self, RoutingError> {
        options.validate()?;
        Ok(SaturationRouter {
            source,
            options,
            snapshot: Mutex::new(Snapshot::new(options.max_models, options.idle_ms)),
            new_model: Arc::new(Notify::new()),
            metrics,
            failing: AtomicBool::new(false),
        })
    }

    /// A router refreshed by a background task on the current Tokio
    /// runtime; the task ends once the router is dropped.
    pub fn start(
        source: Arc<dyn SaturationSource>,
        options: RoutingOptions,
        metrics: SaturationMetrics,
    ) -> Result<Arc<Self>, RoutingError> {
        let router = Arc::new(Self::new(source, options, metrics)?);
        let new_model = router.new_model.clone();
        tokio::spawn(refresh_loop(Arc::downgrade(&router), new_model, options));
        Ok(router)
    }

    pub fn options(&self) -> &RoutingOptions {
        &self.options
    }

    /// Models tracked now.
    pub fn models(&self) -> usize {
        self.lock().len()
    }

    /// Where an in-quota request for `model` goes at `now_ms`: from the
    /// snapshot alone (no I/O). A model not read yet goes direct.
    pub fn route(&self, model: &str, now_ms: u64) -> Route {
        let (ask, tracked) = {
            let mut snapshot = self.lock();
            let ask = snapshot.ask(model, now_ms);
            (ask, snapshot.len())
        };
        match ask {
            Ask::Known(state) => saturation::route_in_quota(state, now_ms, self.options.max_age_ms),
            Ask::Added { replaced_idle } => {
                self.metrics.models.set(tracked as i64);
                if replaced_idle {
                    self.metrics.dropped("idle").inc();
                }
                self.new_model.notify_one();
                Route::Direct
            }
            Ask::Refused => {
                self.metrics.dropped("refused").inc();
                Route::Direct
            }
        }
    }

    /// One read of every tracked model (idle ones dropped first), in one
    /// round trip; returns how many were read. A failed read leaves the
    /// snapshot as it was.
    pub async fn refresh(&self, now_ms: u64) -> Result<usize, String> {
        let (models, dropped, tracked) = {
            let mut snapshot = self.lock();
            let (models, dropped) = snapshot.due(now_ms);
            (models, dropped, snapshot.len())
        };
        self.metrics.models.set(tracked as i64);
        self.metrics.dropped("idle").inc_by(dropped as u64);
        if models.is_empty() {
            return Ok(0);
        }
        match self.source.read(&models).await {
            Ok(states) => {
                self.lock().apply(&models, states);
                self.metrics.read("ok").inc();
                if self.failing.swap(false, Ordering::Relaxed) {
                    tracing::info!("reading the saturation state again");
                }
                Ok(models.len())
            }
            Err(error) => {
                self.metrics.read("failed").inc();
                if self.failing.swap(true, Ordering::Relaxed) {
                    tracing::debug!(%error, "cannot read the saturation state");
                } else {
                    tracing::warn!(%error, max_age_ms = self.options.max_age_ms,
                        "cannot read the saturation state: keeping the last one until it is older than the max age");
                }
                Err(error)
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Snapshot> {
        self.snapshot
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Reads every `refresh_ms`, and sooner (but not within [`NEW_MODEL_GAP`]
/// of the last read) when a model is first tracked; ends with the router.
async fn refresh_loop(
    router: Weak<SaturationRouter>,
    new_model: Arc<Notify>,
    options: RoutingOptions,
) {
    let refresh = Duration::from_millis(options.refresh_ms);
    let gap = NEW_MODEL_GAP.min(refresh);
    loop {
        let started = tokio::time::Instant::now();
        let Some(live) = router.upgrade() else {
            return;
        };
        // Errors are counted and logged by `refresh`.
        let _ = live.refresh(sluice_contract::now_ms()).await;
        drop(live);
        tokio::time::sleep_until(started + gap).await;
        tokio::select! {
            () = tokio::time::sleep_until(started + refresh) => {}
            () = new_model.notified() => {}
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use crate::metrics::SaturationMetrics;
    use crate::saturation::{
        RoutingError, RoutingOptions, SaturationRouter, SaturationSource, NEW_MODEL_GAP,
    };
    use futures::future::BoxFuture;
    use sluice_contract::saturation::{Route, Saturation};
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    /// A source with one settable state for every model; counts its reads
    /// (round trips) and the models they asked for.
    #[derive(Default)]
    pub(crate) struct Fixed {
        pub state: Mutex<Option<Saturation>>,
        pub fail: AtomicBool,
        pub reads: AtomicUsize,
        pub models_read: AtomicUsize,
    }

    impl Fixed {
        pub(crate) fn set(&self, state: Option<Saturation>) {
            *self.state.lock().unwrap_or_else(|e| e.into_inner()) = state;
        }
    }

    impl SaturationSource for Fixed {
        fn read<'a>(
            &'a self,
            models: &'a [String],
        ) -> BoxFuture<'a, Result<Vec<Option<Saturation>>, String>> {
            self.reads.fetch_add(1, Ordering::SeqCst);
            self.models_read.fetch_add(models.len(), Ordering::SeqCst);
            let result = if self.fail.load(Ordering::SeqCst) {
                Err("down".to_string())
            } else {
                let state = *self.state.lock().unwrap_or_else(|e| e.into_inner());
                Ok(vec![state; models.len()])
            };
            Box::pin(async move { result })
        }
    }

    fn saturated(at_ms: u64) -> Option<Saturation> {
        Some(Saturation {
            saturated: true,
            at_ms,
        })
    }

    fn router(source: &Arc<Fixed>, options: RoutingOptions) -> SaturationRouter {
        SaturationRouter::new(source.clone(), options, SaturationMetrics::default()).unwrap()
    }

    #[tokio::test]
    async fn decisions_read_the_snapshot_and_never_the_source() {
        let source = Arc::new(Fixed::default());
        source.set(saturated(1_000));
        let router = router(&source, RoutingOptions::default());
        // First asked: not read yet, direct; tracked from now.
        assert_eq!(router.route("m", 1_000), Route::Direct);
        for now in 1_000..1_100 {
            router.route("m", now);
        }
        assert_eq!(
            source.reads.load(Ordering::SeqCst),
            0,
            "no read on the decision path"
        );
        assert_eq!(router.refresh(1_100).await, Ok(1));
        assert_eq!(router.route("m", 1_100), Route::Queue);
        // The controller stopped writing: the state ages out.
        assert_eq!(router.route("m", 2_500), Route::Queue);
        assert_eq!(router.route("m", 2_501), Route::Direct);
        source.set(Some(Saturation {
            saturated: false,
            at_ms: 2_600,
        }));
        router.refresh(2_600).await.unwrap();
        assert_eq!(router.route("m", 2_700), Route::Direct);
        assert_eq!(source.reads.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_failed_read_keeps_the_last_state_until_it_is_older_than_the_max_age() {
        let source = Arc::new(Fixed::default());
        let metrics = SaturationMetrics::default();
        let router =
            SaturationRouter::new(source.clone(), RoutingOptions::default(), metrics.clone())
                .unwrap();
        router.route("m", 0);
        router.refresh(0).await.unwrap();
        assert_eq!(router.route("m", 0), Route::Direct, "no state written");
        source.set(saturated(500));
        router.refresh(500).await.unwrap();
        source.fail.store(true, Ordering::SeqCst);
        assert!(router.refresh(1_000).await.is_err());
        assert_eq!(router.route("m", 1_000), Route::Queue, "the last state");
        assert!(router.refresh(2_000).await.is_err());
        assert_eq!(
            router.route("m", 2_000),
            Route::Queue,
            "1.5 s after the write"
        );
        assert_eq!(
            router.route("m", 2_001),
            Route::Direct,
            "older than the max age"
        );
        source.fail.store(false, Ordering::SeqCst);
        source.set(saturated(2_100));
        router.refresh(2_100).await.unwrap();
        assert_eq!(router.route("m", 2_100), Route::Queue);
        assert_eq!(metrics.read("failed").get(), 2);
        assert_eq!(metrics.read("ok").get(), 3);
    }

    #[tokio::test]
    async fn one_round_trip_for_every_model_and_a_bounded_set() {
        let source = Arc::new(Fixed::default());
        source.set(saturated(0));
        let metrics = SaturationMetrics::default();
        let options = RoutingOptions {
            max_models: 100,
            ..RoutingOptions::default()
        };
        let router = SaturationRouter::new(source.clone(), options, metrics.clone()).unwrap();
        for i in 0..1_000 {
            assert_eq!(router.route(&format!("model-{i}"), 0), Route::Direct);
        }
        assert_eq!(router.models(), 100);
        assert_eq!(metrics.models.get(), 100);
        assert_eq!(metrics.dropped("refused").get(), 900);
        assert_eq!(router.refresh(0).await, Ok(100));
        assert_eq!(source.reads.load(Ordering::SeqCst), 1, "one round trip");
        assert_eq!(source.models_read.load(Ordering::SeqCst), 100);
        assert_eq!(router.route("model-7", 10), Route::Queue);
        assert_eq!(
            router.route("model-700", 10),
            Route::Direct,
            "refused: never read"
        );
        // A minute later only model-7 was asked again: the rest leave.
        router.route("model-7", 60_001);
        assert_eq!(router.refresh(60_002).await, Ok(1));
        assert_eq!(metrics.dropped("idle").get(), 99);
        assert_eq!(metrics.models.get(), 1);
    }

    /// Reads `source` has made, once it has made at least `at_least`.
    async fn reads_reach(source: &Fixed, at_least: usize) -> usize {
        let asked = std::time::Instant::now();
        loop {
            let reads = source.reads.load(Ordering::SeqCst);
            if reads >= at_least {
                return reads;
            }
            assert!(asked.elapsed() < Duration::from_secs(30), "{reads} reads");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    #[tokio::test]
    async fn the_background_task_reads_new_models_and_spends_at_most_one_read_per_gap() {
        let source = Arc::new(Fixed::default());
        source.set(saturated(sluice_contract::now_ms() + 60_000));
        let options = RoutingOptions::with_max_age(200);
        let router =
            SaturationRouter::start(source.clone(), options, SaturationMetrics::default()).unwrap();
        // The task's clock is the wall clock (idle models leave by it).
        assert_eq!(router.route("m", sluice_contract::now_ms()), Route::Direct);
        reads_reach(&source, 1).await;
        assert_eq!(router.route("m", sluice_contract::now_ms()), Route::Queue);
        // Known models are read again each refresh.
        let reads = source.reads.load(Ordering::SeqCst);
        reads_reach(&source, reads + 2).await;

        // A new model name with every decision: reads stay at most one
        // per gap (and one per refresh), whatever the decision rate.
        let started = std::time::Instant::now();
        let before = source.reads.load(Ordering::SeqCst);
        for i in 0..20_000 {
            router.route(&format!("flood-{i}"), sluice_contract::now_ms());
            if i % 100 == 0 {
                tokio::task::yield_now().await;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        let reads = source.reads.load(Ordering::SeqCst) - before;
        let gaps = started.elapsed().as_millis() as usize / NEW_MODEL_GAP.as_millis() as usize;
        assert!(reads <= gaps + 2, "{reads} reads in {gaps} gaps");
        assert_eq!(router.models(), 1_024, "bounded");

        // Dropped router: the task ends (at most the read under way).
        let reads = source.reads.load(Ordering::SeqCst);
        drop(router);
        tokio::time::sleep(Duration::from_millis(options.refresh_ms * 5)).await;
        assert!(source.reads.load(Ordering::SeqCst) <= reads + 1);
    }

    #[test]
    fn options_are_validated() {
        assert_eq!(RoutingOptions::default().validate(), Ok(()));
        assert_eq!(RoutingOptions::default().refresh_ms, 750);
        let bad = RoutingOptions::with_max_age(10);
        assert!(matches!(bad.validate(), Err(RoutingError::Refresh { .. })));
        for max_models in [0, RoutingOptions::MAX_MODELS + 1] {
            let bad = RoutingOptions {
                max_models,
                ..RoutingOptions::default()
            };
            assert!(matches!(bad.validate(), Err(RoutingError::Models { .. })));
        }
        let bad = RoutingOptions {
            idle_ms: 1_000,
            ..RoutingOptions::default()
        };
        assert!(matches!(bad.validate(), Err(RoutingError::Idle { .. })));
        let bad = RoutingOptions {
            refresh_ms: 1_500,
            ..RoutingOptions::default()
        };
        assert!(matches!(bad.validate(), Err(RoutingError::Refresh { .. })));
    }
}
