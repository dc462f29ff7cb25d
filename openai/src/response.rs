//! The answer objects of chat/completions, completions and embeddings, as
//! OpenAI writes them (fields in OpenAI's order): what sluice-llm-sim
//! answers, so whatever Sluice reads of a model server is read from the
//! same shapes.

use crate::Usage;
use serde::Serialize;

/// What every completion object carries around its `choices` (`C`): the
/// usage is `U`, absent with `x-sim-usage: omit` (whole answers) or without
/// `include_usage` (streams, where `U` is `Option<Usage>`: `null` on every
/// chunk but the last, as OpenAI sends).
#[derive(Serialize)]
pub struct Completion<'a, C, U> {
    pub id: &'a str,
    pub object: &'static str,
    pub created: u64,
    pub model: &'a str,
    pub choices: Vec<C>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<U>,
}

/// A `chat.completion` object.
pub type ChatCompletion<'a> = Completion<'a, ChatChoice<'a>, Usage>;
/// A `chat.completion.chunk` object.
pub type ChatChunk<'a> = Completion<'a, ChunkChoice<'a>, Option<Usage>>;
/// A `text_completion` object, whole or streamed.
pub type TextCompletion<'a> = Completion<'a, TextChoice<'a>, Option<Usage>>;

#[derive(Serialize)]
pub struct ChatChoice<'a> {
    pub index: usize,
    pub message: ChatMessage<'a>,
    pub logprobs: Option<()>,
    pub finish_reason: &'a str,
}

#[derive(Serialize)]
pub struct ChatMessage<'a> {
    pub role: &'static str,
    /// `null` when the answer is a tool call.
    pub content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall<'a>>>,
    pub refusal: Option<()>,
}

/// A whole tool call of a message.
#[derive(Serialize)]
pub struct ToolCall<'a> {
    pub id: &'a str,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub function: FunctionCall<'a>,
}

#[derive(Serialize)]
pub struct FunctionCall<'a> {
    pub name: &'a str,
    pub arguments: &'a str,
}

/// A piece of a streamed tool call: the first carries its id, type and
/// name; the next ones pieces of `arguments`.
#[derive(Serialize)]
pub struct ToolCallDelta<'a> {
    pub index: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<&'a str>,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<&'static str>,
    pub function: FunctionDelta<'a>,
}

#[derive(Serialize)]
pub struct FunctionDelta<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<&'a str>,
    pub arguments: &'a str,
}

#[derive(Serialize)]
pub struct ChunkChoice<'a> {
    pub index: usize,
    pub delta: Delta<'a>,
    pub logprobs: Option<()>,
    pub finish_reason: Option<&'a str>,
}

#[derive(Default, Serialize)]
pub struct Delta<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCallDelta<'a>>>,
}

#[derive(Serialize)]
pub struct TextChoice<'a> {
    pub text: &'a str,
    pub index: usize,
    pub logprobs: Option<()>,
    pub finish_reason: Option<&'a str>,
}

#[derive(Serialize)]
pub struct EmbeddingList<'a> {
    pub object: &'static str,
    pub data: Vec<EmbeddingData>,
    pub model: &'a str,
    pub usage: EmbeddingUsage,
}

#[derive(Serialize)]
pub struct EmbeddingData {
    pub object: &'static str,
    pub index: usize,
    pub embedding: EmbeddingValue,
}

#[derive(Serialize)]
#[serde(untagged)]
pub enum EmbeddingValue {
    Float(Vec<f32>),
    Base64(String),
}

#[derive(Serialize)]
pub struct EmbeddingUsage {
    pub prompt_tokens: u64,
    pub total_tokens: u64,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests fail loudly
mod tests {
    use super::*;

    #[test]
    fn chunks_serialize_in_openai_order() {
        let chunk = ChatChunk {
            id: "chatcmpl-1",
            object: "chat.completion.chunk",
            created: 7,
            model: "m",
            choices: vec![ChunkChoice {
                index: 0,
                delta: Delta {
                    content: Some("hi"),
                    ..Delta::default()
                },
                logprobs: None,
                finish_reason: None,
            }],
            usage: None,
        };
        assert_eq!(
            serde_json::to_string(&chunk).unwrap(),
            r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,"delta":{"content":"hi"},"logprobs":null,"finish_reason":null}]}"#
        );
        let usage_chunk = ChatChunk {
            id: "chatcmpl-1",
            object: "chat.completion.chunk",
            created: 7,
            model: "m",
            choices: vec![],
            usage: Some(Some(Usage::new(3, 4))),
        };
        assert_eq!(
            serde_json::to_string(&usage_chunk).unwrap(),
            r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":7,"model":"m","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}"#
        );
    }
}
