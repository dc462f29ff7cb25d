//! A small JSON parser for `tokenizer.json` (no dependencies, no I/O, so it
//! builds for `wasm32-unknown-unknown` like the rest of the crate).
//!
//! Strings without escapes borrow from the input; numbers are kept as their
//! text (the loader only needs small non-negative integers). Nesting is
//! limited to [`MAX_DEPTH`] so that no input can exhaust the stack.

use alloc::borrow::Cow;
use alloc::string::String;
use alloc::vec::Vec;

/// Deepest nesting accepted (a `tokenizer.json` nests about 6 deep).
pub const MAX_DEPTH: usize = 64;

#[derive(Debug, Clone, PartialEq)]
pub enum Value<'a> {
    Null,
    Bool(bool),
    Number(&'a str),
    String(Cow<'a, str>),
    Array(Vec<Value<'a>>),
    Object(Vec<(Cow<'a, str>, Value<'a>)>),
}

impl<'a> Value<'a> {
    /// The member `key` of an object (the first, if repeated).
    pub fn get(&self, key: &str) -> Option<&Value<'a>> {
        match self {
            Value::Object(members) => members.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    pub fn as_u32(&self) -> Option<u32> {
        match self {
            Value::Number(n) => n.parse().ok(),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Value<'a>]> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    pub fn as_object(&self) -> Option<&[(Cow<'a, str>, Value<'a>)]> {
        match self {
            Value::Object(o) => Some(o),
            _ => None,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }
}

/// Where and why parsing stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JsonError {
    pub offset: usize,
    pub what: &'static str,
}

/// Parses one JSON document (surrounding whitespace allowed).
pub fn parse(text: &str) -> Result<Value<'_>, JsonError> {
    let mut p = Parser {
        s: text,
        b: text.as_bytes(),
        i: 0,
    };
    let v = p.value(0)?;
    p.ws();
    if p.i != p.b.len() {
        return Err(p.err("trailing characters after the document"));
    }
    Ok(v)
}

struct Parser<'a> {
    s: &'a str,
    b: &'a [u8],
    i: usize,
}

impl<'a> Parser<'a> {
    fn err(&self, what: &'static str) -> JsonError {
        JsonError {
            offset: self.i,
            what,
        }
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.b.get(self.i) {
            self.i += 1;
        }
    }

    fn lit(&mut self, word: &str, v: Value<'a>) -> Result<Value<'a>, JsonError> {
        if self.b[self.i..].starts_with(word.as_bytes()) {
            self.i += word.len();
            Ok(v)
        } else {
            Err(self.err("invalid literal"))
        }
    }

    /// At an opening `[` or `{`: the items `item` reads, separated by
    /// commas, up to the closing `close` (consumed).
    fn list<T>(
        &mut self,
        close: u8,
        mut item: impl FnMut(&mut Self) -> Result<T, JsonError>,
    ) -> Result<Vec<T>, JsonError> {
        self.i += 1;
        let mut items = Vec::new();
        self.ws();
        if self.b.get(self.i) == Some(&close) {
            self.i += 1;
            return Ok(items);
        }
        loop {
            items.push(item(self)?);
            self.ws();
            match self.b.get(self.i) {
                Some(b',') => self.i += 1,
                Some(&c) if c == close => {
                    self.i += 1;
                    return Ok(items);
                }
                _ if close == b']' => return Err(self.err("expected ',' or ']'")),
                _ => return Err(self.err("expected ',' or '}'")),
            }
        }
    }

    /// One `"name": value` member of an object, its value at `depth`.
    fn member(&mut self, depth: usize) -> Result<(Cow<'a, str>, Value<'a>), JsonError> {
        self.ws();
        if self.b.get(self.i) != Some(&b'"') {
            return Err(self.err("expected a member name"));
        }
        let key = self.string()?;
        self.ws();
        if self.b.get(self.i) != Some(&b':') {
            return Err(self.err("expected ':'"));
        }
        self.i += 1;
        Ok((key, self.value(depth)?))
    }

    fn value(&mut self, depth: usize) -> Result<Value<'a>, JsonError> {
        if depth > MAX_DEPTH {
            return Err(self.err("nested too deep"));
        }
        self.ws();
        match self.b.get(self.i) {
            None => Err(self.err("unexpected end")),
            Some(b'n') => self.lit("null", Value::Null),
            Some(b't') => self.lit("true", Value::Bool(true)),
            Some(b'f') => self.lit("false", Value::Bool(false)),
            Some(b'"') => Ok(Value::String(self.string()?)),
            Some(b'[') => Ok(Value::Array(self.list(b']', |p| p.value(depth + 1))?)),
            Some(b'{') => Ok(Value::Object(self.list(b'}', |p| p.member(depth + 1))?)),
            Some(b'-' | b'0'..=b'9') => {
                let start = self.i;
                while let Some(b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9') = self.b.get(self.i)
                {
                    self.i += 1;
                }
                Ok(Value::Number(&self.s[start..self.i]))
            }
            Some(_) => Err(self.err("unexpected character")),
        }
    }

    /// A string starting at the opening quote.
    fn string(&mut self) -> Result<Cow<'a, str>, JsonError> {
        self.i += 1;
        let start = self.i;
        // Fast path: no escape before the closing quote.
        loop {
            match self.b.get(self.i) {
                None => return Err(self.err("unterminated string")),
                Some(b'"') => {
                    let s = &self.s[start..self.i];
                    self.i += 1;
                    return Ok(Cow::Borrowed(s));
                }
                Some(b'\\') => break,
                Some(&c) if c < 0x20 => return Err(self.err("control character in string")),
                Some(_) => self.i += 1,
            }
        }
        let mut out = String::from(&self.s[start..self.i]);
        loop {
            let run = self.i;
            while let Some(&c) = self.b.get(self.i) {
                if c == b'"' || c == b'\\' || c < 0x20 {
                    break;
                }
                self.i += 1;
            }
            out.push_str(&self.s[run..self.i]);
            match self.b.get(self.i) {
                None => return Err(self.err("unterminated string")),
                Some(b'"') => {
                    self.i += 1;
                    return Ok(Cow::Owned(out));
                }
                Some(b'\\') => {
                    let e = self.b.get(self.i + 1).copied();
                    self.i += 2;
                    let c = match e {
                        Some(b'"') => '"',
                        Some(b'\\') => '\\',
                        Some(b'/') => '/',
                        Some(b'b') => '\u{8}',
                        Some(b'f') => '\u{c}',
                        Some(b'n') => '\n',
                        Some(b'r') => '\r',
                        Some(b't') => '\t',
                        Some(b'u') => {
                            let hi = self.hex4()?;
                            if (0xd800..0xdc00).contains(&hi) {
                                if self.b.get(self.i) != Some(&b'\\')
                                    || self.b.get(self.i + 1) != Some(&b'u')
                                {
                                    return Err(self.err("lone surrogate"));
                                }
                                self.i += 2;
                                let lo = self.hex4()?;
                                if !(0xdc00..0xe000).contains(&lo) {
                                    return Err(self.err("lone surrogate"));
                                }
                                let cp = 0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00);
                                char::from_u32(cp).ok_or(self.err("invalid code point"))?
                            } else {
                                char::from_u32(hi).ok_or(self.err("lone surrogate"))?
                            }
                        }
                        _ => return Err(self.err("invalid escape")),
                    };
                    out.push(c);
                }
                Some(_) => return Err(self.err("control character in string")),
            }
        }
    }

    fn hex4(&mut self) -> Result<u32, JsonError> {
        let mut v = 0;
        for _ in 0..4 {
            let d = match self.b.get(self.i) {
                Some(&c @ b'0'..=b'9') => c - b'0',
                Some(&c @ b'a'..=b'f') => c - b'a' + 10,
                Some(&c @ b'A'..=b'F') => c - b'A' + 10,
                _ => return Err(self.err("invalid \\u escape")),
            };
            v = v * 16 + d as u32;
            self.i += 1;
        }
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_tokenizer_json_uses() {
        let v = parse(r#" {"a": [1, -2.5e3, true, false, null], "b\u00e9\n": "x\"\\\ud83d\ude00y", "c": {}} "#)
            .unwrap();
        assert_eq!(v.get("a").unwrap().as_array().unwrap().len(), 5);
        assert_eq!(
            v.get("b\u{e9}\n").unwrap().as_str(),
            Some("x\"\\\u{1f600}y")
        );
        assert_eq!(v.get("a").unwrap().as_array().unwrap()[0].as_u32(), Some(1));
    }

    #[test]
    fn rejects_bad_input_without_panicking() {
        for bad in [
            "",
            "{",
            "[1,",
            "\"abc",
            "{\"a\" 1}",
            "[1] x",
            "\"\\ud800\"",
            "tru",
            "\"\\u12\"",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
        let deep = "[".repeat(10_000);
        assert!(parse(&deep).is_err());
    }

    #[test]
    fn a_list_names_the_bracket_it_expected() {
        for (bad, what) in [
            ("[1 2]", "expected ',' or ']'"),
            ("{\"a\": 1 \"b\": 2}", "expected ',' or '}'"),
            ("{\"a\": 1, 2}", "expected a member name"),
            ("{\"a\" 1}", "expected ':'"),
        ] {
            assert_eq!(
                parse(bad).map(|_| ()).map_err(|e| e.what),
                Err(what),
                "{bad}"
            );
        }
        assert_eq!(
            parse("[[], {}, [{}]]").unwrap().as_array().unwrap().len(),
            3
        );
    }
}
