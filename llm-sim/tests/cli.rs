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
        "--gpu-tokens-per-s",
        "--kv-cache-tokens",
        "--max-batch",
        "--max-waiting",
        "--gpu-step-ms",
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
    for (args, problem) in [
        (&["--gpu-tokens-per-s=-5"][..], "tokens_per_s"),
        (&["--gpu-tokens-per-s=100", "--gpu-step-ms=0"][..], "step"),
        (
            &["--gpu-tokens-per-s=100", "--max-batch=0"][..],
            "max_batch",
        ),
    ] {
        let output = bin()
            .args(["--addr", "127.0.0.1:0"])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(1), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(problem), "{stderr}");
    }
}

/// Starts the binary; returns it and the address it listens on.
fn spawn(command: &mut Command) -> (std::process::Child, std::net::SocketAddr) {
    let mut child = command
        .args(["--addr", "127.0.0.1:0", "--log-format", "json"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (lines_tx, lines_rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        // Drains stderr to the end: a closed pipe would fail the child's logging.
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = lines_tx.send(line);
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
    (child, addr)
}

/// SIGTERM, then the child must exit cleanly.
async fn terminate(mut child: std::process::Child) {
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

#[tokio::test]
async fn serves_until_sigterm() {
    let (child, addr) = spawn(
        bin()
            .env("SLUICE_SIM_TOKENS_PER_SECOND", "0")
            .env("SLUICE_SIM_MODELS", "m1,m2"),
    );
    let models = common::get(addr, "/v1/models").await.json();
    assert_eq!(models["data"].as_array().unwrap().len(), 2);
    let answer = common::chat(addr, &[], &common::chat_body("hi")).await;
    assert_eq!(answer.status, 200);

    terminate(child).await;
}

#[tokio::test]
async fn the_gpu_flags_make_one_gpu_per_model() {
    let (child, addr) = spawn(
        bin()
            .args(["--model", "m1,m2", "--gpu-tokens-per-s", "800"])
            .args(["--kv-cache-tokens", "4096", "--max-batch", "8"])
            .env("SLUICE_SIM_MAX_WAITING", "3"),
    );
    let capacity = common::get(addr, "/admin/capacity").await.json();
    let gpus = capacity["gpus"].as_array().unwrap();
    assert_eq!(gpus.len(), 2, "{capacity}");
    for (gpu, model) in gpus.iter().zip(["m1", "m2"]) {
        assert_eq!(gpu["model"], model);
        assert_eq!(gpu["tokens_per_s"], 800.0);
        assert_eq!(gpu["kv_cache_tokens"], 4096);
        assert_eq!(gpu["max_batch"], 8);
    }
    let answer = common::chat(addr, &[], &common::chat_body("hi")).await;
    assert_eq!(answer.status, 200);
    let metrics = common::get(addr, "/metrics").await.text();
    for series in [
        "vllm:num_requests_waiting{model_name=\"m1\"} 0",
        "vllm:num_requests_running{model_name=\"m2\"} 0",
        // "test-model" is not served: the first model's GPU generated it.
        "vllm:generation_tokens_total{model_name=\"m1\"} 16",
    ] {
        assert!(metrics.contains(series), "{series} not in\n{metrics}");
    }
    terminate(child).await;
}
