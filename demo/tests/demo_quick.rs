//! The demo binary, for real: `sluice-demo --quick` starts the whole stack
//! (Redis, RocketMQ, sluice-rls, sluice-consumer, llm-sim, Envoy + Wasm),
//! plays the short scenario and must leave its results — and no process —
//! behind.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

fn csv_rows(text: &str) -> Vec<std::collections::HashMap<String, String>> {
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    lines
        .map(|l| {
            header
                .iter()
                .map(|h| h.to_string())
                .zip(l.split(',').map(str::to_string))
                .collect()
        })
        .collect()
}

/// Runs `sluice-demo` with `args`, quick and not live, its files in `out`;
/// its stdout, once it has succeeded. What is decided, not how fast: see
/// `--decision-deadline-ms`.
fn run_quick_demo(args: &[&str], out: &Path) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_sluice-demo"))
        .args(args)
        .args([
            "--quick",
            "--live",
            "false",
            "--decision-deadline-ms",
            "5000",
            "--out",
        ])
        .arg(out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    stdout
}

#[test]
fn quick_demo_defers_the_bursty_tenant_rejects_low_priority_and_cleans_up() {
    let exe = Path::new(env!("CARGO_BIN_EXE_sluice-demo"));
    let bin_dir = exe.parent().unwrap();
    for name in ["sluice-rls", "sluice-consumer", "sluice-llm-sim"] {
        assert!(
            bin_dir.join(name).is_file(),
            "{} missing: build the workspace's binaries first (cargo test --workspace does)",
            bin_dir.join(name).display()
        );
    }
    let out = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let stdout = run_quick_demo(&[], out.path());
    let took = started.elapsed();
    assert!(took < Duration::from_secs(90), "took {took:?}");

    for name in ["summary.txt", "samples.csv", "requests.csv", "demo.png"] {
        assert!(out.path().join(name).is_file(), "{name} missing\n{stdout}");
    }
    assert!(stdout.contains("==> summary after"), "{stdout}");
    assert!(stdout.contains("demo.png"), "{stdout}");

    let png = std::fs::read(out.path().join("demo.png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(u32::from_be_bytes(png[16..20].try_into().unwrap()), 1280);
    assert_eq!(u32::from_be_bytes(png[20..24].try_into().unwrap()), 1200);

    let requests = csv_rows(&std::fs::read_to_string(out.path().join("requests.csv")).unwrap());
    let of = |tenant: &'static str| requests.iter().filter(move |r| r["tenant"] == tenant);
    // steady: inside its quota, answered directly.
    assert!(of("steady").count() >= 20, "{stdout}");
    assert!(
        of("steady")
            .all(|r| r["status"] == "200" && r["deferred"] == "false" && r["completed"] == "true"),
        "{stdout}"
    );
    // bursty: over its tokens/min, deferred and answered through the queue.
    let bursty_queued = of("bursty")
        .filter(|r| r["deferred"] == "true" && r["completed"] == "true")
        .count();
    assert!(
        bursty_queued >= 2,
        "bursty answered via queue: {bursty_queued}\n{stdout}"
    );
    assert_eq!(
        of("bursty").filter(|r| r["status"] == "429").count(),
        0,
        "{stdout}"
    );
    // batch-etl: low priority fails fast with 429 + Retry-After.
    let rejected: Vec<_> = of("batch-etl").filter(|r| r["status"] == "429").collect();
    assert!(!rejected.is_empty(), "{stdout}");
    assert!(
        rejected.iter().all(|r| !r["retry_after"].is_empty()),
        "{stdout}"
    );

    let samples = std::fs::read_to_string(out.path().join("samples.csv")).unwrap();
    assert!(samples.lines().count() > 10, "{samples}");

    // Nothing it started is left running.
    let pids_line = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("pids:"))
        .unwrap();
    for part in pids_line.split_whitespace().filter(|p| p.contains('=')) {
        let pid = part.split('=').nth(1).unwrap().trim_end_matches(')');
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists()
                || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .map(|s| s.contains(") Z "))
                    .unwrap_or(true),
            "{part} still running"
        );
    }
}

#[test]
fn adaptive_demo_follows_the_capacity_and_shares_by_weight() {
    let out = tempfile::tempdir().unwrap();
    let stdout = run_quick_demo(&["--scenario", "adaptive"], out.path());
    for name in ["summary.txt", "gpu-samples.csv", "requests.csv", "demo.png"] {
        assert!(out.path().join(name).is_file(), "{name} missing\n{stdout}");
    }

    // Every request is answered, nearly all through the queue.
    let requests = csv_rows(&std::fs::read_to_string(out.path().join("requests.csv")).unwrap());
    let unanswered: Vec<_> = requests
        .iter()
        .filter(|r| r["completed"] != "true")
        .collect();
    assert!(unanswered.is_empty(), "{unanswered:?}\n{stdout}");
    let deferred = requests.iter().filter(|r| r["deferred"] == "true").count();
    assert!(deferred * 10 >= requests.len() * 9, "{stdout}");

    // The capacity halves from 10 s to 20 s (quick timing), and the
    // controller's limit follows: lower while halved than after the restore.
    let samples = csv_rows(&std::fs::read_to_string(out.path().join("gpu-samples.csv")).unwrap());
    let mean_limit = |from: f64, to: f64| {
        let limits: Vec<f64> = samples
            .iter()
            .filter(|s| (from..to).contains(&s["t_s"].parse::<f64>().unwrap()))
            .filter_map(|s| s["limit"].parse::<f64>().ok())
            .collect();
        assert!(
            !limits.is_empty(),
            "no limit sampled in {from}..{to}\n{stdout}"
        );
        limits.iter().sum::<f64>() / limits.len() as f64
    };
    let halved = mean_limit(14.0, 20.0);
    let restored = mean_limit(24.0, 30.0);
    assert!(
        halved < restored,
        "limit {halved} halved, {restored} restored\n{stdout}"
    );
    let capacity_at = |t: f64| -> f64 {
        samples
            .iter()
            .find(|s| s["t_s"].parse::<f64>().unwrap() >= t)
            .map(|s| s["capacity_tokens_per_s"].parse().unwrap())
            .unwrap()
    };
    assert_eq!(capacity_at(15.0) * 2.0, capacity_at(25.0), "{stdout}");

    // Weights 1, 2 and 4: answered tokens in that order, after the start.
    let tokens = |tenant: &str| -> f64 {
        requests
            .iter()
            .filter(|r| r["tenant"] == tenant && r["done_s"].parse::<f64>().unwrap() >= 5.0)
            .map(|r| {
                r["prompt_tokens"].parse::<f64>().unwrap()
                    + r["completion_tokens"].parse::<f64>().unwrap()
            })
            .sum()
    };
    let (a, b, c) = (tokens("team-a"), tokens("team-b"), tokens("team-c"));
    assert!(a < b && b < c, "team tokens {a} / {b} / {c}\n{stdout}");
}
