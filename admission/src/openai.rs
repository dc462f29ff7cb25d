//! OpenAI-compatible request parsing and token estimates.
//!
//! Prompt counts for chat follow OpenAI's published recipe (cookbook
//! "How to count tokens with tiktoken"): 3 tokens per message, the encoded
//! value of every field, 1 more for `name`, 3 to prime the reply. That is exact
//! for text messages. Tool/function definitions are counted as their JSON text
//! (OpenAI renders them in a private format; JSON is a slight overestimate),
//! images as a configured flat cost. A counter that knows the model's chat
//! template (an open model's `chat_template`) counts a chat of text messages
//! as the template renders it ([`TokenCounter::chat_tokens`]) and frames
//! other chats with its own per-message and priming tokens.

use crate::{ChatMessage, TokenCounter};
use serde_json::Value;

mod api;
mod scan;
pub use api::Endpoint;
use api::{REPLY_PRIMING, TOKENS_PER_MESSAGE, TOKENS_PER_NAME};
pub use scan::{scan, Scan};

/// A parsed request body.
#[derive(Debug)]
pub struct LlmRequest {
    pub endpoint: Endpoint,
    pub model: String,
    pub stream: bool,
    /// `stream_options.include_usage` as the client sent it.
    pub include_usage: bool,
    /// max_tokens / max_completion_tokens / max_output_tokens, times `n`.
    pub requested_output: Option<u64>,
    body: Value,
}

/// Token costs of one request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Estimate {
    pub prompt_tokens: u64,
    pub output_tokens: u64,
}

impl Estimate {
    pub fn total(&self) -> u64 {
        self.prompt_tokens.saturating_add(self.output_tokens)
    }
}

/// Parse a request body. The error is a message for a 400 answer.
pub fn parse(endpoint: Endpoint, body: &[u8]) -> Result<LlmRequest, String> {
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        if std::str::from_utf8(body).is_err() {
            "request body is not valid UTF-8".to_string()
        } else {
            format!("request body is not valid JSON: {e}")
        }
    })?;
    let object = value
        .as_object()
        .ok_or_else(|| "request body must be a JSON object".to_string())?;
    let model = match object.get("model") {
        Some(Value::String(m)) if !m.is_empty() => m.clone(),
        Some(_) => return Err("'model' must be a non-empty string".into()),
        None => return Err("missing required parameter: 'model'".into()),
    };
    match endpoint {
        Endpoint::ChatCompletions => {
            if !object.get("messages").is_some_and(Value::is_array) {
                return Err("missing required parameter: 'messages' (an array)".into());
            }
        }
        Endpoint::Completions => {
            if !object.contains_key("prompt") {
                return Err("missing required parameter: 'prompt'".into());
            }
        }
        Endpoint::Embeddings => {
            if !object.contains_key("input") {
                return Err("missing required parameter: 'input'".into());
            }
        }
        Endpoint::Responses => {
            if !object.contains_key("input") && !object.contains_key("instructions") {
                return Err("missing required parameter: 'input'".into());
            }
        }
    }
    let requested = requested_output(endpoint, object);
    let stream = object
        .get("stream")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let include_usage = object
        .get("stream_options")
        .and_then(|o| o.get("include_usage"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    Ok(LlmRequest {
        endpoint,
        model,
        stream,
        include_usage,
        requested_output: requested,
        body: value,
    })
}

/// The output tokens a request object asks for at most (`max_tokens`,
/// `max_completion_tokens` or `max_output_tokens`, times `n` / `best_of`);
/// `None` when it names no bound.
pub fn requested_output(
    endpoint: Endpoint,
    object: &serde_json::Map<String, Value>,
) -> Option<u64> {
    let number = |key: &str| object.get(key).and_then(Value::as_u64);
    let choices = number("n")
        .unwrap_or(1)
        .max(number("best_of").unwrap_or(1))
        .max(1);
    match endpoint {
        Endpoint::ChatCompletions => number("max_completion_tokens").or(number("max_tokens")),
        Endpoint::Completions => number("max_tokens"),
        Endpoint::Responses => number("max_output_tokens"),
        Endpoint::Embeddings => Some(0),
    }
    .map(|n| n.saturating_mul(choices))
}

impl LlmRequest {
    /// The parsed request object, unchanged (for whoever forwards it).
    pub fn into_body(self) -> Value {
        self.body
    }

    /// Prompt tokens with `counter`, all counted exactly; images cost
    /// `image_tokens` each.
    pub fn prompt_tokens(&self, counter: &dyn TokenCounter, image_tokens: u64) -> u64 {
        self.prompt_count(counter, image_tokens, usize::MAX).tokens
    }

    /// Prompt tokens, counted exactly while the texts fit in `budget_bytes`
    /// (see [`TokenCounter::count_within`]), then bounded from above by the
    /// bytes of the rest: never less than the exact count.
    pub fn prompt_count(
        &self,
        counter: &dyn TokenCounter,
        image_tokens: u64,
        budget_bytes: usize,
    ) -> PromptCount {
        let mut counting = Counting {
            measure: Measure::Count {
                counter,
                budget: budget_bytes,
            },
            framing: counter.chat_framing(),
            image_tokens,
            total: 0,
            exact: true,
        };
        self.walk(&mut counting);
        PromptCount {
            tokens: counting.total,
            exact: counting.exact,
        }
    }

    /// A lower bound of the prompt's tokens, without counting: every text
    /// of `n` bytes has at least `n / max_token_bytes` tokens (the
    /// encoding's longest token), plus the per-message tokens and images.
    /// Costs a walk over the parsed body, no tokenizing.
    pub fn prompt_tokens_at_least(&self, max_token_bytes: usize, image_tokens: u64) -> u64 {
        let mut counting = Counting {
            measure: Measure::LowerBound {
                max_token_bytes: max_token_bytes.max(1),
            },
            // OpenAI's, which no counter's framing is below.
            framing: (TOKENS_PER_MESSAGE, REPLY_PRIMING),
            image_tokens,
            total: 0,
            exact: false,
        };
        self.walk(&mut counting);
        counting.total
    }

    fn walk(&self, counting: &mut Counting<'_>) {
        let body = &self.body;
        match self.endpoint {
            Endpoint::ChatCompletions => {
                if counting.rendered_chat(body) {
                    return;
                }
                if let Some(messages) = body.get("messages").and_then(Value::as_array) {
                    for message in messages {
                        counting.message(message);
                    }
                    counting.total += counting.framing.1;
                }
                for key in ["tools", "functions"] {
                    if let Some(definitions) = body.get(key) {
                        counting.json(definitions);
                    }
                }
            }
            Endpoint::Completions => {
                if let Some(prompt) = body.get("prompt") {
                    counting.input(prompt);
                }
                if let Some(Value::String(suffix)) = body.get("suffix") {
                    counting.text(suffix);
                }
            }
            Endpoint::Embeddings => {
                if let Some(input) = body.get("input") {
                    counting.input(input);
                }
            }
            Endpoint::Responses => {
                if let Some(Value::String(instructions)) = body.get("instructions") {
                    counting.text(instructions);
                }
                match body.get("input") {
                    Some(Value::Array(items)) => {
                        for item in items {
                            counting.message(item);
                        }
                        counting.total += counting.framing.1;
                    }
                    Some(input) => counting.input(input),
                    None => {}
                }
                if let Some(tools) = body.get("tools") {
                    counting.json(tools);
                }
            }
        }
    }

    /// Whether the client asked for a streamed answer.
    pub fn is_stream(&self) -> bool {
        self.stream
    }
}

/// The roles every supported chat template renders.
const TEMPLATE_ROLES: [&str; 3] = ["system", "user", "assistant"];

/// The messages of a chat body that a chat template renders exactly: only
/// `role` (system, user or assistant) and a string `content` in each, no
/// tools or functions. `None` for anything else (names, parts, images,
/// tool calls), which is counted by the documented framing instead.
fn text_messages(body: &Value) -> Option<Vec<ChatMessage<'_>>> {
    if body.get("tools").is_some() || body.get("functions").is_some() {
        return None;
    }
    let messages = body.get("messages")?.as_array()?;
    messages
        .iter()
        .map(|message| {
            let fields = message.as_object()?;
            let role = fields.get("role")?.as_str()?;
            let content = fields.get("content")?.as_str()?;
            let plain = fields.len() == 2 && TEMPLATE_ROLES.contains(&role);
            plain.then_some(ChatMessage { role, content })
        })
        .collect()
}

/// A prompt's token count: exact, or (after the counting budget ran out)
/// an upper bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PromptCount {
    pub tokens: u64,
    pub exact: bool,
}

enum Measure<'a> {
    /// Count with `counter` while `budget` (bytes) lasts, then bound.
    Count {
        counter: &'a dyn TokenCounter,
        budget: usize,
    },
    /// Only the lower bound of each text (its bytes over the longest token).
    LowerBound { max_token_bytes: usize },
}

struct Counting<'a> {
    measure: Measure<'a>,
    /// Tokens around each message and to prime the reply (see
    /// [`TokenCounter::chat_framing`]).
    framing: (u64, u64),
    image_tokens: u64,
    total: u64,
    /// Every text was counted exactly.
    exact: bool,
}

impl Counting<'_> {
    /// A chat of text messages counted as the model's chat template renders
    /// it, when the counter knows the template: true when counted so.
    fn rendered_chat(&mut self, body: &Value) -> bool {
        let Measure::Count { counter, budget } = &mut self.measure else {
            return false;
        };
        let Some(messages) = text_messages(body) else {
            return false;
        };
        let Some(counted) = counter.chat_tokens(&messages, budget) else {
            return false;
        };
        self.exact &= counted.exact;
        self.total = self.total.saturating_add(counted.tokens as u64);
        true
    }

    fn text(&mut self, text: &str) {
        let tokens = match &mut self.measure {
            Measure::Count { counter, budget } => {
                let counted = counter.count_within(text, budget);
                self.exact &= counted.exact;
                counted.tokens
            }
            Measure::LowerBound { max_token_bytes } => text.len().div_ceil(*max_token_bytes),
        };
        self.total = self.total.saturating_add(tokens as u64);
    }

    fn json(&mut self, value: &Value) {
        self.text(&value.to_string());
    }

    /// A prompt/input: string, array of strings, token array, or array of token arrays.
    fn input(&mut self, input: &Value) {
        match input {
            Value::String(s) => self.text(s),
            Value::Array(items) => {
                for item in items {
                    match item {
                        Value::String(s) => self.text(s),
                        // Pre-tokenized: one token per number.
                        Value::Number(_) => self.total += 1,
                        Value::Array(tokens) => self.total += tokens.len() as u64,
                        other => self.json(other),
                    }
                }
            }
            other => self.json(other),
        }
    }

    fn message(&mut self, message: &Value) {
        self.total += self.framing.0;
        let Some(fields) = message.as_object() else {
            self.json(message);
            return;
        };
        for (key, value) in fields {
            match (key.as_str(), value) {
                ("content", Value::Array(parts)) => {
                    for part in parts {
                        self.content_part(part);
                    }
                }
                ("tool_calls", Value::Array(calls)) => {
                    for call in calls {
                        if let Some(function) = call.get("function") {
                            self.function_call(function);
                        }
                    }
                }
                ("function_call", function) => self.function_call(function),
                (_, Value::String(s)) => self.text(s),
                (_, Value::Null) => {}
                (_, other) => self.json(other),
            }
            if key == "name" {
                self.total += TOKENS_PER_NAME;
            }
        }
    }

    fn function_call(&mut self, function: &Value) {
        for key in ["name", "arguments"] {
            if let Some(Value::String(s)) = function.get(key) {
                self.text(s);
            }
        }
    }

    fn content_part(&mut self, part: &Value) {
        let kind = part.get("type").and_then(Value::as_str).unwrap_or("");
        match kind {
            "text" | "input_text" | "output_text" => {
                if let Some(Value::String(text)) = part.get("text") {
                    self.text(text);
                }
            }
            "image_url" | "input_image" | "image" => {
                self.total = self.total.saturating_add(self.image_tokens)
            }
            _ => match part {
                Value::String(s) => self.text(s),
                other => self.json(other),
            },
        }
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)] // tests fail loudly
mod tests;
