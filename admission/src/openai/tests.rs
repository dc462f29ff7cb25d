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

/// Bodies of every endpoint the full parse accepts, with the shapes the
/// light read measures and those it skips.
const ACCEPTED: &[(Endpoint, &str)] = &[
    (Endpoint::ChatCompletions, COOKBOOK),
    (
        Endpoint::ChatCompletions,
        r#"{"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}}]}, "just a string", 7, [1, 2]], "model": "gpt-4o", "n": 3, "max_completion_tokens": 20, "max_tokens": 5, "tools": [{"type": "function", "function": {"name": "f"}}]}"#,
    ),
    (
        Endpoint::ChatCompletions,
        r#"{"model": "gpt-4o", "max_tokens": -0, "messages": [{"content": "first", "content": "the last one wins", "name": "x"}]}"#,
    ),
    (
        Endpoint::ChatCompletions,
        r#"{"model": "first", "model": "gpt-4o", "max_tokens": 1.0, "messages": [{"role": "user", "content": "caf\u00e9 \ud83d\ude00 \"quoted\""}]}"#,
    ),
    (
        Endpoint::Completions,
        r#"{"model": "gpt-3.5-turbo-instruct", "prompt": ["one", "two", 5, [1, 2, 3], {"content": "obj"}], "suffix": "end", "max_tokens": 9, "best_of": 2}"#,
    ),
    (Endpoint::Completions, r#"{"model": "m", "prompt": null}"#),
    (
        Endpoint::Embeddings,
        r#"{"model": "text-embedding-3-small", "input": "some text to embed"}"#,
    ),
    (
        Endpoint::Embeddings,
        r#"{"model": "text-embedding-3-small", "input": [[1, 2], [3]]}"#,
    ),
    (
        Endpoint::Responses,
        r#"{"model": "gpt-4o", "instructions": "be brief", "input": [{"role": "user", "content": "hello"}, "plain"], "max_output_tokens": 40}"#,
    ),
    (
        Endpoint::Responses,
        r#"{"model": "gpt-4o", "input": "a single input string"}"#,
    ),
    (
        Endpoint::Responses,
        r#"{"model": "gpt-4o", "instructions": "only"}"#,
    ),
];

#[test]
fn the_light_read_agrees_with_the_full_parse_and_stays_below_its_bound() {
    for &(endpoint, body) in ACCEPTED {
        let full = parse(endpoint, body.as_bytes()).unwrap();
        let light = scan(endpoint, body.as_bytes()).unwrap_or_else(|| panic!("{body}"));
        assert_eq!(light.model, full.model, "{body}");
        assert_eq!(light.requested_output, full.requested_output, "{body}");
        for longest in [1, 4, 128] {
            let bound = light.prompt_tokens_at_least(longest);
            let full_bound = full.prompt_tokens_at_least(longest, 765);
            assert!(bound <= full_bound, "{body}: {bound} > {full_bound}");
        }
    }
    // The texts it measures: 3 per message, priming, "the last one wins".
    let light = scan(Endpoint::ChatCompletions, ACCEPTED[2].1.as_bytes()).unwrap();
    assert_eq!(light.prompt_tokens_at_least(1), 3 + 3 + 17);
    assert_eq!(light.requested_output, None, "-0 is no u64 for either");
}

#[test]
fn the_light_read_refuses_what_the_full_parse_refuses() {
    let deep = format!(
        r#"{{"model": "gpt-4o", "messages": [], "x": {}1{}}}"#,
        "[".repeat(200),
        "]".repeat(200)
    );
    let rejected: Vec<(Endpoint, Vec<u8>)> = vec![
        (
            Endpoint::ChatCompletions,
            b"{\"model\": \"gpt-4o\", \"messages\": [".to_vec(),
        ),
        (
            Endpoint::ChatCompletions,
            b"{\"model\": \"gpt-4o\", \"messages\": []} x".to_vec(),
        ),
        (
            Endpoint::ChatCompletions,
            b"{\"model\": \"gpt-4o\", \"messages\": [], \"x\": \"\xff\"}".to_vec(),
        ),
        (
            Endpoint::ChatCompletions,
            br#"{"model": "gpt-4o", "messages": [], "x": "\ud800"}"#.to_vec(),
        ),
        (
            Endpoint::ChatCompletions,
            br#"{"model": "gpt-4o", "messages": [], "x": "\q"}"#.to_vec(),
        ),
        (
            Endpoint::ChatCompletions,
            br#"{"model": "gpt-4o", "messages": [], "x": 01}"#.to_vec(),
        ),
        (Endpoint::ChatCompletions, deep.into_bytes()),
        (Endpoint::ChatCompletions, br#"["gpt-4o", []]"#.to_vec()),
        (Endpoint::ChatCompletions, br#"{"messages": []}"#.to_vec()),
        (
            Endpoint::ChatCompletions,
            br#"{"model": "", "messages": []}"#.to_vec(),
        ),
        (
            Endpoint::ChatCompletions,
            br#"{"model": "gpt-4o", "model": 4, "messages": []}"#.to_vec(),
        ),
        (
            Endpoint::ChatCompletions,
            br#"{"model": "gpt-4o", "messages": {}}"#.to_vec(),
        ),
        (
            Endpoint::ChatCompletions,
            br#"{"model": "gpt-4o", "messages": [], "messages": null}"#.to_vec(),
        ),
        (
            Endpoint::Completions,
            br#"{"model": "m", "input": "x"}"#.to_vec(),
        ),
        (
            Endpoint::Embeddings,
            br#"{"model": "m", "prompt": "x"}"#.to_vec(),
        ),
        (
            Endpoint::Responses,
            br#"{"model": "m", "messages": []}"#.to_vec(),
        ),
    ];
    for (endpoint, body) in rejected {
        let shown = String::from_utf8_lossy(&body);
        assert!(
            parse(endpoint, &body).is_err(),
            "the full parse took {shown}"
        );
        assert_eq!(scan(endpoint, &body), None, "{shown}");
    }
}

/// The light read against the full parse on a flood body (3.9 MiB of
/// random words in one message), natively; printed, not asserted:
/// `cargo test -p sluice-admission --release light_read_timing -- --ignored --nocapture`
#[test]
#[ignore = "a measurement: run it in release"]
fn light_read_timing() {
    let mut x: u64 = 7;
    let text: String = (0..4_089_000)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if i % 9 == 8 {
                ' '
            } else {
                char::from(b'a' + (x % 26) as u8)
            }
        })
        .collect();
    let body = serde_json::json!({"model": "gpt-4o", "max_tokens": 100, "messages": [{"role": "user", "content": text}]}).to_string();
    let time = |f: &dyn Fn() -> u64| {
        let mut best = std::time::Duration::MAX;
        let mut result = 0;
        for _ in 0..20 {
            let started = std::time::Instant::now();
            result = f();
            best = best.min(started.elapsed());
        }
        (best, result)
    };
    let (full, full_bound) = time(&|| {
        parse(Endpoint::ChatCompletions, body.as_bytes())
            .map(|r| r.prompt_tokens_at_least(128, 0))
            .unwrap_or(0)
    });
    let (light, light_bound) = time(&|| {
        scan(Endpoint::ChatCompletions, body.as_bytes())
            .map(|s| s.prompt_tokens_at_least(128))
            .unwrap_or(0)
    });
    println!(
        "{} B: full parse + lower bound {full:?} (bound {full_bound}), light read {light:?} (bound {light_bound}): {:.1}×",
        body.len(),
        full.as_secs_f64() / light.as_secs_f64()
    );
}
