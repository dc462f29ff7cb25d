//! What the demo's clients saw, per request, and what follows from it: the
//! live table's counts, per-second samples (CSV) and the chart.
//!
//! Everything here is computed from client-side observations only: the
//! status and headers Envoy answered with, when the first token arrived, and
//! the usage the model reported.

use sluice_testkit::chart::{Chart, Panel, Series};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// One request as its client saw it. Times are seconds since the scenario
/// started.
#[derive(Clone, Debug, Default)]
pub struct Record {
    pub tenant: String,
    pub model: String,
    pub sent_s: f64,
    /// Response status, once the headers arrived.
    pub status: Option<u16>,
    /// Answered by the deferral endpoint (`x-sluice-request-id` present):
    /// the request was queued instead of refused.
    pub deferred: bool,
    pub retry_after: Option<String>,
    /// `error.code` of a non-200 answer (or of an SSE `error` event).
    pub error_code: Option<String>,
    /// When the first generated token arrived: the model was working on it.
    pub first_token_s: Option<f64>,
    /// When the answer ended (`[DONE]`, an error, or the connection).
    pub done_s: Option<f64>,
    /// Ended with `[DONE]` after content.
    pub completed: bool,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Transport failure (connection refused, reset, timeout).
    pub failure: Option<String>,
}

impl Record {
    pub fn rejected(&self) -> bool {
        self.status == Some(429)
    }

    /// Admitted to the model without waiting in a queue.
    pub fn direct(&self) -> bool {
        self.status == Some(200) && !self.deferred
    }

    /// Deferred and not started yet at `t` (a later snapshot of the record
    /// knows when it started; a live one does not yet).
    pub fn waiting_at(&self, t: f64) -> bool {
        self.deferred
            && self.sent_s <= t
            && self.first_token_s.is_none_or(|f| f > t)
            && self.done_s.is_none_or(|d| d > t)
    }

    /// When the model started answering (first token), if it did.
    pub fn admitted_at(&self) -> Option<f64> {
        self.first_token_s
    }
}

/// A tenant × model bucket.
pub type Bucket = (String, String);

/// Counts of one bucket at one moment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Counts {
    pub sent: u64,
    pub direct: u64,
    pub deferred: u64,
    /// Deferred and answered completely.
    pub via_queue: u64,
    pub rejected: u64,
    /// Other statuses, SSE errors and transport failures.
    pub failed: u64,
    /// Deferred, not started yet.
    pub waiting: u64,
    /// Age of the oldest waiting request, seconds.
    pub queue_age_s: f64,
}

/// Counts per bucket as of `now_s`, from records sent up to then.
pub fn counts(records: &[Record], now_s: f64) -> BTreeMap<Bucket, Counts> {
    let mut out: BTreeMap<Bucket, Counts> = BTreeMap::new();
    for r in records.iter().filter(|r| r.sent_s <= now_s) {
        let c = out.entry((r.tenant.clone(), r.model.clone())).or_default();
        c.sent += 1;
        if r.direct() {
            c.direct += 1;
        }
        let done_by_now = r.done_s.is_some_and(|d| d <= now_s);
        if r.deferred {
            c.deferred += 1;
            if r.completed && done_by_now {
                c.via_queue += 1;
            }
        }
        if r.rejected() {
            c.rejected += 1;
        }
        let failed_status = r.status.is_some_and(|s| s != 200 && s != 429);
        let failed_stream = r.done_s.is_some() && r.status == Some(200) && !r.completed;
        if failed_status || failed_stream || r.failure.is_some() {
            c.failed += 1;
        }
        if r.waiting_at(now_s) {
            c.waiting += 1;
            c.queue_age_s = c.queue_age_s.max(now_s - r.sent_s);
        }
    }
    out
}

/// A configured pace: requests and tokens per second; `None` = unlimited in
/// that dimension.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Pace {
    pub rps: Option<f64>,
    pub tps: Option<f64>,
}

/// Configured pace of one model column's queue over time: `(from_s, pace)`
/// steps.
#[derive(Clone, Debug, Default)]
pub struct PaceTimeline {
    pub steps: Vec<(f64, Pace)>,
}

impl PaceTimeline {
    pub fn at(&self, t: f64) -> Pace {
        self.steps
            .iter()
            .rev()
            .find(|(from, _)| *from <= t)
            .or(self.steps.first())
            .map(|&(_, pace)| pace)
            .unwrap_or_default()
    }
}

/// One bucket at one second.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Sample {
    pub t_s: f64,
    pub tenant: String,
    pub model: String,
    pub counts: Counts,
    /// Requests that reached the model, per second (moving window).
    pub admitted_rps: f64,
    /// Of which released from the deferred queue.
    pub queued_rps: f64,
    /// Their tokens (prompt + completion as reported by the model), per second.
    pub admitted_tps: f64,
    /// Configured pace of the model's queue at that second.
    pub pace: Pace,
}

/// Length of the moving window behind the per-second rates.
pub const RATE_WINDOW_S: f64 = 5.0;

/// Per-second samples of every bucket, from 0 to `end_s`.
pub fn samples(
    records: &[Record],
    paces: &BTreeMap<String, PaceTimeline>,
    end_s: f64,
) -> Vec<Sample> {
    let buckets: Vec<Bucket> = counts(records, f64::INFINITY).into_keys().collect();
    let mut out = Vec::new();
    let seconds = end_s.max(0.0).ceil() as u64;
    for second in 0..=seconds {
        let t = second as f64;
        let now = counts(records, t);
        let window = RATE_WINDOW_S.min(t).max(1.0);
        for bucket in &buckets {
            let admitted: Vec<&Record> = records
                .iter()
                .filter(|r| (&r.tenant, &r.model) == (&bucket.0, &bucket.1))
                .filter(|r| r.admitted_at().is_some_and(|a| a > t - window && a <= t))
                .collect();
            let tokens: u64 = admitted
                .iter()
                .map(|r| r.prompt_tokens + r.completion_tokens)
                .sum();
            let pace = paces.get(&bucket.1).map(|p| p.at(t)).unwrap_or_default();
            let queued = admitted.iter().filter(|r| r.deferred).count();
            out.push(Sample {
                t_s: t,
                tenant: bucket.0.clone(),
                model: bucket.1.clone(),
                counts: now.get(bucket).cloned().unwrap_or_default(),
                admitted_rps: admitted.len() as f64 / window,
                queued_rps: queued as f64 / window,
                admitted_tps: tokens as f64 / window,
                pace,
            });
        }
    }
    out
}

fn opt(v: Option<f64>) -> String {
    v.map(|v| format!("{v}")).unwrap_or_default()
}

/// Samples as CSV (one row per bucket and second).
pub fn samples_csv(samples: &[Sample]) -> String {
    let mut out = String::from(
        "t_s,tenant,model,sent,direct,deferred,via_queue,rejected,failed,waiting,queue_age_s,admitted_rps,queued_rps,admitted_tps,pace_rps,pace_tps\n",
    );
    for s in samples {
        let c = &s.counts;
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{:.2},{:.3},{:.3},{:.1},{},{}",
            s.t_s,
            s.tenant,
            s.model,
            c.sent,
            c.direct,
            c.deferred,
            c.via_queue,
            c.rejected,
            c.failed,
            c.waiting,
            c.queue_age_s,
            s.admitted_rps,
            s.queued_rps,
            s.admitted_tps,
            opt(s.pace.rps),
            opt(s.pace.tps)
        );
    }
    out
}

/// Every request as CSV.
pub fn records_csv(records: &[Record]) -> String {
    let mut out = String::from(
        "tenant,model,sent_s,status,deferred,retry_after,error_code,first_token_s,done_s,completed,prompt_tokens,completion_tokens,failure\n",
    );
    let f = |v: Option<f64>| v.map(|v| format!("{v:.3}")).unwrap_or_default();
    for r in records {
        let _ = writeln!(
            out,
            "{},{},{:.3},{},{},{},{},{},{},{},{},{},{}",
            r.tenant,
            r.model,
            r.sent_s,
            r.status.map(|s| s.to_string()).unwrap_or_default(),
            r.deferred,
            r.retry_after.clone().unwrap_or_default(),
            r.error_code.clone().unwrap_or_default(),
            f(r.first_token_s),
            f(r.done_s),
            r.completed,
            r.prompt_tokens,
            r.completion_tokens,
            r.failure
                .as_deref()
                .unwrap_or("")
                .replace([',', '\n', '"'], " ")
        );
    }
    out
}

/// A configured value sampled once a second, drawn as steps (it changes at
/// one instant, not over the second before).
fn steps(points: impl Iterator<Item = (f64, f64)>) -> Vec<(f64, f64)> {
    let mut out: Vec<(f64, f64)> = Vec::new();
    for (t, v) in points {
        if let Some(&(_, last)) = out.last() {
            if last != v {
                out.push((t, last));
            }
        }
        out.push((t, v));
    }
    out
}

/// A limit drawn into the tokens panel: `(label, tokens per second)`.
pub type QuotaLine = (String, f64);

/// The demo's chart: admitted requests/s and tokens/s per bucket with the
/// configured rates as dashed lines, and the age of the oldest queued request.
pub fn chart(samples: &[Sample], quotas: &[QuotaLine], title: &str) -> Chart {
    let mut buckets: Vec<Bucket> = samples
        .iter()
        .map(|s| (s.tenant.clone(), s.model.clone()))
        .collect();
    buckets.sort();
    buckets.dedup();
    let mut models: Vec<String> = buckets.iter().map(|b| b.1.clone()).collect();
    models.sort();
    models.dedup();
    fn of<'a>(samples: &'a [Sample], bucket: &'a Bucket) -> impl Iterator<Item = &'a Sample> {
        samples
            .iter()
            .filter(move |s| s.tenant == bucket.0 && s.model == bucket.1)
    }
    let mut rps = Vec::new();
    let mut tps = Vec::new();
    let mut age = Vec::new();
    for (i, bucket) in buckets.iter().enumerate() {
        let label = format!("{}/{}", bucket.0, bucket.1);
        let points = |value: fn(&Sample) -> f64| -> Vec<(f64, f64)> {
            of(samples, bucket).map(|s| (s.t_s, value(s))).collect()
        };
        rps.push(Series::solid(
            format!("{label} (all)"),
            points(|s| s.admitted_rps),
            i,
        ));
        if of(samples, bucket).any(|s| s.queued_rps > 0.0) {
            rps.push(
                Series::solid(
                    format!("{label} (from the queue)"),
                    points(|s| s.queued_rps),
                    i,
                )
                .thin(),
            );
        }
        tps.push(Series::solid(label.clone(), points(|s| s.admitted_tps), i));
        age.push(Series::solid(label, points(|s| s.counts.queue_age_s), i));
    }
    let first_pace_color = buckets.len();
    for (j, model) in models.iter().enumerate() {
        let of_model: Vec<&Sample> = {
            let mut seen = std::collections::BTreeSet::new();
            samples
                .iter()
                .filter(|s| &s.model == model)
                .filter(|s| seen.insert(s.t_s.to_bits()))
                .collect()
        };
        let label = format!("{model} queue pace (configured)");
        let color = first_pace_color + j;
        let pace = |value: fn(&Sample) -> Option<f64>| {
            steps(of_model.iter().filter_map(|s| value(s).map(|v| (s.t_s, v))))
        };
        for (panel, points) in [
            (&mut rps, pace(|s| s.pace.rps)),
            (&mut tps, pace(|s| s.pace.tps)),
        ] {
            if !points.is_empty() {
                panel.push(Series::dashed(label.clone(), points, color));
            }
        }
    }
    let end = samples.iter().map(|s| s.t_s).fold(0.0, f64::max);
    for (k, (label, value)) in quotas.iter().enumerate() {
        tps.push(Series::dashed(
            label.clone(),
            vec![(0.0, *value), (end, *value)],
            first_pace_color + models.len() + k,
        ));
    }
    Chart {
        title: title.to_string(),
        x_label: "seconds since start".into(),
        width: 1280,
        height: 1200,
        panels: vec![
            Panel {
                title: format!(
                    "requests/s reaching the model ({RATE_WINDOW_S:.0} s moving average)"
                ),
                y_label: "requests/s".into(),
                series: rps,
            },
            Panel {
                title: "tokens/s reaching the model (prompt + completion)".into(),
                y_label: "tokens/s".into(),
                series: tps,
            },
            Panel {
                title: "deferred queue: age of the oldest waiting request".into(),
                y_label: "seconds".into(),
                series: age,
            },
        ],
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    fn pace(rps: Option<f64>, tps: Option<f64>) -> Pace {
        Pace { rps, tps }
    }

    fn record(tenant: &str, sent: f64) -> Record {
        Record {
            tenant: tenant.into(),
            model: "m".into(),
            sent_s: sent,
            ..Default::default()
        }
    }

    #[test]
    fn counts_follow_what_the_client_saw() {
        // A 200 answered from `first_token_s` to `done_s`, to the end.
        let completed = |first_token_s: f64, done_s: f64, sent: Record| Record {
            status: Some(200),
            first_token_s: Some(first_token_s),
            done_s: Some(done_s),
            completed: true,
            ..sent
        };
        let direct = completed(0.1, 0.5, record("a", 0.0));
        let waiting = Record {
            status: Some(200),
            deferred: true,
            ..record("a", 1.0)
        };
        let via_queue = completed(
            4.0,
            5.0,
            Record {
                deferred: true,
                ..record("a", 2.0)
            },
        );
        let rejected = Record {
            status: Some(429),
            retry_after: Some("30".into()),
            done_s: Some(2.1),
            ..record("a", 2.0)
        };
        let later = record("a", 9.0);
        let all = [direct, waiting, via_queue, rejected, later];
        let c = &counts(&all, 6.0)[&("a".to_string(), "m".to_string())];
        assert_eq!(
            *c,
            Counts {
                sent: 4,
                direct: 1,
                deferred: 2,
                via_queue: 1,
                rejected: 1,
                failed: 0,
                waiting: 1,
                queue_age_s: 5.0,
            }
        );
    }

    #[test]
    fn samples_count_admissions_in_a_moving_window_and_carry_the_pace() {
        let records: Vec<Record> = (0..10)
            .map(|i| Record {
                status: Some(200),
                first_token_s: Some(i as f64 + 0.5),
                prompt_tokens: 90,
                completion_tokens: 10,
                completed: true,
                ..record("a", i as f64)
            })
            .collect();
        let mut paces = BTreeMap::new();
        paces.insert(
            "m".to_string(),
            PaceTimeline {
                steps: vec![
                    (0.0, pace(Some(2.0), None)),
                    (5.0, pace(Some(1.0), Some(100.0))),
                ],
            },
        );
        let s = samples(&records, &paces, 10.0);
        assert_eq!(s.len(), 11);
        // At t=8: admissions at 3.5 .. 7.5 are in (3, 8]: 5 in 5 s.
        assert_eq!(s[8].admitted_rps, 1.0);
        assert_eq!(s[8].admitted_tps, 100.0);
        assert_eq!(s[4].pace, pace(Some(2.0), None));
        assert_eq!(s[6].pace, pace(Some(1.0), Some(100.0)));
        let csv = samples_csv(&s);
        assert_eq!(csv.lines().count(), 12);
        assert!(csv.lines().nth(9).unwrap().starts_with("8,a,m,"), "{csv}");
    }
}
