//! Sluice admission: everything the Wasm filter decides, as plain Rust.
//!
//! * [`config`] — the plugin configuration (JSON), validated once per VM;
//! * [`openai`] — OpenAI-compatible request parsing and token estimates;
//! * [`descriptors`] — tenant/model sanitizing and the RLS request;
//! * [`counter_write`] — the filter's signature on refunds and forced charges;
//! * [`usage`] — reading real usage back from JSON and SSE responses;
//! * [`admission`] — the per-request state machine over a small [`host::Host`] trait.
//!
//! Nothing here touches the proxy-wasm ABI, so it all runs in native unit tests
//! (and in the sidecar's ext_authz front door).

pub mod admission;
pub mod config;
pub mod counter_write;
pub mod deferral;
pub mod descriptors;
pub mod encoders;
pub mod errors;
pub mod host;
pub mod openai;
pub mod stream_usage;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod usage;

/// Counts tokens of ordinary text with one BPE encoding.
pub trait TokenCounter {
    fn count(&self, text: &str) -> usize;
}

impl<F: Fn(&str) -> usize> TokenCounter for F {
    fn count(&self, text: &str) -> usize {
        self(text)
    }
}
