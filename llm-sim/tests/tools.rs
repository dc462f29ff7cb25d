//! Tool calls (a chat request with `tools` is answered with a call, whole or
//! streamed as OpenAI streams it) and answers without usage (`x-sim-usage: omit`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

mod common;

use common::{chat, chat_body, get, parse, stream_body};
use serde_json::{json, Value};
use sluice_llm_sim::text::{tool_arguments, tool_name_tokens};

fn with_tools(mut body: Value) -> Value {
    body["tools"] = json!([
        {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}},
        {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
    ]);
    body
}

#[tokio::test]
async fn a_request_with_tools_is_answered_with_a_tool_call() {
    let sim = sluice_llm_sim::spawn(sluice_llm_sim::SimConfig::fast())
        .await
        .unwrap();
    let headers = [("x-sim-completion-tokens", "12"), ("x-sim-ledger", "t")];
    let body = with_tools(chat_body("what time is it"));
    let answer = chat(sim.addr(), &headers, &body).await.json();
    let choice = &answer["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    assert_eq!(choice["message"]["content"], Value::Null);
    let call = &choice["message"]["tool_calls"][0];
    assert_eq!(call["type"], "function");
    assert!(call["id"].as_str().unwrap().starts_with("call_"));
    let name = call["function"]["name"].as_str().unwrap().to_string();
    assert!(["get_time", "get_weather"].contains(&name.as_str()));
    let arguments = call["function"]["arguments"].as_str().unwrap();
    // Completion tokens: the name's and one per piece of the arguments.
    let pieces = 12 - tool_name_tokens(&name);
    assert_eq!(arguments, tool_arguments(pieces).concat());
    serde_json::from_str::<Value>(arguments).expect("complete arguments are JSON");
    assert_eq!(answer["usage"]["completion_tokens"], 12);
    // Deterministic: the same request calls the same tool.
    let again = chat(sim.addr(), &headers, &body).await.json();
    assert_eq!(
        again["choices"][0]["message"]["tool_calls"][0]["function"]["name"],
        name.as_str()
    );

    // Streamed as OpenAI does: the name first, then the arguments in pieces.
    let mut body = with_tools(stream_body("what time is it", true));
    body["tool_choice"] = json!({"type": "function", "function": {"name": "get_weather"}});
    let events = chat(sim.addr(), &headers, &body).await.events();
    let chunks: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|e| parse(e))
        .collect();
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
    assert_eq!(
        chunks[0]["choices"][0]["delta"],
        json!({"role": "assistant"})
    );
    let first = &chunks[1]["choices"][0]["delta"]["tool_calls"][0];
    assert_eq!(first["index"], 0);
    assert_eq!(
        first["function"],
        json!({"name": "get_weather", "arguments": ""})
    );
    let streamed: Vec<&str> = chunks[2..]
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"].as_str())
        .collect();
    let pieces = 12 - tool_name_tokens("get_weather");
    assert_eq!(streamed, tool_arguments(pieces));
    let finish = &chunks[chunks.len() - 2];
    assert_eq!(finish["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(chunks.last().unwrap()["usage"]["completion_tokens"], 12);

    // `tool_choice: "none"`: text.
    let mut body = with_tools(chat_body("hi"));
    body["tool_choice"] = "none".into();
    let answer = chat(sim.addr(), &headers, &body).await.json();
    assert_eq!(answer["choices"][0]["finish_reason"], "stop");

    let ledger = get(sim.addr(), "/sim/ledger").await.json();
    assert_eq!(ledger["t"]["completion_tokens"], 4 * 12);
}

#[tokio::test]
async fn a_broken_tool_call_stream_counts_what_went_out() {
    let sim = sluice_llm_sim::spawn(sluice_llm_sim::SimConfig::fast())
        .await
        .unwrap();
    let headers = [
        ("x-sim-completion-tokens", "20"),
        ("x-sim-fail", "mid"),
        ("x-sim-ledger", "t"),
    ];
    let mut body = with_tools(stream_body("x", false));
    body["tool_choice"] = json!({"type": "function", "function": {"name": "get_time"}});
    let answer = chat(sim.addr(), &headers, &body).await;
    assert!(!answer.complete);
    let ledger = get(sim.addr(), "/sim/ledger").await.json();
    // The name (2 tokens) and arguments up to token 10 of 20.
    assert_eq!(ledger["t"]["completion_tokens"], 10);
    assert_eq!(ledger["t"]["broken"], 1);
}

#[tokio::test]
async fn usage_can_be_omitted() {
    let sim = sluice_llm_sim::spawn(sluice_llm_sim::SimConfig::fast())
        .await
        .unwrap();
    let omit = [("x-sim-usage", "omit")];
    let answer = chat(sim.addr(), &omit, &chat_body("hello")).await.json();
    assert!(answer.get("usage").is_none(), "{answer}");
    let events = chat(sim.addr(), &omit, &stream_body("hello", true))
        .await
        .events();
    assert!(events.iter().all(|e| !e.contains("usage")), "{events:?}");
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
}
