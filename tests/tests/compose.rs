//! docker-compose.yml stays in step with the rest of the repository, checked
//! without containers: Debian's docker-compose (1.29, installed by
//! scripts/install-test-tools) must accept the file, and everything the file
//! names —
//! build contexts, Dockerfiles and their stages, mounted files, ports, the
//! Envoy upstreams, the broker addresses, the LiteTopic parent and group,
//! Prometheus targets — must exist and agree with the configs the services
//! read.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

use serde::Deserialize;
use serde_yaml::Value;
use sluice_admission::config::FilterConfig;
use sluice_testkit::workspace_root;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

fn docker_compose(args: &[&str]) -> std::process::Output {
    let root = workspace_root();
    Command::new("docker-compose")
        .arg("-f")
        .arg(root.join("docker-compose.yml"))
        .args(args)
        .current_dir(&root)
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run docker-compose ({e}): run scripts/install-test-tools (it installs Debian's docker-compose)")
        })
}

/// The file as docker-compose resolves it: paths absolute, ports expanded.
fn resolved() -> Value {
    let output = docker_compose(&["config"]);
    sluice_testkit::assert_success(&output, "docker-compose config");
    serde_yaml::from_slice(&output.stdout).unwrap()
}

fn yaml(path: &str) -> Value {
    serde_yaml::from_str(&std::fs::read_to_string(workspace_root().join(path)).unwrap()).unwrap()
}

fn env<'a>(service: &'a Value, key: &str) -> &'a str {
    service["environment"][key]
        .as_str()
        .unwrap_or_else(|| panic!("environment {key} missing in {service:?}"))
}

fn port_of(addr: &str) -> u16 {
    addr.parse::<SocketAddr>()
        .unwrap_or_else(|e| panic!("{addr}: {e}"))
        .port()
}

/// Container ports published by a service.
fn published(service: &Value) -> Vec<u16> {
    service["ports"]
        .as_sequence()
        .map(|ports| {
            ports
                .iter()
                .map(|p| match p {
                    Value::Mapping(_) => p["target"].as_u64().unwrap() as u16,
                    // "[host_ip:]published:target[/protocol]"
                    other => {
                        let text = other.as_str().unwrap();
                        let target = text.rsplit(':').next().unwrap();
                        target.split('/').next().unwrap().parse().unwrap()
                    }
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Whether a service publishes container port `port` on the host's loopback
/// only (`127.0.0.1:published:target[/protocol]`).
fn published_on_loopback(service: &Value, port: u16) -> bool {
    service["ports"].as_sequence().is_some_and(|ports| {
        ports.iter().filter_map(Value::as_str).any(|text| {
            let target = text.rsplit(':').next().unwrap().split('/').next().unwrap();
            text.starts_with("127.0.0.1:") && target == port.to_string()
        })
    })
}

/// Names of a service's environment variables.
fn service_env_names(service: &Value) -> Vec<String> {
    service["environment"]
        .as_mapping()
        .map(|m| {
            m.keys()
                .filter_map(|k| k.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// (source, target) of every volume entry of a service.
fn mounts(service: &Value) -> Vec<(String, String)> {
    service["volumes"]
        .as_sequence()
        .map(|volumes| {
            volumes
                .iter()
                .map(|v| match v {
                    Value::Mapping(_) => (
                        v["source"].as_str().unwrap().to_string(),
                        v["target"].as_str().unwrap().to_string(),
                    ),
                    other => {
                        let parts: Vec<&str> = other.as_str().unwrap().split(':').collect();
                        (parts[0].to_string(), parts[1].to_string())
                    }
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The host file mounted at `target` in `service` (a bind mount).
fn host_file(service: &Value, target: &str) -> PathBuf {
    let (source, _) = mounts(service)
        .into_iter()
        .find(|(_, t)| t == target)
        .unwrap_or_else(|| panic!("nothing mounted at {target} in {service:?}"));
    assert!(
        source.starts_with('/'),
        "{target} is a named volume, not a file"
    );
    PathBuf::from(source)
}

/// The source lines of `COPY` (not `COPY --from`) in a Dockerfile.
fn copy_sources(dockerfile: &str) -> Vec<String> {
    dockerfile
        .lines()
        .map(str::trim)
        .filter_map(|line| line.strip_prefix("COPY "))
        .filter(|rest| !rest.starts_with("--from"))
        .flat_map(|rest| {
            let words: Vec<&str> = rest.split_whitespace().collect();
            words[..words.len() - 1]
                .iter()
                .map(|w| w.to_string())
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn docker_compose_accepts_the_file() {
    let output = docker_compose(&["config", "-q"]);
    sluice_testkit::assert_success(&output, "docker-compose config -q");
}

#[test]
fn every_build_and_mounted_path_exists() {
    let config = resolved();
    let services = config["services"].as_mapping().unwrap();
    let mut builds = 0;
    for (name, service) in services {
        let name = name.as_str().unwrap();
        if let Some(build) = service.get("build") {
            builds += 1;
            let context = PathBuf::from(build["context"].as_str().unwrap());
            assert!(context.is_dir(), "{name}: build context {context:?}");
            let dockerfile = context.join(build["dockerfile"].as_str().unwrap());
            let text = std::fs::read_to_string(&dockerfile)
                .unwrap_or_else(|e| panic!("{name}: {dockerfile:?}: {e}"));
            if let Some(target) = build["target"].as_str() {
                assert!(
                    text.lines()
                        .any(|l| l.starts_with("FROM ") && l.ends_with(&format!(" AS {target}"))),
                    "{name}: {dockerfile:?} has no stage {target}"
                );
            }
            for source in copy_sources(&text) {
                assert!(
                    source == "." || context.join(&source).exists(),
                    "{name}: {dockerfile:?} copies {source}, which does not exist"
                );
            }
        }
        for (source, target) in mounts(service) {
            if source.starts_with('/') {
                assert!(
                    Path::new(&source).exists(),
                    "{name}: {source} (mounted at {target}) does not exist"
                );
            } else {
                assert!(
                    config["volumes"].get(source.as_str()).is_some(),
                    "{name}: volume {source} is not declared"
                );
            }
        }
    }
    assert!(builds >= 5, "expected Sluice's and RocketMQ's own builds");
    // The build context is the repository: keep the 10+ GB target/ out of it.
    let ignore = std::fs::read_to_string(workspace_root().join(".dockerignore")).unwrap();
    assert!(ignore.lines().any(|l| l.trim() == "target/"), "{ignore}");
    // The broker image and the namesrv image are one image.
    assert_eq!(
        services[&Value::from("broker")]["image"],
        services[&Value::from("namesrv")]["image"]
    );
}

#[test]
fn envoy_upstreams_match_the_services() {
    let config = resolved();
    let services = &config["services"];
    let envoy_service = &services["envoy"];
    let envoy_config_path = host_file(envoy_service, "/etc/envoy/envoy.yaml");
    assert_eq!(
        envoy_config_path,
        workspace_root().join("envoy/compose.yaml")
    );
    let envoy: Value =
        serde_yaml::from_str(&std::fs::read_to_string(&envoy_config_path).unwrap()).unwrap();

    // Listener and admin ports are published.
    let listener = &envoy["static_resources"]["listeners"][0];
    let listener_port = listener["address"]["socket_address"]["port_value"]
        .as_u64()
        .unwrap() as u16;
    let admin_port = envoy["admin"]["address"]["socket_address"]["port_value"]
        .as_u64()
        .unwrap() as u16;
    assert_eq!(
        envoy["admin"]["address"]["socket_address"]["address"].as_str(),
        Some("0.0.0.0"),
        "admin must listen beyond loopback for Prometheus"
    );
    let envoy_ports = published(envoy_service);
    assert!(envoy_ports.contains(&listener_port), "{envoy_ports:?}");
    assert!(envoy_ports.contains(&admin_port), "{envoy_ports:?}");

    // Every cluster points at a compose service, on the port that service listens on.
    let clusters: BTreeMap<String, (String, u16)> = envoy["static_resources"]["clusters"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|c| {
            let addr = &c["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]
                ["address"]["socket_address"];
            assert_eq!(c["type"].as_str(), Some("STRICT_DNS"), "{c:?}");
            (
                c["name"].as_str().unwrap().to_string(),
                (
                    addr["address"].as_str().unwrap().to_string(),
                    addr["port_value"].as_u64().unwrap() as u16,
                ),
            )
        })
        .collect();
    let rls = &services["sluice-rls"];
    let sim = &services["llm-sim"];
    let expected = BTreeMap::from([
        (
            "sluice_rls".to_string(),
            (
                "sluice-rls".to_string(),
                port_of(env(rls, "SLUICE_RLS_GRPC_ADDR")),
            ),
        ),
        (
            "sluice_deferral".to_string(),
            (
                "sluice-rls".to_string(),
                port_of(env(rls, "SLUICE_DEFERRAL_ADDR")),
            ),
        ),
        (
            "llm_backend".to_string(),
            ("llm-sim".to_string(), port_of(env(sim, "SLUICE_SIM_ADDR"))),
        ),
    ]);
    assert_eq!(clusters, expected);

    // The filter: same plugin config as the reference envoy/sluice-filter.yaml,
    // naming a cluster that exists, loaded from the volume the `filter`
    // service fills.
    let plugin = |doc: &Value| -> (Value, String) {
        let wasm = &doc["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]
            ["typed_config"]["http_filters"][0]["typed_config"]["config"];
        let json = wasm["configuration"]["value"].as_str().unwrap();
        (
            serde_json::from_str::<serde_json::Value>(json)
                .map(|v| serde_yaml::to_value(v).unwrap())
                .unwrap(),
            wasm["vm_config"]["code"]["local"]["filename"]
                .as_str()
                .unwrap()
                .to_string(),
        )
    };
    let (compose_plugin, wasm_file) = plugin(&envoy);
    let (reference_plugin, _) = plugin(&yaml("envoy/sluice-filter.yaml"));
    assert_eq!(compose_plugin, reference_plugin);
    let parsed =
        FilterConfig::from_json(serde_json::to_string(&compose_plugin).unwrap().as_bytes())
            .unwrap();
    assert!(clusters.contains_key(&parsed.rls_cluster));
    let deferral_route = &listener["filter_chains"][0]["filters"][0]["typed_config"]
        ["route_config"]["virtual_hosts"][0]["routes"][0];
    assert_eq!(
        deferral_route["match"]["headers"][0]["name"].as_str(),
        Some(parsed.deferral.marker_header.as_str())
    );
    assert_eq!(
        deferral_route["route"]["cluster"].as_str(),
        Some("sluice_deferral")
    );
    let wasm_dir = Path::new(&wasm_file).parent().unwrap().to_str().unwrap();
    let envoy_filter_volume = mounts(envoy_service)
        .into_iter()
        .find(|(_, target)| target == wasm_dir)
        .map(|(source, _)| source)
        .unwrap_or_else(|| panic!("nothing mounted at {wasm_dir} in envoy"));
    let filter_service = &services["filter"];
    let (_, filter_out) = mounts(filter_service)
        .into_iter()
        .find(|(source, _)| *source == envoy_filter_volume)
        .expect("the filter service writes the volume envoy reads");
    let dockerfile =
        std::fs::read_to_string(workspace_root().join("deploy/docker/sluice.Dockerfile")).unwrap();
    let wasm_name = Path::new(&wasm_file).file_name().unwrap().to_str().unwrap();
    assert!(
        dockerfile.contains(&format!("{filter_out}/{wasm_name}")),
        "the filter stage must copy {wasm_name} into {filter_out}"
    );
    assert!(
        services["envoy"]["depends_on"]["filter"]["condition"].as_str()
            == Some("service_completed_successfully")
    );
}

#[test]
fn services_agree_on_redis_broker_topic_and_backend() {
    let config = resolved();
    let services = &config["services"];
    let rls = &services["sluice-rls"];
    let consumer = &services["sluice-consumer"];
    let namesrv = &services["namesrv"];
    let broker = &services["broker"];

    // One parent topic and one consumer group on both sides of the queue.
    assert_eq!(
        env(rls, "SLUICE_LITE_PARENT"),
        env(consumer, "SLUICE_LITE_PARENT")
    );
    assert_eq!(
        env(rls, "SLUICE_CONSUMER_GROUP"),
        env(consumer, "SLUICE_CONSUMER_GROUP")
    );

    // The name server's fixed address, as everyone is told it.
    let namesrv_ip = namesrv["networks"]["sluice"]["ipv4_address"]
        .as_str()
        .unwrap();
    let namesrv_addr = format!("{namesrv_ip}:{}", env(namesrv, "NAMESRV_PORT"));
    assert_eq!(env(rls, "SLUICE_NAMESRV"), namesrv_addr);
    assert_eq!(env(consumer, "SLUICE_NAMESRV"), namesrv_addr);
    assert_eq!(env(broker, "NAMESRV_ADDR"), namesrv_addr);
    assert!(published(namesrv).contains(&port_of(&namesrv_addr)));
    let broker_ip = broker["networks"]["sluice"]["ipv4_address"]
        .as_str()
        .unwrap();
    assert_eq!(env(broker, "BROKER_IP"), broker_ip);
    let subnet = config["networks"]["sluice"]["ipam"]["config"][0]["subnet"]
        .as_str()
        .unwrap();
    let prefix = subnet.rsplit_once('.').unwrap().0;
    assert!(namesrv_ip.starts_with(prefix) && broker_ip.starts_with(prefix));

    // The broker config the container renders: this repository's template
    // with the compose addresses, listening beyond loopback.
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(workspace_root().join("deploy/docker/rocketmq-entrypoint.sh"))
        .args(["broker", "--render"])
        .arg(dir.path())
        .env(
            "ROCKETMQ_TEMPLATES",
            workspace_root().join("lite-topic/broker"),
        )
        .env("NAMESRV_ADDR", env(broker, "NAMESRV_ADDR"))
        .env("BROKER_IP", env(broker, "BROKER_IP"))
        .env("BROKER_PORT", env(broker, "BROKER_PORT"))
        .env("BROKER_HA_PORT", env(broker, "BROKER_HA_PORT"))
        .output()
        .unwrap();
    sluice_testkit::assert_success(&output, "rocketmq-entrypoint.sh broker --render");
    let rendered = std::fs::read_to_string(dir.path().join("broker.toml")).unwrap();
    for line in [
        format!("namesrvAddr = \"{namesrv_addr}\""),
        format!("brokerIp1 = \"{broker_ip}\""),
        format!("listenPort = {}", env(broker, "BROKER_PORT")),
        "bindAddress = \"0.0.0.0\"".to_string(),
        "haListenAddress = \"0.0.0.0\"".to_string(),
        "enableLmq = true".to_string(),
        "enableMultiDispatch = true".to_string(),
    ] {
        assert!(
            rendered.lines().any(|l| l.trim() == line),
            "{line} missing:\n{rendered}"
        );
    }
    assert!(
        !rendered.contains('@'),
        "unrendered placeholder:\n{rendered}"
    );
    assert!(!rendered.contains("127.0.0.1"), "{rendered}");

    // Redis: the compose service, on its default port.
    assert_eq!(env(rls, "SLUICE_RLS_STORE"), "redis");
    for service in [rls, consumer] {
        assert_eq!(env(service, "SLUICE_REDIS_URL"), "redis://redis:6379");
    }
    assert!(published(&services["redis"]).contains(&6379));

    // The consumer calls the simulator on the port it listens on.
    assert_eq!(
        env(consumer, "SLUICE_BACKEND_URL"),
        format!(
            "http://llm-sim:{}",
            port_of(env(&services["llm-sim"], "SLUICE_SIM_ADDR"))
        )
    );

    // Every listening address is published.
    for (service, key) in [
        (rls, "SLUICE_RLS_GRPC_ADDR"),
        (rls, "SLUICE_RLS_ADMIN_ADDR"),
        (rls, "SLUICE_DEFERRAL_ADDR"),
        (consumer, "SLUICE_CONSUMER_ADMIN_ADDR"),
        (&services["llm-sim"], "SLUICE_SIM_ADDR"),
    ] {
        let port = port_of(env(service, key));
        assert!(published(service).contains(&port), "{key}: {port}");
    }

    // Admin ports reach the host's loopback only.
    let envoy_admin = yaml("envoy/compose.yaml")["admin"]["address"]["socket_address"]["port_value"]
        .as_u64()
        .unwrap() as u16;
    for (service, port) in [
        (rls, port_of(env(rls, "SLUICE_RLS_ADMIN_ADDR"))),
        (
            consumer,
            port_of(env(consumer, "SLUICE_CONSUMER_ADMIN_ADDR")),
        ),
        (&services["envoy"], envoy_admin),
    ] {
        assert!(
            published_on_loopback(service, port),
            "{port}: {:?}",
            service["ports"]
        );
    }
    // Bound beyond loopback inside its container, the consumer's admin API
    // takes the token from the host's environment (unset: writes answer 403).
    assert!(
        service_env_names(consumer).contains(&"SLUICE_ADMIN_TOKEN".to_string()),
        "{consumer:?}"
    );
}

/// The consumer's config file, shaped as `sluice-consumer --config` reads it.
#[derive(Deserialize)]
#[serde(default, deny_unknown_fields)]
#[derive(Default)]
struct ConsumerFile {
    #[serde(flatten)]
    _processor: sluice_consumer::ProcessorConfig,
    pacing: sluice_consumer::PacingConfig,
    limits: sluice_consumer::InFlightConfig,
}

#[test]
fn mounted_configs_load() {
    let config = resolved();
    let services = &config["services"];
    let rls = &services["sluice-rls"];
    let limits = host_file(rls, env(rls, "SLUICE_RLS_CONFIG"));
    let loaded = sluice_ratelimit::config::LimitsConfig::load(&limits).unwrap();
    assert!(loaded.limit_count() > 0);

    let consumer = &services["sluice-consumer"];
    let file = host_file(consumer, env(consumer, "SLUICE_CONSUMER_CONFIG"));
    let parsed: ConsumerFile =
        serde_yaml::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert!(parsed.pacing.default_rates.requests_per_second.unwrap() > 0.0);
    assert!(parsed.limits.default_max_in_flight.unwrap() > 0);
}

#[test]
fn prometheus_scrapes_every_metrics_port() {
    let config = resolved();
    let services = &config["services"];
    let prometheus = yaml("deploy/prometheus/prometheus.yml");
    assert_eq!(
        host_file(&services["prometheus"], "/etc/prometheus/prometheus.yml"),
        workspace_root().join("deploy/prometheus/prometheus.yml")
    );
    let envoy_admin = yaml("envoy/compose.yaml")["admin"]["address"]["socket_address"]["port_value"]
        .as_u64()
        .unwrap() as u16;
    let expected = BTreeMap::from([
        (
            "sluice-rls".to_string(),
            port_of(env(&services["sluice-rls"], "SLUICE_RLS_ADMIN_ADDR")),
        ),
        (
            "sluice-consumer".to_string(),
            port_of(env(
                &services["sluice-consumer"],
                "SLUICE_CONSUMER_ADMIN_ADDR",
            )),
        ),
        (
            "llm-sim".to_string(),
            port_of(env(&services["llm-sim"], "SLUICE_SIM_ADDR")),
        ),
        ("envoy".to_string(), envoy_admin),
    ]);
    let mut targets = BTreeMap::new();
    for job in prometheus["scrape_configs"].as_sequence().unwrap() {
        for target in job["static_configs"][0]["targets"].as_sequence().unwrap() {
            let (host, port) = target.as_str().unwrap().split_once(':').unwrap();
            assert!(
                services.get(host).is_some(),
                "{host} is not a compose service"
            );
            targets.insert(host.to_string(), port.parse::<u16>().unwrap());
        }
    }
    assert_eq!(targets, expected);

    // Grafana gets the dashboard and a Prometheus datasource.
    let grafana = &services["grafana"];
    let dashboard = host_file(grafana, "/var/lib/grafana/dashboards/sluice-dashboard.json");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dashboard).unwrap()).unwrap();
    assert!(!json["panels"].as_array().unwrap().is_empty());
    let provisioning = host_file(grafana, "/etc/grafana/provisioning");
    let datasource = yaml(
        provisioning
            .join("datasources/prometheus.yaml")
            .strip_prefix(workspace_root())
            .unwrap()
            .to_str()
            .unwrap(),
    );
    assert_eq!(
        datasource["datasources"][0]["url"].as_str(),
        Some("http://prometheus:9090")
    );
}
