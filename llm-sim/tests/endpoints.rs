//! `/v1/completions`, `/v1/embeddings`, `/v1/models`, health, metrics,
//! `/sim/calls`, request-id echo and graceful shutdown.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

mod common;

use common::*;
use serde_json::{json, Value};
use sluice_llm_sim::text::{approx_tokens, completion_text, embedding_base64};
use std::time::Duration;

#[tokio::test]
async fn completions_answer_text_completion_objects() {
    let server = start(SimConfig::fast()).await;
    let addr = server.addr();
    let body = json!({"model": "legacy", "prompt": "Once upon a time", "max_tokens": 4});
    let answer = post(addr, "/v1/completions", &[], &body.to_string()).await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    let answer = answer.json();
    assert!(answer["id"].as_str().unwrap().starts_with("cmpl-"));
    assert_eq!(answer["object"], "text_completion");
    assert_eq!(answer["model"], "legacy");
    assert_eq!(
        answer["choices"],
        json!([{"text": completion_text(4), "index": 0, "logprobs": null, "finish_reason": "length"}])
    );
    let prompt = approx_tokens("Once upon a time");
    assert_eq!(
        answer["usage"],
        json!({"prompt_tokens": prompt, "completion_tokens": 4, "total_tokens": prompt + 4})
    );

    // A batch of prompts: one choice each.
    let body = json!({"model": "legacy", "prompt": ["a", [1, 2, 3]], "max_tokens": 2});
    let answer = post(addr, "/v1/completions", &[], &body.to_string())
        .await
        .json();
    let choices = answer["choices"].as_array().unwrap();
    assert_eq!(choices.len(), 2);
    assert_eq!(choices[1]["index"], 1);
    assert_eq!(answer["usage"]["prompt_tokens"], 1 + 3);
    assert_eq!(answer["usage"]["completion_tokens"], 4);

    let response = post(addr, "/v1/completions", &[], r#"{"model":"m"}"#).await;
    assert_eq!(response.status, 400);
    assert_eq!(response.json()["error"]["param"], "prompt");
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn streamed_completions_end_with_usage_and_done() {
    let server = start(SimConfig::fast()).await;
    let body = json!({
        "model": "legacy", "prompt": ["p1", "p2"], "stream": true,
        "stream_options": {"include_usage": true},
    });
    let response = post(
        server.addr(),
        "/v1/completions",
        &[("x-sim-completion-tokens", "3")],
        &body.to_string(),
    )
    .await;
    assert_eq!(response.status, 200);
    assert_eq!(response.header("content-type"), Some("text/event-stream"));
    assert!(response.complete);
    let events = response.events();
    // 3 steps × 2 choices, 2 finish chunks, usage, [DONE]
    assert_eq!(events.len(), 6 + 2 + 1 + 1, "{events:#?}");
    let mut texts = [String::new(), String::new()];
    for event in &events[..6] {
        let chunk = parse(event);
        assert_eq!(chunk["object"], "text_completion");
        assert_eq!(chunk["usage"], Value::Null);
        let choice = &chunk["choices"][0];
        assert_eq!(choice["finish_reason"], Value::Null);
        texts[choice["index"].as_u64().unwrap() as usize]
            .push_str(choice["text"].as_str().unwrap());
    }
    assert_eq!(texts, [completion_text(3), completion_text(3)]);
    for (i, event) in events[6..8].iter().enumerate() {
        let choice = &parse(event)["choices"][0];
        assert_eq!(choice["index"], i);
        assert_eq!(choice["text"], "");
        assert_eq!(choice["finish_reason"], "stop");
    }
    let usage = parse(&events[8]);
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(usage["usage"]["completion_tokens"], 6);
    assert_eq!(events[9], "[DONE]");
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn embeddings_are_deterministic_and_encodable_as_base64() {
    let server = start(SimConfig::fast()).await;
    let addr = server.addr();
    let body = json!({"model": "embed", "input": ["hello world", "other"]});
    let first = post(addr, "/v1/embeddings", &[], &body.to_string()).await;
    assert_eq!(first.status, 200, "{}", first.text());
    let first = first.json();
    assert_eq!(first["object"], "list");
    assert_eq!(first["model"], "embed");
    let data = first["data"].as_array().unwrap();
    assert_eq!(data.len(), 2);
    assert_eq!(data[0]["object"], "embedding");
    assert_eq!(data[1]["index"], 1);
    let vector: Vec<f32> = data[0]["embedding"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap() as f32)
        .collect();
    assert_eq!(vector.len(), 8);
    let norm: f32 = vector.iter().map(|v| v * v).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() < 1e-4, "{norm}");
    assert_ne!(data[0]["embedding"], data[1]["embedding"]);
    let prompt = approx_tokens("hello world") + approx_tokens("other");
    assert_eq!(
        first["usage"],
        json!({"prompt_tokens": prompt, "total_tokens": prompt})
    );

    let again = post(addr, "/v1/embeddings", &[], &body.to_string())
        .await
        .json();
    assert_eq!(again["data"], first["data"]);

    let body = json!({"model": "embed", "input": "hello world", "encoding_format": "base64"});
    let encoded = post(addr, "/v1/embeddings", &[], &body.to_string())
        .await
        .json();
    assert_eq!(encoded["data"][0]["embedding"], embedding_base64(&vector));

    let body = json!({"model": "embed", "input": [[1, 2, 3], [4]], "dimensions": 3});
    let tokens = post(addr, "/v1/embeddings", &[], &body.to_string())
        .await
        .json();
    assert_eq!(tokens["data"][0]["embedding"].as_array().unwrap().len(), 3);
    assert_eq!(tokens["usage"]["prompt_tokens"], 4);

    let response = post(addr, "/v1/embeddings", &[], r#"{"model":"embed"}"#).await;
    assert_eq!(response.status, 400);
    assert_eq!(response.json()["error"]["param"], "input");
    let response = post(
        addr,
        "/v1/embeddings",
        &[("x-sim-fail", "before")],
        &body.to_string(),
    )
    .await;
    assert_eq!(response.status, 500);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn models_health_and_metrics() {
    let server = start(SimConfig {
        models: vec!["alpha".into(), "beta".into()],
        ..SimConfig::fast()
    })
    .await;
    let addr = server.addr();
    let models = get(addr, "/v1/models").await;
    assert_eq!(models.status, 200);
    let models = models.json();
    assert_eq!(models["object"], "list");
    let ids: Vec<&str> = models["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            assert_eq!(m["object"], "model");
            m["id"].as_str().unwrap()
        })
        .collect();
    assert_eq!(ids, ["alpha", "beta"]);

    let health = get(addr, "/healthz").await;
    assert_eq!((health.status, health.text().as_str()), (200, "ok\n"));

    chat(addr, &[("x-sim-completion-tokens", "5")], &chat_body("hi")).await;
    let metrics = get(addr, "/metrics").await;
    assert_eq!(metrics.status, 200);
    let text = metrics.text();
    for needle in [
        "sluice_sim_requests_total{endpoint=\"chat_completions\",status=\"200\"} 1",
        "sluice_sim_requests_total{endpoint=\"models\",status=\"200\"} 1",
        "sluice_sim_tokens_generated_total 5",
        "sluice_sim_in_flight 0",
        "sluice_sim_rejected_over_capacity_total 0",
        "sluice_sim_client_disconnects_total 0",
        "# EOF",
    ] {
        assert!(text.contains(needle), "{needle} not in\n{text}");
    }
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn calls_are_counted_per_request_id_and_the_id_is_echoed() {
    let server = start(SimConfig::fast()).await;
    let addr = server.addr();
    for _ in 0..3 {
        let response = chat(addr, &[("x-request-id", "req-42")], &chat_body("hi")).await;
        assert_eq!(response.header("x-sim-request-id"), Some("req-42"));
    }
    // Rejected and failed requests reached the model endpoint too.
    let response = post(
        addr,
        "/v1/chat/completions",
        &[("x-request-id", "req-42")],
        "{",
    )
    .await;
    assert_eq!(response.status, 400);
    assert_eq!(response.header("x-sim-request-id"), Some("req-42"));
    post(
        addr,
        "/v1/embeddings",
        &[("x-request-id", "emb/1 x")],
        r#"{"model":"e","input":"x"}"#,
    )
    .await;
    let response = chat(addr, &[], &chat_body("no id")).await;
    assert_eq!(response.header("x-sim-request-id"), None);
    // Other endpoints are not the model.
    get(addr, "/healthz").await;
    request(
        addr,
        "GET",
        "/v1/models",
        &[("x-request-id", "req-42")],
        None,
    )
    .await;

    let calls = get(addr, "/sim/calls?request_id=req-42").await.json();
    assert_eq!(
        calls,
        json!({"request_id": "req-42", "calls": 4, "arrival": 0})
    );
    let calls = get(addr, "/sim/calls?request_id=emb%2F1+x").await.json();
    assert_eq!((&calls["calls"], &calls["arrival"]), (&json!(1), &json!(1)));
    let calls = get(addr, "/sim/calls?request_id=never").await.json();
    assert_eq!(
        (&calls["calls"], &calls["arrival"]),
        (&json!(0), &json!(null))
    );
    let response = get(addr, "/sim/calls").await;
    assert_eq!(response.status, 400);
    assert_eq!(response.json()["error"]["param"], "request_id");
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn call_counts_keep_a_window_of_the_last_request_ids() {
    let server = start(SimConfig {
        max_tracked_request_ids: 2,
        ..SimConfig::fast()
    })
    .await;
    let addr = server.addr();
    for id in ["w-1", "w-2", "w-1", "w-3"] {
        chat(addr, &[("x-request-id", id)], &chat_body("hi")).await;
    }
    let calls_of = |id: &'static str| async move {
        get(addr, &format!("/sim/calls?request_id={id}"))
            .await
            .json()["calls"]
            .clone()
    };
    // w-1 was seen first: forgotten when w-3 came, although called twice.
    assert_eq!(calls_of("w-1").await, 0);
    assert_eq!(calls_of("w-2").await, 1);
    assert_eq!(calls_of("w-3").await, 1);
    assert_stats(
        addr,
        &[("tracked_request_ids", 2), ("forgotten_request_ids", 1)],
    )
    .await;
    assert_metrics(addr, &["sluice_sim_tracked_request_ids 2"]).await;
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn shutdown_lets_streams_in_flight_finish() {
    let (server, mut stream) = start_paced_stream("20", &stream_body("finish me", false)).await;
    let addr = server.addr();
    stream.next_event().await.unwrap();
    let stopping = tokio::spawn(server.shutdown());
    let rest = stream.rest().await;
    assert_eq!(rest.len(), 20 + 1 + 1);
    assert_eq!(rest.last().unwrap(), "[DONE]");
    assert!(stream.finished);
    tokio::time::timeout(Duration::from_secs(10), stopping)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    // Nothing listens any more.
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}
