//! Open models through real Envoy: a Llama 3 and a Qwen3 chat request are
//! counted exactly by the Wasm filter (their vocabularies handed to the VM
//! as a bundle of compact vocabularies) and by the ext_authz front door
//! (`model_tokenizers` files read by sluice-rls), against what the model
//! server reports: llm-sim renders each chat with the model's template and
//! tokenizes it with the model's `tokenizer.json`, as vLLM would.
//!
//! Needs the reference `tokenizer.json` files (scripts/fetch-hf-tokenizers);
//! without them each test says SKIPPED and passes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

use serde_json::Value;
use sluice_admission::config::FilterConfig;
use sluice_admission::encoders::BpeEncoders;
use sluice_llm_sim::tokenizers::ModelTokenizer;
use sluice_llm_sim::SimConfig;
use sluice_ratelimit::ext_authz::ExtAuthzService;
use sluice_ratelimit::limiter::Limiter;
use sluice_ratelimit::metrics::Metrics;
use sluice_testkit::stack::limits::{self, OverLimit};
use sluice_testkit::stack::{redis_limiter, start_envoy, start_llm_sim, start_rls, Rls, RlsParts};
use sluice_testkit::vocab::{
    hf_tokenizer_json, vocab_bundle, with_model_tokenizers, with_vm_vocabularies,
};
use sluice_testkit::{
    filter_event_count, free_port, post, sluice_filter_envoy_config, workspace_root, Envoy,
    EnvoyPorts, RedisServer, SluiceFilterPorts, StaticHttpServer, ECHO_HEADERS,
};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

/// (reference directory, the model's name in requests, chat template).
const MODELS: [(&str, &str, &str); 2] = [
    ("llama3", "meta-llama/Meta-Llama-3-8B-Instruct", "llama3"),
    ("qwen3", "Qwen/Qwen3-8B", "qwen3"),
];

/// A model of `model_tokenizers` whose file the filter's bundle lacks.
const MISSING_MODEL: &str = "mistral-small";

/// The reference files, in the order of [`MODELS`]; `None` (skip) if any
/// is absent.
fn reference_files() -> Option<Vec<PathBuf>> {
    MODELS
        .iter()
        .map(|(dir, _, _)| hf_tokenizer_json(dir))
        .collect()
}

/// The chat sent to each model: several roles, scripts, digits and code,
/// texts that neither start nor end with whitespace.
fn chat(model: &str) -> Value {
    serde_json::json!({
        "model": model,
        "max_tokens": 8,
        "messages": [
            {"role": "system", "content": "You are a terse assistant. Answer in one line."},
            {"role": "user", "content": "Summarise: 令牌桶算法按租户限制请求速率。 Die Überprüfung erfolgt pro Mandant; 3.14159 × 2718281828 = ?"},
            {"role": "assistant", "content": "fn main() { println!(\"{}\", 42); }"},
            {"role": "user", "content": "Now in हिन्दी and العربية, please: 12345678901234567890!"}
        ]
    })
}

/// The limiter, Redis and sluice-rls (with `ext_authz` when given).
struct Limits {
    limiter: Arc<Limiter>,
    rls: Rls,
    _redis: RedisServer,
}

async fn limits(ext_authz: impl FnOnce(Arc<Limiter>) -> Option<ExtAuthzService>) -> Limits {
    let redis = RedisServer::start().unwrap();
    let file = limits::file(&[limits::tenant(
        Some("meter"),
        1000,
        50_000_000,
        OverLimit::Count,
    )]);
    let limiter = redis_limiter(&file, &redis.url(), Metrics::new());
    let ext_authz = ext_authz(limiter.clone());
    let rls = start_rls(limiter.clone(), RlsParts::ext_authz(ext_authz)).await;
    Limits {
        limiter,
        rls,
        _redis: redis,
    }
}

/// llm-sim counting each model of [`MODELS`] with its own tokenizer.
async fn model_server(files: &[PathBuf]) -> SocketAddr {
    let tokenizers = MODELS
        .iter()
        .zip(files)
        .map(|((_, model, template), path)| ModelTokenizer::load(model, path, template).unwrap())
        .collect();
    start_llm_sim(SimConfig {
        tokenizers,
        ..SimConfig::fast()
    })
    .await
}

/// The `model_tokenizers` entries of [`MODELS`].
fn entries(files: &[PathBuf]) -> Vec<(&'static str, &PathBuf, Option<&'static str>)> {
    MODELS
        .iter()
        .zip(files)
        .map(|((_, model, template), path)| (*model, path, Some(*template)))
        .collect()
}

/// Sends `model`'s chat as tenant `meter`; the prompt tokens the model
/// server reported.
async fn reported_prompt_tokens(envoy: &Envoy, listener: SocketAddr, model: &str) -> u64 {
    let headers = vec![
        ("x-tenant-id", "meter".to_string()),
        ("content-type", "application/json".to_string()),
    ];
    let body = chat(model).to_string().into_bytes();
    let response = post(listener, "/v1/chat/completions", headers, body)
        .await
        .unwrap();
    assert_eq!(
        response.status,
        200,
        "{model}: {response:?}\n{}",
        envoy.log_text()
    );
    let answer: Value = serde_json::from_str(&response.body).unwrap();
    answer["usage"]["prompt_tokens"]
        .as_u64()
        .unwrap_or_else(|| panic!("{model}: no usage in {answer}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wasm_filter_counts_llama3_and_qwen3_exactly() {
    let Some(files) = reference_files() else {
        return;
    };
    let limits = limits(|_| None).await;
    let backend = model_server(&files).await;
    let deferral = StaticHttpServer::start(ECHO_HEADERS).unwrap();
    let (admin, listener) = (free_port(), free_port());
    let config = sluice_filter_envoy_config(&SluiceFilterPorts {
        admin,
        listener,
        rls: limits.rls.port,
        backend: backend.port(),
        deferral: deferral.addr.port(),
    })
    .unwrap();
    let missing = PathBuf::from("/absent/mistral/tokenizer.json");
    let mut tokenizers = entries(&files);
    tokenizers.push((MISSING_MODEL, &missing, None));
    let config = with_model_tokenizers(&config, &tokenizers).unwrap();
    let config = with_vm_vocabularies(&config, &vocab_bundle(&files).unwrap()).unwrap();
    let envoy = start_envoy(config, admin, listener).await;
    let listener = ([127, 0, 0, 1], listener).into();

    for (_, model, _) in MODELS {
        let before = filter_event_count(&envoy, "prompt_tokens").await.unwrap();
        let reported = reported_prompt_tokens(&envoy, listener, model).await;
        let counted = filter_event_count(&envoy, "prompt_tokens").await.unwrap() - before;
        assert_eq!(counted, reported, "{model}: filter vs model server");
    }
    assert_eq!(
        filter_event_count(&envoy, "tokenizer_fallback")
            .await
            .unwrap(),
        0
    );
    // A model whose vocabulary did not reach the filter: still admitted,
    // counted with the documented estimate, and the metric says so.
    reported_prompt_tokens(&envoy, listener, MISSING_MODEL).await;
    assert_eq!(
        filter_event_count(&envoy, "tokenizer_fallback")
            .await
            .unwrap(),
        1
    );
    assert!(
        envoy.log_text().contains("/absent/mistral/tokenizer.json"),
        "no warning about the missing vocabulary:\n{}",
        envoy.log_text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ext_authz_counts_llama3_and_qwen3_exactly() {
    let Some(files) = reference_files() else {
        return;
    };
    let json = std::fs::read_to_string(workspace_root().join("config/ext-authz.json")).unwrap();
    let json = with_model_tokenizers(&json, &entries(&files)).unwrap();
    let mut admission = FilterConfig::from_json(json.as_bytes()).unwrap();
    admission.deferral.secrets = vec![sluice_testkit::example_deferral_secret()];
    let encoders = BpeEncoders::load(&admission).unwrap();
    let limits =
        limits(|limiter| Some(ExtAuthzService::with_encoders(limiter, admission, encoders))).await;
    let backend = model_server(&files).await;
    let (admin, listener) = (free_port(), free_port());
    let template = std::fs::read_to_string(workspace_root().join("envoy/ext-authz.yaml")).unwrap();
    let config = EnvoyPorts {
        admin,
        listener,
        rls: limits.rls.port,
        backend: backend.port(),
        deferral: None,
    }
    .apply(&template);
    let envoy = start_envoy(config, admin, listener).await;
    let listener = ([127, 0, 0, 1], listener).into();

    let counter = &limits.limiter.metrics().ext_authz_prompt_tokens;
    for (_, model, _) in MODELS {
        let before = counter.get();
        let reported = reported_prompt_tokens(&envoy, listener, model).await;
        assert_eq!(
            counter.get() - before,
            reported,
            "{model}: ext_authz vs model server"
        );
    }
}
