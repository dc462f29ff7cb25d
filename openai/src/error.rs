//! The OpenAI error body, `{"error":{"message","type","param","code"}}`,
//! fields in OpenAI's order, so clients' SDKs surface every Sluice answer
//! (filter, ext_authz, deferral endpoint, consumer admin, simulator) the
//! same way.

use serde::Serialize;

/// Sent if serialization ever failed (it cannot for string fields).
const FALLBACK_BODY: &str =
    r#"{"error":{"message":"error","type":"server_error","param":null,"code":null}}"#;

/// One OpenAI error: `message`, `type`, and optional `param` and `code`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct OpenAiError<'a> {
    pub message: &'a str,
    #[serde(rename = "type")]
    pub error_type: &'a str,
    pub param: Option<&'a str>,
    pub code: Option<&'a str>,
}

#[derive(Serialize)]
struct Envelope<'a> {
    error: &'a OpenAiError<'a>,
}

impl<'a> OpenAiError<'a> {
    /// No `param`, no `code`.
    pub fn new(message: &'a str, error_type: &'a str) -> Self {
        OpenAiError {
            message,
            error_type,
            param: None,
            code: None,
        }
    }

    pub fn code(mut self, code: &'a str) -> Self {
        self.code = Some(code);
        self
    }

    pub fn param(mut self, param: &'a str) -> Self {
        self.param = Some(param);
        self
    }

    /// The JSON body.
    pub fn body(&self) -> String {
        serde_json::to_string(&Envelope { error: self })
            .unwrap_or_else(|_| FALLBACK_BODY.to_string())
    }
}

/// The body Sluice's own refusals carry: a `type`, a `code`, no `param`.
pub fn openai_error_body(message: &str, error_type: &str, code: &str) -> String {
    OpenAiError::new(message, error_type).code(code).body()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_come_in_openai_order() {
        assert_eq!(
            openai_error_body("slow \"down\"", "rate_limit_error", "rate_limit_exceeded"),
            r#"{"error":{"message":"slow \"down\"","type":"rate_limit_error","param":null,"code":"rate_limit_exceeded"}}"#
        );
    }

    #[test]
    fn param_and_code_are_optional() {
        assert_eq!(
            OpenAiError::new("boom", "server_error").body(),
            r#"{"error":{"message":"boom","type":"server_error","param":null,"code":null}}"#
        );
        assert_eq!(
            OpenAiError::new("missing", "invalid_request_error")
                .param("messages")
                .code("missing_required_parameter")
                .body(),
            r#"{"error":{"message":"missing","type":"invalid_request_error","param":"messages","code":"missing_required_parameter"}}"#
        );
    }

    #[test]
    fn the_fallback_is_valid_json() {
        assert!(serde_json::from_str::<serde_json::Value>(FALLBACK_BODY).is_ok());
    }
}
