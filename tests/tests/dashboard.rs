//! Every metric the Grafana dashboard (deploy/grafana/sluice-dashboard.json)
//! queries is exported by a running component: the whole stack is started
//! from real parts (Redis, the RocketMQ broker, sluice-rls with its admin port
//! and deferral endpoint, the consumer's pop loop, llm-sim, Envoy with the
//! Wasm filter), one request is admitted and one deferred so that lazily
//! created series exist, then every component's metrics are scraped and each
//! PromQL `expr` of the dashboard is checked name by name.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly
#![recursion_limit = "256"] // rocketmq-client futures are deeply nested

use sluice_testkit::stack::{limits, ConsumerSpec, Stack};
use sluice_testkit::{free_port, http_request, workspace_root};
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------
// PromQL: the metric names of an expression.

/// Aggregation operators: followed by `by (...)`/`without (...)` or `(`.
const AGGREGATIONS: &[&str] = &[
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
];
/// Keywords whose parenthesised label list is not an expression.
const LABEL_LISTS: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];
const KEYWORDS: &[&str] = &["bool", "offset", "and", "or", "unless", "inf", "nan"];

/// Metric names in a PromQL expression: identifiers that are not functions,
/// aggregations or keywords, outside label matchers, ranges, label lists and
/// strings.
fn metric_names(expr: &str) -> Vec<String> {
    let chars: Vec<char> = expr.chars().collect();
    let skip_to = |from: usize, close: char| -> usize {
        let mut j = from;
        while j < chars.len() && chars[j] != close {
            if chars[j] == '"' || chars[j] == '\'' {
                let quote = chars[j];
                j += 1;
                while j < chars.len() && chars[j] != quote {
                    if chars[j] == '\\' {
                        j += 1;
                    }
                    j += 1;
                }
            }
            j += 1;
        }
        j + 1
    };
    let mut names = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '{' {
            i = skip_to(i + 1, '}');
        } else if c == '[' {
            i = skip_to(i + 1, ']');
        } else if c == '"' || c == '\'' {
            i = skip_to(i + 1, c);
        } else if c.is_ascii_digit() || c == '.' {
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                i += 1;
            }
        } else if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == ':')
            {
                i += 1;
            }
            let ident: String = chars[start..i].iter().collect();
            let mut next = i;
            while next < chars.len() && chars[next].is_whitespace() {
                next += 1;
            }
            let before_paren = next < chars.len() && chars[next] == '(';
            if LABEL_LISTS.contains(&ident.as_str()) {
                if before_paren {
                    i = skip_to(next + 1, ')');
                }
            } else if before_paren
                || AGGREGATIONS.contains(&ident.as_str())
                || KEYWORDS.contains(&ident.to_ascii_lowercase().as_str())
            {
                // a function or aggregation call, or a keyword
            } else {
                names.push(ident);
            }
        } else {
            i += 1;
        }
    }
    names
}

#[test]
fn promql_names_are_found_and_the_rest_ignored() {
    assert_eq!(
        metric_names(
            r#"histogram_quantile(0.99, sum by (le, model) (rate(a_b_bucket{x="y}"}[$__rate_interval])))"#
        ),
        ["a_b_bucket"]
    );
    assert_eq!(
        metric_names("sum without (code) (rate(x_total[5m])) / on (job) group_left (z) y"),
        ["x_total", "y"]
    );
    assert_eq!(
        metric_names("max(sluice_rls_config_limits) > bool 1"),
        ["sluice_rls_config_limits"]
    );
}

// ---------------------------------------------------------------------------
// Exposition text: which names a component exports.

/// Names a scrape exports: every sample name, plus the sample names each
/// `# TYPE` line promises (a family without samples yet still exports its
/// name). Returns (exported, with samples).
fn exported(text: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut declared = BTreeSet::new();
    let mut sampled = BTreeSet::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut words = rest.split_whitespace();
            let (Some(name), Some(kind)) = (words.next(), words.next()) else {
                continue;
            };
            declared.insert(name.to_string());
            match kind {
                "counter" => {
                    declared.insert(format!("{}_total", name.trim_end_matches("_total")));
                }
                "histogram" => {
                    for suffix in ["_bucket", "_sum", "_count"] {
                        declared.insert(format!("{name}{suffix}"));
                    }
                }
                _ => {}
            }
        } else if !line.starts_with('#') && !line.trim().is_empty() {
            let end = line.find(['{', ' ']).unwrap_or(line.len());
            sampled.insert(line[..end].to_string());
        }
    }
    declared.extend(sampled.iter().cloned());
    (declared, sampled)
}

fn get(addr: SocketAddr, path: &str) -> String {
    let response = http_request(addr, "GET", path, &[], b"").unwrap();
    assert_eq!(response.status, 200, "GET {path}: {response:?}");
    response.body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dashboard_metric_is_exported_by_a_running_component() {
    let started = Instant::now();
    sluice_testkit::init_test_tracing();

    // The dashboard's expressions, panel by panel.
    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(workspace_root().join("deploy/grafana/sluice-dashboard.json"))
            .unwrap(),
    )
    .unwrap();
    let mut queried: BTreeMap<String, Vec<String>> = BTreeMap::new(); // name -> panels
    let mut panels = 0;
    for panel in dashboard["panels"].as_array().unwrap() {
        if panel["type"] == "row" {
            continue;
        }
        panels += 1;
        let title = panel["title"].as_str().unwrap();
        let targets = panel["targets"].as_array().unwrap();
        assert!(!targets.is_empty(), "panel {title} has no query");
        for target in targets {
            let expr = target["expr"].as_str().unwrap();
            let names = metric_names(expr);
            assert!(!names.is_empty(), "panel {title}: no metric in {expr}");
            for name in names {
                queried.entry(name).or_default().push(title.to_string());
            }
        }
    }
    assert!(panels >= 20, "{panels} panels");

    // The stack, sluice-rls as its binary wires it (admin port, limits
    // reloaded from a file, the endpoint's metrics in the service's registry);
    // the consumer with a model whose backend is down: its calls fail
    // (consumer errors).
    let mut sim = sluice_llm_sim::SimConfig::fast();
    sim.default_completion_tokens = 5;
    let mut consumer = ConsumerSpec::new("dashboard-consumer");
    consumer.config.backend.models.insert(
        "llama-down".into(),
        sluice_consumer::BackendTargetConfig {
            base_url: format!("http://127.0.0.1:{}", free_port()),
            ..consumer.config.backend.default.clone()
        },
    );
    // `patient` gets 50 tokens an hour and defers the rest; other tenants
    // are unlimited.
    let limits = limits::patient_defers();
    let mut stack = Stack::builder(limits.clone())
        .sim(sim)
        .consumer(consumer)
        .as_binary()
        .start()
        .await;
    let envoy = &stack.envoy.envoy;
    let (envoy_addr, envoy_admin) = (stack.envoy.listener, stack.envoy.admin);
    let rls_admin = stack.rls.admin.unwrap();
    let rls_port = stack.rls.port;
    let deferral_addr = stack.rls.deferral.unwrap();
    let backend_addr = stack.backend;
    let limits_file = stack.limits_file.clone().unwrap();
    let consumer_metrics = stack.consumer.metrics.clone();

    // Traffic that moves the series the dashboard shows: one request
    // admitted (no limit for `walk-in`); two deferred into one bucket at the
    // default pace of 1/s (the second is suspended, then answered); one
    // deferred for a model whose backend is down (not awaited: the consumer
    // retries it); a request the deferral endpoint refuses; a limits reload;
    // and, last, a limited tenant's request while Redis is down (the
    // filter's failure_mode lets it through).
    let chat = move |tenant: &'static str, model: &'static str, words: usize| {
        let body = serde_json::json!({
            "model": model,
            "max_tokens": 10,
            "messages": [{"role": "user", "content": "hello ".repeat(words)}]
        });
        move || {
            http_request(
                envoy_addr,
                "POST",
                "/v1/chat/completions",
                &[("x-tenant-id", tenant)],
                body.to_string().as_bytes(),
            )
            .unwrap()
        }
    };
    let admitted = tokio::task::spawn_blocking(chat("walk-in", "gpt-4o", 3))
        .await
        .unwrap();
    assert_eq!(admitted.status, 200, "{admitted:?}\n{}", envoy.log_text());
    assert!(admitted.header("x-sluice-request-id").is_none());
    // Its answer never matters here (and the connection may close early).
    std::thread::spawn(move || {
        let _ = sluice_testkit::stack::chat_of(envoy_addr, "patient", "llama-down", (60, 10));
    });
    let deferred: Vec<_> = (0..2)
        .map(|_| tokio::task::spawn_blocking(chat("patient", "gpt-4o", 60)))
        .collect();
    for client in deferred {
        let response = client.await.unwrap();
        assert_eq!(response.status, 200, "{response:?}\n{}", envoy.log_text());
        assert!(
            response.header("x-sluice-request-id").is_some(),
            "{response:?}"
        );
    }
    let refused = tokio::task::spawn_blocking(move || {
        http_request(deferral_addr, "GET", "/v1/chat/completions", &[], b"").unwrap()
    })
    .await
    .unwrap();
    assert_eq!(refused.status, 405, "{refused:?}");
    std::fs::write(&limits_file, format!("{limits}# changed\n")).unwrap();
    let metrics_text = move || {
        std::thread::sleep(Duration::from_millis(100));
        get(rls_admin, "/metrics")
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while !tokio::task::spawn_blocking(metrics_text)
        .await
        .unwrap()
        .contains("sluice_rls_config_reloads_total{result=\"applied\"}")
    {
        assert!(Instant::now() < deadline, "the limits were not reloaded");
    }
    while !consumer_metrics
        .encode()
        .contains("sluice_consumer_errors_total{kind=")
    {
        assert!(
            Instant::now() < deadline,
            "no consumer error for the unreachable backend"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stack.redis.stop();
    // sluice-rls answers UNAVAILABLE without its store. A worker that had an
    // answer within rls_down_after_ms (5 s) refuses (the service may only be
    // loaded); once none came for that long, failure_mode allow lets through.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let answer = tokio::task::spawn_blocking(chat("patient", "gpt-4o", 1))
            .await
            .unwrap();
        if answer.status == 200 {
            break;
        }
        assert_eq!(answer.status, 503, "failure_mode allow: {answer:?}");
        assert!(answer.body.contains("rate_limit_unavailable"), "{answer:?}");
        assert!(
            Instant::now() < deadline,
            "never let through with the store down: {answer:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Envoy gives up on the RLS after the filter's rls_timeout_ms and the
    // cancelled call records nothing; a caller that waits gets UNAVAILABLE,
    // counted as a store error.
    {
        use sluice_proto::pb::envoy::extensions::common::ratelimit::v3::{
            rate_limit_descriptor::Entry, RateLimitDescriptor,
        };
        use sluice_proto::pb::envoy::service::ratelimit::v3::{
            rate_limit_service_client::RateLimitServiceClient, RateLimitRequest,
        };
        let mut client = RateLimitServiceClient::connect(format!("http://127.0.0.1:{rls_port}"))
            .await
            .unwrap();
        let entry = |key: &str, value: &str| Entry {
            key: key.into(),
            value: value.into(),
        };
        let status = client
            .should_rate_limit(RateLimitRequest {
                domain: "sluice".into(),
                descriptors: vec![RateLimitDescriptor {
                    entries: vec![entry("tenant", "patient"), entry("model", "gpt-4o")],
                    ..Default::default()
                }],
                hits_addend: 1,
            })
            .await
            .expect_err("Redis is down");
        assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while !tokio::task::spawn_blocking(metrics_text)
        .await
        .unwrap()
        .contains("sluice_rls_store_errors_total{")
    {
        assert!(
            Instant::now() < deadline,
            "no store error with Redis down: {}\n{}",
            get(rls_admin, "/metrics"),
            get(envoy_admin, "/stats?filter=sluice")
        );
    }

    // Scrape everything.
    let scrapes: Vec<(&str, String)> = {
        let consumer_text = consumer_metrics.encode();
        tokio::task::spawn_blocking(move || {
            vec![
                ("sluice-rls", get(rls_admin, "/metrics")),
                ("sluice-consumer", consumer_text),
                ("llm-sim", get(backend_addr, "/metrics")),
                ("envoy", get(envoy_admin, "/stats/prometheus")),
            ]
        })
        .await
        .unwrap()
    };
    let mut exporters: BTreeMap<String, &str> = BTreeMap::new();
    let mut with_samples = BTreeSet::new();
    for (component, text) in &scrapes {
        let (names, sampled) = exported(text);
        assert!(!sampled.is_empty(), "{component} exported no samples");
        for name in names {
            exporters.entry(name).or_insert(component);
        }
        with_samples.extend(sampled);
    }

    // The deferred request moved the series the deferral panels rest on.
    for name in [
        "sluice_rls_decisions_total",
        "sluice_rls_over_limit_total",
        "sluice_rls_deferral_accepted_total",
        "sluice_consumer_pacing_decisions_total",
        "sluice_consumer_queue_wait_seconds_bucket",
        "sluice_consumer_chunk_write_seconds_bucket",
        "sluice_sim_requests_total",
        "sluice_deferred_total",
        "envoy_cluster_upstream_rq_total",
        "sluice_consumer_pacing_wait_seconds_bucket",
        "sluice_consumer_errors_total",
        "sluice_rls_deferral_rejected_total",
        "sluice_rls_config_reloads_total",
        "sluice_rls_store_errors_total",
        "sluice_rls_failure_allowed_total",
    ] {
        assert!(
            with_samples.contains(name),
            "no samples of {name}; similar: {:?}",
            with_samples
                .iter()
                .filter(|n| n.contains(name.rsplit('_').nth(1).unwrap()))
                .collect::<Vec<_>>()
        );
        assert!(
            queried.contains_key(name),
            "the dashboard does not show {name}"
        );
    }

    let mut missing = Vec::new();
    let mut declared_only = Vec::new();
    for (name, panels) in &queried {
        match exporters.get(name) {
            None => missing.push(format!("{name} (panels: {})", panels.join("; "))),
            Some(_) if !with_samples.contains(name) => declared_only.push(name.as_str()),
            Some(_) => {}
        }
    }
    println!(
        "{} metric names in {} panels; exported by: {}",
        queried.len(),
        panels,
        ["sluice-rls", "sluice-consumer", "llm-sim", "envoy"]
            .iter()
            .map(|c| format!(
                "{c} {}",
                queried
                    .keys()
                    .filter(|n| exporters.get(*n) == Some(c))
                    .count()
            ))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "declared but without samples yet (no such event in this run): {}",
        declared_only.join(", ")
    );
    println!("took {:?}", started.elapsed());
    assert!(
        missing.is_empty(),
        "dashboard metrics no component exports:\n{}",
        missing.join("\n")
    );
    drop(stack);
}
