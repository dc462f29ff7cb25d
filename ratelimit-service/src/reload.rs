//! Hot reload of the limits configuration.
//!
//! Polls the files rather than relying on inotify: Kubernetes updates a
//! ConfigMap mount by swapping a symlink, which file watches often miss, and a
//! read of a few small files every couple of seconds costs nothing.

use crate::config::{parse_file, read_sources};
use crate::limiter::Limiter;
use crate::metrics::ResultLabels;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Outcome of one reload check.
#[derive(Debug, PartialEq, Eq)]
pub enum ReloadOutcome {
    Unchanged,
    Applied,
    Rejected(String),
}

pub struct Reloader {
    path: PathBuf,
    limiter: Arc<Limiter>,
    /// Fingerprint of the last contents seen (applied or rejected), so a bad
    /// file is reported once, not every tick.
    last_seen: Option<u64>,
}

impl Reloader {
    pub fn new(path: PathBuf, limiter: Arc<Limiter>) -> Self {
        let last_seen = read_sources(&path).ok().map(|s| fingerprint(&s));
        Reloader {
            path,
            limiter,
            last_seen,
        }
    }

    /// Check the files once and apply them if they changed and are valid.
    pub fn check(&mut self) -> ReloadOutcome {
        let result = read_sources(&self.path).and_then(|sources| {
            let print = fingerprint(&sources);
            if self.last_seen == Some(print) {
                return Ok(None);
            }
            self.last_seen = Some(print);
            let files = sources
                .iter()
                .map(|(file, text)| parse_file(file, text).map(|domain| (file.clone(), domain)))
                .collect::<Result<Vec<_>, _>>()?;
            // Same options, same xDS part as the running config.
            self.limiter
                .update_config(|current| current.with_files(files))
                .map(Some)
        });
        let metrics = self.limiter.metrics().clone();
        match result {
            Ok(None) => ReloadOutcome::Unchanged,
            Ok(Some(config)) => {
                tracing::info!(
                    path = %self.path.display(),
                    limits = config.limit_count(),
                    "limits configuration reloaded"
                );
                config.log_warnings();
                metrics
                    .config_reloads
                    .get_or_create(&ResultLabels { result: "applied" })
                    .inc();
                ReloadOutcome::Applied
            }
            Err(error) => {
                // An unreadable path is retried every tick; a bad file once per change.
                tracing::error!(%error, "limits configuration rejected; keeping the last good one");
                metrics
                    .config_reloads
                    .get_or_create(&ResultLabels { result: "rejected" })
                    .inc();
                ReloadOutcome::Rejected(error.to_string())
            }
        }
    }

    /// Check every `interval` until `shutdown` resolves.
    pub async fn run(
        mut self,
        interval: Duration,
        shutdown: impl std::future::Future<Output = ()>,
    ) {
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                _ = &mut shutdown => return,
                _ = ticker.tick() => {
                    // A few small files: reading them inline is cheaper than a hop to a blocking thread.
                    let outcome = self.check();
                    tracing::trace!(?outcome, "reload check");
                }
            }
        }
    }
}

fn fingerprint(sources: &[(PathBuf, String)]) -> u64 {
    let mut hasher = DefaultHasher::new();
    sources.hash(&mut hasher);
    hasher.finish()
}
