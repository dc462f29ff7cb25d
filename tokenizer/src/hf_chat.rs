//! The chat templates of the supported open models, for text messages:
//! the prompt the server tokenizes is `apply_chat_template(messages)`, so
//! its exact token count is that of the rendered text (added tokens such as
//! `<|im_start|>` are recognised by [`crate::HfTokenizer`], and the text
//! between them is tokenized on its own, as `tokenizers` does).
//!
//! Each template is written out by hand from the model's Jinja template
//! (`tokenizer_config.json`) for messages of roles `system`, `user` and
//! `assistant` with string content, no tools, no `reasoning_content`; the
//! differential test renders the same conversations with Jinja (as
//! `transformers` does) and compares text and token count.

use alloc::string::String;
use alloc::vec::Vec;

/// A chat message: role and text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Message<'a> {
    pub role: &'a str,
    pub content: &'a str,
}

/// A supported chat template.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ChatTemplate {
    /// Llama 3 (`<|start_header_id|>role<|end_header_id|>\n\n…<|eot_id|>`,
    /// content trimmed, `<|begin_of_text|>` first; the generation prompt is
    /// always added).
    Llama3,
    /// Qwen3's ChatML (`<|im_start|>role\n…<|im_end|>\n`, with its handling
    /// of `<think>` in the last turns).
    Qwen3,
    /// DeepSeek V3 (`<｜begin▁of▁sentence｜>` + system prompts joined, then
    /// `<｜User｜>…` and `<｜Assistant｜>…<｜end▁of▁sentence｜>`).
    DeepSeekV3,
    /// Llama 3.1 (and 3.3): Llama 3's turns after a system block that is
    /// always there, `Cutting Knowledge Date: December 2023` and `Today
    /// Date: 26 Jul 2024` (the template's own date, which vLLM and
    /// `transformers` do not override) before the first system message;
    /// the generation prompt only when asked.
    Llama31,
    /// gpt-oss's harmony format as its chat template maps text messages:
    /// the system message harmony writes (model identity, knowledge cutoff,
    /// `Current date`, `Reasoning: medium`, the valid channels), the first
    /// message if `system` or `developer` as the developer's `# Instructions`,
    /// users' turns, assistants' on the `final` channel; later system
    /// messages are dropped, as the template drops them. Message text is
    /// counted as the rendered prompt is tokenized, so a message that spells
    /// a harmony control token (`<|end|>`) counts it as one token, where
    /// openai-harmony would encode it as text.
    GptOss,
    /// Mistral's v3 instruct format over a tekken vocabulary (Mistral NeMo,
    /// Pixtral), as mistral-common encodes a chat completion (vLLM's
    /// `mistral` tokenizer mode): `<s>`, each user turn `[INST]`…`[/INST]`,
    /// each assistant turn its text (trailing spaces cut) and `</s>`; neighbouring messages of one
    /// role joined by a blank line, empty ones skipped, every system message
    /// joined into one prompt put before the last user turn's text. Its
    /// control tokens are ids, never text: count it with
    /// [`ChatTemplate::count`], not by tokenizing [`ChatTemplate::render`].
    MistralV3Tekken,
}

/// The date [`ChatTemplate::render`] writes into gpt-oss's system message
/// (`YYYY-MM-DD`); any date counts the same (every date in the
/// differential test does).
pub const GPT_OSS_DATE: &str = "2025-08-05";

const LLAMA31_SYSTEM: &str = "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n\
    Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n";

const GPT_OSS_SYSTEM: &str = "<|start|>system<|message|>You are ChatGPT, a large language model \
    trained by OpenAI.\nKnowledge cutoff: 2024-06\nCurrent date: ";

const GPT_OSS_SYSTEM_END: &str = "\n\nReasoning: medium\n\n# Valid channels: analysis, \
    commentary, final. Channel must be included for every message.<|end|>";

impl ChatTemplate {
    /// By name: `llama3`, `llama3_1` (also `llama3.1`), `qwen3` (also
    /// `chatml`), `deepseek_v3`, `gpt_oss` (also `harmony`).
    pub fn from_name(name: &str) -> Option<ChatTemplate> {
        match name {
            "llama3" => Some(ChatTemplate::Llama3),
            "llama3_1" | "llama3.1" => Some(ChatTemplate::Llama31),
            "qwen3" | "chatml" => Some(ChatTemplate::Qwen3),
            "deepseek_v3" => Some(ChatTemplate::DeepSeekV3),
            "gpt_oss" | "harmony" => Some(ChatTemplate::GptOss),
            "mistral_v3_tekken" => Some(ChatTemplate::MistralV3Tekken),
            _ => None,
        }
    }

    /// The prompt tokens of `messages` as the model server counts them:
    /// `count` (a text's tokens with the model's tokenizer) of the rendered
    /// prompt, or, for Mistral's format, its control tokens (one each) plus
    /// `count` of each text between them (as mistral-common encodes them).
    pub fn count(
        self,
        messages: &[Message<'_>],
        add_generation_prompt: bool,
        mut count: impl FnMut(&str) -> usize,
    ) -> usize {
        match self {
            ChatTemplate::MistralV3Tekken => mistral_v3_count(messages, &mut count),
            _ => count(&self.render(messages, add_generation_prompt)),
        }
    }

    /// The prompt text `apply_chat_template(messages, add_generation_prompt,
    /// tokenize=False)` renders (gpt-oss's dated [`GPT_OSS_DATE`]).
    pub fn render(self, messages: &[Message<'_>], add_generation_prompt: bool) -> String {
        self.render_dated(messages, add_generation_prompt, GPT_OSS_DATE)
    }

    /// As [`ChatTemplate::render`], with `date` (`YYYY-MM-DD`) as gpt-oss's
    /// `Current date` (the other templates have no date to set).
    pub fn render_dated(
        self,
        messages: &[Message<'_>],
        add_generation_prompt: bool,
        date: &str,
    ) -> String {
        let mut out = String::new();
        match self {
            ChatTemplate::Llama3 => {
                if !messages.is_empty() {
                    out.push_str("<|begin_of_text|>");
                }
                messages.iter().for_each(|m| llama3_turn(&mut out, m));
                // This template adds it whatever `add_generation_prompt` says.
                out.push_str(LLAMA3_GENERATION);
            }
            ChatTemplate::Llama31 => llama31(&mut out, messages, add_generation_prompt),
            ChatTemplate::GptOss => gpt_oss(&mut out, messages, add_generation_prompt, date),
            ChatTemplate::Qwen3 => qwen3(&mut out, messages, add_generation_prompt),
            ChatTemplate::MistralV3Tekken => {
                // For reading only: its control tokens spelled out.
                let turns = mistral_v3_turns(messages);
                out.push_str("<s>");
                for turn in &turns.turns {
                    match turn.role {
                        "user" => {
                            out.push_str("[INST]");
                            out.push_str(&turns.user_text(turn));
                            out.push_str("[/INST]");
                        }
                        _ => {
                            out.push_str(turn.text.trim_end_matches(' '));
                            out.push_str("</s>");
                        }
                    }
                }
            }
            ChatTemplate::DeepSeekV3 => {
                out.push_str("<｜begin▁of▁sentence｜>");
                let mut first = true;
                for m in messages.iter().filter(|m| m.role == "system") {
                    if !first {
                        out.push_str("\n\n");
                    }
                    out.push_str(m.content);
                    first = false;
                }
                for m in messages {
                    match m.role {
                        "user" => {
                            out.push_str("<｜User｜>");
                            out.push_str(m.content);
                        }
                        "assistant" => {
                            out.push_str("<｜Assistant｜>");
                            out.push_str(m.content);
                            out.push_str("<｜end▁of▁sentence｜>");
                        }
                        _ => {}
                    }
                }
                if add_generation_prompt {
                    out.push_str("<｜Assistant｜>");
                }
            }
        }
        out
    }
}

const LLAMA3_GENERATION: &str = "<|start_header_id|>assistant<|end_header_id|>\n\n";

/// One Llama 3 turn: header, trimmed content, `<|eot_id|>`.
fn llama3_turn(out: &mut String, m: &Message<'_>) {
    out.push_str("<|start_header_id|>");
    out.push_str(m.role);
    out.push_str("<|end_header_id|>\n\n");
    out.push_str(py_strip(m.content));
    out.push_str("<|eot_id|>");
}

/// The first message if its role is one of `roles`, and the rest.
fn split_first<'m, 'a>(
    messages: &'m [Message<'a>],
    roles: &[&str],
) -> (Option<&'m Message<'a>>, &'m [Message<'a>]) {
    match messages.split_first() {
        Some((first, rest)) if roles.contains(&first.role) => (Some(first), rest),
        _ => (None, messages),
    }
}

fn llama31(out: &mut String, messages: &[Message<'_>], add_generation_prompt: bool) {
    out.push_str(LLAMA31_SYSTEM);
    let (system, rest) = split_first(messages, &["system"]);
    if let Some(m) = system {
        out.push_str(py_strip(m.content));
    }
    out.push_str("<|eot_id|>");
    rest.iter().for_each(|m| llama3_turn(out, m));
    if add_generation_prompt {
        out.push_str(LLAMA3_GENERATION);
    }
}

fn gpt_oss(out: &mut String, messages: &[Message<'_>], add_generation_prompt: bool, date: &str) {
    out.push_str(GPT_OSS_SYSTEM);
    out.push_str(date);
    out.push_str(GPT_OSS_SYSTEM_END);
    let (developer, rest) = split_first(messages, &["system", "developer"]);
    if let Some(m) = developer.filter(|m| !m.content.is_empty()) {
        out.push_str("<|start|>developer<|message|># Instructions\n\n");
        out.push_str(m.content);
        out.push_str("<|end|>");
    }
    for m in rest {
        let head = match m.role {
            "user" => "<|start|>user<|message|>",
            "assistant" => "<|start|>assistant<|channel|>final<|message|>",
            _ => continue,
        };
        out.push_str(head);
        out.push_str(m.content);
        out.push_str("<|end|>");
    }
    if add_generation_prompt {
        out.push_str("<|start|>assistant");
    }
}

/// One turn of Mistral's format: neighbouring messages of one role.
struct MistralTurn<'a> {
    role: &'a str,
    text: String,
}

/// The turns mistral-common's normaliser makes of a chat, and its system
/// prompt.
struct MistralTurns<'a> {
    turns: Vec<MistralTurn<'a>>,
    system: Option<String>,
    /// The index of the last user turn.
    last_user: Option<usize>,
}

impl MistralTurns<'_> {
    /// A user turn's text: the system prompt goes before the last one's.
    fn user_text(&self, turn: &MistralTurn<'_>) -> String {
        let last = self.last_user.and_then(|i| self.turns.get(i));
        match (&self.system, last) {
            (Some(system), Some(last)) if core::ptr::eq(last, turn) => {
                let mut text = system.clone();
                text.push_str("\n\n");
                text.push_str(&turn.text);
                text
            }
            _ => turn.text.clone(),
        }
    }
}

/// The non-empty texts of `parts`, joined by a blank line.
fn join_blank_line<'a>(parts: impl Iterator<Item = &'a str>) -> String {
    let mut out = String::new();
    for part in parts.filter(|p| !p.is_empty()) {
        if !out.is_empty() {
            out.push_str("\n\n");
        }
        out.push_str(part);
    }
    out
}

/// mistral-common's normalisation: every system message into one prompt;
/// runs of one role (a system message ends a run) into one turn; an empty
/// user turn first when the chat does not start with one. Roles other than
/// system, user and assistant are left out.
fn mistral_v3_turns<'a>(messages: &[Message<'a>]) -> MistralTurns<'a> {
    let system = join_blank_line(
        messages
            .iter()
            .filter(|m| m.role == "system")
            .map(|m| m.content),
    );
    let mut turns: Vec<MistralTurn<'a>> = Vec::new();
    for run in messages.chunk_by(|a, b| a.role == b.role) {
        let Some(first) = run.first() else { continue };
        if first.role == "user" || first.role == "assistant" {
            let text = join_blank_line(run.iter().map(|m| m.content));
            turns.push(MistralTurn {
                role: first.role,
                text,
            });
        }
    }
    if turns.first().is_none_or(|t| t.role != "user") {
        turns.insert(
            0,
            MistralTurn {
                role: "user",
                text: String::new(),
            },
        );
    }
    let last_user = turns.iter().rposition(|t| t.role == "user");
    MistralTurns {
        turns,
        system: (!system.is_empty()).then_some(system),
        last_user,
    }
}

/// Mistral's v3 format counted: `<s>`; `[INST]` text `[/INST]` per user
/// turn; text (trailing spaces cut) `</s>` per assistant turn.
fn mistral_v3_count(messages: &[Message<'_>], count: &mut dyn FnMut(&str) -> usize) -> usize {
    let turns = mistral_v3_turns(messages);
    let mut total = 1;
    for turn in &turns.turns {
        total += match turn.role {
            "user" => 2 + count(&turns.user_text(turn)),
            _ => count(turn.text.trim_end_matches(' ')) + 1,
        };
    }
    total
}

/// Python's `str.isspace()` for one character (what Jinja's `trim` and
/// `str.strip()` remove): White_Space plus the four separators U+001C–U+001F.
fn py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

fn py_strip(s: &str) -> &str {
    s.trim_matches(py_space)
}

fn qwen3(out: &mut String, messages: &[Message<'_>], add_generation_prompt: bool) {
    if let Some(m) = messages.first().filter(|m| m.role == "system") {
        out.push_str("<|im_start|>system\n");
        out.push_str(m.content);
        out.push_str("<|im_end|>\n");
    }
    // The last user message that is not a tool response.
    let last_query = messages
        .iter()
        .rposition(|m| {
            m.role == "user"
                && !(m.content.starts_with("<tool_response>")
                    && m.content.ends_with("</tool_response>"))
        })
        .unwrap_or(messages.len().saturating_sub(1));
    for (i, m) in messages.iter().enumerate() {
        if m.role == "user" || (m.role == "system" && i != 0) {
            out.push_str("<|im_start|>");
            out.push_str(m.role);
            out.push('\n');
            out.push_str(m.content);
            out.push_str("<|im_end|>\n");
        } else if m.role == "assistant" {
            let mut content = m.content;
            let mut reasoning = "";
            if m.content.contains("</think>") {
                content = m
                    .content
                    .rsplit("</think>")
                    .next()
                    .unwrap_or("")
                    .trim_start_matches('\n');
                let before = m.content.split("</think>").next().unwrap_or("");
                reasoning = before
                    .trim_end_matches('\n')
                    .rsplit("<think>")
                    .next()
                    .unwrap_or("")
                    .trim_start_matches('\n');
            }
            out.push_str("<|im_start|>assistant\n");
            let last = i + 1 == messages.len();
            if i > last_query && (last || !reasoning.is_empty()) {
                out.push_str("<think>\n");
                out.push_str(reasoning.trim_matches('\n'));
                out.push_str("\n</think>\n\n");
                out.push_str(content.trim_start_matches('\n'));
            } else {
                out.push_str(content);
            }
            out.push_str("<|im_end|>\n");
        }
    }
    if add_generation_prompt {
        out.push_str("<|im_start|>assistant\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders() {
        let msgs = [
            Message {
                role: "system",
                content: "Be brief.",
            },
            Message {
                role: "user",
                content: " Hi! ",
            },
        ];
        assert_eq!(
            ChatTemplate::Llama3.render(&msgs, true),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>\
             <|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>\
             <|start_header_id|>assistant<|end_header_id|>\n\n"
        );
        assert_eq!(
            ChatTemplate::Qwen3.render(&msgs, true),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n Hi! <|im_end|>\n<|im_start|>assistant\n"
        );
        assert_eq!(
            ChatTemplate::DeepSeekV3.render(&msgs, true),
            "<｜begin▁of▁sentence｜>Be brief.<｜User｜> Hi! <｜Assistant｜>"
        );
        assert_eq!(
            ChatTemplate::Llama31.render(&msgs[1..], false),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n\
             Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|>\
             <|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>"
        );
        let oss = ChatTemplate::GptOss.render_dated(&msgs, true, "2026-12-04");
        assert!(oss.starts_with("<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: 2024-06\nCurrent date: 2026-12-04\n\nReasoning: medium\n\n"));
        assert!(oss.ends_with(
            "message.<|end|><|start|>developer<|message|># Instructions\n\nBe brief.<|end|>\
             <|start|>user<|message|> Hi! <|end|><|start|>assistant"
        ));
    }
}
