//! Hugging Face `tokenizer.json` byte-level BPE tokenizers (Llama 3, Qwen2 /
//! 2.5 / 3, gpt-oss, ...), loaded from bytes: no I/O, so a Wasm filter can
//! load one it was handed.
//!
//! [`HfTokenizer::from_json`] accepts the subset these models use and
//! refuses the rest with a [`LoadError`] that says what is unsupported:
//!
//! * `model`: `BPE` over a byte-level vocabulary (every token made of
//!   GPT-2's byte-to-character map, every byte a token); no dropout, no
//!   `byte_fallback`, no subword prefix or suffix; `ignore_merges` honoured.
//!   SentencePiece-style BPE (`▁`, byte fallback), Unigram and WordPiece
//!   are refused.
//! * `normalizer`: none, an empty `Sequence`, or `NFC` (Qwen), see below.
//! * `pre_tokenizer`: `Split` (regex, `Isolated`) with one of the patterns
//!   of [`hf_pretok::Rule`] followed by `ByteLevel` without prefix space and
//!   without its own regex.
//! * `added_tokens`: matched in the text before anything else (leftmost,
//!   longest), those with `normalized: false` on the raw text, the others on
//!   the normalized text, as `tokenizers` does; `lstrip`, `rstrip` and
//!   `single_word` are refused.
//!
//! The tokens are those of `tokenizer.encode(text, add_special_tokens=False)`
//! (the post-processor adds nothing then; truncation and padding are not
//! applied).

use alloc::borrow::Cow;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use crate::budget::{BoundedCount, LONG_PIECE_COST};
use crate::hf_bpe::{self, Id, PairMap, Scratch, TokenMap};
use crate::hf_json::{self, Value};
use crate::hf_pretok::Rule;

#[path = "hf_compact.rs"]
mod compact;
pub use compact::{read_bundle, write_bundle, BUNDLE_MAGIC, COMPACT_MAGIC};

/// Why a `tokenizer.json` cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    #[error("tokenizer.json is not UTF-8")]
    NotUtf8,
    #[error("tokenizer.json is not valid JSON (byte {offset}: {what})")]
    Json { offset: usize, what: &'static str },
    #[error("missing or malformed field `{0}`")]
    Field(&'static str),
    #[error("unsupported model type {0:?}: only byte-level BPE is supported (not Unigram, WordPiece or SentencePiece BPE)")]
    Model(String),
    #[error("unsupported BPE option: {0}")]
    ModelOption(&'static str),
    #[error("not a byte-level vocabulary: more than 1 % of the tokens, {0:?} among them, have characters outside GPT-2's byte map (SentencePiece BPE is not supported)")]
    NotByteLevel(String),
    #[error("the vocabulary has no token for byte {0:#04x}")]
    MissingByte(u8),
    #[error("token {0:?} appears twice in the vocabulary")]
    DuplicateToken(String),
    #[error("merge #{0} is malformed or names a token not in the vocabulary: {1:?}")]
    Merge(usize, String),
    #[error("unsupported normalizer: {0}")]
    Normalizer(String),
    #[error("unsupported pre-tokenizer: {0}")]
    PreTokenizer(String),
    #[error("unsupported pre-tokenizer regex (no hand-written rule for it): {0:?}")]
    Pattern(String),
    #[error("added token {0:?}: {1}")]
    AddedToken(String, &'static str),
    #[error("not a Sluice compact vocabulary (made by `sluice-vocab compile`): {0}")]
    Compact(&'static str),
}

/// GPT-2's byte-level map: the character standing for each byte.
fn byte_char(b: u8) -> char {
    let printable = |b: u8| matches!(b, 33..=126 | 161..=172 | 174..=255);
    if printable(b) {
        return b as char;
    }
    let n = (0..b).filter(|&x| !printable(x)).count() as u32;
    char::from_u32(256 + n).unwrap_or('\0')
}

/// The inverse of [`byte_char`] for all 256 bytes.
struct ByteMap {
    /// The byte of each character U+0100 + n (the 68 unprintable bytes).
    high: [u8; 68],
}

impl ByteMap {
    fn new() -> ByteMap {
        let mut high = [0u8; 68];
        for b in 0..=255u8 {
            let cp = byte_char(b) as u32;
            if let Some(slot) = cp.checked_sub(256).and_then(|n| high.get_mut(n as usize)) {
                *slot = b;
            }
        }
        ByteMap { high }
    }

    fn byte(&self, c: char) -> Option<u8> {
        let cp = c as u32;
        if cp < 256 {
            let b = cp as u8;
            return (byte_char(b) == c).then_some(b);
        }
        self.high.get(cp as usize - 256).copied()
    }

    fn decode(&self, s: &str) -> Option<Vec<u8>> {
        s.chars().map(|c| self.byte(c)).collect()
    }
}

/// Added tokens of one kind (raw or normalized), in a byte trie: finding
/// the longest token at a position costs at most the longest token's length,
/// whatever the text (a text of 4 MiB of `<` must not try every token that
/// starts with `<` at every byte).
/// A trie node: its children (byte, node) sorted by byte, and the id of the
/// token ending there.
type Node = (Vec<(u8, u32)>, Option<Id>);

/// Added tokens' bytes and ids, before they are indexed.
type AddedList = Vec<(Vec<u8>, Id)>;

#[derive(Debug)]
struct Added {
    /// Node 0 is the root.
    nodes: Vec<Node>,
    first: [bool; 256],
}

impl Added {
    fn new(tokens: AddedList) -> Added {
        let mut a = Added {
            nodes: alloc::vec![(Vec::new(), None)],
            first: [false; 256],
        };
        for (t, id) in tokens {
            let Some(&f) = t.first() else { continue };
            a.first[f as usize] = true;
            let mut node = 0usize;
            for &byte in &t {
                let next = a.nodes.len() as u32;
                let children = &mut a.nodes[node].0;
                node = match children.binary_search_by_key(&byte, |c| c.0) {
                    Ok(k) => children[k].1 as usize,
                    Err(k) => {
                        children.insert(k, (byte, next));
                        a.nodes.push((Vec::new(), None));
                        next as usize
                    }
                };
            }
            // Of two tokens with the same content the first listed wins.
            if a.nodes[node].1.is_none() {
                a.nodes[node].1 = Some(id);
            }
        }
        a
    }

    fn is_empty(&self) -> bool {
        !self.first.iter().any(|&f| f)
    }

    /// The tokens of the trie (each content once), depth first.
    fn tokens(&self) -> Vec<(Vec<u8>, Id)> {
        let mut out = Vec::new();
        let mut stack = alloc::vec![(0u32, Vec::new())];
        while let Some((node, prefix)) = stack.pop() {
            let Some((children, id)) = self.nodes.get(node as usize) else {
                continue;
            };
            if let Some(id) = id {
                out.push((prefix.clone(), *id));
            }
            for &(byte, child) in children.iter().rev() {
                let mut next = prefix.clone();
                next.push(byte);
                stack.push((child, next));
            }
        }
        out
    }

    /// The longest added token starting at `i`.
    #[inline]
    fn at(&self, b: &[u8], i: usize) -> Option<(usize, Id)> {
        let f = *b.get(i)?;
        if !self.first[f as usize] {
            return None;
        }
        let mut node = 0usize;
        let mut best = None;
        for (k, byte) in b[i..].iter().enumerate() {
            let children = &self.nodes.get(node)?.0;
            match children.binary_search_by_key(byte, |c| c.0) {
                Ok(c) => node = children[c].1 as usize,
                Err(_) => break,
            }
            if let Some(id) = self.nodes.get(node).and_then(|n| n.1) {
                best = Some((k + 1, id));
            }
        }
        best
    }

    /// Splits `text` at the added tokens (leftmost, then longest), calling
    /// `f` with `Ok(text between)` and `Err(token id)` in order.
    fn split<'t>(&self, text: &'t str, mut f: impl FnMut(Result<&'t str, Id>) -> bool) -> bool {
        if self.is_empty() {
            return text.is_empty() || f(Ok(text));
        }
        let b = text.as_bytes();
        let mut start = 0;
        let mut i = 0;
        while i < b.len() {
            if let Some((len, id)) = self.at(b, i) {
                // Token contents are whole UTF-8 strings, so i and i + len
                // are character boundaries.
                if i > start && !f(Ok(text.get(start..i).unwrap_or(""))) {
                    return false;
                }
                if !f(Err(id)) {
                    return false;
                }
                i += len;
                start = i;
            } else {
                i += 1;
            }
        }
        start >= b.len() || f(Ok(text.get(start..).unwrap_or("")))
    }
}

/// Pieces at least this long weigh [`LONG_PIECE_COST`] per byte in
/// [`HfTokenizer::count_within`] (measured: 1 MiB of `a`, one piece, takes
/// about 1 s natively on a loaded VM, against tens of ms for ordinary text).
pub const LONG_PIECE: usize = 128;

/// The normalizers supported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Normalizer {
    None,
    Nfc,
}

/// What a tokenizer is besides its tables.
struct Header {
    rule: Rule,
    normalizer: Normalizer,
    ignore_merges: bool,
    max_token_bytes: usize,
}

/// A byte-level BPE tokenizer loaded from a Hugging Face `tokenizer.json`.
/// Immutable, `Send + Sync`; build it once.
#[derive(Debug)]
pub struct HfTokenizer {
    rule: Rule,
    normalizer: Normalizer,
    vocab: TokenMap,
    pairs: PairMap,
    byte_ids: [Id; 256],
    ignore_merges: bool,
    added_raw: Added,
    added_normalized: Added,
    max_token_bytes: usize,
    /// The linear merge of `bpe.rs`, for vocabularies that merge by
    /// tiktoken's rule (Mistral's tekken): `None` for the others, which
    /// `hf_bpe::merge` serves.
    ranked: Option<Ranked>,
}

/// A tiktoken-rule vocabulary in `bpe.rs`'s tables: ids are ranks plus
/// `first_id`.
#[derive(Debug)]
pub(crate) struct Ranked {
    ranks: crate::bpe::Ranks,
    first_id: Id,
}

impl Ranked {
    /// The tables of `tokens` (bytes, id), whose ids must be consecutive
    /// in this order (the ranks); `None` if they are not, or if `bpe.rs`'s
    /// tables cannot hold them ([`crate::bpe::Ranks::from_tokens`]).
    pub(crate) fn of<'a>(tokens: impl Iterator<Item = (&'a [u8], Id)>) -> Option<Ranked> {
        let tokens: Vec<(&[u8], Id)> = tokens.collect();
        let first_id = tokens.first()?.1;
        let consecutive = tokens
            .iter()
            .enumerate()
            .all(|(i, t)| t.1.checked_sub(first_id) == Some(i as Id));
        if !consecutive {
            return None;
        }
        let ranks = crate::bpe::Ranks::from_tokens(tokens.iter().map(|t| t.0))?;
        Some(Ranked { ranks, first_id })
    }

    /// Calls `f` with the ids of `piece`: the piece if it is a token, else
    /// its linear merge.
    #[inline]
    fn piece(&self, piece: &[u8], s: &mut crate::bpe::Scratch, f: &mut impl FnMut(Id)) {
        if let Some(r) = self.ranks.get(piece) {
            f(r + self.first_id);
            return;
        }
        self.ranks.merge(piece, s, |t| {
            if let Some(r) = self.ranks.get(t) {
                f(r + self.first_id);
            }
        });
    }
}

/// The JSON document of a vocabulary file.
pub(crate) fn parse(bytes: &[u8]) -> Result<Value<'_>, LoadError> {
    let text = core::str::from_utf8(bytes).map_err(|_| LoadError::NotUtf8)?;
    hf_json::parse(text).map_err(|e| LoadError::Json {
        offset: e.offset,
        what: e.what,
    })
}

/// The id of each byte; a vocabulary must have them all.
fn byte_ids(vocab: &TokenMap) -> Result<[Id; 256], LoadError> {
    let mut byte_ids = [u32::MAX; 256];
    for (b, id) in byte_ids.iter_mut().enumerate() {
        *id = vocab
            .get(&[b as u8])
            .ok_or(LoadError::MissingByte(b as u8))?;
    }
    Ok(byte_ids)
}

pub(crate) fn field<'v, 'a>(
    v: &'v Value<'a>,
    key: &'static str,
) -> Result<&'v Value<'a>, LoadError> {
    v.get(key).ok_or(LoadError::Field(key))
}

/// `null`, absent, `false`: the option is off.
fn off(v: &Value<'_>, key: &str) -> bool {
    match v.get(key) {
        None | Some(Value::Null) | Some(Value::Bool(false)) => true,
        Some(Value::String(s)) => s.is_empty(),
        _ => false,
    }
}

/// A merge's two parts: `"a b"` or `["a", "b"]`.
fn merge_parts<'v>(m: &'v Value<'_>) -> Option<(&'v str, &'v str)> {
    match m {
        Value::String(s) => {
            let mut it = s.split(' ');
            match (it.next(), it.next(), it.next()) {
                (Some(a), Some(b), None) => Some((a, b)),
                _ => None,
            }
        }
        Value::Array(pair) => match pair.as_slice() {
            [Value::String(a), Value::String(b)] => Some((a.as_ref(), b.as_ref())),
            _ => None,
        },
        _ => None,
    }
}

fn short_json(v: &Value<'_>) -> String {
    let mut s = alloc::format!("{v:?}");
    if s.len() > 200 {
        let mut cut = 200;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push('…');
    }
    s
}

impl HfTokenizer {
    /// Loads a `tokenizer.json` from its bytes.
    pub fn from_json(bytes: &[u8]) -> Result<HfTokenizer, LoadError> {
        Self::from_doc(&parse(bytes)?)
    }

    /// A tiktoken-style vocabulary: `tokens` (bytes, id) with the tiktoken
    /// merges `pairs` (each pair ranked by the token it makes), split by
    /// `rule`; a piece that is a token is that token, as in tiktoken. No
    /// normalizer, no added tokens.
    pub(crate) fn from_ranked(
        rule: Rule,
        tokens: &[(Vec<u8>, Id)],
        pairs: PairMap,
    ) -> Result<HfTokenizer, LoadError> {
        let vocab = TokenMap::new(tokens).ok_or_else(|| {
            LoadError::DuplicateToken("(a vocabulary entry is repeated)".to_string())
        })?;
        Ok(HfTokenizer {
            rule,
            normalizer: Normalizer::None,
            byte_ids: byte_ids(&vocab)?,
            vocab,
            pairs,
            ignore_merges: true,
            added_raw: Added::new(Vec::new()),
            added_normalized: Added::new(Vec::new()),
            max_token_bytes: tokens.iter().map(|t| t.0.len()).max().unwrap_or(1),
            ranked: Ranked::of(tokens.iter().map(|(t, id)| (t.as_slice(), *id))),
        })
    }

    /// Loads a parsed `tokenizer.json`.
    pub(crate) fn from_doc(doc: &Value<'_>) -> Result<HfTokenizer, LoadError> {
        let model = field(doc, "model")?;
        let ignore_merges = Self::bpe_options(model)?;
        let map = ByteMap::new();
        let (vocab, vocab_max_bytes) = Self::vocabulary(model, &map)?;
        let pairs = Self::merges(model, &map, &vocab)?;
        let normalizer = Self::normalizer(doc.get("normalizer"))?;
        let rule = Self::pre_tokenizer(doc.get("pre_tokenizer"))?;
        let (raw, normalized) = Self::added_tokens(doc.get("added_tokens"))?;
        let added_max_bytes = raw.iter().chain(&normalized).map(|t| t.0.len()).max();
        let header = Header {
            rule,
            normalizer,
            ignore_merges,
            max_token_bytes: vocab_max_bytes.max(added_max_bytes.unwrap_or(0)),
        };
        let added = (Added::new(raw), Added::new(normalized));
        HfTokenizer::assemble(header, vocab, pairs, added)
    }

    /// Refuses the BPE options Sluice does not implement; returns
    /// `ignore_merges`.
    fn bpe_options(model: &Value<'_>) -> Result<bool, LoadError> {
        match model.get("type").and_then(Value::as_str) {
            Some("BPE") => {}
            Some(other) => return Err(LoadError::Model(other.to_string())),
            None => return Err(LoadError::Field("model.type")),
        }
        for option in [
            "dropout",
            "byte_fallback",
            "continuing_subword_prefix",
            "end_of_word_suffix",
        ] {
            if !off(model, option) {
                return Err(LoadError::ModelOption(option));
            }
        }
        Ok(model
            .get("ignore_merges")
            .and_then(Value::as_bool)
            .unwrap_or(false))
    }

    /// `model.vocab` as bytes to ids, and its longest entry in bytes.
    fn vocabulary(model: &Value<'_>, map: &ByteMap) -> Result<(TokenMap, usize), LoadError> {
        let vocab_obj = field(model, "vocab")?
            .as_object()
            .ok_or(LoadError::Field("model.vocab"))?;
        let mut tokens = Vec::with_capacity(vocab_obj.len());
        // Entries that are not byte-level strings (DeepSeek V3 lists its
        // special tokens in the vocabulary as they are written) can never
        // come out of the merges; only the added tokens produce them. More
        // than a few such entries mean the vocabulary is not byte-level.
        let mut foreign = Vec::new();
        for (k, v) in vocab_obj {
            let id = v.as_u32().ok_or(LoadError::Field("model.vocab"))?;
            match map.decode(k) {
                Some(bytes) => tokens.push((bytes, id)),
                None => foreign.push(k),
            }
        }
        if foreign.len() > vocab_obj.len() / 100 {
            let first = foreign.first().map_or("", |k| k.as_ref());
            return Err(LoadError::NotByteLevel(first.to_string()));
        }
        let max_token_bytes = tokens.iter().map(|t| t.0.len()).max().unwrap_or(0);
        let vocab = TokenMap::new(&tokens).ok_or_else(|| {
            // Distinct strings decode to distinct bytes: a string repeated.
            LoadError::DuplicateToken("(a vocabulary key is repeated)".to_string())
        })?;
        // Checked here too: the merges name tokens by their bytes.
        byte_ids(&vocab)?;
        Ok((vocab, max_token_bytes))
    }

    /// `model.merges` (`"a b"` strings or `["a", "b"]` pairs) as id pairs.
    fn merges(model: &Value<'_>, map: &ByteMap, vocab: &TokenMap) -> Result<PairMap, LoadError> {
        let merges_v = field(model, "merges")?
            .as_array()
            .ok_or(LoadError::Field("model.merges"))?;
        let mut merges = Vec::with_capacity(merges_v.len());
        let mut joined = Vec::new();
        for (n, m) in merges_v.iter().enumerate() {
            let bad = || LoadError::Merge(n, short_json(m));
            let (a, b) = merge_parts(m).ok_or_else(bad)?;
            // A merge names its tokens by their byte-level strings.
            joined.clear();
            let mut ids = [0; 2];
            for (id, part) in ids.iter_mut().zip([a, b]) {
                let start = joined.len();
                for c in part.chars() {
                    joined.push(map.byte(c).ok_or_else(bad)?);
                }
                *id = vocab.get(&joined[start..]).ok_or_else(bad)?;
            }
            let ab = vocab.get(&joined).ok_or_else(bad)?;
            merges.push((ids[0], ids[1], ab));
        }
        Ok(PairMap::new(&merges))
    }

    /// `added_tokens`, split into those matched on the raw text and those
    /// matched after normalization.
    fn added_tokens(list: Option<&Value<'_>>) -> Result<(AddedList, AddedList), LoadError> {
        let (mut raw, mut normalized) = (Vec::new(), Vec::new());
        let Some(list) = list else {
            return Ok((raw, normalized));
        };
        let list = list.as_array().ok_or(LoadError::Field("added_tokens"))?;
        for t in list {
            let content = field(t, "content")?
                .as_str()
                .ok_or(LoadError::Field("added_tokens.content"))?;
            let id = field(t, "id")?
                .as_u32()
                .ok_or(LoadError::Field("added_tokens.id"))?;
            for (opt, what) in [
                ("lstrip", "lstrip is not supported"),
                ("rstrip", "rstrip is not supported"),
                ("single_word", "single_word is not supported"),
            ] {
                if !off(t, opt) {
                    return Err(LoadError::AddedToken(content.to_string(), what));
                }
            }
            if content.is_empty() {
                return Err(LoadError::AddedToken(String::new(), "empty content"));
            }
            let entry = (content.as_bytes().to_vec(), id);
            if t.get("normalized").and_then(Value::as_bool).unwrap_or(true) {
                normalized.push(entry);
            } else {
                raw.push(entry);
            }
        }
        Ok((raw, normalized))
    }

    /// The tokenizer of its parts (from the JSON or a compact vocabulary);
    /// refused if a byte has no token.
    fn assemble(
        header: Header,
        vocab: TokenMap,
        pairs: PairMap,
        (added_raw, added_normalized): (Added, Added),
    ) -> Result<HfTokenizer, LoadError> {
        let byte_ids = byte_ids(&vocab)?;
        Ok(HfTokenizer {
            rule: header.rule,
            normalizer: header.normalizer,
            vocab,
            pairs,
            byte_ids,
            ignore_merges: header.ignore_merges,
            added_raw,
            added_normalized,
            max_token_bytes: header.max_token_bytes,
            ranked: None,
        })
    }

    fn normalizer(v: Option<&Value<'_>>) -> Result<Normalizer, LoadError> {
        let Some(v) = v else {
            return Ok(Normalizer::None);
        };
        if v.is_null() {
            return Ok(Normalizer::None);
        }
        match v.get("type").and_then(Value::as_str) {
            Some("NFC") => Ok(Normalizer::Nfc),
            Some("Sequence") => {
                let list = v
                    .get("normalizers")
                    .and_then(Value::as_array)
                    .ok_or(LoadError::Field("normalizer.normalizers"))?;
                match list {
                    [] => Ok(Normalizer::None),
                    [one] => Self::normalizer(Some(one)),
                    _ => Err(LoadError::Normalizer(short_json(v))),
                }
            }
            _ => Err(LoadError::Normalizer(short_json(v))),
        }
    }

    fn pre_tokenizer(v: Option<&Value<'_>>) -> Result<Rule, LoadError> {
        let bad = |v: &Value<'_>| LoadError::PreTokenizer(short_json(v));
        let Some(v) = v.filter(|v| !v.is_null()) else {
            return Err(LoadError::PreTokenizer("none".to_string()));
        };
        let steps: &[Value<'_>] = match v.get("type").and_then(Value::as_str) {
            Some("Sequence") => v
                .get("pretokenizers")
                .and_then(Value::as_array)
                .ok_or(LoadError::Field("pre_tokenizer.pretokenizers"))?,
            _ => core::slice::from_ref(v),
        };
        let mut patterns = Vec::new();
        let mut byte_level = false;
        for s in steps {
            match s.get("type").and_then(Value::as_str) {
                Some("Split") if !byte_level => {
                    let pattern = s.get("pattern").ok_or_else(|| bad(s))?;
                    let regex = pattern.get("Regex").and_then(Value::as_str);
                    let Some(regex) = regex else {
                        return Err(bad(s));
                    };
                    if s.get("behavior").and_then(Value::as_str) != Some("Isolated")
                        || !off(s, "invert")
                    {
                        return Err(bad(s));
                    }
                    patterns.push(regex);
                }
                Some("ByteLevel") if !byte_level => {
                    if !off(s, "add_prefix_space") {
                        return Err(LoadError::PreTokenizer(
                            "ByteLevel with add_prefix_space".to_string(),
                        ));
                    }
                    if s.get("use_regex").and_then(Value::as_bool) != Some(false) {
                        return Err(LoadError::Pattern(
                            "ByteLevel's own (GPT-2) regex".to_string(),
                        ));
                    }
                    byte_level = true;
                }
                _ => return Err(bad(s)),
            }
        }
        if !byte_level {
            return Err(LoadError::PreTokenizer(
                "no ByteLevel step (not a byte-level tokenizer)".to_string(),
            ));
        }
        Rule::of_patterns(&patterns).ok_or_else(|| LoadError::Pattern(patterns.join(" ; ")))
    }

    /// Calls `f` with each token id of `text`, in order, while it returns
    /// true; `piece_cost` is told each pre-tokenized piece before it is
    /// merged and may stop there (returning false). Returns false if
    /// stopped.
    fn run(&self, text: &str, piece_cost: impl FnMut(usize) -> bool, f: impl FnMut(Id)) -> bool {
        self.run_with(text, self.ranked.as_ref(), piece_cost, f)
    }

    /// [`HfTokenizer::run`], merging with `ranked` if given, else with
    /// `hf_bpe::merge`.
    fn run_with(
        &self,
        text: &str,
        ranked: Option<&Ranked>,
        mut piece_cost: impl FnMut(usize) -> bool,
        mut f: impl FnMut(Id),
    ) -> bool {
        let mut scratch = Scratch::default();
        self.added_raw.split(text, |seg| match seg {
            Err(id) => {
                f(id);
                true
            }
            Ok(seg) => {
                let seg: Cow<'_, str> = match self.normalizer {
                    Normalizer::None => Cow::Borrowed(seg),
                    Normalizer::Nfc => crate::hf_nfc::nfc(seg),
                };
                self.added_normalized.split(&seg, |s| match s {
                    Err(id) => {
                        f(id);
                        true
                    }
                    Ok(s) => self.rule.for_each_piece(s.as_bytes(), |piece| {
                        if !piece_cost(piece.len()) {
                            return false;
                        }
                        match ranked {
                            Some(r) => r.piece(piece, &mut scratch.linear, &mut f),
                            None => self.piece(piece, &mut scratch, &mut f),
                        }
                        true
                    }),
                })
            }
        })
    }

    #[inline]
    fn piece(&self, piece: &[u8], scratch: &mut Scratch, f: &mut impl FnMut(Id)) {
        if self.ignore_merges || piece.len() == 1 {
            if let Some(id) = self.vocab.get(piece) {
                f(id);
                return;
            }
        }
        hf_bpe::merge(piece, &self.byte_ids, &self.pairs, scratch, f);
    }

    /// The tokens of `text`: `tokenizer.encode(text,
    /// add_special_tokens=False).ids` of `tokenizers`.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        let mut out = Vec::with_capacity(text.len() / 4 + 1);
        self.run(text, |_| true, |id| out.push(id));
        out
    }

    /// The number of tokens of `text` (`self.encode(text).len()`).
    pub fn count(&self, text: &str) -> usize {
        let mut n = 0;
        self.run(text, |_| true, |_| n += 1);
        n
    }

    /// [`HfTokenizer::count`] with `hf_bpe`'s heap merge even where the
    /// linear one serves this vocabulary: the engine of before, for the
    /// benchmark and as a second reference in the tests. Not part of the
    /// supported API.
    #[doc(hidden)]
    pub fn count_with_heap_merge(&self, text: &str) -> usize {
        let mut n = 0;
        self.run_with(text, None, |_| true, |_| n += 1);
        n
    }

    /// Empties the linear merge's cache of pairs of tokens (see
    /// `Tokenizer::clear_cache`); nothing to do for the heap merge. Not
    /// part of the supported API.
    #[doc(hidden)]
    pub fn clear_cache(&self) {
        if let Some(r) = &self.ranked {
            r.ranks.clear_cache();
        }
    }

    /// Whether this vocabulary is merged with the linear merge of the
    /// OpenAI encodings (tiktoken's rule: Mistral's tekken), not with the
    /// heap merge. Not part of the supported API.
    #[doc(hidden)]
    pub fn merges_linearly(&self) -> bool {
        self.ranked.is_some()
    }

    /// As [`crate::Tokenizer::count_within`]: exact while the pieces merged
    /// fit in `budget` bytes (pieces of [`LONG_PIECE`] bytes or more weigh
    /// [`LONG_PIECE_COST`] per byte), then the rest bounded by its length in bytes
    /// (each token covers at least one byte of the normalized text, and NFC
    /// lengthens a character 3 times at most (U+1D160); the bound uses the raw length
    /// times 3 when a normalizer is set).
    pub fn count_within(&self, text: &str, budget: &mut usize) -> BoundedCount {
        let mut n = 0;
        let mut left = *budget;
        let exact = self.run(
            text,
            |len| {
                // Long pieces weigh more, as in `Tokenizer::count_within`:
                // their merge costs more per byte.
                let weight = if len >= LONG_PIECE {
                    LONG_PIECE_COST
                } else {
                    1
                };
                let cost = len.saturating_mul(weight);
                if cost > left {
                    return false;
                }
                left -= cost;
                true
            },
            |_| n += 1,
        );
        if exact {
            *budget = left;
            return BoundedCount { tokens: n, exact };
        }
        *budget = 0;
        let factor = match self.normalizer {
            Normalizer::None => 1,
            Normalizer::Nfc => 3,
        };
        BoundedCount {
            tokens: text.len().saturating_mul(factor),
            exact: false,
        }
    }

    /// Bytes of *input* text one token covers at most: a text of `n` bytes
    /// has at least `n / max_token_bytes()` tokens (rounded up). The
    /// longest token (ordinary or added), times 5 with NFC, which shrinks
    /// text: a character's decomposition is at most 3 times its bytes
    /// (Hangul jamo L V T, 9 bytes, compose into one 3-byte syllable), and
    /// singletons such as U+2126 (3 bytes) become 2-byte characters; 5 is
    /// a margin over the product (4.5).
    pub fn max_token_bytes(&self) -> usize {
        let factor = match self.normalizer {
            Normalizer::None => 1,
            Normalizer::Nfc => 5,
        };
        self.max_token_bytes.max(1) * factor
    }

    /// Heap memory held by the tables, in bytes (approximate).
    pub fn memory_bytes(&self) -> usize {
        self.vocab.memory_bytes()
            + self.pairs.memory_bytes()
            + self.ranked.as_ref().map_or(0, |r| r.ranks.memory_bytes())
    }

    /// The pre-tokenization of `text` without added tokens or
    /// normalization. For the tests; not part of the supported API.
    #[doc(hidden)]
    pub fn split_pieces<'a>(&self, text: &'a str) -> Vec<&'a str> {
        let mut out = Vec::new();
        let mut i = 0;
        self.rule.for_each_piece(text.as_bytes(), |piece| {
            out.push(text.get(i..i + piece.len()).unwrap_or(""));
            i += piece.len();
            true
        });
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_map_is_gpt2s() {
        assert_eq!(byte_char(b' '), 'Ġ');
        assert_eq!(byte_char(b'\n'), 'Ċ');
        assert_eq!(byte_char(b'a'), 'a');
        assert_eq!(byte_char(0xad), 'Ń');
        let m = ByteMap::new();
        for b in 0..=255u8 {
            assert_eq!(m.byte(byte_char(b)), Some(b));
        }
    }

    pub(super) fn tiny(pre: &str) -> String {
        let mut vocab = String::new();
        for b in 0..=255u8 {
            let c = byte_char(b);
            let c = match c {
                '"' => "\\\"".to_string(),
                '\\' => "\\\\".to_string(),
                c => c.to_string(),
            };
            vocab.push_str(&alloc::format!("\"{c}\": {b}, "));
        }
        vocab.push_str("\"ab\": 256, \"abc\": 257, \"Ġab\": 258");
        alloc::format!(
            r#"{{"added_tokens": [{{"id": 300, "content": "<|x|>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}}],
            "normalizer": null, "pre_tokenizer": {pre},
            "model": {{"type": "BPE", "dropout": null, "unk_token": null, "byte_fallback": false, "ignore_merges": false,
            "vocab": {{{vocab}}}, "merges": ["a b", ["ab", "c"], "Ġ ab"]}}}}"#
        )
    }

    pub(super) const LLAMA_PRE: &str = r#"{"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}, "behavior": "Isolated", "invert": false}, {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]}"#;

    #[test]
    fn loads_and_encodes_a_tiny_vocabulary() {
        let t = HfTokenizer::from_json(tiny(LLAMA_PRE).as_bytes()).unwrap();
        assert_eq!(
            t.encode("abc ab<|x|>abx"),
            [257, 258, 300, 256, b'x' as u32]
        );
        assert_eq!(t.count("abc ab<|x|>abx"), 5);
        let mut budget = 3;
        assert!(!t.count_within("abc ab", &mut budget).exact);
    }

    #[test]
    fn added_tokens_longest_first_in_linear_time() {
        let a = Added::new(alloc::vec![
            (b"<|x|>".to_vec(), 1),
            (b"<|x|>y".to_vec(), 2),
            (b"<|".to_vec(), 3),
        ]);
        assert_eq!(a.at(b"<|x|>yz", 0), Some((6, 2)));
        assert_eq!(a.at(b"<|x|z", 0), Some((2, 3)));
        assert_eq!(a.at(b"a<|", 0), None);
        let mut ids = Vec::new();
        a.split("a<|x|><|x|>yb<", |s| {
            ids.push(s.map(|_| 0).unwrap_or_else(|id| id));
            true
        });
        assert_eq!(ids, [0, 1, 2, 0]);
    }

    #[test]
    fn refuses_what_it_does_not_support() {
        let gpt2 = r#"{"type": "ByteLevel", "add_prefix_space": false, "use_regex": true}"#;
        assert!(matches!(
            HfTokenizer::from_json(tiny(gpt2).as_bytes()),
            Err(LoadError::Pattern(_))
        ));
        let other = LLAMA_PRE.replace("{1,3}", "{1,4}");
        assert!(matches!(
            HfTokenizer::from_json(tiny(&other).as_bytes()),
            Err(LoadError::Pattern(_))
        ));
        let unigram = r#"{"model": {"type": "Unigram", "vocab": []}}"#;
        assert_eq!(
            HfTokenizer::from_json(unigram.as_bytes()).unwrap_err(),
            LoadError::Model("Unigram".to_string())
        );
        assert!(HfTokenizer::from_json(b"{").is_err());
        assert!(HfTokenizer::from_json(b"\xff").is_err());
    }
}
