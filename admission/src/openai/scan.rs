//! A light read of a request body: its model, its requested output and a
//! lower bound of its prompt's tokens, without building a JSON tree (texts
//! are measured where they lie, everything else is skipped unread).
//!
//! For a tenant already known over, this decides a refusal for a fraction
//! of [`super::parse`]'s cost on a large body. It succeeds only on a body
//! that [`super::parse`] also accepts, with the same model and requested
//! output; on anything else it returns `None` and the full parse gives its
//! answer. Every value goes through serde_json's `deserialize_any` (never
//! `IgnoredAny`, which skips strings without checking their escapes and
//! nests without the recursion limit), so what this accepts is what the
//! full parse accepts; a repeated key keeps its last value, as there.
//!
//! The bound counts a subset of what [`super::LlmRequest::prompt_tokens_at_least`]
//! walks (every term of that walk is ≥ 0, so a subset stays below it): the
//! per-message tokens, the reply priming, and the bytes of the plain texts
//! (string contents, prompts, inputs, instructions), all of them over the
//! encoding's longest token at once (`⌈Σn / k⌉ ≤ Σ⌈n / k⌉`).

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use super::api::{Endpoint, REPLY_PRIMING, TOKENS_PER_MESSAGE};

/// What the light read found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scan {
    pub model: String,
    /// As [`super::LlmRequest::requested_output`].
    pub requested_output: Option<u64>,
    /// Tokens known without measuring texts (messages, priming, token arrays).
    fixed_tokens: u64,
    /// Bytes of the texts measured.
    text_bytes: u64,
}

impl Scan {
    /// A lower bound of the prompt's tokens, never above
    /// [`super::LlmRequest::prompt_tokens_at_least`] with the same
    /// `max_token_bytes`.
    pub fn prompt_tokens_at_least(&self, max_token_bytes: usize) -> u64 {
        let longest = u64::try_from(max_token_bytes.max(1)).unwrap_or(u64::MAX);
        self.fixed_tokens
            .saturating_add(self.text_bytes.div_ceil(longest))
    }
}

/// Reads `body` lightly; `None` when it is not a request [`super::parse`]
/// would accept (or might read differently).
pub fn scan(endpoint: Endpoint, body: &[u8]) -> Option<Scan> {
    let fields: Fields = serde_json::from_slice(body).ok()?;
    let model = fields.model.clone().filter(|m| !m.is_empty())?;
    let (fixed_tokens, text_bytes) = fields.prompt_parts(endpoint)?;
    Some(Scan {
        requested_output: fields.requested_output(endpoint),
        model,
        fixed_tokens,
        text_bytes,
    })
}

/// The top-level fields the light read looks at; others are skipped.
#[derive(Default)]
struct Fields {
    /// A string `model` (`None`: absent or not a string).
    model: Option<String>,
    messages: Part,
    prompt: Part,
    input: Part,
    instructions: Part,
    suffix: Part,
    max_tokens: Part,
    max_completion_tokens: Part,
    max_output_tokens: Part,
    n: Part,
    best_of: Part,
}

impl Fields {
    /// Reads the value of `key` into its field (the last one given wins).
    fn read<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        let part = match key {
            "model" => {
                self.model = map.next_value::<OnlyString<Option<String>>>()?.0;
                return Ok(());
            }
            "messages" => &mut self.messages,
            "prompt" => &mut self.prompt,
            "input" => &mut self.input,
            "instructions" => &mut self.instructions,
            "suffix" => &mut self.suffix,
            "max_tokens" => &mut self.max_tokens,
            "max_completion_tokens" => &mut self.max_completion_tokens,
            "max_output_tokens" => &mut self.max_output_tokens,
            "n" => &mut self.n,
            "best_of" => &mut self.best_of,
            _ => {
                map.next_value::<Skip>()?;
                return Ok(());
            }
        };
        *part = map.next_value()?;
        Ok(())
    }
}

impl Fields {
    /// (fixed tokens, text bytes) of the endpoint's prompt; `None` when a
    /// field the endpoint requires is missing (the full parse's 400).
    fn prompt_parts(&self, endpoint: Endpoint) -> Option<(u64, u64)> {
        match endpoint {
            Endpoint::ChatCompletions => {
                let messages = self.messages.array.as_ref()?;
                Some((messages.as_messages(), messages.text_bytes))
            }
            Endpoint::Completions => {
                let prompt = self.prompt.present.then_some(&self.prompt)?;
                let (fixed, bytes) = prompt.as_input();
                Some((fixed, bytes.saturating_add(self.suffix.text.unwrap_or(0))))
            }
            Endpoint::Embeddings => self.input.present.then(|| self.input.as_input()),
            Endpoint::Responses => {
                if !self.input.present && !self.instructions.present {
                    return None;
                }
                let (fixed, bytes) = match &self.input.array {
                    Some(items) => (items.as_messages(), items.text_bytes),
                    None => self.input.as_input(),
                };
                Some((
                    fixed,
                    bytes.saturating_add(self.instructions.text.unwrap_or(0)),
                ))
            }
        }
    }

    /// The same figure as the full parse's `requested_output`.
    fn requested_output(&self, endpoint: Endpoint) -> Option<u64> {
        let choices = self
            .n
            .number
            .unwrap_or(1)
            .max(self.best_of.number.unwrap_or(1))
            .max(1);
        match endpoint {
            Endpoint::ChatCompletions => {
                self.max_completion_tokens.number.or(self.max_tokens.number)
            }
            Endpoint::Completions => self.max_tokens.number,
            Endpoint::Responses => self.max_output_tokens.number,
            Endpoint::Embeddings => Some(0),
        }
        .map(|n| n.saturating_mul(choices))
    }
}

/// One top-level value, as far as the bound needs it.
#[derive(Debug, Default)]
struct Part {
    /// The key was there (`null` included, as `contains_key`).
    present: bool,
    /// Bytes of a string.
    text: Option<u64>,
    /// A non-negative integer (as `Value::as_u64`).
    number: Option<u64>,
    array: Option<Items>,
}

impl Part {
    /// A prompt or input: a string, or an array of strings and token arrays.
    fn as_input(&self) -> (u64, u64) {
        match (&self.array, self.text) {
            (Some(items), _) => (items.token_count, items.text_bytes),
            (None, Some(bytes)) => (0, bytes),
            (None, None) => (0, 0),
        }
    }
}

/// The elements of a top-level array, summed.
#[derive(Debug, Default)]
struct Items {
    count: u64,
    /// Bytes of the string elements and of the objects' string `content`.
    text_bytes: u64,
    /// Number elements (one token each) and the lengths of array elements
    /// (pre-tokenized prompts).
    token_count: u64,
}

impl Items {
    /// Fixed tokens of these items read as messages.
    fn as_messages(&self) -> u64 {
        self.count
            .saturating_mul(TOKENS_PER_MESSAGE)
            .saturating_add(REPLY_PRIMING)
    }
}

impl<'de> Deserialize<'de> for Part {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(PartVisitor)
    }
}

struct PartVisitor;

impl<'de> Visitor<'de> for PartVisitor {
    type Value = Part;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_str<E: de::Error>(self, text: &str) -> Result<Part, E> {
        Ok(Part {
            present: true,
            text: Some(text.len() as u64),
            ..Part::default()
        })
    }
    fn visit_u64<E: de::Error>(self, number: u64) -> Result<Part, E> {
        Ok(Part {
            present: true,
            number: Some(number),
            ..Part::default()
        })
    }
    fn visit_i64<E: de::Error>(self, number: i64) -> Result<Part, E> {
        Ok(Part {
            present: true,
            number: u64::try_from(number).ok(),
            ..Part::default()
        })
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Part, E> {
        Ok(present())
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Part, E> {
        Ok(present())
    }
    fn visit_unit<E: de::Error>(self) -> Result<Part, E> {
        Ok(present())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Part, A::Error> {
        while map.next_entry::<Skip, Skip>()?.is_some() {}
        Ok(present())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Part, A::Error> {
        let mut items = Items::default();
        while let Some(element) = seq.next_element::<Element>()? {
            items.count += 1;
            items.text_bytes = items.text_bytes.saturating_add(element.text_bytes);
            items.token_count = items.token_count.saturating_add(element.tokens);
        }
        Ok(Part {
            present: true,
            array: Some(items),
            ..Part::default()
        })
    }
}

fn present() -> Part {
    Part {
        present: true,
        ..Part::default()
    }
}

/// One element of a top-level array: its text bytes (a string, or an
/// object's string `content`) and tokens (a number, an array's length).
#[derive(Debug, Default)]
struct Element {
    text_bytes: u64,
    tokens: u64,
}

impl<'de> Deserialize<'de> for Element {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ElementVisitor)
    }
}

struct ElementVisitor;

impl<'de> Visitor<'de> for ElementVisitor {
    type Value = Element;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_str<E: de::Error>(self, text: &str) -> Result<Element, E> {
        Ok(Element {
            text_bytes: text.len() as u64,
            tokens: 0,
        })
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Element, E> {
        Ok(one_token())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Element, E> {
        Ok(one_token())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Element, E> {
        Ok(one_token())
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Element, E> {
        Ok(Element::default())
    }
    fn visit_unit<E: de::Error>(self) -> Result<Element, E> {
        Ok(Element::default())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Element, A::Error> {
        let mut length = 0u64;
        while seq.next_element::<Skip>()?.is_some() {
            length += 1;
        }
        Ok(Element {
            text_bytes: 0,
            tokens: length,
        })
    }
    /// A message: only a string `content` is measured (the last one, as
    /// the full parse keeps the last of a repeated key).
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Element, A::Error> {
        let mut content = 0u64;
        while let Some(key) = map.next_key::<Key>()? {
            match key {
                Key::Content => {
                    let OnlyString(ContentBytes(bytes)) = map.next_value()?;
                    content = bytes;
                }
                Key::Other => {
                    map.next_value::<Skip>()?;
                }
            }
        }
        Ok(Element {
            text_bytes: content,
            tokens: 0,
        })
    }
}

fn one_token() -> Element {
    Element {
        text_bytes: 0,
        tokens: 1,
    }
}

/// A message's key: `content` or another.
enum Key {
    Content,
    Other,
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(KeyVisitor)
    }
}

struct KeyVisitor;

impl Visitor<'_> for KeyVisitor {
    type Value = Key;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a key")
    }
    fn visit_str<E: de::Error>(self, key: &str) -> Result<Key, E> {
        Ok(if key == "content" {
            Key::Content
        } else {
            Key::Other
        })
    }
}

impl<'de> Deserialize<'de> for Fields {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(FieldsVisitor)
    }
}

struct FieldsVisitor;

impl<'de> Visitor<'de> for FieldsVisitor {
    type Value = Fields;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Fields, A::Error> {
        let mut fields = Fields::default();
        while let Some(key) = map.next_key::<KeyText>()? {
            fields.read(&key.0, &mut map)?;
        }
        Ok(fields)
    }
}

/// A top-level key (short: an allocation per key is nothing next to a body).
struct KeyText(String);

impl<'de> Deserialize<'de> for KeyText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(KeyText)
    }
}

/// What a value read as [`OnlyString`] keeps of a string.
trait FromString: Default {
    fn from_string(text: &str) -> Self;
}

/// Nothing: the value is only read through.
impl FromString for () {
    fn from_string(_: &str) -> Self {}
}

/// `model`'s value: the string (`None`: not a string).
impl FromString for Option<String> {
    fn from_string(text: &str) -> Self {
        Some(text.to_string())
    }
}

/// A `content` value's text bytes (0: not a string).
#[derive(Default)]
struct ContentBytes(u64);

impl FromString for ContentBytes {
    fn from_string(text: &str) -> Self {
        ContentBytes(text.len() as u64)
    }
}

/// Any value, read through: strings are checked (escapes, surrogates) and
/// nesting counts against serde_json's recursion limit, as in the full
/// parse. Of a string it keeps `T::from_string`; of anything else, which it
/// drops, `T::default()`.
struct OnlyString<T>(T);

/// Any value, read through and dropped.
type Skip = OnlyString<()>;

impl<'de, T: FromString> Deserialize<'de> for OnlyString<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(OnlyStringVisitor(PhantomData))
    }
}

struct OnlyStringVisitor<T>(PhantomData<T>);

impl<'de, T: FromString> Visitor<'de> for OnlyStringVisitor<T> {
    type Value = OnlyString<T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_str<E: de::Error>(self, text: &str) -> Result<Self::Value, E> {
        Ok(OnlyString(T::from_string(text)))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(OnlyString(T::default()))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(OnlyString(T::default()))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(OnlyString(T::default()))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(OnlyString(T::default()))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(OnlyString(T::default()))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<Skip, Skip>()?.is_some() {}
        Ok(OnlyString(T::default()))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<Skip>()?.is_some() {}
        Ok(OnlyString(T::default()))
    }
}
