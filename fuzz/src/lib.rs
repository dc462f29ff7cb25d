//! Fuzz entry points: one function per input parser Sluice exposes to bytes
//! it does not control. Each takes arbitrary bytes and must return without
//! panicking; libFuzzer drives them (`fuzz/libfuzzer`, `scripts/fuzz`), and
//! this crate's tests replay the seed corpora and every saved crash input
//! through the same functions, so `cargo test` catches regressions without a
//! sanitizer build.

mod admission_host;

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Instant;

use bytes::BytesMut;
use rocketmq_protocol::protocol::remoting_command::RemotingCommand;
use sluice_admission::config::FilterConfig;
use sluice_admission::openai::{self, Endpoint};
use sluice_admission::TokenCounter;
use sluice_contract::work::WorkItem;
use sluice_openai::usage::UsageTracker;
use sluice_ratelimit::config::LimitsConfig;

pub use admission_host::admission;

/// One fuzz target: its name (the libFuzzer binary and the corpus folder)
/// and its entry point.
pub struct Target {
    pub name: &'static str,
    pub run: fn(&[u8]),
}

/// Every target, in the order `scripts/fuzz` runs them.
pub const TARGETS: &[Target] = &[
    Target {
        name: "openai_request",
        run: openai_request,
    },
    Target {
        name: "admission",
        run: admission,
    },
    Target {
        name: "filter_config",
        run: filter_config,
    },
    Target {
        name: "rls_yaml",
        run: rls_yaml,
    },
    Target {
        name: "usage",
        run: usage,
    },
    Target {
        name: "work_item",
        run: work_item,
    },
    Target {
        name: "lite_topic_frame",
        run: lite_topic_frame,
    },
    Target {
        name: "hf_tokenizer_json",
        run: hf_tokenizer_json,
    },
];

/// The repository's `fuzz/` folder (seed corpora and saved crash inputs).
pub fn fuzz_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Counts characters: a cheap stand-in for a BPE, so the parser's walk over
/// every part of a request runs at fuzzing speed.
fn char_count(text: &str) -> usize {
    text.chars().count()
}

/// The OpenAI request parser, on each endpoint, then the prompt walk that
/// counts tokens. The first byte picks the endpoint.
pub fn openai_request(data: &[u8]) {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    let path = ENDPOINT_PATHS[usize::from(selector) % ENDPOINT_PATHS.len()];
    let Some(endpoint) = Endpoint::from_path(path) else {
        return;
    };
    if let Ok(request) = openai::parse(endpoint, body) {
        let counter: &dyn TokenCounter = &char_count;
        let _ = request.prompt_tokens(counter, sluice_openai::DEFAULT_IMAGE_TOKENS);
        let _ = request.into_body();
    }
}

/// Paths the fuzzers pick from: the four endpoints, one with a gateway
/// prefix and a query, and one that is not an endpoint.
pub(crate) const ENDPOINT_PATHS: [&str; 6] = [
    "/v1/chat/completions",
    "/v1/completions",
    "/v1/embeddings",
    "/v1/responses",
    "/openai/v1/chat/completions/?api-version=1",
    "/v1/models",
];

/// A vocabulary file as an operator points Sluice at one (a Hugging Face
/// `tokenizer.json` or a Mistral `tekken.json`); when it loads, a few texts
/// through it, whose count must be their number of ids.
pub fn hf_tokenizer_json(data: &[u8]) {
    let Ok(tokenizer) = sluice_tokenizer::HfTokenizer::from_vocabulary_file(data) else {
        return;
    };
    for text in [
        "Hello, world! 1234",
        "<|x|>ab  \n\n x",
        "中文😀 é\u{301}",
        "",
    ] {
        let ids = tokenizer.encode(text);
        assert_eq!(ids.len(), tokenizer.count(text), "{text:?}");
        let mut budget = 8;
        let bounded = tokenizer.count_within(text, &mut budget);
        if bounded.exact {
            assert_eq!(bounded.tokens, ids.len(), "{text:?}");
        } else {
            assert!(bounded.tokens >= ids.len(), "{text:?}");
        }
    }
}

/// The plugin configuration (JSON), with its validation and warnings.
pub fn filter_config(data: &[u8]) {
    if let Ok(config) = FilterConfig::from_json(data) {
        let _ = config.warnings();
    }
}

/// sluice-rls's limits YAML, then a lookup of a few descriptors in every
/// domain it declares.
pub fn rls_yaml(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let sources = [(PathBuf::from("fuzz.yaml"), text.to_string())];
    let Ok(config) = LimitsConfig::from_sources(&sources) else {
        return;
    };
    let domains: Vec<String> = config.domains().map(str::to_string).collect();
    for domain in &domains {
        let _ = config.lookup(domain, [("tenant", "acme")]);
        let _ = config.lookup(domain, [("tenant", "acme"), ("model", "gpt-4o")]);
        let _ = config.lookup(domain, [("generic_key", "x"), ("model", "")]);
    }
    let _ = config.limit_count();
}

/// The usage readers (JSON body, SSE stream), fed in chunks. The first byte
/// picks the content type and the chunk size, so SSE lines and JSON split
/// anywhere.
pub fn usage(data: &[u8]) {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    let content_type = if selector & 1 == 0 {
        "application/json; charset=utf-8"
    } else {
        "text/event-stream"
    };
    // A small limit too, so the overflow path runs.
    let limit = if selector & 2 == 0 { 1 << 20 } else { 64 };
    let chunk = usize::from(selector >> 2) + 1;
    let Some(mut tracker) = UsageTracker::for_content_type(content_type, limit) else {
        return;
    };
    for piece in body.chunks(chunk) {
        tracker.feed(piece);
    }
    if let Some(found) = tracker.finish() {
        let _ = found.total();
    }
}

/// A deferred request's message body, as the consumer reads it, and back.
pub fn work_item(data: &[u8]) {
    if let Ok(item) = WorkItem::from_json(data) {
        let _ = item.response_key();
        let _ = item.queued_ms(u64::MAX);
        let again = WorkItem::from_json(&item.to_json());
        debug_assert!(
            again.is_ok(),
            "a valid work item must survive its own encoding"
        );
    }
}

/// A RocketMQ remoting frame as the broker would send it, decoded the way the
/// LiteTopic client reads a pop answer: frame, header, then the messages.
pub fn lite_topic_frame(data: &[u8]) {
    let mut buffer = BytesMut::from(data);
    // A stream can hold several frames back to back.
    while let Ok(Some(mut command)) = RemotingCommand::decode(&mut buffer) {
        let _ = sluice_litetopic::decode_pop_answer(&mut command, Instant::now());
    }
}

/// Built once: the configurations are fixed, only the input varies.
pub(crate) fn cached<T>(cell: &'static OnceLock<T>, build: impl FnOnce() -> T) -> &'static T {
    cell.get_or_init(build)
}
