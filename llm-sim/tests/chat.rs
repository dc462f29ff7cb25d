//! `/v1/chat/completions` over real sockets: wire format, caps, errors, failures.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

mod common;

use common::*;
use serde_json::{json, Value};
use sluice_llm_sim::text::{chat_prompt_tokens, completion_text};

#[tokio::test]
async fn non_streaming_chat_answers_with_consistent_usage() {
    let server = start(SimConfig::fast()).await;
    let response = chat(server.addr(), &[], &chat_body("Hello there, simulator!")).await;
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(response.header("content-type"), Some("application/json"));
    let body = response.json();
    assert!(
        body["id"].as_str().unwrap().starts_with("chatcmpl-"),
        "{body}"
    );
    assert_eq!(body["object"], "chat.completion");
    assert!(body["created"].as_u64().unwrap() > 1_600_000_000);
    assert_eq!(body["model"], "test-model");
    let choices = body["choices"].as_array().unwrap();
    assert_eq!(choices.len(), 1);
    assert_eq!(choices[0]["index"], 0);
    assert_eq!(choices[0]["message"]["role"], "assistant");
    assert_eq!(choices[0]["message"]["content"], completion_text(16));
    assert_eq!(choices[0]["finish_reason"], "stop");
    let prompt = chat_prompt_tokens(["Hello there, simulator!"]);
    assert_eq!(
        body["usage"],
        json!({"prompt_tokens": prompt, "completion_tokens": 16, "total_tokens": prompt + 16})
    );
    server.shutdown().await.unwrap();
}

/// The chunk every streamed event must look like, apart from choices.
fn check_chunk(chunk: &Value, id: &str, created: &Value) {
    assert_eq!(chunk["id"], id);
    assert_eq!(chunk["object"], "chat.completion.chunk");
    assert_eq!(&chunk["created"], created);
    assert_eq!(chunk["model"], "test-model");
}

/// A streamed chat of `tokens` completion tokens, answered 200.
async fn streamed_chat(
    server: &SimServer,
    tokens: &str,
    prompt: &str,
    include_usage: bool,
) -> Response {
    let response = chat(
        server.addr(),
        &[("x-sim-completion-tokens", tokens)],
        &stream_body(prompt, include_usage),
    )
    .await;
    assert_eq!(response.status, 200);
    response
}

#[tokio::test]
async fn streaming_chat_is_framed_exactly_like_openai() {
    let server = start(SimConfig::fast()).await;
    let response = streamed_chat(&server, "5", "hi", false).await;
    assert_eq!(response.header("content-type"), Some("text/event-stream"));
    assert!(response.complete, "stream not terminated");
    let events = response.events();
    // role, 5 tokens, finish, [DONE]
    assert_eq!(events.len(), 8, "{events:#?}");
    assert_eq!(events.last().unwrap(), "[DONE]");
    let first = parse(&events[0]);
    let id = first["id"].as_str().unwrap().to_string();
    assert!(id.starts_with("chatcmpl-"));
    let created = first["created"].clone();
    assert_eq!(
        first["choices"],
        json!([{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": null, "finish_reason": null}])
    );
    let mut content = String::new();
    for event in &events[1..6] {
        let chunk = parse(event);
        check_chunk(&chunk, &id, &created);
        let choices = chunk["choices"].as_array().unwrap();
        assert_eq!(choices.len(), 1);
        assert_eq!(choices[0]["finish_reason"], Value::Null);
        let delta = choices[0]["delta"].as_object().unwrap();
        assert_eq!(delta.len(), 1, "{delta:?}");
        content.push_str(delta["content"].as_str().unwrap());
    }
    assert_eq!(content, completion_text(5));
    let finish = parse(&events[6]);
    check_chunk(&finish, &id, &created);
    assert_eq!(
        finish["choices"],
        json!([{"index": 0, "delta": {}, "logprobs": null, "finish_reason": "stop"}])
    );
    for event in &events[..7] {
        assert!(
            parse(event).get("usage").is_none(),
            "usage without include_usage: {event}"
        );
    }
    // The exact bytes of one event.
    assert!(response
        .text()
        .ends_with("\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"));
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn streaming_chat_sends_a_usage_chunk_only_with_include_usage() {
    let server = start(SimConfig::fast()).await;
    let response = streamed_chat(&server, "3", "count me", true).await;
    let events = response.events();
    // role, 3 tokens, finish, usage, [DONE]
    assert_eq!(events.len(), 7, "{events:#?}");
    for event in &events[..5] {
        let chunk = parse(event);
        assert_eq!(chunk["usage"], Value::Null, "{event}");
        assert!(chunk.as_object().unwrap().contains_key("usage"));
    }
    assert_eq!(parse(&events[4])["choices"][0]["finish_reason"], "stop");
    let usage = parse(&events[5]);
    assert_eq!(usage["object"], "chat.completion.chunk");
    assert_eq!(usage["choices"], json!([]));
    let prompt = chat_prompt_tokens(["count me"]);
    assert_eq!(
        usage["usage"],
        json!({"prompt_tokens": prompt, "completion_tokens": 3, "total_tokens": prompt + 3})
    );
    assert_eq!(events[6], "[DONE]");

    // include_usage: false is the same as no stream_options.
    let mut body = stream_body("x", false);
    body["stream_options"] = json!({"include_usage": false});
    let response = chat(server.addr(), &[("x-sim-completion-tokens", "2")], &body).await;
    let events = response.events();
    assert_eq!(events.len(), 5);
    assert!(events[..4].iter().all(|e| parse(e).get("usage").is_none()));
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn max_tokens_caps_the_answer_with_finish_reason_length() {
    let server = start(SimConfig::fast()).await;
    let addr = server.addr();
    let mut body = chat_body("hi");
    body["max_tokens"] = json!(5);
    let answer = chat(addr, &[], &body).await.json();
    assert_eq!(answer["choices"][0]["finish_reason"], "length");
    assert_eq!(
        answer["choices"][0]["message"]["content"],
        completion_text(5)
    );
    assert_eq!(answer["usage"]["completion_tokens"], 5);

    // max_completion_tokens wins over max_tokens.
    body["max_completion_tokens"] = json!(2);
    let answer = chat(addr, &[], &body).await.json();
    assert_eq!(answer["choices"][0]["finish_reason"], "length");
    assert_eq!(answer["usage"]["completion_tokens"], 2);

    // A cap above what is generated: finish_reason stop.
    let mut body = chat_body("hi");
    body["max_tokens"] = json!(100);
    let answer = chat(addr, &[("x-sim-completion-tokens", "7")], &body)
        .await
        .json();
    assert_eq!(answer["choices"][0]["finish_reason"], "stop");
    assert_eq!(answer["usage"]["completion_tokens"], 7);
    assert_eq!(
        answer["choices"][0]["message"]["content"],
        completion_text(7)
    );

    // A cap equal to the wanted tokens did not cut anything.
    body["max_tokens"] = json!(7);
    let answer = chat(addr, &[("x-sim-completion-tokens", "7")], &body)
        .await
        .json();
    assert_eq!(answer["choices"][0]["finish_reason"], "stop");

    // Streaming: the finish chunk says length.
    let mut body = stream_body("hi", true);
    body["max_tokens"] = json!(4);
    let response = chat(addr, &[("x-sim-completion-tokens", "50")], &body).await;
    let events = response.events();
    assert_eq!(events.len(), 1 + 4 + 1 + 1 + 1);
    assert_eq!(parse(&events[5])["choices"][0]["finish_reason"], "length");
    assert_eq!(parse(&events[6])["usage"]["completion_tokens"], 4);

    // Zero tokens requested: an empty answer.
    let answer = chat(addr, &[("x-sim-completion-tokens", "0")], &chat_body("hi"))
        .await
        .json();
    assert_eq!(answer["choices"][0]["message"]["content"], "");
    assert_eq!(answer["usage"]["completion_tokens"], 0);
    server.shutdown().await.unwrap();
}

fn assert_openai_error(response: &Response, status: u16, kind: &str) -> Value {
    assert_eq!(response.status, status, "{}", response.text());
    assert_eq!(response.header("content-type"), Some("application/json"));
    let body = response.json();
    let error = body["error"].as_object().unwrap();
    let mut keys: Vec<&str> = error.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["code", "message", "param", "type"], "{body}");
    assert!(!error["message"].as_str().unwrap().is_empty());
    assert_eq!(error["type"], kind, "{body}");
    body["error"].clone()
}

#[tokio::test]
async fn bad_requests_get_openai_shaped_errors() {
    let server = start(SimConfig::fast()).await;
    let addr = server.addr();

    let response = post(addr, "/v1/chat/completions", &[], "{\"model\": ").await;
    let error = assert_openai_error(&response, 400, "invalid_request_error");
    assert!(error["message"].as_str().unwrap().contains("JSON"));

    let response = post(
        addr,
        "/v1/chat/completions",
        &[],
        r#"{"messages":[{"role":"user","content":"hi"}]}"#,
    )
    .await;
    let error = assert_openai_error(&response, 400, "invalid_request_error");
    assert!(error["message"].as_str().unwrap().contains("model"));

    let response = post(addr, "/v1/chat/completions", &[], r#"{"model":"m"}"#).await;
    let error = assert_openai_error(&response, 400, "invalid_request_error");
    assert_eq!(error["param"], "messages");
    assert_eq!(error["code"], "missing_required_parameter");

    let response = chat(
        addr,
        &[("x-sim-completion-tokens", "lots")],
        &chat_body("hi"),
    )
    .await;
    let error = assert_openai_error(&response, 400, "invalid_request_error");
    assert_eq!(error["param"], "x-sim-completion-tokens");

    let mut body = chat_body("hi");
    body["stream_options"] = json!({"include_usage": true});
    let response = chat(addr, &[], &body).await;
    let error = assert_openai_error(&response, 400, "invalid_request_error");
    assert_eq!(error["param"], "stream_options");

    let response = post(addr, "/v1/nothing-here", &[], "{}").await;
    let error = assert_openai_error(&response, 404, "invalid_request_error");
    assert_eq!(error["message"], "Invalid URL (POST /v1/nothing-here)");

    let response = get(addr, "/v1/chat/completions").await;
    assert_openai_error(&response, 405, "invalid_request_error");

    // None of these reached the model.
    assert_stats(addr, &[("in_flight", 0), ("tokens_generated", 0)]).await;
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn injected_failure_before_output_is_a_500() {
    let server = start(SimConfig::fast()).await;
    let addr = server.addr();
    let response = chat(addr, &[("x-sim-fail", "before")], &chat_body("hi")).await;
    let error = assert_openai_error(&response, 500, "server_error");
    assert_eq!(error["param"], Value::Null);
    // Streaming requests fail before the stream starts, too.
    let response = chat(addr, &[("x-sim-fail", "before")], &stream_body("hi", true)).await;
    assert_openai_error(&response, 500, "server_error");
    assert_stats(
        addr,
        &[
            ("injected_failures_before", 2),
            ("in_flight", 0),
            ("client_disconnects", 0),
        ],
    )
    .await;
    assert_metrics(
        addr,
        &[
            "sluice_sim_injected_failures_total{kind=\"before\"} 2",
            "sluice_sim_requests_total{endpoint=\"chat_completions\",status=\"500\"} 2",
        ],
    )
    .await;
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn failure_rate_is_deterministic_for_a_seed_and_headers_override_it() {
    let config = SimConfig {
        failure_rate: 0.5,
        seed: 7,
        ..SimConfig::fast()
    };
    let mut runs = Vec::new();
    for _ in 0..2 {
        let server = start(config.clone()).await;
        let mut statuses = Vec::new();
        for _ in 0..24 {
            statuses.push(chat(server.addr(), &[], &chat_body("hi")).await.status);
        }
        server.shutdown().await.unwrap();
        runs.push(statuses);
    }
    assert_eq!(runs[0], runs[1]);
    assert!(
        runs[0].contains(&500) && runs[0].contains(&200),
        "{:?}",
        runs[0]
    );
    assert!(runs[0].iter().all(|s| *s == 200 || *s == 500));

    let always = start(SimConfig {
        failure_rate: 1.0,
        ..SimConfig::fast()
    })
    .await;
    let response = chat(always.addr(), &[], &chat_body("hi")).await;
    assert_openai_error(&response, 500, "server_error");
    let response = chat(always.addr(), &[("x-sim-fail", "none")], &chat_body("hi")).await;
    assert_eq!(response.status, 200);
    always.shutdown().await.unwrap();
}

#[tokio::test]
async fn mid_stream_failure_closes_the_connection_without_done() {
    let server = start(SimConfig::fast()).await;
    let addr = server.addr();
    let response = chat(
        addr,
        &[("x-sim-fail", "mid"), ("x-sim-completion-tokens", "10")],
        &stream_body("hi", true),
    )
    .await;
    assert_eq!(response.status, 200);
    assert!(!response.complete, "a broken stream must not end cleanly");
    let events = response.events();
    // The role chunk and half of the tokens, then nothing.
    assert_eq!(events.len(), 1 + 5, "{events:#?}");
    assert!(events.iter().all(|e| e != "[DONE]"));
    let content: String = events[1..]
        .iter()
        .map(|e| {
            parse(e)["choices"][0]["delta"]["content"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(content, completion_text(5));

    // A whole (non-streamed) answer broken halfway is a 500.
    let response = chat(
        addr,
        &[("x-sim-fail", "mid"), ("x-sim-completion-tokens", "10")],
        &chat_body("hi"),
    )
    .await;
    assert_openai_error(&response, 500, "server_error");

    let stats = wait_for_stats(addr, |s| s["in_flight"] == 0).await;
    assert_eq!(stats["injected_failures_mid"], 2);
    assert_eq!(stats["client_disconnects"], 0);
    assert_eq!(stats["tokens_generated"], 10);

    // The configured rate does the same to every stream at 1.0.
    let broken = start(SimConfig {
        mid_stream_failure_rate: 1.0,
        ..SimConfig::fast()
    })
    .await;
    let response = chat(broken.addr(), &[], &stream_body("hi", false)).await;
    assert!(!response.complete);
    assert_eq!(response.events().len(), 1 + 8);
    broken.shutdown().await.unwrap();
    server.shutdown().await.unwrap();
}
