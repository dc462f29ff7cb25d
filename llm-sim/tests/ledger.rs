//! `GET /sim/ledger`: what the simulator really sent, per `x-sim-ledger` key.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

mod common;

use common::{chat, chat_body, get, post};
use serde_json::json;

#[tokio::test]
async fn the_ledger_holds_what_was_sent_per_key() {
    let sim = sluice_llm_sim::spawn(sluice_llm_sim::SimConfig::fast())
        .await
        .unwrap();
    let addr = sim.addr();
    let whole = chat(
        addr,
        &[("x-sim-ledger", "a"), ("x-sim-completion-tokens", "7")],
        &chat_body("hello there"),
    )
    .await;
    let prompt = whole.json()["usage"]["prompt_tokens"].as_u64().unwrap();
    // A stream that breaks halfway: 5 of its 10 tokens went out.
    let mut body = chat_body("hello there");
    body["stream"] = true.into();
    chat(
        addr,
        &[
            ("x-sim-ledger", "a"),
            ("x-sim-completion-tokens", "10"),
            ("x-sim-fail", "mid"),
        ],
        &body,
    )
    .await;
    post(
        addr,
        "/v1/embeddings",
        &[("x-sim-ledger", "b")],
        &json!({"model": "m", "input": "abcdefgh"}).to_string(),
    )
    .await;
    // Without a key: not recorded.
    chat(addr, &[], &chat_body("hello there")).await;

    let ledger = get(addr, "/sim/ledger").await.json();
    assert_eq!(
        ledger,
        json!({
            "a": {"requests": 2, "prompt_tokens": 2 * prompt, "completion_tokens": 7 + 5, "broken": 1},
            "b": {"requests": 1, "prompt_tokens": 2, "completion_tokens": 0, "broken": 0},
        })
    );
}
