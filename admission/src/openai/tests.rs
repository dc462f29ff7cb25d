use super::*;
use std::sync::OnceLock;

fn cl100k() -> &'static tiktoken_rs::CoreBPE {
    static BPE: OnceLock<tiktoken_rs::CoreBPE> = OnceLock::new();
    BPE.get_or_init(|| tiktoken_rs::cl100k_base().unwrap())
}

fn o200k() -> &'static tiktoken_rs::CoreBPE {
    static BPE: OnceLock<tiktoken_rs::CoreBPE> = OnceLock::new();
    BPE.get_or_init(|| tiktoken_rs::o200k_base().unwrap())
}

fn count_cl100k(text: &str) -> usize {
    cl100k().encode_ordinary(text).len()
}

fn count_o200k(text: &str) -> usize {
    o200k().encode_ordinary(text).len()
}

/// OpenAI cookbook "How to count tokens with tiktoken": these messages are
/// 129 prompt tokens for gpt-3.5-turbo / gpt-4 and 124 for gpt-4o, as the
/// API's own `usage.prompt_tokens` reports.
const COOKBOOK: &str = r#"{"model": "gpt-4", "messages": [
  {"role": "system", "content": "You are a helpful, pattern-following assistant that translates corporate jargon into plain English."},
  {"role": "system", "name": "example_user", "content": "New synergies will help drive top-line growth."},
  {"role": "system", "name": "example_assistant", "content": "Things working well together will increase revenue."},
  {"role": "system", "name": "example_user", "content": "Let's circle back when we have more bandwidth to touch base on opportunities for increased leverage."},
  {"role": "system", "name": "example_assistant", "content": "Let's talk later when we're less busy about how to do better."},
  {"role": "user", "content": "This late pivot means we don't have time to boil the ocean for the client deliverable."}
]}"#;

#[test]
fn chat_counts_match_openai_reference_usage() {
    let request = parse(Endpoint::ChatCompletions, COOKBOOK.as_bytes()).unwrap();
    assert_eq!(request.prompt_tokens(&count_cl100k, 765), 129);
    assert_eq!(request.prompt_tokens(&count_o200k, 765), 124);
}

#[test]
fn endpoints_by_path_suffix() {
    for (path, endpoint) in [
        ("/v1/chat/completions", Some(Endpoint::ChatCompletions)),
        (
            "/openai/v1/chat/completions?x=1",
            Some(Endpoint::ChatCompletions),
        ),
        ("/v1/completions/", Some(Endpoint::Completions)),
        ("/v1/embeddings", Some(Endpoint::Embeddings)),
        ("/v1/responses", Some(Endpoint::Responses)),
        ("/v1/models", None),
        ("/healthz", None),
    ] {
        assert_eq!(Endpoint::from_path(path), endpoint, "{path}");
    }
}

#[test]
fn content_parts_names_tools_and_images() {
    let body = br#"{"model": "gpt-4o", "messages": [
        {"role": "user", "content": [
            {"type": "text", "text": "What is in this image?"},
            {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
        ]},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{\"q\": \"cats\"}"}}
        ]},
        {"role": "tool", "tool_call_id": "call_1", "content": "three cats"}
    ], "tools": [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]}"#;
    let request = parse(Endpoint::ChatCompletions, body).unwrap();
    let c = count_o200k;
    let tools =
        r#"[{"function":{"name":"lookup","parameters":{"type":"object"}},"type":"function"}]"#;
    let expected = 3
        + c("user")
        + c("What is in this image?")
        + 85
        + 3
        + c("assistant")
        + c("lookup")
        + c("{\"q\": \"cats\"}")
        + 3
        + c("tool")
        + c("call_1")
        + c("three cats")
        + 3
        + c(tools);
    assert_eq!(request.prompt_tokens(&c, 85), expected as u64);
}

#[test]
fn completions_embeddings_and_responses() {
    let c = count_cl100k;
    let r = parse(Endpoint::Completions, br#"{"model": "gpt-3.5-turbo-instruct", "prompt": ["Say hi", "Say bye"], "max_tokens": 7, "n": 2}"#).unwrap();
    assert_eq!(r.prompt_tokens(&c, 0), (c("Say hi") + c("Say bye")) as u64);
    assert_eq!(r.requested_output, Some(14));

    let r = parse(
        Endpoint::Embeddings,
        br#"{"model": "text-embedding-3-small", "input": [[1, 2, 3], [4, 5]]}"#,
    )
    .unwrap();
    assert_eq!(r.prompt_tokens(&c, 0), 5);
    assert_eq!(r.requested_output, Some(0));
    let r = parse(
        Endpoint::Embeddings,
        br#"{"model": "m", "input": [101, 102, 103]}"#,
    )
    .unwrap();
    assert_eq!(r.prompt_tokens(&c, 0), 3);

    let r = parse(Endpoint::Responses, br#"{"model": "gpt-4.1", "instructions": "Be brief.", "input": "Hello there", "max_output_tokens": 50}"#).unwrap();
    assert_eq!(
        r.prompt_tokens(&c, 0),
        (c("Be brief.") + c("Hello there")) as u64
    );
    assert_eq!(r.requested_output, Some(50));
    let r = parse(Endpoint::Responses, br#"{"model": "gpt-4.1", "input": [{"role": "user", "content": [{"type": "input_text", "text": "Hi"}]}]}"#).unwrap();
    assert_eq!(r.prompt_tokens(&c, 0), (3 + c("user") + c("Hi") + 3) as u64);
}

#[test]
fn output_and_stream_flags() {
    let r = parse(Endpoint::ChatCompletions, br#"{"model": "m", "messages": [], "max_tokens": 10, "max_completion_tokens": 20, "stream": true, "stream_options": {"include_usage": true}}"#).unwrap();
    assert_eq!(r.requested_output, Some(20));
    assert!(r.is_stream() && r.include_usage);
    let r = parse(
        Endpoint::ChatCompletions,
        br#"{"model": "m", "messages": []}"#,
    )
    .unwrap();
    assert_eq!(r.requested_output, None);
    assert!(!r.is_stream() && !r.include_usage);
}

#[test]
fn bad_bodies_get_clear_messages() {
    let cases: [(&[u8], &str); 7] = [
        (b"{not json", "not valid JSON"),
        (b"\xff\xfe{}", "not valid UTF-8"),
        (b"[1, 2]", "must be a JSON object"),
        (
            br#"{"messages": []}"#,
            "missing required parameter: 'model'",
        ),
        (
            br#"{"model": 42, "messages": []}"#,
            "'model' must be a non-empty string",
        ),
        (
            br#"{"model": "", "messages": []}"#,
            "'model' must be a non-empty string",
        ),
        (br#"{"model": "gpt-4o"}"#, "'messages'"),
    ];
    for (body, expected) in cases {
        let err = parse(Endpoint::ChatCompletions, body).unwrap_err();
        assert!(err.contains(expected), "{err}");
    }
    // Invalid UTF-8 inside a JSON string is refused too.
    let err = parse(
        Endpoint::Completions,
        b"{\"model\": \"m\", \"prompt\": \"\xc3\x28\"}",
    )
    .unwrap_err();
    assert!(err.contains("UTF-8"), "{err}");
}
