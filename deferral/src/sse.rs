//! Server-sent events, exactly framed, and the non-streamed answer rebuilt
//! from streamed chunks.

use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// One event. Every line of `data` becomes its own `data:` line (so a payload
/// with newlines cannot end the event early or inject fields); `id` and
/// `event` are dropped if they contain line breaks.
pub fn event(id: Option<&str>, name: Option<&str>, data: &str) -> String {
    let mut out = String::with_capacity(data.len() + 32);
    let clean = |s: &str| !s.contains(['\r', '\n']);
    if let Some(id) = id.filter(|s| clean(s)) {
        out.push_str("id: ");
        out.push_str(id);
        out.push('\n');
    }
    if let Some(name) = name.filter(|s| clean(s)) {
        out.push_str("event: ");
        out.push_str(name);
        out.push('\n');
    }
    for line in data.split("\r\n").flat_map(|l| l.split(['\r', '\n'])) {
        out.push_str("data: ");
        out.push_str(line);
        out.push('\n');
    }
    out.push('\n');
    out
}

/// A comment line: keeps proxies and load balancers from timing out an idle stream.
pub fn comment(text: &str) -> String {
    format!(": {}\n\n", text.replace(['\r', '\n'], " "))
}

/// OpenAI's end-of-stream marker.
pub const DONE: &str = "data: [DONE]\n\n";

/// Rebuilds `chat.completion` / `text_completion` JSON from streamed chunks.
#[derive(Default)]
pub struct Assembler {
    id: Option<Value>,
    model: Option<Value>,
    created: Option<Value>,
    text_completion: bool,
    /// choice index → (content, finish_reason)
    choices: BTreeMap<u64, (String, Option<Value>)>,
    usage: Option<Value>,
    system_fingerprint: Option<Value>,
}

impl Assembler {
    pub fn feed(&mut self, data: &str) {
        let Ok(chunk) = serde_json::from_str::<Value>(data) else {
            return;
        };
        for (slot, key) in [
            (&mut self.id, "id"),
            (&mut self.model, "model"),
            (&mut self.created, "created"),
            (&mut self.system_fingerprint, "system_fingerprint"),
        ] {
            if slot.is_none() {
                *slot = chunk.get(key).filter(|v| !v.is_null()).cloned();
            }
        }
        if chunk.get("object").and_then(Value::as_str) == Some("text_completion") {
            self.text_completion = true;
        }
        if let Some(usage) = chunk.get("usage").filter(|u| !u.is_null()) {
            self.usage = Some(usage.clone());
        }
        for choice in chunk
            .get("choices")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let index = choice.get("index").and_then(Value::as_u64).unwrap_or(0);
            let entry = self.choices.entry(index).or_default();
            let piece = choice
                .get("delta")
                .and_then(|d| d.get("content"))
                .or_else(|| choice.get("text"))
                .and_then(Value::as_str);
            if let Some(piece) = piece {
                entry.0.push_str(piece);
            }
            if let Some(reason) = choice.get("finish_reason").filter(|r| !r.is_null()) {
                entry.1 = Some(reason.clone());
            }
        }
    }

    /// The usage seen in the stream, if any.
    pub fn usage(&self) -> Option<&Value> {
        self.usage.as_ref()
    }

    pub fn finish(self) -> Value {
        let choices: Vec<Value> = self
            .choices
            .into_iter()
            .map(|(index, (content, reason))| {
                let reason = reason.unwrap_or(Value::Null);
                if self.text_completion {
                    json!({"index": index, "text": content, "logprobs": null, "finish_reason": reason})
                } else {
                    json!({
                        "index": index,
                        "message": {"role": "assistant", "content": content},
                        "logprobs": null,
                        "finish_reason": reason
                    })
                }
            })
            .collect();
        let mut out = Map::new();
        out.insert("id".into(), self.id.unwrap_or(Value::Null));
        out.insert(
            "object".into(),
            Value::from(if self.text_completion {
                "text_completion"
            } else {
                "chat.completion"
            }),
        );
        out.insert("created".into(), self.created.unwrap_or(Value::from(0)));
        out.insert("model".into(), self.model.unwrap_or(Value::Null));
        out.insert("choices".into(), Value::Array(choices));
        if let Some(usage) = self.usage {
            out.insert("usage".into(), usage);
        }
        if let Some(fingerprint) = self.system_fingerprint {
            out.insert("system_fingerprint".into(), fingerprint);
        }
        Value::Object(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framing_is_exact_and_not_injectable() {
        assert_eq!(
            event(Some("1-0"), None, "{\"a\":1}"),
            "id: 1-0\ndata: {\"a\":1}\n\n"
        );
        assert_eq!(
            event(
                Some("2-0"),
                Some("error"),
                "line one\nline two\r\nthree\rfour"
            ),
            "id: 2-0\nevent: error\ndata: line one\ndata: line two\ndata: three\ndata: four\n\n"
        );
        // A payload trying to end the event and start its own: still data.
        let hostile = event(None, None, "x\n\nevent: done\ndata: [DONE]");
        assert_eq!(
            hostile,
            "data: x\ndata: \ndata: event: done\ndata: data: [DONE]\n\n"
        );
        assert_eq!(
            event(Some("bad\nid"), Some("bad\rname"), "z"),
            "data: z\n\n"
        );
        assert_eq!(comment("keep\nalive"), ": keep alive\n\n");
    }

    #[test]
    fn chat_chunks_reassemble() {
        let mut a = Assembler::default();
        for chunk in [
            r#"{"id":"c1","object":"chat.completion.chunk","created":7,"model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#,
            r#"{"id":"c1","object":"chat.completion.chunk","created":7,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}]}"#,
            r#"{"id":"c1","object":"chat.completion.chunk","created":7,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":null}]}"#,
            r#"{"id":"c1","object":"chat.completion.chunk","created":7,"model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
            r#"{"id":"c1","object":"chat.completion.chunk","created":7,"model":"gpt-4o","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}"#,
            "not json",
        ] {
            a.feed(chunk);
        }
        let out = a.finish();
        assert_eq!(out["object"], "chat.completion");
        assert_eq!(out["id"], "c1");
        assert_eq!(out["choices"][0]["message"]["content"], "Hello");
        assert_eq!(out["choices"][0]["finish_reason"], "stop");
        assert_eq!(out["usage"]["total_tokens"], 5);
    }

    #[test]
    fn text_completion_chunks_reassemble() {
        let mut a = Assembler::default();
        a.feed(r#"{"id":"t","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"ab","finish_reason":null}]}"#);
        a.feed(r#"{"id":"t","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"c","finish_reason":"length"}]}"#);
        let out = a.finish();
        assert_eq!(out["object"], "text_completion");
        assert_eq!(out["choices"][0]["text"], "abc");
        assert_eq!(out["choices"][0]["finish_reason"], "length");
    }
}
