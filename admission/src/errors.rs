//! OpenAI-style error bodies, so clients' SDKs surface Sluice's answers cleanly.

/// `{"error": {"message", "type", "param", "code"}}` as OpenAI sends it
/// (one definition for every component, see `openai/`).
pub use sluice_openai::openai_error_body;

/// A local reply the filter sends instead of forwarding the request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalReply {
    pub status: u32,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl LocalReply {
    pub fn error(status: u32, message: &str, error_type: &str, code: &str) -> Self {
        LocalReply {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: openai_error_body(message, error_type, code),
        }
    }

    pub fn bad_request(message: &str) -> Self {
        Self::error(400, message, "invalid_request_error", "invalid_request")
    }
}
