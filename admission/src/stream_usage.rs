//! Streams whose client did not ask for usage: Sluice asks the backend for it
//! anyway (`stream_options.include_usage: true`), and takes out of the answer
//! what the client would not have received (the usage-only final chunk and
//! the `usage` member of every other chunk), so the client sees the bytes it
//! would have seen without Sluice.
//!
//! Both edits are byte-level: every byte of the request body and of the
//! answer outside the edited members stays as the client or backend sent it.

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use sluice_openai::stream;
use std::fmt;
use std::ops::Range;

const STREAM_OPTIONS: &str = "stream_options";
const INCLUDE_USAGE: &str = "include_usage";
const USAGE: &str = "usage";
const CHOICES: &str = "choices";
/// What the filter adds to a body without `stream_options`.
const STREAM_OPTIONS_MEMBER: &str = r#""stream_options":{"include_usage":true}"#;

/// The top-level members of a JSON object, in order, each value borrowed
/// from the input (so its position in the input is known).
struct Members<'de>(Vec<(String, &'de RawValue)>);

impl<'de> Deserialize<'de> for Members<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MembersVisitor;
        impl<'de> Visitor<'de> for MembersVisitor {
            type Value = Members<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut members = Vec::new();
                while let Some(entry) = map.next_entry::<String, &'de RawValue>()? {
                    members.push(entry);
                }
                Ok(Members(members))
            }
        }
        deserializer.deserialize_map(MembersVisitor)
    }
}

/// One member of an object: its key and where its value sits in the text.
struct Member {
    key: String,
    value: Range<usize>,
}

/// The members of the JSON object `text` with byte ranges into `text`;
/// `None` when `text` is not an object.
fn members(text: &str) -> Option<Vec<Member>> {
    let Members(raw) = serde_json::from_str(text).ok()?;
    let base = text.as_ptr() as usize;
    Some(
        raw.into_iter()
            .map(|(key, value)| {
                let start = (value.get().as_ptr() as usize).saturating_sub(base);
                Member {
                    key,
                    value: start..start + value.get().len(),
                }
            })
            .collect(),
    )
}

fn skip_whitespace(bytes: &[u8], mut at: usize) -> usize {
    while bytes.get(at).is_some_and(u8::is_ascii_whitespace) {
        at += 1;
    }
    at
}

/// Where the object's first member (its key) starts.
fn first_key_start(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let open = skip_whitespace(bytes, 0);
    (bytes.get(open) == Some(&b'{')).then(|| skip_whitespace(bytes, open + 1))
}

/// `text` without member `index` of `list` (and the comma that tied it to
/// its neighbour).
fn without_member(text: &str, list: &[Member], index: usize) -> Option<String> {
    let member = list.get(index)?;
    let bytes = text.as_bytes();
    let cut = if let Some(previous) = index.checked_sub(1).and_then(|i| list.get(i)) {
        // `, "usage": …` from the end of the previous value.
        previous.value.end..member.value.end
    } else {
        let start = first_key_start(text)?;
        match list.get(1) {
            // First of several: up to the next key.
            Some(_) => {
                let comma = skip_whitespace(bytes, member.value.end);
                (bytes.get(comma) == Some(&b',')).then_some(())?;
                start..skip_whitespace(bytes, comma + 1)
            }
            None => start..member.value.end,
        }
    };
    let mut out = String::with_capacity(text.len());
    out.push_str(text.get(..cut.start)?);
    out.push_str(text.get(cut.end..)?);
    Some(out)
}

/// The request body with `stream_options.include_usage: true`, or `None`
/// when it needs no change (or is not an object this can edit).
pub fn request_with_usage(body: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(body).ok()?;
    let list = members(text)?;
    let Some(options) = list.iter().rev().find(|m| m.key == STREAM_OPTIONS) else {
        // No stream_options: add the member after the last one (or into `{}`).
        let (at, separator) = match list.last() {
            Some(last) => (last.value.end, ","),
            None => (text.trim_end().len().checked_sub(1)?, ""),
        };
        return Some(
            [
                text.get(..at)?,
                separator,
                STREAM_OPTIONS_MEMBER,
                text.get(at..)?,
            ]
            .concat()
            .into_bytes(),
        );
    };
    let raw = text.get(options.value.clone())?;
    let replacement = if raw == "null" {
        r#"{"include_usage":true}"#.to_string()
    } else {
        options_with_usage(raw)?
    };
    Some(
        [
            text.get(..options.value.start)?,
            &replacement,
            text.get(options.value.end..)?,
        ]
        .concat()
        .into_bytes(),
    )
}

/// A `stream_options` object with `include_usage` set to true.
fn options_with_usage(raw: &str) -> Option<String> {
    let list = members(raw)?;
    match list.iter().rev().find(|m| m.key == INCLUDE_USAGE) {
        Some(flag) if raw.get(flag.value.clone()) == Some("true") => None,
        Some(flag) => Some(
            [
                raw.get(..flag.value.start)?,
                "true",
                raw.get(flag.value.end..)?,
            ]
            .concat(),
        ),
        None => {
            let start = first_key_start(raw)?;
            let separator = if list.is_empty() { "" } else { "," };
            Some(
                [
                    raw.get(..start)?,
                    r#""include_usage":true"#,
                    separator,
                    raw.get(start..)?,
                ]
                .concat(),
            )
        }
    }
}

/// What becomes of one SSE line.
#[derive(Debug, PartialEq, Eq)]
enum LineEdit {
    Keep,
    /// The usage-only chunk: gone, with the blank line that ends its event.
    DropEvent,
    Replace(Vec<u8>),
}

fn edit_line(line: &[u8]) -> LineEdit {
    let content_end = line
        .iter()
        .rposition(|&b| b != b'\n' && b != b'\r')
        .map_or(0, |i| i + 1);
    let (content, ending) = line.split_at(content_end);
    let Some(data) = stream::data_payload(content) else {
        return LineEdit::Keep;
    };
    let prefix_len = content.len() - data.len();
    let Ok(payload) = std::str::from_utf8(data) else {
        return LineEdit::Keep;
    };
    // Cheap filter before parsing: most lines carry no usage member.
    if !payload.contains("\"usage\"") {
        return LineEdit::Keep;
    }
    let Some(list) = members(payload) else {
        return LineEdit::Keep;
    };
    let Some(index) = list.iter().position(|m| m.key == USAGE) else {
        return LineEdit::Keep;
    };
    let no_choices = list
        .iter()
        .find(|m| m.key == CHOICES)
        .and_then(|m| payload.get(m.value.clone()))
        .is_some_and(|raw| raw.bytes().all(|b| b"[] \t\r\n".contains(&b)));
    let usage_is_null = list.get(index).and_then(|m| payload.get(m.value.clone())) == Some("null");
    if no_choices && !usage_is_null {
        return LineEdit::DropEvent;
    }
    match without_member(payload, &list, index) {
        Some(edited) => {
            let mut out = Vec::with_capacity(line.len());
            out.extend_from_slice(content.get(..prefix_len).unwrap_or_default());
            out.extend_from_slice(edited.as_bytes());
            out.extend_from_slice(ending);
            LineEdit::Replace(out)
        }
        None => LineEdit::Keep,
    }
}

/// Rewrites an SSE answer as it passes: complete lines go out edited at once;
/// a partial line waits (bounded) for its end.
#[derive(Debug)]
pub struct UsageStripper {
    line: Vec<u8>,
    limit: usize,
    /// The last event was dropped: its closing blank line goes too.
    dropping_event: bool,
}

impl UsageStripper {
    /// `limit`: the longest line held back to edit (longer ones pass as they are).
    pub fn new(limit: usize) -> Self {
        UsageStripper {
            line: Vec::new(),
            limit,
            dropping_event: false,
        }
    }

    /// The bytes to send on for `chunk`.
    pub fn feed(&mut self, chunk: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(chunk.len() + self.line.len());
        let mut rest = chunk;
        while let Some(newline) = rest.iter().position(|&b| b == b'\n') {
            let (head, tail) = rest.split_at(newline + 1);
            self.line.extend_from_slice(head);
            self.emit_line(&mut out);
            rest = tail;
        }
        self.line.extend_from_slice(rest);
        if self.line.len() > self.limit {
            // Too long to be a chunk worth editing: let it through unedited.
            out.append(&mut self.line);
            self.dropping_event = false;
        }
        out
    }

    /// The end of the answer: whatever is still held back.
    pub fn finish(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        if !self.line.is_empty() {
            self.emit_line(&mut out);
        }
        out
    }

    fn emit_line(&mut self, out: &mut Vec<u8>) {
        let line = std::mem::take(&mut self.line);
        let blank = line.iter().all(|&b| b == b'\n' || b == b'\r');
        if blank && self.dropping_event {
            self.dropping_event = false;
            return;
        }
        self.dropping_event = false;
        match edit_line(&line) {
            LineEdit::Keep => out.extend_from_slice(&line),
            LineEdit::Replace(edited) => out.extend_from_slice(&edited),
            LineEdit::DropEvent => self.dropping_event = true,
        }
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing, clippy::unwrap_used)] // tests fail loudly
mod tests {
    use super::*;

    fn with_usage(body: &str) -> Option<String> {
        request_with_usage(body.as_bytes()).map(|b| String::from_utf8(b).unwrap())
    }

    #[test]
    fn adds_stream_options_keeping_every_other_byte() {
        assert_eq!(
            with_usage(r#"{"model":"m","stream":true}"#).unwrap(),
            r#"{"model":"m","stream":true,"stream_options":{"include_usage":true}}"#
        );
        assert_eq!(
            with_usage("{\n  \"model\": \"m\",\n  \"stream\": true\n}\n").unwrap(),
            "{\n  \"model\": \"m\",\n  \"stream\": true,\"stream_options\":{\"include_usage\":true}\n}\n"
        );
        assert_eq!(
            with_usage(r#"{"stream_options":null,"x":"\u00e9"}"#).unwrap(),
            r#"{"stream_options":{"include_usage":true},"x":"\u00e9"}"#
        );
        assert_eq!(
            with_usage(r#"{"stream_options": {"include_usage": false}, "n": 2}"#).unwrap(),
            r#"{"stream_options": {"include_usage": true}, "n": 2}"#
        );
        assert_eq!(
            with_usage(r#"{"stream_options": { "other": 1 }}"#).unwrap(),
            r#"{"stream_options": { "include_usage":true,"other": 1 }}"#
        );
        assert_eq!(
            with_usage(r#"{"stream_options":{}}"#).unwrap(),
            r#"{"stream_options":{"include_usage":true}}"#
        );
        assert_eq!(
            with_usage(r#"{"stream_options":{"include_usage":true}}"#),
            None
        );
        assert_eq!(
            with_usage("{ }").unwrap(),
            r#"{ "stream_options":{"include_usage":true}}"#
        );
        assert_eq!(with_usage("[1]"), None);
        assert_eq!(with_usage(r#"{"stream_options":3}"#), None);
        for body in [
            r#"{"model":"m","stream":true}"#,
            r#"{"stream_options": { "other": 1 }}"#,
        ] {
            let edited: serde_json::Value =
                serde_json::from_str(&with_usage(body).unwrap()).unwrap();
            assert_eq!(edited["stream_options"]["include_usage"], true);
        }
    }

    const CHUNK: &str = r#"{"id":"c","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,"delta":{"content":"hi"},"logprobs":null,"finish_reason":null}]"#;

    fn stream(usage: bool) -> String {
        let member = if usage { r#","usage":null"# } else { "" };
        let mut s = format!("data: {CHUNK}{member}}}\n\ndata: {CHUNK}{member}}}\n\n");
        if usage {
            s.push_str(r#"data: {"id":"c","object":"chat.completion.chunk","created":7,"model":"m","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}"#);
            s.push_str("\n\n");
        }
        s.push_str("data: [DONE]\n\n");
        s
    }

    #[test]
    fn strips_what_the_client_did_not_ask_for_at_any_split() {
        let with = stream(true);
        let without = stream(false);
        for split in 0..with.len() {
            let mut stripper = UsageStripper::new(1 << 16);
            let (a, b) = with.as_bytes().split_at(split);
            let mut out = stripper.feed(a);
            out.extend(stripper.feed(b));
            out.extend(stripper.finish());
            assert_eq!(String::from_utf8(out).unwrap(), without, "split at {split}");
        }
    }

    #[test]
    fn removes_usage_wherever_it_sits_and_keeps_crlf() {
        let mut s = UsageStripper::new(1 << 16);
        let out =
            s.feed(b"data: {\"usage\":{\"prompt_tokens\":1},\"choices\":[{\"x\":1}]}\r\n\r\n");
        assert_eq!(out, b"data: {\"choices\":[{\"x\":1}]}\r\n\r\n");
        let out = s.feed(b"data:{\"usage\":null}\n: comment\nevent: x\n");
        assert_eq!(out, b"data:{}\n: comment\nevent: x\n");
        let out = s.feed(
            b"data: {\"choices\": [], \"usage\": {\"prompt_tokens\": 1}}\r\n\r\ndata: [DONE]",
        );
        assert_eq!(out, b"");
        assert_eq!(s.finish(), b"data: [DONE]");
        // Garbage passes untouched.
        let mut s = UsageStripper::new(1 << 16);
        assert_eq!(
            s.feed(b"data: {\"usage\" oops\n"),
            b"data: {\"usage\" oops\n"
        );
    }

    #[test]
    fn long_lines_pass_unedited() {
        let mut s = UsageStripper::new(8);
        assert_eq!(s.feed(b"data: {\"usage\":null,"), b"data: {\"usage\":null,");
        assert_eq!(s.feed(b"\"a\":1}\n"), b"\"a\":1}\n");
    }
}
