//! What an OpenAI-compatible model server speaks, defined once for every
//! Sluice component (the filter, ext_authz, the deferral endpoint, the
//! consumer, the simulator):
//!
//! - [`error`]: the error body, `{"error":{"message","type","param","code"}}`;
//! - [`usage`]: the `usage` object, and reading it (or the output text)
//!   back from a JSON or SSE answer;
//! - [`stream`]: Server-Sent Events: `data:` lines, the `[DONE]` sentinel,
//!   an incremental event parser;
//! - [`response`]: the answer objects (chat, completions, embeddings) as
//!   OpenAI writes them;
//! - [`model_server`]: vLLM's and SGLang's Prometheus metric names.
//!
//! Its own crate because every side needs it and none of the others fits:
//! it depends on serde only, so the Wasm filter links it (no tokio, no
//! Redis), and the simulator and the consumer use it without linking the
//! admission core, its tokenizer or Redis.
// The filter runs inside Envoy: an index past the end would be a panic there.
#![warn(clippy::indexing_slicing)]

pub mod error;
pub mod model_server;
pub mod response;
pub mod stream;
pub mod usage;

pub use error::{openai_error_body, OpenAiError};
pub use usage::Usage;

/// Tokens one image part of a prompt is charged by default: OpenAI's figure
/// for a 1024×1024 high-detail image.
pub const DEFAULT_IMAGE_TOKENS: u64 = 765;
