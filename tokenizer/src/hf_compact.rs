//! Sluice's compact vocabulary: an [`HfTokenizer`] written as the arrays it
//! is built from, so that a Wasm filter loads it in milliseconds instead of
//! parsing a `tokenizer.json` of 9–28 MB (seconds inside V8).
//!
//! Layout, little-endian, made by [`HfTokenizer::to_compact`] (the
//! `sluice-vocab compile` command) and read by [`HfTokenizer::from_compact`]:
//!
//! ```text
//! magic            8 bytes  "SLVOCAB1"
//! rule, normalizer, ignore_merges, tiktoken_rule   4 × u8
//!                  (tiktoken_rule: 1 if merged by tiktoken's rule, with
//!                  the linear merge (tekken); 0 in files written before)
//! max_token_bytes  u32
//! tokens           u32 n, n × u32 id, n × u16 length, the bytes of all
//! merges           u32 m, m × (u32 left, u32 right, u32 merged), by rank
//! added (raw)      u32 k, k × (u32 id, u16 length, bytes)
//! added (normalized) the same
//! checksum         u32 FNV-1a of everything before it
//! ```
//!
//! The file holds only what the loader derived from the `tokenizer.json`
//! (byte strings, ids, merge order, the pre-tokenizer rule), so it is
//! exactly as exact as the JSON it came from; the tests compare both on
//! the reference vocabularies.

use alloc::vec::Vec;

use super::{Added, HfTokenizer, LoadError, Normalizer};
use crate::hf_bpe::{Id, PairMap, TokenMap};
use crate::hf_pretok::Rule;

/// The first 8 bytes of a compact vocabulary.
pub const COMPACT_MAGIC: &[u8; 8] = b"SLVOCAB1";

const RULES: [Rule; 5] = [
    Rule::Llama3,
    Rule::Qwen2,
    Rule::O200k,
    Rule::DeepSeekV3,
    Rule::Tekken,
];
const NORMALIZERS: [Normalizer; 2] = [Normalizer::None, Normalizer::Nfc];

fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5u32, |h, &b| {
        (h ^ b as u32).wrapping_mul(0x0100_0193)
    })
}

fn code_of<T: PartialEq>(table: &[T], value: &T) -> u8 {
    table.iter().position(|v| v == value).unwrap_or(0) as u8
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_added(out: &mut Vec<u8>, tokens: &[(Vec<u8>, Id)]) {
    put_u32(out, tokens.len() as u32);
    for (bytes, id) in tokens {
        put_u32(out, *id);
        out.extend_from_slice(&(bytes.len() as u16).to_le_bytes());
        out.extend_from_slice(bytes);
    }
}

/// Reads the layout front to back; every read is bounds-checked.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], LoadError> {
        let end = self
            .at
            .checked_add(n)
            .ok_or(LoadError::Compact("truncated"))?;
        let out = self
            .bytes
            .get(self.at..end)
            .ok_or(LoadError::Compact("truncated"))?;
        self.at = end;
        Ok(out)
    }

    fn u8(&mut self) -> Result<u8, LoadError> {
        Ok(self.take(1)?[0])
    }

    fn u16_at(b: &[u8], i: usize) -> u16 {
        u16::from_le_bytes([b[2 * i], b[2 * i + 1]])
    }

    fn u32_at(b: &[u8], i: usize) -> u32 {
        u32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]])
    }

    fn u32(&mut self) -> Result<u32, LoadError> {
        Ok(Self::u32_at(self.take(4)?, 0))
    }

    /// A count of items of `size` bytes each, refused if the rest of the
    /// input cannot hold them (no allocation is sized by an unchecked count).
    fn count(&mut self, size: usize) -> Result<usize, LoadError> {
        let n = self.u32()? as usize;
        if n.saturating_mul(size) > self.bytes.len() - self.at {
            return Err(LoadError::Compact("a count is larger than the file"));
        }
        Ok(n)
    }

    fn tokens(&mut self) -> Result<Vec<(Vec<u8>, Id)>, LoadError> {
        let n = self.count(6)?;
        let ids = self.take(4 * n)?;
        let lens = self.take(2 * n)?;
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            let bytes = self.take(Self::u16_at(lens, i) as usize)?;
            out.push((bytes.to_vec(), Self::u32_at(ids, i)));
        }
        Ok(out)
    }

    /// (rank, left, right, merged): a rank of its own, since a tekken
    /// vocabulary ranks several pairs alike (by the token they make).
    fn merges(&mut self) -> Result<Vec<(u32, Id, Id, Id)>, LoadError> {
        let n = self.count(16)?;
        let raw = self.take(16 * n)?;
        Ok((0..n)
            .map(|i| {
                (
                    Self::u32_at(raw, 4 * i),
                    Self::u32_at(raw, 4 * i + 1),
                    Self::u32_at(raw, 4 * i + 2),
                    Self::u32_at(raw, 4 * i + 3),
                )
            })
            .collect())
    }

    fn added(&mut self) -> Result<Added, LoadError> {
        let n = self.count(6)?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let id = self.u32()?;
            let len = Self::u16_at(self.take(2)?, 0) as usize;
            if len == 0 {
                return Err(LoadError::Compact("an added token is empty"));
            }
            out.push((self.take(len)?.to_vec(), id));
        }
        Ok(Added::new(out))
    }
}

impl HfTokenizer {
    /// This tokenizer in Sluice's compact format (see the module's doc),
    /// which [`HfTokenizer::from_compact`] loads back.
    /// Fails only on a token longer than 65 535 bytes.
    pub fn to_compact(&self) -> Result<Vec<u8>, LoadError> {
        let too_long = LoadError::Compact("a token is longer than 65535 bytes");
        let long = |t: &[u8]| t.len() > u16::MAX as usize;
        if self.vocab.iter().any(|(t, _)| long(t))
            || self
                .added_raw
                .tokens()
                .iter()
                .chain(&self.added_normalized.tokens())
                .any(|(t, _)| long(t))
        {
            return Err(too_long);
        }
        let mut out = Vec::new();
        out.extend_from_slice(COMPACT_MAGIC);
        out.extend_from_slice(&[
            code_of(&RULES, &self.rule),
            code_of(&NORMALIZERS, &self.normalizer),
            self.ignore_merges as u8,
            // Merged by tiktoken's rule (the linear merge): 1 (a file of
            // before, with 0 here, is merged with the heap merge: also exact).
            self.ranked.is_some() as u8,
        ]);
        put_u32(&mut out, self.max_token_bytes as u32);
        let tokens: Vec<(&[u8], Id)> = self.vocab.iter().collect();
        put_u32(&mut out, tokens.len() as u32);
        for (_, id) in &tokens {
            put_u32(&mut out, *id);
        }
        for (bytes, _) in &tokens {
            out.extend_from_slice(&(bytes.len() as u16).to_le_bytes());
        }
        for (bytes, _) in &tokens {
            out.extend_from_slice(bytes);
        }
        let merges = self.pairs.merges();
        put_u32(&mut out, merges.len() as u32);
        for (rank, a, b, new) in merges {
            for v in [rank, a, b, new] {
                put_u32(&mut out, v);
            }
        }
        put_added(&mut out, &self.added_raw.tokens());
        put_added(&mut out, &self.added_normalized.tokens());
        let sum = fnv1a(&out);
        put_u32(&mut out, sum);
        Ok(out)
    }

    /// Loads a compact vocabulary made by [`HfTokenizer::to_compact`]:
    /// tens of milliseconds where [`HfTokenizer::from_json`] takes seconds
    /// inside a Wasm VM. Refuses a file that is truncated, corrupted (its
    /// checksum) or names an unknown rule.
    pub fn from_compact(bytes: &[u8]) -> Result<HfTokenizer, LoadError> {
        let (body, sum) = bytes
            .split_last_chunk::<4>()
            .ok_or(LoadError::Compact("truncated"))?;
        if !body.starts_with(COMPACT_MAGIC) {
            return Err(LoadError::Compact("wrong magic"));
        }
        if fnv1a(body) != u32::from_le_bytes(*sum) {
            return Err(LoadError::Compact("checksum mismatch (a damaged file)"));
        }
        let mut r = Reader {
            bytes: body,
            at: COMPACT_MAGIC.len(),
        };
        let rule = *RULES
            .get(r.u8()? as usize)
            .ok_or(LoadError::Compact("unknown pre-tokenizer rule"))?;
        let normalizer = *NORMALIZERS
            .get(r.u8()? as usize)
            .ok_or(LoadError::Compact("unknown normalizer"))?;
        let ignore_merges = r.u8()? != 0;
        let tiktoken_rule = r.u8()? != 0;
        let max_token_bytes = r.u32()? as usize;
        let vocab =
            TokenMap::new(&r.tokens()?).ok_or(LoadError::Compact("a token is listed twice"))?;
        let mut byte_ids = [0; 256];
        for (b, id) in byte_ids.iter_mut().enumerate() {
            *id = vocab
                .get(&[b as u8])
                .ok_or(LoadError::MissingByte(b as u8))?;
        }
        let merges = r.merges()?;
        let pairs = PairMap::ranked(merges.len(), merges.into_iter());
        let added_raw = r.added()?;
        let added_normalized = r.added()?;
        if r.at != body.len() {
            return Err(LoadError::Compact("trailing bytes"));
        }
        Ok(HfTokenizer {
            rule,
            normalizer,
            pairs,
            byte_ids,
            ignore_merges,
            added_raw,
            ranked: if tiktoken_rule {
                super::Ranked::of(vocab.iter())
            } else {
                None
            },
            vocab,
            added_normalized,
            max_token_bytes,
        })
    }
}

/// The first 8 bytes of a bundle of compact vocabularies.
pub const BUNDLE_MAGIC: &[u8; 8] = b"SLVOCSET";

/// Several compact vocabularies in one blob, each under a name (the
/// `tokenizer_json` path the configuration names it by): what the Wasm
/// filter is handed. Layout: magic, u32 count, then per entry u16 name
/// length, the name, u32 length, the compact vocabulary.
pub fn write_bundle<'a>(entries: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> Vec<u8> {
    let entries: Vec<(&str, &[u8])> = entries.into_iter().collect();
    let mut out = Vec::new();
    out.extend_from_slice(BUNDLE_MAGIC);
    put_u32(&mut out, entries.len() as u32);
    for (name, bytes) in entries {
        let name = name.as_bytes();
        let name = name.get(..u16::MAX as usize).unwrap_or(name);
        out.extend_from_slice(&(name.len() as u16).to_le_bytes());
        out.extend_from_slice(name);
        put_u32(&mut out, bytes.len() as u32);
        out.extend_from_slice(bytes);
    }
    out
}

/// The entries of a bundle made by [`write_bundle`], (name, compact
/// vocabulary), without copying; each vocabulary is checked when loaded.
pub fn read_bundle(bytes: &[u8]) -> Result<Vec<(&str, &[u8])>, LoadError> {
    if !bytes.starts_with(BUNDLE_MAGIC) {
        return Err(LoadError::Compact(
            "not a bundle of vocabularies (wrong magic)",
        ));
    }
    let mut r = Reader {
        bytes,
        at: BUNDLE_MAGIC.len(),
    };
    let n = r.count(6)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let len = Reader::u16_at(r.take(2)?, 0) as usize;
        let name = core::str::from_utf8(r.take(len)?)
            .map_err(|_| LoadError::Compact("a bundle entry's name is not UTF-8"))?;
        let len = r.u32()? as usize;
        out.push((name, r.take(len)?));
    }
    if r.at != bytes.len() {
        return Err(LoadError::Compact("trailing bytes after the bundle"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{tiny, LLAMA_PRE};
    use super::*;

    #[test]
    fn round_trips_and_refuses_damage() {
        let json = HfTokenizer::from_json(tiny(LLAMA_PRE).as_bytes()).unwrap();
        let bytes = json.to_compact().unwrap();
        let back = HfTokenizer::from_compact(&bytes).unwrap();
        let text = "abc ab<|x|>abx";
        assert_eq!(back.encode(text), json.encode(text));
        assert_eq!(back.to_compact().unwrap(), bytes);
        // Every truncation and every flipped byte is refused, never a panic.
        for cut in 0..bytes.len() {
            assert!(
                HfTokenizer::from_compact(&bytes[..cut]).is_err(),
                "cut {cut}"
            );
        }
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x41;
            assert!(HfTokenizer::from_compact(&bad).is_err(), "byte {i}");
        }
        assert!(HfTokenizer::from_compact(b"{}").is_err());
    }

    #[test]
    fn bundles_name_their_vocabularies() {
        let bundle = write_bundle([("/a/tokenizer.json", &b"one"[..]), ("b", b"")]);
        assert_eq!(
            read_bundle(&bundle).unwrap(),
            [("/a/tokenizer.json", &b"one"[..]), ("b", &b""[..])]
        );
        assert!(read_bundle(&bundle[..bundle.len() - 1]).is_err());
        assert!(read_bundle(b"SLVOCAB1").is_err());
        assert!(read_bundle(&write_bundle([])).unwrap().is_empty());
    }
}
