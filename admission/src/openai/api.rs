//! The OpenAI inference endpoints Sluice understands, and the chat prompt
//! recipe's constants (OpenAI cookbook, "How to count tokens with
//! tiktoken"), shared by the full parse and the light scan.

/// The inference endpoints Sluice understands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    ChatCompletions,
    Completions,
    Embeddings,
    Responses,
}

impl Endpoint {
    /// By path suffix, so gateway prefixes (`/openai/v1/...`) work; the query
    /// string is ignored.
    pub fn from_path(path: &str) -> Option<Endpoint> {
        let path = path
            .split(['?', '#'])
            .next()
            .unwrap_or("")
            .trim_end_matches('/');
        if path.ends_with("/chat/completions") {
            Some(Endpoint::ChatCompletions)
        } else if path.ends_with("/completions") {
            Some(Endpoint::Completions)
        } else if path.ends_with("/embeddings") {
            Some(Endpoint::Embeddings)
        } else if path.ends_with("/responses") {
            Some(Endpoint::Responses)
        } else {
            None
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Endpoint::ChatCompletions => "chat.completions",
            Endpoint::Completions => "completions",
            Endpoint::Embeddings => "embeddings",
            Endpoint::Responses => "responses",
        }
    }
}

/// Tokens every chat message costs besides its fields.
pub(crate) const TOKENS_PER_MESSAGE: u64 = 3;
/// Tokens a message's `name` costs besides its text.
pub(crate) const TOKENS_PER_NAME: u64 = 1;
/// Tokens that prime the assistant's reply.
pub(crate) const REPLY_PRIMING: u64 = 3;
