//! The `sluice-llm-sim` binary: flags, env fallbacks, serving, SIGTERM.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sluice-llm-sim"))
}

#[test]
fn help_lists_the_knobs() {
    let output = bin().arg("--help").output().unwrap();
    assert!(output.status.success());
    let help = String::from_utf8_lossy(&output.stdout);
    for flag in [
        "--tokens-per-second",
        "--first-token-ms",
        "--max-concurrency",
        "--over-capacity",
        "--default-completion-tokens",
        "--failure-rate",
        "--mid-stream-failure-rate",
        "--seed",
        "SLUICE_SIM_TOKENS_PER_SECOND",
    ] {
        assert!(help.contains(flag), "{flag} not in\n{help}");
    }
}

#[test]
fn refuses_bad_values() {
    let output = bin()
        .args(["--addr", "127.0.0.1:0", "--failure-rate", "1.5"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("failure_rate"), "{stderr}");
}

#[tokio::test]
async fn serves_until_sigterm() {
    let mut child = bin()
        .args(["--addr", "127.0.0.1:0", "--log-format", "json"])
        .env("SLUICE_SIM_TOKENS_PER_SECOND", "0")
        .env("SLUICE_SIM_MODELS", "m1,m2")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (lines_tx, lines_rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    let addr: std::net::SocketAddr = loop {
        let line = lines_rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("no listening line");
        let log: serde_json::Value = match serde_json::from_str(&line) {
            Ok(log) => log,
            Err(_) => continue,
        };
        if log["fields"]["message"] == "sluice-llm-sim listening" {
            break log["fields"]["addr"].as_str().unwrap().parse().unwrap();
        }
    };
    let models = common::get(addr, "/v1/models").await.json();
    assert_eq!(models["data"].as_array().unwrap().len(), 2);
    let answer = common::chat(addr, &[], &common::chat_body("hi")).await;
    assert_eq!(answer.status, 200);

    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = tokio::task::spawn_blocking(move || child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(exit.success(), "{exit:?}");
}
