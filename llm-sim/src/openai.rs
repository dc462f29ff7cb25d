//! OpenAI request parsing, with OpenAI-shaped 400s (the response objects
//! are `sluice_openai::response`'s).

use crate::text::{approx_tokens, chat_prompt_tokens, fnv1a64};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};
use sluice_openai::OpenAiError;

/// An error answered as `{"error":{"message","type","param","code"}}`.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    pub kind: &'static str,
    pub param: Option<String>,
    pub code: Option<&'static str>,
    /// Seconds for a `Retry-After` header.
    pub retry_after: Option<u64>,
}

impl ApiError {
    pub fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
            kind,
            param: None,
            code: None,
            retry_after: None,
        }
    }

    /// 400 `invalid_request_error`.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::invalid_request(StatusCode::BAD_REQUEST, message)
    }

    /// An `invalid_request_error` with another status (404, 405, 409, 413).
    pub fn invalid_request(status: StatusCode, message: impl Into<String>) -> Self {
        Self::new(status, "invalid_request_error", message)
    }

    pub fn param(mut self, param: impl Into<String>) -> Self {
        self.param = Some(param.into());
        self
    }

    pub fn code(mut self, code: &'static str) -> Self {
        self.code = Some(code);
        self
    }

    pub fn missing(param: &str) -> Self {
        Self::invalid(format!("Missing required parameter: '{param}'."))
            .param(param)
            .code("missing_required_parameter")
    }

    pub fn invalid_type(param: &str, expected: &str, got: &Value) -> Self {
        Self::invalid(format!(
            "Invalid type for '{param}': expected {expected}, but got {} instead.",
            json_type_name(got)
        ))
        .param(param)
        .code("invalid_type")
    }

    /// The JSON body (the shared builder, fields in OpenAI's order).
    pub fn body_text(&self) -> String {
        OpenAiError {
            message: &self.message,
            error_type: self.kind,
            param: self.param.as_deref(),
            code: self.code,
        }
        .body()
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = self.body_text();
        let mut response = (
            self.status,
            [(header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response();
        if let Some(seconds) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

fn json_type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "an integer",
        Value::Number(_) => "a decimal",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Parses a body as a JSON object, or answers OpenAI's 400 for bad JSON.
pub fn parse_object(body: &[u8]) -> Result<Map<String, Value>, ApiError> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(other) => Err(ApiError::invalid(format!(
            "Invalid body: expected a JSON object, but got {} instead.",
            json_type_name(&other)
        ))),
        Err(error) => Err(ApiError::invalid(format!(
            "We could not parse the JSON body of your request. (HINT: This likely means you \
             aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, \
             but what was sent was not valid JSON: {error})"
        ))),
    }
}

/// What is not null in `obj[key]`.
fn present<'a>(obj: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    obj.get(key).filter(|value| !value.is_null())
}

fn model(obj: &Map<String, Value>) -> Result<String, ApiError> {
    match present(obj, "model") {
        Some(Value::String(model)) if !model.is_empty() => Ok(model.clone()),
        Some(Value::String(_)) | None => {
            Err(ApiError::invalid("you must provide a model parameter"))
        }
        Some(other) => Err(ApiError::invalid_type("model", "a string", other)),
    }
}

fn positive_int(obj: &Map<String, Value>, key: &str) -> Result<Option<u64>, ApiError> {
    match present(obj, key) {
        None => Ok(None),
        Some(value) => match value.as_u64() {
            Some(0) => Err(ApiError::invalid(format!(
                "Invalid '{key}': integer below minimum value. Expected a value >= 1, but got 0 instead."
            ))
            .param(key)
            .code("integer_below_min_value")),
            Some(n) => Ok(Some(n)),
            None if value.as_i64().is_some() => Err(ApiError::invalid(format!(
                "Invalid '{key}': integer below minimum value. Expected a value >= 1, but got {value} instead."
            ))
            .param(key)
            .code("integer_below_min_value")),
            None => Err(ApiError::invalid_type(key, "an integer", value)),
        },
    }
}

/// vLLM's request `priority`: any integer, 0 when absent.
fn priority(obj: &Map<String, Value>) -> Result<i64, ApiError> {
    match present(obj, "priority") {
        None => Ok(0),
        Some(value) => value
            .as_i64()
            .ok_or_else(|| ApiError::invalid_type("priority", "an integer", value)),
    }
}

fn boolean(obj: &Map<String, Value>, key: &str) -> Result<bool, ApiError> {
    match present(obj, key) {
        None => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(other) => Err(ApiError::invalid_type(key, "a boolean", other)),
    }
}

/// `stream` and `stream_options.include_usage`, checked as OpenAI does.
fn streaming(obj: &Map<String, Value>) -> Result<(bool, bool), ApiError> {
    let stream = boolean(obj, "stream")?;
    let include_usage = match present(obj, "stream_options") {
        None => false,
        Some(Value::Object(options)) => {
            if !stream {
                return Err(ApiError::invalid(
                    "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
                )
                .param("stream_options"));
            }
            match present(options, "include_usage") {
                None => false,
                Some(Value::Bool(b)) => *b,
                Some(other) => {
                    return Err(ApiError::invalid_type(
                        "stream_options.include_usage",
                        "a boolean",
                        other,
                    ))
                }
            }
        }
        Some(other) => return Err(ApiError::invalid_type("stream_options", "an object", other)),
    };
    Ok((stream, include_usage))
}

/// A generation request (chat or legacy completions), reduced to what the
/// simulator needs.
#[derive(Clone, Debug, PartialEq)]
pub struct GenerationRequest {
    pub model: String,
    /// Prompt tokens of each choice (one per prompt; chat has one).
    pub prompt_tokens: Vec<u64>,
    /// `max_completion_tokens`, else `max_tokens`.
    pub max_tokens: Option<u64>,
    pub stream: bool,
    pub include_usage: bool,
    /// Functions the model may call (`tools`, narrowed by `tool_choice`);
    /// with any, the answer is a tool call.
    pub tool_names: Vec<String>,
    /// A hash of the request body: which offered tool is called.
    pub request_key: u64,
    /// A chat's (role, text) messages, for a model's own tokenizer
    /// (`SimConfig::tokenizers`); empty for completions.
    pub messages: Vec<(String, String)>,
    /// The prompt tokens the tool definitions add (approximate).
    pub definition_tokens: u64,
    /// vLLM's `priority` (lower is served first; 0 when absent).
    pub priority: i64,
}

/// The function names of `tools` (each `{"type":"function","function":{"name":…}}`),
/// narrowed by `tool_choice` (`"none"`: no call; a named function: that one),
/// and the prompt tokens the definitions add.
fn tools(obj: &Map<String, Value>) -> Result<(Vec<String>, u64), ApiError> {
    let tools = match present(obj, "tools") {
        None => return Ok((Vec::new(), 0)),
        Some(Value::Array(tools)) => tools,
        Some(other) => return Err(ApiError::invalid_type("tools", "an array", other)),
    };
    let mut names = Vec::with_capacity(tools.len());
    for (index, tool) in tools.iter().enumerate() {
        match tool.pointer("/function/name") {
            Some(Value::String(name)) if !name.is_empty() => names.push(name.clone()),
            _ => return Err(ApiError::missing(&format!("tools[{index}].function.name"))),
        }
    }
    let definitions = approx_tokens(&Value::Array(tools.clone()).to_string());
    let names = match present(obj, "tool_choice") {
        Some(Value::String(choice)) if choice == "none" => Vec::new(),
        Some(Value::Object(choice)) => match choice.get("function").and_then(|f| f.get("name")) {
            Some(Value::String(name)) if names.contains(name) => vec![name.clone()],
            _ => {
                return Err(ApiError::invalid(
                    "Invalid 'tool_choice': it must name a function of 'tools'.",
                )
                .param("tool_choice"))
            }
        },
        _ => names,
    };
    Ok((names, definitions))
}

/// `POST /v1/chat/completions`.
pub fn parse_chat(body: &[u8]) -> Result<GenerationRequest, ApiError> {
    let obj = parse_object(body)?;
    let model = model(&obj)?;
    let messages = match obj.get("messages") {
        None | Some(Value::Null) => return Err(ApiError::missing("messages")),
        Some(Value::Array(messages)) if messages.is_empty() => {
            return Err(ApiError::invalid(
                "Invalid 'messages': empty array. Expected an array with minimum length 1, \
                 but got an empty array instead.",
            )
            .param("messages")
            .code("empty_array"))
        }
        Some(Value::Array(messages)) => messages,
        Some(other) => return Err(ApiError::invalid_type("messages", "an array", other)),
    };
    let mut contents: Vec<String> = Vec::with_capacity(messages.len());
    let mut roles: Vec<String> = Vec::with_capacity(messages.len());
    for (index, message) in messages.iter().enumerate() {
        let Value::Object(message) = message else {
            return Err(ApiError::invalid_type(
                &format!("messages[{index}]"),
                "an object",
                message,
            ));
        };
        match present(message, "role") {
            Some(Value::String(role)) => roles.push(role.clone()),
            None => return Err(ApiError::missing(&format!("messages[{index}].role"))),
            Some(other) => {
                return Err(ApiError::invalid_type(
                    &format!("messages[{index}].role"),
                    "a string",
                    other,
                ))
            }
        }
        let content = match present(message, "content") {
            None => String::new(),
            Some(Value::String(text)) => text.clone(),
            // Content parts: text parts count, others (images, audio) do not.
            Some(Value::Array(parts)) => parts
                .iter()
                .filter_map(|part| part.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join(""),
            Some(other) => {
                return Err(ApiError::invalid_type(
                    &format!("messages[{index}].content"),
                    "a string or array",
                    other,
                ))
            }
        };
        contents.push(content);
    }
    let max_tokens = match positive_int(&obj, "max_completion_tokens")? {
        Some(n) => Some(n),
        None => positive_int(&obj, "max_tokens")?,
    };
    let (stream, include_usage) = streaming(&obj)?;
    let (tool_names, definition_tokens) = tools(&obj)?;
    Ok(GenerationRequest {
        model,
        prompt_tokens: vec![
            chat_prompt_tokens(contents.iter().map(String::as_str)) + definition_tokens,
        ],
        max_tokens,
        stream,
        include_usage,
        tool_names,
        request_key: fnv1a64(body),
        messages: roles.into_iter().zip(contents).collect(),
        definition_tokens,
        priority: priority(&obj)?,
    })
}

/// One input of a completions prompt or an embeddings input: its token count
/// and a hash identifying it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Input {
    pub tokens: u64,
    pub key: u64,
}

fn text_input(text: &str) -> Input {
    Input {
        tokens: approx_tokens(text),
        key: fnv1a64(text.as_bytes()),
    }
}

fn token_input(tokens: &[Value]) -> Option<Input> {
    let mut bytes = Vec::with_capacity(tokens.len() * 8);
    for token in tokens {
        bytes.extend_from_slice(&token.as_u64()?.to_le_bytes());
    }
    Some(Input {
        tokens: tokens.len() as u64,
        key: fnv1a64(&bytes) ^ 0x7070_7070,
    })
}

/// A string, an array of strings, an array of token ids, or an array of
/// arrays of token ids (the shapes OpenAI accepts for `prompt` and `input`).
fn inputs(obj: &Map<String, Value>, key: &str) -> Result<Vec<Input>, ApiError> {
    let value = match present(obj, key) {
        None => return Err(ApiError::missing(key)),
        Some(value) => value,
    };
    let invalid = || {
        ApiError::invalid(format!(
            "Invalid '{key}': expected a string, an array of strings, an array of integers \
             or an array of arrays of integers."
        ))
        .param(key)
        .code("invalid_type")
    };
    match value {
        Value::String(text) => Ok(vec![text_input(text)]),
        Value::Array(items) if items.is_empty() => Err(ApiError::invalid(format!(
            "Invalid '{key}': empty array. Expected an array with minimum length 1, \
             but got an empty array instead."
        ))
        .param(key)
        .code("empty_array")),
        Value::Array(items) if items.iter().all(Value::is_number) => token_input(items)
            .map(|input| vec![input])
            .ok_or_else(invalid),
        Value::Array(items) => items
            .iter()
            .map(|item| match item {
                Value::String(text) => Some(text_input(text)),
                Value::Array(tokens) => token_input(tokens),
                _ => None,
            })
            .collect::<Option<Vec<_>>>()
            .ok_or_else(invalid),
        _ => Err(invalid()),
    }
}

/// `POST /v1/completions`: one choice per prompt.
pub fn parse_completion(body: &[u8]) -> Result<GenerationRequest, ApiError> {
    let obj = parse_object(body)?;
    let model = model(&obj)?;
    let prompts = inputs(&obj, "prompt")?;
    let max_tokens = positive_int(&obj, "max_tokens")?;
    let (stream, include_usage) = streaming(&obj)?;
    Ok(GenerationRequest {
        model,
        prompt_tokens: prompts.iter().map(|input| input.tokens).collect(),
        max_tokens,
        stream,
        include_usage,
        tool_names: Vec::new(),
        request_key: fnv1a64(body),
        messages: Vec::new(),
        definition_tokens: 0,
        priority: priority(&obj)?,
    })
}

#[derive(Clone, Debug, PartialEq)]
pub struct EmbeddingRequest {
    pub model: String,
    pub inputs: Vec<Input>,
    pub base64: bool,
    pub dimensions: Option<u64>,
}

/// Largest `dimensions` accepted.
pub const MAX_EMBEDDING_DIMENSIONS: u64 = 65_536;

/// `POST /v1/embeddings`.
pub fn parse_embedding(body: &[u8]) -> Result<EmbeddingRequest, ApiError> {
    let obj = parse_object(body)?;
    let model = model(&obj)?;
    let inputs = inputs(&obj, "input")?;
    let base64 = match present(&obj, "encoding_format") {
        None => false,
        Some(Value::String(format)) if format == "float" => false,
        Some(Value::String(format)) if format == "base64" => true,
        Some(other) => {
            return Err(ApiError::invalid(format!(
                "Invalid value for 'encoding_format': expected 'float' or 'base64', got {other}."
            ))
            .param("encoding_format")
            .code("invalid_value"))
        }
    };
    let dimensions = positive_int(&obj, "dimensions")?;
    if dimensions.is_some_and(|d| d > MAX_EMBEDDING_DIMENSIONS) {
        return Err(ApiError::invalid(format!(
            "Invalid 'dimensions': at most {MAX_EMBEDDING_DIMENSIONS}."
        ))
        .param("dimensions")
        .code("invalid_value"));
    }
    Ok(EmbeddingRequest {
        model,
        inputs,
        base64,
        dimensions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_requires_model_and_messages() {
        let error =
            parse_chat(b"{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}").unwrap_err();
        assert_eq!(error.status, StatusCode::BAD_REQUEST);
        assert!(error.message.contains("model"), "{}", error.message);
        let error = parse_chat(b"{\"model\":\"m\"}").unwrap_err();
        assert_eq!(error.param.as_deref(), Some("messages"));
        assert_eq!(error.code, Some("missing_required_parameter"));
        let error = parse_chat(b"{\"model\":\"m\",\"messages\":[]}").unwrap_err();
        assert_eq!(error.code, Some("empty_array"));
        let error =
            parse_chat(b"{\"model\":\"m\",\"messages\":[{\"content\":\"x\"}]}").unwrap_err();
        assert_eq!(error.param.as_deref(), Some("messages[0].role"));
        let error = parse_chat(b"{not json").unwrap_err();
        assert!(error.message.contains("could not parse the JSON body"));
        let error = parse_chat(b"[1]").unwrap_err();
        assert_eq!(error.kind, "invalid_request_error");
    }

    #[test]
    fn chat_reads_limits_and_stream_options() {
        let request = parse_chat(
            br#"{"model":"m","messages":[{"role":"system","content":"abcdefgh"},
                {"role":"user","content":[{"type":"text","text":"abcd"},{"type":"image_url","image_url":{"url":"x"}}]}],
                "max_tokens":7,"stream":true,"stream_options":{"include_usage":true}}"#,
        )
        .unwrap();
        assert_eq!(request.model, "m");
        assert_eq!(request.prompt_tokens, vec![3 + (3 + 2) + (3 + 1)]);
        assert_eq!(request.max_tokens, Some(7));
        assert!(request.stream && request.include_usage);

        let request = parse_chat(
            br#"{"model":"m","messages":[{"role":"user","content":null}],"max_tokens":9,"max_completion_tokens":5}"#,
        )
        .unwrap();
        assert_eq!(request.max_tokens, Some(5));
        assert!(!request.stream && !request.include_usage);

        let error = parse_chat(
            br#"{"model":"m","messages":[{"role":"user","content":"x"}],"stream_options":{"include_usage":true}}"#,
        )
        .unwrap_err();
        assert_eq!(error.param.as_deref(), Some("stream_options"));
        let error = parse_chat(
            br#"{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":0}"#,
        )
        .unwrap_err();
        assert_eq!(error.code, Some("integer_below_min_value"));
        let error = parse_chat(
            br#"{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":"5"}"#,
        )
        .unwrap_err();
        assert_eq!(error.code, Some("invalid_type"));
    }

    #[test]
    fn chat_reads_tools_and_tool_choice() {
        let body = br#"{"model":"m","messages":[{"role":"user","content":"x"}],
            "tools":[{"type":"function","function":{"name":"a"}},{"type":"function","function":{"name":"b"}}]}"#;
        let request = parse_chat(body).unwrap();
        assert_eq!(request.tool_names, vec!["a", "b"]);
        let definitions = serde_json::from_slice::<Value>(body).unwrap()["tools"].to_string();
        assert_eq!(
            request.prompt_tokens,
            vec![3 + 3 + 1 + approx_tokens(&definitions)]
        );
        let named = parse_chat(
            br#"{"model":"m","messages":[{"role":"user","content":"x"}],
            "tools":[{"type":"function","function":{"name":"a"}},{"type":"function","function":{"name":"b"}}],
            "tool_choice":{"type":"function","function":{"name":"b"}}}"#,
        )
        .unwrap();
        assert_eq!(named.tool_names, vec!["b"]);
        let none = parse_chat(
            br#"{"model":"m","messages":[{"role":"user","content":"x"}],
            "tools":[{"type":"function","function":{"name":"a"}}],"tool_choice":"none"}"#,
        )
        .unwrap();
        assert!(none.tool_names.is_empty());
        let error = parse_chat(
            br#"{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function"}]}"#,
        )
        .unwrap_err();
        assert_eq!(error.param.as_deref(), Some("tools[0].function.name"));
    }

    #[test]
    fn prompts_and_inputs_accept_openai_shapes() {
        let one = parse_completion(br#"{"model":"m","prompt":"abcdefgh"}"#).unwrap();
        assert_eq!(one.prompt_tokens, vec![2]);
        let batch = parse_completion(br#"{"model":"m","prompt":["a","abcde"]}"#).unwrap();
        assert_eq!(batch.prompt_tokens, vec![1, 2]);
        let tokens = parse_completion(br#"{"model":"m","prompt":[1,2,3]}"#).unwrap();
        assert_eq!(tokens.prompt_tokens, vec![3]);
        let token_batch = parse_completion(br#"{"model":"m","prompt":[[1,2],[3]]}"#).unwrap();
        assert_eq!(token_batch.prompt_tokens, vec![2, 1]);
        assert!(parse_completion(br#"{"model":"m"}"#).is_err());
        assert!(parse_completion(br#"{"model":"m","prompt":[1,"a"]}"#).is_err());
        assert!(parse_completion(br#"{"model":"m","prompt":{}}"#).is_err());

        let embedding = parse_embedding(
            br#"{"model":"e","input":["x","y"],"encoding_format":"base64","dimensions":4}"#,
        )
        .unwrap();
        assert_eq!(embedding.inputs.len(), 2);
        assert!(embedding.base64);
        assert_eq!(embedding.dimensions, Some(4));
        assert_ne!(embedding.inputs[0].key, embedding.inputs[1].key);
        assert!(parse_embedding(br#"{"model":"e","input":"x","encoding_format":"hex"}"#).is_err());
    }

    #[test]
    fn errors_have_openai_shape() {
        let error = ApiError::missing("messages");
        assert_eq!(
            error.body_text(),
            r#"{"error":{"message":"Missing required parameter: 'messages'.","type":"invalid_request_error","param":"messages","code":"missing_required_parameter"}}"#
        );
        let error = ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "server_error", "boom");
        assert_eq!(
            error.body_text(),
            r#"{"error":{"message":"boom","type":"server_error","param":null,"code":null}}"#
        );
    }
}
