//! The images `scripts/build-images` makes (deploy/docker/release.Containerfile),
//! each started as a container runtime would start it: `buildah from` the
//! image, then its entrypoint (and command) run with `buildah run
//! --isolation chroot` as the image's user, sharing the host's network, on
//! free loopback ports. Each must answer: sluice-rls its health, metrics and
//! a decision; the consumer and sluice-allinone their health; llm-sim a
//! chat request; the broker image, as name server and as broker, a route
//! table listing the broker; and host Envoy must load the `.wasm` taken out
//! of the filter's OCI image and count through it.
//!
//! Images missing from buildah's storage are built first with
//! `scripts/build-images` (seconds when only the layers on top changed);
//! `./scripts/setup` installs buildah and builds them. Every process started
//! here runs in its own process group and is killed, and its container
//! removed, when its guard drops, the test failing or not.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

use serde_json::Value;
use sluice_proto::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use sluice_proto::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use sluice_testkit::process::tail;
use sluice_testkit::rls::{descriptor, request};
use sluice_testkit::{
    broker_ports, broker_scratch_dir, free_port, http_request, rocketmq_cluster_info,
    sluice_filter_envoy_config_with, workspace_root, Envoy, RedisServer, RocketMq,
    SluiceFilterPorts,
};
use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const SETUP: &str = "run ./scripts/setup: it installs Debian's buildah and debootstrap and builds the images (scripts/build-images)";

fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

fn buildah(args: &[&str]) -> Output {
    Command::new("buildah")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run buildah ({e}): {SETUP}"))
}

/// `scripts/build-images --list`: short name (sluice-rls) → full name.
fn image_names() -> BTreeMap<String, String> {
    let output = Command::new(workspace_root().join("scripts/build-images"))
        .arg("--list")
        .output()
        .unwrap();
    sluice_testkit::assert_success(&output, "scripts/build-images --list");
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|full| {
            let short = full.rsplit('/').next().unwrap().split(':').next().unwrap();
            (short.to_string(), full.to_string())
        })
        .collect()
}

/// Every image, built first if one is missing (once per test binary).
fn images() -> &'static BTreeMap<String, String> {
    static IMAGES: OnceLock<BTreeMap<String, String>> = OnceLock::new();
    IMAGES.get_or_init(|| {
        let version = buildah(&["--version"]);
        assert!(
            version.status.success(),
            "buildah --version failed: {SETUP}"
        );
        let names = image_names();
        let missing: Vec<&String> = names
            .values()
            .filter(|name| {
                !buildah(&["inspect", "--type", "image", name])
                    .status
                    .success()
            })
            .collect();
        if !missing.is_empty() {
            eprintln!("images missing ({missing:?}): running scripts/build-images");
            let output = Command::new(workspace_root().join("scripts/build-images"))
                .output()
                .unwrap();
            assert!(
                output.status.success(),
                "scripts/build-images failed ({SETUP}):\n{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        names
    })
}

fn image(short: &str) -> &'static str {
    images()
        .get(short)
        .unwrap_or_else(|| panic!("scripts/build-images --list names no {short}"))
}

/// The image's OCI config (`Entrypoint`, `Cmd`, `User`, `Labels`, ...).
fn image_config(name: &str) -> Value {
    let output = buildah(&["inspect", "--type", "image", name]);
    assert!(output.status.success(), "buildah inspect {name}");
    let inspect: Value = serde_json::from_slice(&output.stdout).unwrap();
    inspect["OCIv1"]["config"].clone()
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|items| {
            items
                .iter()
                .map(|s| s.as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// A working container of an image; removed (with whatever runs in it
/// killed) when dropped.
struct Container {
    name: String,
    image: String,
    process: Option<Child>,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Container {
    fn new(image: &str) -> Container {
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "sluice-test-{}-{}",
            std::process::id(),
            COUNT.fetch_add(1, Ordering::Relaxed)
        );
        let output = buildah(&["from", "--quiet", "--pull-never", "--name", &name, image]);
        sluice_testkit::assert_success(&output, &format!("buildah from {image}"));
        let dir = tempfile::tempdir().unwrap();
        Container {
            log: dir.path().join("container.log"),
            name,
            image: image.to_string(),
            process: None,
            _dir: dir,
        }
    }

    /// Starts the image's entrypoint with `args` in place of its command
    /// (as `docker run IMAGE ARGS...`), and waits until every `ready` port
    /// accepts on loopback.
    fn start(
        image: &str,
        env: &[(&str, &str)],
        volumes: &[(&Path, &str)],
        args: &[String],
        ready: &[u16],
    ) -> Container {
        let mut container = Container::new(image);
        let config = image_config(image);
        let mut command = strings(&config["Entrypoint"]);
        command.extend(if args.is_empty() {
            strings(&config["Cmd"])
        } else {
            args.to_vec()
        });
        let mut run = Command::new("buildah");
        run.args(["run", "--isolation", "chroot"]);
        for (key, value) in env {
            run.arg("--env").arg(format!("{key}={value}"));
        }
        for (host, inside) in volumes {
            // Read-only unless the path inside names its mode (`…:rw`).
            let mode = if inside.ends_with(":rw") { "" } else { ":ro" };
            run.arg("--volume")
                .arg(format!("{}:{inside}{mode}", host.display()));
        }
        run.arg(&container.name).arg("--").args(&command);
        let log = std::fs::File::create(&container.log).unwrap();
        use std::os::unix::process::CommandExt;
        container.process = Some(
            run.stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .process_group(0)
                .spawn()
                .unwrap_or_else(|e| panic!("buildah run {image}: {e} ({SETUP})")),
        );
        container.wait_ready(ready);
        container
    }

    fn wait_ready(&mut self, ports: &[u16]) {
        let deadline = Instant::now() + Duration::from_secs(60);
        for &port in ports {
            loop {
                if let Some(status) = self.process.as_mut().unwrap().try_wait().unwrap() {
                    panic!(
                        "{} exited ({status}) before listening on {port}:\n{}",
                        self.image,
                        self.log_tail()
                    );
                }
                if TcpStream::connect_timeout(&loopback(port), Duration::from_millis(200)).is_ok() {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "{} does not listen on {port} after 60 s:\n{}",
                    self.image,
                    self.log_tail()
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    /// The real uid of the process in this container's group whose name is
    /// `comm` (its entrypoint, `buildah run`'s helpers aside).
    fn uid_of(&self, comm: &str) -> Option<u32> {
        let group = self.process.as_ref()?.id();
        std::fs::read_dir("/proc").ok()?.find_map(|entry| {
            let dir = entry.ok()?.path();
            let stat = std::fs::read_to_string(dir.join("stat")).ok()?;
            // pid (comm) state ppid pgrp ...
            let (name, rest) = stat.split_once(" (")?.1.rsplit_once(") ")?;
            let pgrp: u32 = rest.split_whitespace().nth(2)?.parse().ok()?;
            if pgrp != group || !comm.starts_with(name) {
                return None;
            }
            let status = std::fs::read_to_string(dir.join("status")).ok()?;
            status
                .lines()
                .find_map(|l| l.strip_prefix("Uid:"))?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
    }

    fn log_tail(&self) -> String {
        tail(&self.log, 30)
    }

    /// The container's root file system, mounted on the host.
    fn mount(&self) -> PathBuf {
        let output = buildah(&["mount", &self.name]);
        assert!(output.status.success(), "buildah mount {}", self.name);
        PathBuf::from(String::from_utf8(output.stdout).unwrap().trim())
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        if let Some(mut child) = self.process.take() {
            // buildah run, its chroot runtime and the entrypoint share the group.
            if let Some(group) = i32::try_from(child.id())
                .ok()
                .and_then(rustix::process::Pid::from_raw)
            {
                let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = Command::new("buildah")
            .args(["rm", &self.name])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

fn get(port: u16, path: &str) -> sluice_testkit::HttpResponse {
    http_request(loopback(port), "GET", path, &[], b"")
        .unwrap_or_else(|e| panic!("GET 127.0.0.1:{port}{path}: {e:#}"))
}

fn config_file(path: &str) -> PathBuf {
    workspace_root().join(path)
}

/// The RLS flags sluice-rls and sluice-allinone share here: the example
/// limits and deferral secret (mounted at /etc/sluice) and the two listeners.
fn rls_args(grpc: u16, admin: u16) -> Vec<String> {
    vec![
        "--config".into(),
        "/etc/sluice/limits.yaml".into(),
        "--deferral-secret-file".into(),
        "/etc/sluice/deferral-secret".into(),
        "--grpc-addr".into(),
        loopback(grpc).to_string(),
        "--admin-addr".into(),
        loopback(admin).to_string(),
    ]
}

/// sluice-rls on the example limits, in-memory counters.
fn start_rls(grpc: u16, admin: u16) -> Container {
    let limits = config_file("config/limits.yaml");
    let secret = config_file("config/deferral-secret.example");
    Container::start(
        image("sluice-rls"),
        &[],
        &[
            (&limits, "/etc/sluice/limits.yaml"),
            (&secret, "/etc/sluice/deferral-secret"),
        ],
        &rls_args(grpc, admin),
        &[grpc, admin],
    )
}

fn start_llm_sim(port: u16) -> Container {
    // Configured through the environment, as docker-compose.yml does.
    let addr = loopback(port).to_string();
    Container::start(
        image("sluice-llm-sim"),
        &[
            ("SLUICE_SIM_ADDR", &addr),
            ("SLUICE_SIM_MODELS", "gpt-4o,gpt-4o-mini"),
            ("SLUICE_SIM_TOKENS_PER_SECOND", "1000"),
        ],
        &[],
        &[],
        &[port],
    )
}

fn chat(max_tokens: u32) -> Vec<u8> {
    format!(
        r#"{{"model":"gpt-4o","max_tokens":{max_tokens},"messages":[{{"role":"user","content":"hello from the image test"}}]}}"#
    )
    .into_bytes()
}

#[test]
fn every_image_runs_as_uid_10001_and_carries_the_version_and_labels() {
    let cargo = std::fs::read_to_string(workspace_root().join("Cargo.toml")).unwrap();
    let version = cargo
        .split("[workspace.package]")
        .nth(1)
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("version = ")))
        .unwrap()
        .trim_matches('"')
        .to_string();
    let mut sizes = Vec::new();
    for (short, full) in images() {
        let config = image_config(full);
        let labels = &config["Labels"];
        let tag = full.rsplit(':').next().unwrap();
        assert_eq!(
            labels["org.opencontainers.image.version"].as_str(),
            Some(tag),
            "{full}"
        );
        if short == "sluice-rocketmq" {
            assert_eq!(
                labels["io.github.sluice-llm.sluice.version"].as_str(),
                Some(version.as_str())
            );
        } else {
            assert_eq!(tag, version, "{full}: tag is not the crate version");
        }
        assert_eq!(
            labels["org.opencontainers.image.licenses"].as_str(),
            Some("Apache-2.0")
        );
        assert_eq!(
            labels["org.opencontainers.image.source"].as_str(),
            Some("https://github.com/sluice-llm/sluice")
        );
        // The filter's OCI image runs nothing: no user.
        if short != "sluice-filter" {
            assert_eq!(config["User"].as_str(), Some("10001:10001"), "{full}");
        }
        let size = buildah(&["images", "--format", "{{.Size}}", full]);
        sizes.push(format!(
            "{full}: {}",
            String::from_utf8_lossy(&size.stdout).trim()
        ));
    }
    eprintln!("{}", sizes.join("\n"));
}

#[test]
fn the_chart_compose_and_istio_files_name_the_images_that_are_built() {
    // Static: needs no buildah.
    let built: Vec<String> = image_names().into_values().collect();
    let mut named = Vec::new();
    let compose: serde_yaml::Value = serde_yaml::from_str(
        &std::fs::read_to_string(workspace_root().join("docker-compose.yml")).unwrap(),
    )
    .unwrap();
    for (_, service) in compose["services"].as_mapping().unwrap() {
        let image = service["image"].as_str().unwrap();
        if image.contains("sluice") {
            named.push(("docker-compose.yml", image.to_string()));
        }
    }
    let manifests =
        std::fs::read_to_string(workspace_root().join("deploy/kubernetes/sluice.yaml")).unwrap();
    for line in manifests.lines() {
        if let Some(image) = line.trim().strip_prefix("image: ") {
            if image.contains("sluice-llm") {
                named.push(("deploy/kubernetes/sluice.yaml", image.to_string()));
            }
        }
    }
    let wasm_plugin =
        std::fs::read_to_string(workspace_root().join("deploy/istio/sluice-wasmplugin.yaml"))
            .unwrap();
    let url = wasm_plugin
        .lines()
        .find_map(|l| l.trim().strip_prefix("url: oci://"))
        .unwrap();
    named.push(("deploy/istio/sluice-wasmplugin.yaml", url.to_string()));
    assert!(named.len() >= 8, "{named:?}");
    for (file, image) in named {
        assert!(
            built.contains(&image),
            "{file} names {image}, which scripts/build-images does not build ({built:?})"
        );
    }
}

#[test]
fn sluice_rls_image_answers_health_metrics_and_a_decision() {
    let (grpc, admin) = (free_port(), free_port());
    let rls = start_rls(grpc, admin);
    let health = get(admin, "/healthz");
    assert_eq!(health.status, 200, "{}", rls.log_tail());
    // The image's user, not root: what the chart's runAsNonRoot expects.
    assert_eq!(rls.uid_of("sluice-rls"), Some(10001));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let answer = runtime.block_on(async {
        let mut client = RateLimitServiceClient::connect(format!("http://127.0.0.1:{grpc}"))
            .await
            .unwrap();
        client
            .should_rate_limit(request(
                "sluice",
                vec![descriptor(&[("tenant", "batch-7"), ("model", "gpt-4o")])],
            ))
            .await
            .unwrap()
            .into_inner()
    });
    assert_eq!(answer.overall_code, Code::Ok as i32, "{answer:?}");
    assert_eq!(answer.statuses.len(), 1, "{answer:?}");
    let limit = answer.statuses[0].current_limit.as_ref().unwrap();
    assert_eq!(limit.requests_per_unit, 30, "batch-rpm: {answer:?}");
    let metrics = get(admin, "/metrics");
    assert_eq!(metrics.status, 200);
    metrics.assert_body_contains(r#"sluice_rls_decisions_total{domain="sluice",code="ok"} 1"#);
}

#[test]
fn llm_sim_image_answers_a_chat_request() {
    let port = free_port();
    let sim = start_llm_sim(port);
    let answer = http_request(
        loopback(port),
        "POST",
        "/v1/chat/completions",
        &[("content-type", "application/json")],
        &chat(5),
    )
    .unwrap();
    assert_eq!(answer.status, 200, "{answer:?}\n{}", sim.log_tail());
    assert_eq!(sim.uid_of("sluice-llm-sim"), Some(10001));
    let body: Value = serde_json::from_str(&answer.body).unwrap();
    assert_eq!(body["object"], "chat.completion", "{body}");
    assert!(
        body["choices"][0]["message"]["content"].is_string(),
        "{body}"
    );
}

#[test]
fn broker_image_registers_with_its_name_server() {
    let namesrv_port = free_port();
    let namesrv = Container::start(
        image("sluice-rocketmq"),
        &[
            ("NAMESRV_PORT", &namesrv_port.to_string()),
            ("BIND_ADDRESS", "127.0.0.1"),
        ],
        &[],
        &["namesrv".into()],
        &[namesrv_port],
    );
    assert_eq!(namesrv.uid_of("rocketmq-namesrv-rust"), Some(10001));
    let (port, ha_port) = broker_ports();
    // The image's VOLUME, as a pod mounts its persistent volume there: a
    // store where the broker's disk measure lets it start (over 90 % by
    // that measure it registers and then rolls its start-up back, and
    // buildah's own storage lies on the build machine's disk).
    let store = broker_scratch_dir().unwrap();
    std::os::unix::fs::chown(store.path(), Some(10001), Some(10001)).unwrap();
    let broker = Container::start(
        image("sluice-rocketmq"),
        &[
            ("NAMESRV_ADDR", &loopback(namesrv_port).to_string()),
            ("BROKER_IP", "127.0.0.1"),
            ("BIND_ADDRESS", "127.0.0.1"),
            ("BROKER_PORT", &port.to_string()),
            ("BROKER_HA_PORT", &ha_port.to_string()),
        ],
        &[(store.path(), "/var/lib/rocketmq:rw")],
        &["broker".into()],
        &[port, port - 2],
    );
    // The route table: the name server lists the broker at the address it
    // advertises (brokerIp1:port).
    let needle = loopback(port).to_string();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let info = rocketmq_cluster_info(namesrv_port).unwrap_or_default();
        if info.contains(&needle) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the name server does not list {needle} after 30 s: {info}\nname server:\n{}\nbroker:\n{}",
            namesrv.log_tail(),
            broker.log_tail()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn consumer_image_answers_its_admin_health() {
    let redis = RedisServer::start().unwrap();
    let mq = RocketMq::start().unwrap();
    let admin = free_port();
    let consumer = Container::start(
        image("sluice-consumer"),
        &[],
        &[],
        &[
            "--id".into(),
            "image-test".into(),
            "--redis-url".into(),
            redis.url(),
            "--namesrv".into(),
            mq.namesrv_addr(),
            "--backend-url".into(),
            format!("http://127.0.0.1:{}", free_port()),
            "--admin-addr".into(),
            loopback(admin).to_string(),
        ],
        &[admin],
    );
    let health = get(admin, "/healthz");
    assert_eq!(health.status, 200, "{health:?}\n{}", consumer.log_tail());
}

#[test]
fn allinone_image_answers_health() {
    let redis = RedisServer::start().unwrap();
    let mq = RocketMq::start().unwrap();
    let (grpc, admin, deferral) = (free_port(), free_port(), free_port());
    let limits = config_file("config/limits.yaml");
    let secret = config_file("config/deferral-secret.example");
    let allinone = Container::start(
        image("sluice-allinone"),
        &[],
        &[
            (&limits, "/etc/sluice/limits.yaml"),
            (&secret, "/etc/sluice/deferral-secret"),
        ],
        &[
            rls_args(grpc, admin),
            vec![
                "--deferral-addr".into(),
                loopback(deferral).to_string(),
                "--store".into(),
                "redis".into(),
                "--redis-url".into(),
                redis.url(),
                "--namesrv".into(),
                mq.namesrv_addr(),
            ],
        ]
        .concat(),
        &[grpc, admin, deferral],
    );
    let health = get(admin, "/healthz");
    assert_eq!(health.status, 200, "{health:?}\n{}", allinone.log_tail());
}

#[test]
fn envoy_loads_the_wasm_from_the_filter_oci_image_and_counts_through_it() {
    // The module out of the OCI image WasmPlugin pulls: plugin.wasm alone.
    let filter = Container::new(image("sluice-filter"));
    let root = filter.mount();
    let entries: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(entries, ["plugin.wasm"], "the filter image holds more");
    let dir = tempfile::tempdir().unwrap();
    let wasm = dir.path().join("plugin.wasm");
    std::fs::copy(root.join("plugin.wasm"), &wasm).unwrap();
    drop(filter);

    let (grpc, rls_admin, sim_port) = (free_port(), free_port(), free_port());
    let rls = start_rls(grpc, rls_admin);
    let _sim = start_llm_sim(sim_port);
    let (admin, listener) = (free_port(), free_port());
    let config = sluice_filter_envoy_config_with(
        &SluiceFilterPorts {
            admin,
            listener,
            rls: grpc,
            backend: sim_port,
            deferral: free_port(),
        },
        &wasm,
    )
    .unwrap()
    .replace("address: 0.0.0.0", "address: 127.0.0.1");
    let envoy = Envoy::start(&config, admin, listener).unwrap();
    let answer = http_request(
        loopback(listener),
        "POST",
        "/v1/chat/completions",
        &[
            ("content-type", "application/json"),
            ("x-tenant-id", "acme"),
        ],
        &chat(5),
    )
    .unwrap();
    assert_eq!(
        answer.status,
        200,
        "{answer:?}\nenvoy:\n{}\nrls:\n{}",
        envoy.log_text(),
        rls.log_tail()
    );
    // The filter asked the RLS in the container: it decided for acme.
    let metrics = get(rls_admin, "/metrics");
    assert!(
        metrics
            .body
            .lines()
            .any(|l| l.starts_with(r#"sluice_rls_decisions_total{domain="sluice",code="ok"}"#)),
        "no decision from the filter:\n{}",
        metrics.body
    );
}
