//! The `sluice-rls` binary: `--validate`, refusing bad config, `query`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

use sluice_testkit::process::help_text;
use sluice_testkit::temp_file;
use std::process::Command;

// What the binaries' tests share (upstream's placement variables).
mod support;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sluice-rls"))
}

/// Runs `command`, which must refuse (exit 1): its stderr.
fn refusal(command: &mut Command) -> String {
    let output = command.output().unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn repo(path: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(path)
}

#[test]
fn validate_accepts_the_example_config() {
    let output = bin()
        .arg("--validate")
        .arg(repo("config/limits.yaml"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("OK"), "{stdout}");
    assert!(stdout.contains("[sluice]"), "{stdout}");
}

#[test]
fn validate_names_the_file_and_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("good.yaml"), "domain: a\n").unwrap();
    std::fs::write(
        dir.path().join("bad.yaml"),
        "domain: b\ndescriptors:\n  - key: tenant\n    rate_limit: { unit: minute, requests_per_unit: -1 }\n",
    )
    .unwrap();
    let stderr = refusal(bin().arg("--validate").arg(dir.path()));
    assert!(stderr.contains("bad.yaml"), "{stderr}");
    assert!(stderr.contains("requests_per_unit"), "{stderr}");
}

#[test]
fn serve_refuses_to_start_on_bad_config() {
    let (_dir, path) = temp_file("limits.yaml", "domain: x\nbogus: true\n");
    let stderr = refusal(bin().args(["--config"]).arg(&path).args([
        "--grpc-addr",
        "127.0.0.1:0",
        "--admin-addr",
        "127.0.0.1:0",
    ]));
    assert!(stderr.contains("refusing to start"), "{stderr}");
    assert!(stderr.contains("unknown field `bogus`"), "{stderr}");

    let stderr = refusal(bin().env_remove("SLUICE_RLS_CONFIG"));
    assert!(stderr.contains("--config"), "{stderr}");
}

#[test]
fn redis_password_never_reaches_the_logs() {
    // Unreachable Redis with a password in the URL: the service starts, warns, and
    // must not print the password. It is stopped once the warning is out.
    let mut child = bin()
        .arg("--config")
        .arg(repo("config/limits.yaml"))
        .args([
            "--store",
            "redis",
            "--redis-url",
            "redis://:hunter2-secret@127.0.0.1:1/0",
        ])
        .args([
            "--grpc-addr",
            "127.0.0.1:0",
            "--admin-addr",
            "127.0.0.1:0",
            "--redis-timeout-ms",
            "100",
        ])
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let stderr = stop_and_read_stderr(&mut child);
    assert!(stderr.contains("Redis not reachable yet"), "{stderr}");
    assert!(stderr.contains("standalone 127.0.0.1:1"), "{stderr}");
    assert!(!stderr.contains("hunter2"), "{stderr}");
}

#[test]
fn admin_listeners_default_to_loopback() {
    let help = help_text(env!("CARGO_BIN_EXE_sluice-rls")).unwrap();
    // sluice-rls's admin (the in-process consumer admin is sluice-allinone's:
    // allinone/tests/cli.rs).
    assert!(help.contains("[default: 127.0.0.1:9091]"), "{help}");
    assert!(!help.contains("[default: 0.0.0.0:909"), "{help}");
    // sluice-rls no longer has a consumer in it.
    assert!(!help.contains("--in-process-consumer"), "{help}");
}

#[test]
fn validate_prints_warnings_and_still_accepts() {
    let (_dir, path) = temp_file(
        "limits.yaml",
        "domain: d\ndescriptors:\n  - key: a\n    rate_limit: { unit: minute, requests_per_unit: 1, replaces: [{ name: ghost }] }\n",
    );
    let output = bin().arg("--validate").arg(&path).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    assert!(stdout.contains("warning: "), "{stdout}");
    assert!(stdout.contains("replaces 'ghost'"), "{stdout}");
}

// sluice-ratelimit's test helpers (an xDS management server, requests).
#[path = "../../ratelimit-service/tests/common/mod.rs"]
mod common;

/// `--xds-server` without `--config`: the binary serves nothing until the
/// management server's first config, then answers with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn xds_only_waits_for_the_first_config() {
    use common::xds_server::ManagementServer;
    use sluice_proto::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
    use std::time::Duration;

    let server = ManagementServer::start(None).await;
    let port = sluice_testkit::free_port();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_sluice-rls"))
        .env_remove("SLUICE_RLS_CONFIG")
        .args(["--xds-server", &server.addr.to_string()])
        .args(["--grpc-addr", &format!("127.0.0.1:{port}")])
        .args(["--admin-addr", "127.0.0.1:0"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let request = common::one_entry_request("xd", "tenant", "acme");
    let ask = || {
        let request = request.clone();
        async move {
            let attempt = async {
                let mut client =
                    RateLimitServiceClient::connect(format!("http://127.0.0.1:{port}"))
                        .await
                        .map_err(|e| e.to_string())?;
                client
                    .should_rate_limit(request)
                    .await
                    .map(|r| r.into_inner())
                    .map_err(|e| e.to_string())
            };
            tokio::time::timeout(Duration::from_millis(500), attempt)
                .await
                .map_err(|_| "timed out".to_string())
                .and_then(|r| r)
        }
    };
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert!(ask().await.is_err(), "no answers before the first config");

    let yaml = "domain: xd\ndescriptors:\n  - key: tenant\n    rate_limit: { unit: minute, requests_per_unit: 7, name: from-xds }\n";
    let file = sluice_ratelimit::config::parse_file(std::path::Path::new("x.yaml"), yaml).unwrap();
    server.set("1", &[sluice_ratelimit::xds::to_resource("x", &file)]);
    let mut answer = Err(String::new());
    for _ in 0..40 {
        answer = ask().await;
        if answer.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let answer = answer.expect("answers once the config arrived");
    let limit = answer.statuses[0].current_limit.as_ref().unwrap();
    assert_eq!(
        (limit.name.as_str(), limit.requests_per_unit),
        ("from-xds", 7)
    );
    let _ = child.kill().await;
}

/// SLUICE_RLS_UPSTREAM_ENV=true: envoyproxy/ratelimit's variables alone
/// configure the service (runtime directory, ports, counting mode).
#[test]
fn upstream_environment_variables_configure_the_service() {
    use std::io::Read;
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("ratelimit").join("config");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("a.yaml"), "domain: up\ndescriptors:\n  - key: k\n    rate_limit: { unit: second, requests_per_unit: 1 }\n").unwrap();
    let (grpc, http) = (sluice_testkit::free_port(), sluice_testkit::free_port());
    let mut child = bin()
        .env_remove("SLUICE_RLS_CONFIG")
        .envs(support::upstream_placement(root.path(), grpc, http))
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let probe = std::net::TcpStream::connect(("127.0.0.1", http)).map(|mut s| {
        use std::io::Write;
        let _ = s.write_all(b"GET /healthcheck HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        let mut answer = String::new();
        let _ = s.read_to_string(&mut answer);
        answer
    });
    let stderr = stop_and_read_stderr(&mut child);
    assert!(stderr.contains("sluice-rls listening"), "{stderr}");
    assert!(
        stderr.contains("IncrementAll"),
        "upstream's counting: {stderr}"
    );
    assert!(stderr.contains(&format!("127.0.0.1:{grpc}")), "{stderr}");
    let probe = probe.expect("the admin listener on PORT");
    assert!(probe.starts_with("HTTP/1.1 200"), "{probe}");
}

/// Kills `child` and returns all it wrote to its (piped) stderr.
fn stop_and_read_stderr(child: &mut std::process::Child) -> String {
    use std::io::Read;
    let _ = child.kill();
    let _ = child.wait();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    stderr
}

/// sluice-rls without a secret: closed by default. It says so at start,
/// and refuses an unsigned refund (PERMISSION_DENIED) and an oversized call
/// (INVALID_ARGUMENT, bound by --max-descriptors) while plain decisions pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counter_writes_are_closed_without_a_secret() {
    use sluice_proto::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
    use std::time::Duration;

    let port = sluice_testkit::free_port();
    let mut child = bin()
        .env_remove("SLUICE_DEFERRAL_SECRETS")
        .env_remove("SLUICE_DEFERRAL_SECRET_FILE")
        .env_remove("SLUICE_RLS_COUNTER_WRITES")
        .arg("--config")
        .arg(repo("config/limits.yaml"))
        .args(["--grpc-addr", &format!("127.0.0.1:{port}")])
        .args(["--admin-addr", "127.0.0.1:0", "--max-descriptors", "3"])
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut client = None;
    for _ in 0..80 {
        match RateLimitServiceClient::connect(format!("http://127.0.0.1:{port}")).await {
            Ok(c) => {
                client = Some(c);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
    let mut client = client.expect("sluice-rls serves gRPC");
    let plain = common::one_entry_request("sluice", "tenant", "acme");
    let decided = client.should_rate_limit(plain.clone()).await;
    let mut refund = plain.clone();
    refund.descriptors[0].is_negative_hits = true;
    let refused = client.should_rate_limit(refund).await;
    let mut four = plain;
    four.descriptors = vec![four.descriptors[0].clone(); 4];
    let oversized = client.should_rate_limit(four).await;
    let stderr = stop_and_read_stderr(&mut child);

    assert!(decided.is_ok(), "{decided:?}");
    assert_eq!(
        refused.unwrap_err().code(),
        tonic::Code::PermissionDenied,
        "{stderr}"
    );
    assert_eq!(oversized.unwrap_err().code(), tonic::Code::InvalidArgument);
    assert!(
        stderr.contains("--counter-writes signed without a secret"),
        "{stderr}"
    );
}
