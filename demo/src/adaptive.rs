//! The adaptive-pacing scenario's figures (`sluice-demo --scenario
//! adaptive`): what the samples and the answered requests say about the
//! controller and the fair sharing, as a summary and a chart. Pure: the
//! demo binary plays the scenario and feeds the results in.

use crate::stats::Record;
use sluice_testkit::chart::{Chart, Panel, Series};
use std::fmt::Write as _;

/// A team of closed-loop users sharing the model: each user sends its next
/// request as soon as the previous one is answered, so the team always has
/// work queued.
#[derive(Clone, Copy, Debug)]
pub struct Team {
    pub tenant: &'static str,
    /// Its weight in the consumer's fair sharing
    /// (`demo/config/consumer-adaptive.yaml`).
    pub weight: f64,
    pub users: usize,
}

/// The teams, as `demo/config/consumer-adaptive.yaml` weighs them.
pub const TEAMS: [Team; 3] = [
    Team {
        tenant: "team-a",
        weight: 1.0,
        users: 24,
    },
    Team {
        tenant: "team-b",
        weight: 2.0,
        users: 24,
    },
    Team {
        tenant: "team-c",
        weight: 4.0,
        users: 24,
    },
];

/// The model the teams share.
pub const MODEL: &str = "gpt-4o";

/// When the GPU's capacity halves and recovers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timing {
    pub cut_at_s: f64,
    pub restore_at_s: f64,
    /// No new requests after this.
    pub send_until_s: f64,
}

impl Timing {
    pub fn new(quick: bool) -> Self {
        if quick {
            Timing {
                cut_at_s: 10.0,
                restore_at_s: 20.0,
                send_until_s: 30.0,
            }
        } else {
            Timing {
                cut_at_s: 30.0,
                restore_at_s: 60.0,
                send_until_s: 90.0,
            }
        }
    }

    /// The three phases: (name, from, to, capacity factor).
    pub fn phases(&self) -> [(&'static str, f64, f64, f64); 3] {
        [
            ("full capacity", 0.0, self.cut_at_s, 1.0),
            ("capacity halved", self.cut_at_s, self.restore_at_s, 0.5),
            ("restored", self.restore_at_s, self.send_until_s, 1.0),
        ]
    }
}

/// The model server and the controller at one moment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GpuSample {
    pub t_s: f64,
    /// The simulated GPU's tokens/s (its `/admin/capacity`).
    pub capacity_tps: f64,
    pub running: f64,
    pub waiting: f64,
    /// The controller's limit on calls in flight to the model, all
    /// consumers together (`GET /controller/<model>`).
    pub limit: Option<f64>,
}

/// Length of the window behind tokens/s and shares.
pub const WINDOW_S: f64 = 5.0;

/// Tokens (prompt + completion) of `tenant`'s requests answered in
/// `(from, to]`; every tenant when `tenant` is `None`.
fn tokens_done(records: &[Record], tenant: Option<&str>, from: f64, to: f64) -> f64 {
    records
        .iter()
        .filter(|r| r.completed && r.model == MODEL)
        .filter(|r| tenant.is_none_or(|t| r.tenant == t))
        .filter(|r| r.done_s.is_some_and(|d| d > from && d <= to))
        .map(|r| (r.prompt_tokens + r.completion_tokens) as f64)
        .sum()
}

/// Each team's share of the tokens answered in `(from, to]`, in team order;
/// `None` when nothing was answered.
pub fn shares(records: &[Record], from: f64, to: f64) -> Option<Vec<f64>> {
    let total = tokens_done(records, None, from, to);
    (total > 0.0).then(|| {
        TEAMS
            .iter()
            .map(|team| tokens_done(records, Some(team.tenant), from, to) / total)
            .collect()
    })
}

/// Each team's expected share: its weight over the sum of weights.
pub fn expected_shares() -> Vec<f64> {
    let sum: f64 = TEAMS.iter().map(|t| t.weight).sum();
    TEAMS.iter().map(|t| t.weight / sum).collect()
}

/// The first sample time in `[from, to)` after which the limit stays within
/// ±`band` of its median over the phase's second half; `None` without limits.
pub fn settled_at(samples: &[GpuSample], from: f64, to: f64, band: f64) -> Option<f64> {
    let phase: Vec<(f64, f64)> = samples
        .iter()
        .filter(|s| s.t_s >= from && s.t_s < to)
        .filter_map(|s| s.limit.map(|l| (s.t_s, l)))
        .collect();
    let mut tail: Vec<f64> = phase
        .iter()
        .filter(|(t, _)| *t >= (from + to) / 2.0)
        .map(|&(_, l)| l)
        .collect();
    if tail.is_empty() {
        return None;
    }
    tail.sort_by(f64::total_cmp);
    let median = tail[tail.len() / 2];
    let inside = |l: f64| (l - median).abs() <= band * median.max(1.0);
    // The last sample outside the band; settled at the one after it.
    let last_outside = phase.iter().rposition(|&(_, l)| !inside(l));
    match last_outside {
        None => phase.first().map(|&(t, _)| t),
        Some(i) => phase.get(i + 1).map(|&(t, _)| t),
    }
}

fn mean(values: impl Iterator<Item = f64>) -> Option<f64> {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    (n > 0).then(|| sum / n as f64)
}

/// Per phase: capacity, tokens/s answered, the controller's limit, the
/// server's queue, each team's share against its weight, and how long the
/// limit took to settle after the change that opened the phase.
pub fn summary(samples: &[GpuSample], records: &[Record], timing: &Timing) -> String {
    let mut text = String::new();
    let expected = expected_shares();
    let _ = writeln!(
        text,
        "    teams (weight): {}",
        TEAMS
            .iter()
            .map(|t| format!("{} ({})", t.tenant, t.weight))
            .collect::<Vec<_>>()
            .join(", ")
    );
    for (name, from, to, _) in timing.phases() {
        let of_phase = || samples.iter().filter(move |s| s.t_s >= from && s.t_s < to);
        let _ = write!(text, "    {name:<16} {from:>4.0}-{to:<4.0} s:");
        if let Some(capacity) = mean(of_phase().map(|s| s.capacity_tps)) {
            let _ = write!(text, " capacity {capacity:.0} tokens/s,");
        }
        let done = tokens_done(records, None, from, to) / (to - from).max(1.0);
        let _ = write!(text, " answered {done:.0} tokens/s,");
        if let Some(limit) = mean(of_phase().filter_map(|s| s.limit)) {
            let _ = write!(text, " limit {limit:.1},");
        }
        if let Some(waiting) = mean(of_phase().map(|s| s.waiting)) {
            let _ = write!(text, " server queue {waiting:.1}");
        }
        if from > 0.0 {
            if let Some(at) = settled_at(samples, from, to, 0.25) {
                let _ = write!(text, ", limit settled {:.1} s after the change", at - from);
            }
        }
        let _ = writeln!(text);
        // Shares after the phase's first few seconds (the change settling).
        let settle = (WINDOW_S).min((to - from) / 3.0);
        if let Some(shares) = shares(records, from + settle, to) {
            let parts: Vec<String> = TEAMS
                .iter()
                .zip(shares.iter().zip(&expected))
                .map(|(team, (got, want))| {
                    format!(
                        "{} {:.0} % (weight: {:.0} %)",
                        team.tenant,
                        got * 100.0,
                        want * 100.0
                    )
                })
                .collect();
            let _ = writeln!(text, "      token shares: {}", parts.join(", "));
        }
    }
    text
}

/// Capacity against work answered, the controller's limit against the
/// server's batch and queue, and each team's token share against its weight.
pub fn chart(samples: &[GpuSample], records: &[Record], end_s: f64) -> Chart {
    let seconds: Vec<f64> = (0..=end_s.max(0.0).ceil() as u64)
        .map(|s| s as f64)
        .collect();
    let windowed = |t: f64| (t - WINDOW_S, t);
    let answered: Vec<(f64, f64)> = seconds
        .iter()
        .map(|&t| {
            let (from, to) = windowed(t);
            (t, tokens_done(records, None, from, to) / WINDOW_S)
        })
        .collect();
    let line = |label: &str, color: usize, dashed: bool, points: Vec<(f64, f64)>| Series {
        label: label.to_string(),
        points,
        dashed,
        color,
        thin: false,
    };
    let throughput = Panel {
        title: format!("{MODEL}: GPU capacity and tokens answered ({WINDOW_S:.0} s window)"),
        y_label: "tokens/s".into(),
        series: vec![
            line(
                "GPU capacity",
                7,
                true,
                samples.iter().map(|s| (s.t_s, s.capacity_tps)).collect(),
            ),
            line("answered through Sluice", 0, false, answered),
        ],
    };
    let concurrency = Panel {
        title: "controller limit (calls in flight) vs the server's batch and queue".into(),
        y_label: "requests".into(),
        series: vec![
            line(
                "controller limit",
                3,
                false,
                samples
                    .iter()
                    .filter_map(|s| s.limit.map(|l| (s.t_s, l)))
                    .collect(),
            ),
            line(
                "running at the server",
                2,
                false,
                samples.iter().map(|s| (s.t_s, s.running)).collect(),
            ),
            line(
                "waiting at the server",
                1,
                false,
                samples.iter().map(|s| (s.t_s, s.waiting)).collect(),
            ),
        ],
    };
    let mut share_series = Vec::new();
    for (i, (team, want)) in TEAMS.iter().zip(expected_shares()).enumerate() {
        let points = seconds
            .iter()
            .filter_map(|&t| {
                let (from, to) = windowed(t);
                shares(records, from, to).map(|s| (t, s[i] * 100.0))
            })
            .collect();
        share_series.push(line(
            &format!("{} (weight {})", team.tenant, team.weight),
            4 + i,
            false,
            points,
        ));
        share_series.push(Series {
            thin: true,
            ..line(
                &format!("{} by weight", team.tenant),
                4 + i,
                true,
                vec![(0.0, want * 100.0), (end_s, want * 100.0)],
            )
        });
    }
    Chart {
        title: "Sluice demo: adaptive pacing and fair shares while the GPU halves and recovers"
            .into(),
        x_label: "seconds".into(),
        width: 1280,
        height: 1200,
        panels: vec![
            throughput,
            concurrency,
            Panel {
                title: format!("token share per team ({WINDOW_S:.0} s window)"),
                y_label: "%".into(),
                series: share_series,
            },
        ],
    }
}

/// The samples as CSV.
pub fn samples_csv(samples: &[GpuSample]) -> String {
    let mut text = String::from("t_s,capacity_tokens_per_s,running,waiting,limit\n");
    for s in samples {
        let limit = s.limit.map(|l| l.to_string()).unwrap_or_default();
        let _ = writeln!(
            text,
            "{:.1},{},{},{},{limit}",
            s.t_s, s.capacity_tps, s.running, s.waiting
        );
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answered(tenant: &str, done_s: f64, tokens: u64) -> Record {
        Record {
            tenant: tenant.into(),
            model: MODEL.into(),
            completed: true,
            done_s: Some(done_s),
            prompt_tokens: tokens / 2,
            completion_tokens: tokens - tokens / 2,
            ..Default::default()
        }
    }

    #[test]
    fn shares_count_answered_tokens_per_team_inside_the_window() {
        let records = vec![
            answered("team-a", 1.0, 100),
            answered("team-b", 1.5, 200),
            answered("team-c", 2.0, 400),
            answered("team-c", 2.5, 300),
            // Outside the window, not answered, or another model.
            answered("team-a", 9.0, 1000),
            Record {
                completed: false,
                ..answered("team-a", 2.0, 1000)
            },
            Record {
                model: "other".into(),
                ..answered("team-a", 2.0, 1000)
            },
        ];
        let got = shares(&records, 0.0, 5.0).unwrap();
        assert_eq!(got, vec![0.1, 0.2, 0.7]);
        assert_eq!(shares(&records, 20.0, 25.0), None);
        let want = expected_shares();
        assert!((want.iter().sum::<f64>() - 1.0).abs() < 1e-9);
        assert!((want[2] - 4.0 / 7.0).abs() < 1e-9);
    }

    fn limits(values: &[(f64, f64)]) -> Vec<GpuSample> {
        values
            .iter()
            .map(|&(t_s, l)| GpuSample {
                t_s,
                limit: Some(l),
                ..Default::default()
            })
            .collect()
    }

    #[test]
    fn settling_is_the_first_moment_the_limit_stays_near_its_final_level() {
        // Falls from 20 to ~10 by 13 s, then wobbles inside ±25 %.
        let samples = limits(&[
            (10.0, 20.0),
            (11.0, 16.0),
            (12.0, 14.0),
            (13.0, 11.0),
            (14.0, 10.0),
            (15.0, 9.0),
            (16.0, 10.0),
            (17.0, 11.0),
            (18.0, 10.0),
            (19.0, 10.0),
        ]);
        assert_eq!(settled_at(&samples, 10.0, 20.0, 0.25), Some(13.0));
        // Steady from the start.
        let flat = limits(&[(0.0, 8.0), (1.0, 8.0), (2.0, 8.0)]);
        assert_eq!(settled_at(&flat, 0.0, 3.0, 0.25), Some(0.0));
        // No limit sampled: nothing to say.
        assert_eq!(settled_at(&[], 0.0, 3.0, 0.25), None);
    }

    #[test]
    fn the_chart_has_three_panels_and_the_summary_every_phase() {
        let timing = Timing::new(true);
        let samples: Vec<GpuSample> = (0..30)
            .map(|t| GpuSample {
                t_s: t as f64,
                capacity_tps: if (10..20).contains(&t) { 800.0 } else { 1600.0 },
                running: 8.0,
                waiting: 1.0,
                limit: Some(10.0),
            })
            .collect();
        // Every second, tokens in the ratio of the weights.
        let records: Vec<Record> = (0..30)
            .flat_map(|t| {
                TEAMS.iter().map(move |team| {
                    answered(team.tenant, t as f64 + 0.5, 100 * team.weight as u64)
                })
            })
            .collect();
        let chart = chart(&samples, &records, 30.0);
        assert_eq!(chart.panels.len(), 3);
        assert_eq!(chart.panels[2].series.len(), 6);
        let text = summary(&samples, &records, &timing);
        for phase in ["full capacity", "capacity halved", "restored"] {
            assert!(text.contains(phase), "{text}");
        }
        assert!(text.contains("capacity 800 tokens/s"), "{text}");
        assert!(text.contains("team-c 57 % (weight: 57 %)"), "{text}");
        assert!(text.contains("answered 700 tokens/s"), "{text}");
        assert!(samples_csv(&samples).lines().count() == 31);
    }
}
