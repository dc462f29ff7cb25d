//! `sluice-consumer rates ...` against a real Redis: the operator's way to
//! change pacing at run time, seen by every consumer's next admission.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

use sluice_testkit::RedisServer;
use std::process::Command;

fn rates(redis: &RedisServer, args: &[&str]) -> (bool, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_sluice-consumer"))
        .args(["--redis-url", &redis.url(), "rates"])
        .args(args)
        .env_remove("SLUICE_CONSUMER_CONFIG")
        .output()
        .unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn effective(redis: &RedisServer, model: &str, tenant: &str) -> serde_json::Value {
    let (ok, out, err) = rates(redis, &["effective", model, tenant]);
    assert!(ok, "{err}");
    serde_json::from_str(&out).unwrap()
}

#[test]
fn rates_are_set_shown_scaled_and_cleared() {
    let redis = RedisServer::start().unwrap();
    // Built-in default: 1 request/s per bucket, tokens unlimited.
    let json = effective(&redis, "gpt-4o", "acme");
    assert_eq!(json["requests_per_second"], 1.0);
    assert!(json["tokens_per_second"].is_null());

    let (ok, out, err) = rates(
        &redis,
        &[
            "set", "gpt-4o", "--tenant", "acme", "--rps", "2", "--tps", "500",
        ],
    );
    assert!(ok && out.contains("applied"), "{out}{err}");
    let json = effective(&redis, "gpt-4o", "acme");
    assert_eq!(json["requests_per_second"], 2.0);
    assert_eq!(json["tokens_per_second"], 500.0);
    // Another tenant of the column is untouched.
    assert_eq!(
        effective(&redis, "gpt-4o", "other")["requests_per_second"],
        1.0
    );

    // The column factor scales every bucket of the model.
    let (ok, _, err) = rates(&redis, &["factor", "gpt-4o", "0.5"]);
    assert!(ok, "{err}");
    assert_eq!(
        effective(&redis, "gpt-4o", "acme")["requests_per_second"],
        1.0
    );
    assert_eq!(
        effective(&redis, "gpt-4o", "other")["requests_per_second"],
        0.5
    );

    let (ok, out, _) = rates(&redis, &["show"]);
    assert!(ok);
    let shown: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(shown["gpt-4o"]["factor"], 0.5, "{out}");
    assert!(shown["gpt-4o"]["buckets"]["acme"].is_object(), "{out}");

    // Clearing: the bucket inherits again; the factor resets.
    assert!(rates(&redis, &["clear", "gpt-4o", "--tenant", "acme"]).0);
    assert!(rates(&redis, &["factor", "gpt-4o", "--clear"]).0);
    let json = effective(&redis, "gpt-4o", "acme");
    assert_eq!(json["requests_per_second"], 1.0);
    assert!(json["tokens_per_second"].is_null());

    // `unlimited` is a setting of its own.
    assert!(rates(&redis, &["set", "gpt-4o", "--rps", "unlimited"]).0);
    assert!(effective(&redis, "gpt-4o", "acme")["requests_per_second"].is_null());
}

#[test]
fn bad_rate_commands_fail_clearly_and_change_nothing() {
    let redis = RedisServer::start().unwrap();
    for (args, expected) in [
        (
            &["set", "gpt-4o", "--rps", "fast"][..],
            "non-negative number",
        ),
        (&["set", "gpt-4o", "--rps=-1"][..], "non-negative number"),
        (&["set", "gpt-4o"][..], "--rps and/or --tps"),
        (&["factor", "gpt-4o", "5000"][..], "factor must be within"),
    ] {
        let (ok, _, err) = rates(&redis, args);
        assert!(!ok, "{args:?} succeeded");
        assert!(err.contains(expected), "{args:?}: {err}");
    }
    let (ok, out, _) = rates(&redis, &["show"]);
    assert!(ok);
    assert_eq!(out.trim(), "{}");
    // Redis down: an error, not a hang or a panic.
    drop(redis);
    let redis = RedisServer::start().unwrap();
    let url = redis.url();
    drop(redis);
    let output = Command::new(env!("CARGO_BIN_EXE_sluice-consumer"))
        .args(["--redis-url", &url, "rates", "show"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(!String::from_utf8_lossy(&output.stderr).contains("panicked"));
}

#[test]
fn the_admin_api_defaults_to_loopback() {
    let output = Command::new(env!("CARGO_BIN_EXE_sluice-consumer"))
        .arg("--help")
        .env_remove("SLUICE_CONSUMER_ADMIN_ADDR")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{help}");
    assert!(help.contains("[default: 127.0.0.1:9092]"), "{help}");
    assert!(help.contains("--admin-token-file"), "{help}");
}

#[test]
fn a_bad_admin_token_stops_the_start() {
    // Checked before anything is reached (no Redis, no broker needed).
    let dir = std::env::temp_dir().join(format!("sluice-admin-token-{}", std::process::id()));
    std::fs::write(&dir, "short\n").unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_sluice-consumer"))
        .arg("--admin-token-file")
        .arg(&dir)
        .args([
            "--namesrv",
            "127.0.0.1:1",
            "--redis-url",
            "redis://127.0.0.1:1",
        ])
        .env_remove("SLUICE_CONSUMER_CONFIG")
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&dir);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("at least 16"), "{stderr}");
    assert!(
        !stderr.contains("short"),
        "the token reached the log: {stderr}"
    );

    let output = Command::new(env!("CARGO_BIN_EXE_sluice-consumer"))
        .args(["--admin-token-file", "/nonexistent/sluice-admin-token"])
        .env_remove("SLUICE_CONSUMER_CONFIG")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("cannot read the admin token file"),
        "{stderr}"
    );
}
