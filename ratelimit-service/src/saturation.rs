//! Saturation-aware admission (issue 28): where an in-quota request goes
//! while its model's server is saturated with deferred work.
//!
//! The consumers' controller writes the model's saturation into its
//! controller hash ([`sluice_contract::saturation`]); every sluice-rls
//! instance reads it here, at most once per `refresh_ms` per model (a
//! read-through cache: one `HMGET` per model per refresh, whatever the
//! request rate), and routes by the contract's own rule
//! ([`saturation::route_in_quota`]): a fresh "saturated" sends the request
//! into the token-fair queue (the limiter marks the OK answer with
//! `route: queue`); no state, an old one, or a failed read sends it
//! straight to the server, as before this existed.

use futures::future::BoxFuture;
use sluice_contract::keys;
use sluice_contract::saturation::{self, Route, Saturation};
use sluice_redis::RedisConn;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Where the controller's state is read from.
pub trait SaturationSource: Send + Sync + 'static {
    /// `model`'s last written state; `Ok(None)` when there is none.
    fn read<'a>(&'a self, model: &'a str) -> BoxFuture<'a, Result<Option<Saturation>, String>>;
}

/// The controller hash in Redis (the consumers' Redis).
pub struct RedisSaturation {
    connection: RedisConn,
    timeout: Duration,
}

impl RedisSaturation {
    pub fn new(connection: RedisConn, timeout: Duration) -> Self {
        RedisSaturation {
            connection,
            timeout,
        }
    }
}

impl SaturationSource for RedisSaturation {
    fn read<'a>(&'a self, model: &'a str) -> BoxFuture<'a, Result<Option<Saturation>, String>> {
        Box::pin(async move {
            let mut connection = self.connection.clone();
            let mut command = redis::cmd("HMGET");
            command
                .arg(keys::controller(model))
                .arg(saturation::SATURATED)
                .arg(saturation::SATURATED_AT_MS);
            let (saturated, at_ms): (Option<String>, Option<String>) =
                tokio::time::timeout(self.timeout, command.query_async(&mut connection))
                    .await
                    .map_err(|_| "HMGET timed out".to_string())?
                    .map_err(|e| e.to_string())?;
            Ok(Saturation::from_fields(
                saturated.as_deref(),
                at_ms.as_deref(),
            ))
        })
    }
}

/// The routing knobs (`sluice-rls --route-in-quota-when-saturated`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoutingOptions {
    /// Oldest state acted on, ms: older means "not saturated".
    pub max_age_ms: u64,
    /// How long one read of a model's state is reused, ms.
    pub refresh_ms: u64,
    /// Most models whose state is cached (model names come from clients).
    pub max_models: usize,
}

impl Default for RoutingOptions {
    fn default() -> Self {
        RoutingOptions {
            // Three controller steps at its default 500 ms interval: one
            // missed step does not flip the route.
            max_age_ms: 1_500,
            refresh_ms: 200,
            max_models: 1_024,
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Cached {
    read_at_ms: u64,
    state: Option<Saturation>,
}

/// Routes in-quota requests by their model's saturation.
pub struct SaturationRouter {
    source: Arc<dyn SaturationSource>,
    options: RoutingOptions,
    cache: Mutex<HashMap<String, Cached>>,
}

impl SaturationRouter {
    pub fn new(source: Arc<dyn SaturationSource>, options: RoutingOptions) -> Self {
        SaturationRouter {
            source,
            options,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// Where an in-quota request for `model` goes at `now_ms`.
    pub async fn route(&self, model: &str, now_ms: u64) -> Route {
        let state = match self.cached(model, now_ms) {
            Lookup::Fresh(state) => state,
            Lookup::Read => {
                let state = self.source.read(model).await.unwrap_or_else(|error| {
                    tracing::debug!(model, %error, "cannot read the saturation state: routing direct");
                    None
                });
                self.store(model, now_ms, state);
                state
            }
        };
        saturation::route_in_quota(state, now_ms, self.options.max_age_ms)
    }

    /// The cached state, or whether to read it. The first caller after
    /// `refresh_ms` reads; callers meanwhile keep the previous state (one
    /// read per model per refresh, not one per waiting request).
    fn cached(&self, model: &str, now_ms: u64) -> Lookup {
        let mut cache = self.lock();
        match cache.get_mut(model) {
            Some(entry) if now_ms.saturating_sub(entry.read_at_ms) < self.options.refresh_ms => {
                Lookup::Fresh(entry.state)
            }
            Some(entry) => {
                entry.read_at_ms = now_ms;
                Lookup::Read
            }
            None => Lookup::Read,
        }
    }

    fn store(&self, model: &str, now_ms: u64, state: Option<Saturation>) {
        let mut cache = self.lock();
        if !cache.contains_key(model) && cache.len() >= self.options.max_models {
            let refresh = self.options.refresh_ms;
            cache.retain(|_, e| now_ms.saturating_sub(e.read_at_ms) < refresh);
            if cache.len() >= self.options.max_models {
                return;
            }
        }
        cache.insert(
            model.to_string(),
            Cached {
                read_at_ms: now_ms,
                state,
            },
        );
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Cached>> {
        self.cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

enum Lookup {
    Fresh(Option<Saturation>),
    Read,
}

#[cfg(test)]
pub(crate) mod tests {
    use crate::saturation::{
        BoxFuture, Mutex, Route, RoutingOptions, Saturation, SaturationRouter, SaturationSource,
    };
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// A source with a settable state that counts its reads.
    #[derive(Default)]
    pub(crate) struct Fixed {
        pub state: Mutex<Option<Saturation>>,
        pub fail: std::sync::atomic::AtomicBool,
        pub reads: AtomicUsize,
    }

    impl SaturationSource for Fixed {
        fn read<'a>(
            &'a self,
            _model: &'a str,
        ) -> BoxFuture<'a, Result<Option<Saturation>, String>> {
            self.reads.fetch_add(1, Ordering::SeqCst);
            let result = if self.fail.load(Ordering::SeqCst) {
                Err("down".to_string())
            } else {
                Ok(*self.state.lock().unwrap_or_else(|e| e.into_inner()))
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

    #[tokio::test]
    async fn one_read_per_refresh_and_the_contracts_rule() {
        let source = Arc::new(Fixed::default());
        *source.state.lock().unwrap_or_else(|e| e.into_inner()) = saturated(1_000);
        let router = SaturationRouter::new(source.clone(), RoutingOptions::default());
        assert_eq!(router.route("m", 1_000).await, Route::Queue);
        assert_eq!(router.route("m", 1_199).await, Route::Queue);
        assert_eq!(source.reads.load(Ordering::SeqCst), 1, "cached");
        // The controller stopped writing: the state ages out.
        assert_eq!(router.route("m", 2_501).await, Route::Direct);
        assert_eq!(source.reads.load(Ordering::SeqCst), 2, "read again");
        *source.state.lock().unwrap_or_else(|e| e.into_inner()) = Some(Saturation {
            saturated: false,
            at_ms: 2_600,
        });
        assert_eq!(router.route("m", 2_700).await, Route::Direct);
        assert_eq!(router.route("other", 2_700).await, Route::Direct);
    }

    #[tokio::test]
    async fn a_failed_or_missing_read_goes_direct() {
        let source = Arc::new(Fixed::default());
        let router = SaturationRouter::new(source.clone(), RoutingOptions::default());
        assert_eq!(router.route("m", 0).await, Route::Direct, "no state");
        *source.state.lock().unwrap_or_else(|e| e.into_inner()) = saturated(500);
        source.fail.store(true, Ordering::SeqCst);
        assert_eq!(router.route("m", 500).await, Route::Direct, "failed read");
        source.fail.store(false, Ordering::SeqCst);
        assert_eq!(router.route("m", 700).await, Route::Queue);
    }

    #[tokio::test]
    async fn the_cache_stays_within_its_models() {
        let source = Arc::new(Fixed::default());
        let options = RoutingOptions {
            max_models: 2,
            ..RoutingOptions::default()
        };
        let router = SaturationRouter::new(source.clone(), options);
        for model in ["a", "b", "c", "d"] {
            router.route(model, 0).await;
        }
        assert!(router.lock().len() <= 2);
        // Once their reads are old, new models take their place.
        router.route("e", 1_000).await;
        assert!(router.lock().contains_key("e"));
        assert!(router.lock().len() <= 2);
    }
}
