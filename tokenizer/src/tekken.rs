//! Mistral's tekken vocabularies (`tekken.json`, as `mistral-common` ships
//! them): tiktoken-style byte-level BPE, each token given by its rank and
//! its bytes in base64, split by the `config.pattern` regex, with
//! `config.default_num_special_tokens` control tokens taking the first ids
//! (a token of rank `r` has id `r + num_special`) and only the first
//! `default_vocab_size - num_special` ranks in use.
//!
//! The tokens are those of `mistral-common`'s
//! `Tekkenizer.encode(text, bos=False, eos=False)`: tiktoken's encoding of
//! the text, in which control-token names (`[INST]`, `</s>`) are ordinary
//! text. Merging follows tiktoken: a piece that is a token is that token;
//! otherwise the adjacent pair that makes the lowest-ranked token merges
//! first, the leftmost of equals first.

use alloc::string::ToString;
use alloc::vec::Vec;

use crate::hf::{self, HfTokenizer, LoadError};
use crate::hf_bpe::{Id, PairMap, TokenMap};
use crate::hf_json::Value;
use crate::hf_pretok::Rule;

/// The value of one base64 character (standard alphabet), or `None`.
fn b64_value(c: u8) -> Option<u32> {
    match c {
        b'A'..=b'Z' => Some((c - b'A') as u32),
        b'a'..=b'z' => Some((c - b'a') as u32 + 26),
        b'0'..=b'9' => Some((c - b'0') as u32 + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    }
}

/// Standard base64 with `=` padding, as Python's `base64.b64encode` writes.
fn base64(s: &str) -> Option<Vec<u8>> {
    let b = s.as_bytes();
    if !b.len().is_multiple_of(4) {
        return None;
    }
    let body = b
        .strip_suffix(b"==")
        .or_else(|| b.strip_suffix(b"="))
        .unwrap_or(b);
    let mut out = Vec::with_capacity(body.len() * 3 / 4);
    for chunk in body.chunks(4) {
        let mut acc = 0u32;
        for &c in chunk {
            acc = (acc << 6) | b64_value(c)?;
        }
        match chunk.len() {
            4 => out.extend_from_slice(&[(acc >> 16) as u8, (acc >> 8) as u8, acc as u8]),
            3 => out.extend_from_slice(&[(acc >> 10) as u8, (acc >> 2) as u8]),
            2 => out.push((acc >> 4) as u8),
            _ => return None,
        }
    }
    Some(out)
}

/// A `config` number.
fn config_u32(config: &Value<'_>, key: &'static str) -> Result<u32, LoadError> {
    hf::field(config, key)?
        .as_u32()
        .ok_or(LoadError::Field(key))
}

/// The vocabulary in use: (bytes, id) in rank order.
fn tokens(
    doc: &Value<'_>,
    in_use: usize,
    num_special: u32,
) -> Result<Vec<(Vec<u8>, Id)>, LoadError> {
    let vocab = hf::field(doc, "vocab")?
        .as_array()
        .ok_or(LoadError::Field("vocab"))?;
    if vocab.len() < in_use {
        return Err(LoadError::Field(
            "vocab (shorter than config.default_vocab_size)",
        ));
    }
    let mut tokens = Vec::with_capacity(in_use);
    for (rank, entry) in vocab.iter().take(in_use).enumerate() {
        if hf::field(entry, "rank")?.as_u32() != Some(rank as u32) {
            return Err(LoadError::Field("vocab.rank (not the entry's position)"));
        }
        let bytes = hf::field(entry, "token_bytes")?
            .as_str()
            .and_then(base64)
            .ok_or(LoadError::Field("vocab.token_bytes"))?;
        if bytes.is_empty() {
            return Err(LoadError::Field("vocab.token_bytes (empty)"));
        }
        tokens.push((bytes, rank as Id + num_special));
    }
    Ok(tokens)
}

/// tiktoken's merges: every split of a token into two tokens, ranked by
/// the token (its id: ids follow the ranks).
fn merges(tokens: &[(Vec<u8>, Id)], vocab: &TokenMap) -> PairMap {
    let mut pairs = Vec::new();
    for (bytes, id) in tokens {
        for k in 1..bytes.len() {
            if let (Some(a), Some(b)) = (vocab.get(&bytes[..k]), vocab.get(&bytes[k..])) {
                pairs.push((*id, a, b, *id));
            }
        }
    }
    PairMap::ranked(pairs.len(), pairs.into_iter())
}

impl HfTokenizer {
    /// Loads a Mistral `tekken.json` from its bytes.
    pub fn from_tekken_json(bytes: &[u8]) -> Result<HfTokenizer, LoadError> {
        Self::from_tekken_doc(&hf::parse(bytes)?)
    }

    fn from_tekken_doc(doc: &Value<'_>) -> Result<HfTokenizer, LoadError> {
        let config = hf::field(doc, "config")?;
        let pattern = hf::field(config, "pattern")?
            .as_str()
            .ok_or(LoadError::Field("config.pattern"))?;
        let rule = Rule::of_patterns(&[pattern])
            .filter(|r| *r == Rule::Tekken)
            .ok_or_else(|| LoadError::Pattern(pattern.to_string()))?;
        let vocab_size = config_u32(config, "default_vocab_size")?;
        let num_special = config_u32(config, "default_num_special_tokens")?;
        let in_use = vocab_size
            .checked_sub(num_special)
            .filter(|&n| n >= 256)
            .ok_or(LoadError::Field("config.default_vocab_size"))?;
        let tokens = tokens(doc, in_use as usize, num_special)?;
        let vocab = TokenMap::new(&tokens).ok_or_else(|| {
            LoadError::DuplicateToken("(a token_bytes entry is repeated)".to_string())
        })?;
        let pairs = merges(&tokens, &vocab);
        drop(vocab);
        HfTokenizer::from_ranked(rule, &tokens, pairs)
    }

    /// Loads a vocabulary file of either kind: a Hugging Face
    /// `tokenizer.json` (it has a `model`) or a Mistral `tekken.json` (a
    /// `config` and a `vocab` list, no `model`).
    pub fn from_vocabulary_file(bytes: &[u8]) -> Result<HfTokenizer, LoadError> {
        let doc = hf::parse(bytes)?;
        if doc.get("model").is_none() && doc.get("config").is_some() {
            return Self::from_tekken_doc(&doc);
        }
        Self::from_doc(&doc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::format;
    use alloc::string::String;

    #[test]
    fn decodes_base64() {
        assert_eq!(base64("AA==").unwrap(), [0]);
        assert_eq!(base64("ICgiKg==").unwrap(), b" (\"*");
        assert_eq!(base64("YWJj").unwrap(), b"abc");
        assert_eq!(base64("YWI=").unwrap(), b"ab");
        assert!(base64("YW").is_none());
        assert!(base64("Y!==").is_none());
    }

    /// Python's `base64.b64encode` of `b`, for the tiny vocabulary.
    fn b64(b: &[u8]) -> String {
        const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut s = String::new();
        for chunk in b.chunks(3) {
            let mut acc = 0u32;
            for (k, &x) in chunk.iter().enumerate() {
                acc |= (x as u32) << (16 - 8 * k);
            }
            for k in 0..4 {
                if k <= chunk.len() {
                    s.push(A[(acc >> (18 - 6 * k) & 63) as usize] as char);
                } else {
                    s.push('=');
                }
            }
        }
        s
    }

    fn tiny(extra: &[&[u8]], pattern: &str, vocab_size: usize) -> String {
        let mut entries = Vec::new();
        let all: Vec<Vec<u8>> = (0..=255u8)
            .map(|b| alloc::vec![b])
            .chain(extra.iter().map(|e| e.to_vec()))
            .collect();
        for (rank, t) in all.iter().enumerate() {
            entries.push(format!(
                r#"{{"rank": {rank}, "token_bytes": "{}", "token_str": null}}"#,
                b64(t)
            ));
        }
        let pattern = pattern.replace('\\', "\\\\");
        format!(
            r#"{{"config": {{"pattern": "{pattern}", "num_vocab_tokens": {}, "default_vocab_size": {vocab_size}, "default_num_special_tokens": 10, "version": "v3"}}, "vocab": [{}]}}"#,
            all.len(),
            entries.join(", ")
        )
    }

    #[test]
    fn encodes_as_tiktoken_with_the_special_offset() {
        // ranks: 256 "ab", 257 "bc", 258 "abc", 259 " x"; "abc" merges
        // a+b first (rank 256), then ab+c.
        let json = tiny(
            &[b"ab", b"bc", b"abc", b" x"],
            crate::hf_pretok::TEKKEN,
            270,
        );
        let t = HfTokenizer::from_vocabulary_file(json.as_bytes()).unwrap();
        assert_eq!(t.encode("abc"), [268]);
        assert_eq!(t.encode("abcc x"), [268, 10 + b'c' as u32, 269]);
        // Single digits; control-token names are text.
        assert_eq!(t.count("12"), 2);
        assert_eq!(t.count("[INST]"), 6);
        // Only default_vocab_size - num_special ranks are in use.
        let cut = tiny(
            &[b"ab", b"bc", b"abc", b" x"],
            crate::hf_pretok::TEKKEN,
            267,
        );
        let t = HfTokenizer::from_tekken_json(cut.as_bytes()).unwrap();
        assert_eq!(t.encode("abc"), [266, 10 + b'c' as u32]);
    }

    #[test]
    fn refuses_what_it_does_not_support() {
        let other = tiny(&[], crate::hf_pretok::O200K, 266);
        assert!(matches!(
            HfTokenizer::from_tekken_json(other.as_bytes()),
            Err(LoadError::Pattern(_))
        ));
        let short = tiny(&[], crate::hf_pretok::TEKKEN, 300);
        assert!(HfTokenizer::from_tekken_json(short.as_bytes()).is_err());
        let few = tiny(&[], crate::hf_pretok::TEKKEN, 200);
        assert!(HfTokenizer::from_tekken_json(few.as_bytes()).is_err());
        let bad = tiny(&[], crate::hf_pretok::TEKKEN, 266).replace("\"AA==\"", "\"A!==\"");
        assert!(HfTokenizer::from_tekken_json(bad.as_bytes()).is_err());
        // A SentencePiece file is refused, not mistaken for tekken.
        let unigram = r#"{"model": {"type": "Unigram", "vocab": []}}"#;
        assert_eq!(
            HfTokenizer::from_vocabulary_file(unigram.as_bytes()).unwrap_err(),
            LoadError::Model("Unigram".to_string())
        );
    }
}
