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
    let output = Command::new(exe)
        .args(["--quick", "--live", "false", "--out"])
        .arg(out.path())
        .output()
        .unwrap();
    let took = started.elapsed();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
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
