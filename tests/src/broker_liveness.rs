//! The broker's liveness check run the way kubelet runs the chart's
//! `livenessProbe` (deploy/kubernetes/sluice.yaml): one real round trip
//! (`sluice_litetopic::probe`, what `sluice-rls broker-probe` serves on
//! `/livez`) every period, each within its deadline; after
//! `failure_threshold` failures in a row the broker is to be restarted.
//! Shared by the frozen-broker test (`tests/tests/broker_freeze.rs`) and the
//! chaos run's `broker-freeze` fault.

use sluice_litetopic::probe::{probe, ProbeOptions};
use std::time::{Duration, Instant};

/// How often, how patiently and after how many failures kubelet acts.
#[derive(Clone, Debug)]
pub struct LivenessPolicy {
    /// `periodSeconds`: from the start of one probe to the next.
    pub period: Duration,
    /// `failureThreshold`: failures in a row before a restart.
    pub failure_threshold: u32,
    /// The round trip's own deadline (`broker-probe --deadline-ms`).
    pub probe: ProbeOptions,
}

impl LivenessPolicy {
    /// The chart's: `periodSeconds: 10`, `failureThreshold: 3`, the probe
    /// container's `--deadline-ms 5000` (within `timeoutSeconds: 9`).
    pub fn chart() -> LivenessPolicy {
        LivenessPolicy {
            period: Duration::from_secs(10),
            failure_threshold: 3,
            probe: ProbeOptions {
                deadline: Duration::from_secs(5),
                ..ProbeOptions::default()
            },
        }
    }
}

/// What the probing saw until it decided on a restart, timed from `since`.
#[derive(Clone, Debug)]
pub struct Detection {
    /// The first failed probe ended.
    pub first_failure: Duration,
    /// The last failure of the row ended: the restart is due.
    pub decided: Duration,
    /// The slowest failed probe (bounded by its deadline, or it hangs).
    pub longest_failed_probe: Duration,
    /// Probes that passed after `since` (a broker that is not stuck).
    pub passed: u32,
}

/// Probes the broker behind `namesrv` by `policy` until it fails
/// `failure_threshold` times in a row, or `give_up` after `since` passes
/// first (`Err`: the broker kept answering).
pub async fn until_restart_due(
    namesrv: &str,
    policy: &LivenessPolicy,
    since: Instant,
    give_up: Duration,
) -> anyhow::Result<Detection> {
    let (mut failures, mut passed) = (0, 0);
    let mut first_failure = None;
    let mut longest_failed_probe = Duration::ZERO;
    loop {
        let started = Instant::now();
        match probe(namesrv, &policy.probe).await {
            Ok(report) => {
                eprintln!("broker probe passed: round trip {:?}", report.round_trip);
                failures = 0;
                passed += 1;
            }
            Err(error) => {
                let took = started.elapsed();
                longest_failed_probe = longest_failed_probe.max(took);
                first_failure.get_or_insert(since.elapsed());
                failures += 1;
                eprintln!(
                    "broker probe failed after {took:?} ({failures}/{}): {error}",
                    policy.failure_threshold
                );
            }
        }
        if failures >= policy.failure_threshold {
            return Ok(Detection {
                first_failure: first_failure.unwrap_or_default(),
                decided: since.elapsed(),
                longest_failed_probe,
                passed,
            });
        }
        anyhow::ensure!(
            since.elapsed() < give_up,
            "the broker still answered its probe {give_up:?} on ({passed} passed)"
        );
        tokio::time::sleep(policy.period.saturating_sub(started.elapsed())).await;
    }
}
