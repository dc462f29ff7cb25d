//! Exact OpenAI BPE token counting for `cl100k_base` and `o200k_base`.
//!
//! Gives the same tokens as tiktoken's `encode_ordinary` (special tokens such
//! as `<|endoftext|>` are ordinary text here), checked token for token against
//! tiktoken-rs by the tests. Built for Envoy's Wasm runtime: no dependencies,
//! no threads, no I/O, no C; the vocabularies are embedded (`data/`), and only
//! the one asked for is turned into a hash table, by [`Tokenizer::new`].
//!
//! ```
//! use sluice_tokenizer::{Encoding, Tokenizer};
//! let enc = Encoding::for_model("gpt-4o-mini").unwrap_or(Encoding::O200kBase);
//! let tok = Tokenizer::new(enc);
//! assert_eq!(tok.count("Hello, world!"), 4);
//! ```
//!
//! How: the pre-tokenization regexes are replaced by hand-written scanners
//! with the same leftmost-first / backtracking semantics (`pretok`), on a
//! Unicode class table generated from the `regex` crate (`classes`); each
//! piece is looked up whole, else split with tiktoken's byte-pair merge
//! (`bpe`), or from 32 bytes on with a merge that gives the same tokens in
//! time linear in the piece (the backtracking encoder of GitHub's `bpe`
//! crate), so that no input (one letter repeated, random letters, runs of
//! spaces, CJK without punctuation) makes the count superlinear.

#![no_std]

extern crate alloc;

mod bpe;
mod budget;
mod classes;
#[cfg(feature = "hf")]
mod hf;
#[cfg(feature = "hf")]
mod hf_bpe;
#[cfg(feature = "hf")]
mod hf_chat;
#[cfg(feature = "hf")]
mod hf_json;
#[cfg(feature = "hf")]
mod hf_nfc;
#[cfg(feature = "hf")]
#[rustfmt::skip]
mod hf_nfc_tables;
#[cfg(feature = "hf")]
mod hf_pretok;
mod pretok;
#[cfg(feature = "hf")]
mod tekken;
#[doc(hidden)]
pub mod testing;

#[cfg(feature = "hf")]
pub use hf::{read_bundle, write_bundle, HfTokenizer, LoadError, BUNDLE_MAGIC, COMPACT_MAGIC};
#[cfg(feature = "hf")]
pub use hf_chat::{ChatTemplate, Message, GPT_OSS_DATE};

use alloc::vec::Vec;

/// An OpenAI BPE encoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// GPT-4, GPT-3.5 and the `text-embedding-3` / `ada-002` embeddings.
    Cl100kBase,
    /// GPT-4o, GPT-4.1, GPT-4.5, GPT-5, o1, o3, o4, gpt-oss.
    O200kBase,
}

impl Encoding {
    /// tiktoken's name: `"cl100k_base"` or `"o200k_base"`.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Cl100kBase => "cl100k_base",
            Encoding::O200kBase => "o200k_base",
        }
    }

    /// The encoding of a tiktoken name (`"cl100k_base"`, `"o200k_base"`).
    pub fn from_name(name: &str) -> Option<Encoding> {
        match name {
            "cl100k_base" => Some(Encoding::Cl100kBase),
            "o200k_base" => Some(Encoding::O200kBase),
            _ => None,
        }
    }

    /// The encoding OpenAI uses for a model name, or `None` if the model is
    /// not known to use one of these two encodings.
    ///
    /// First tiktoken's own table (`tiktoken/model.py` 0.12, as tiktoken-rs
    /// 0.12 carries it: exact names, then prefixes; a fine-tuned
    /// `ft:<base>:<org>:...` resolves as `<base>`; `gpt-oss-*` is
    /// `o200k_harmony`, which is `o200k_base` plus special tokens, so
    /// `o200k_base` for ordinary text), then wider prefixes for names tiktoken
    /// does not know yet: `gpt-4o`, `gpt-4.1`, `gpt-4.5`, `gpt-5`, `o1`, `o3`,
    /// `o4`, `chatgpt-4o`, `gpt-oss`, `codex-mini` → o200k; `gpt-4`,
    /// `gpt-3.5`, `gpt-35`, `text-embedding-3-` → cl100k. Names are
    /// case-sensitive, as in tiktoken. Models of older encodings (`davinci`,
    /// `text-davinci-003`, `gpt2`, ...) give `None`.
    pub fn for_model(model: &str) -> Option<Encoding> {
        use Encoding::{Cl100kBase as Cl, O200kBase as O2};
        if let Some(rest) = model.strip_prefix("ft:") {
            let base = rest.split(':').next().unwrap_or(rest);
            return Encoding::for_model(base);
        }
        // tiktoken: MODEL_TO_ENCODING (only the entries of these encodings).
        const EXACT: &[(&str, Encoding)] = &[
            ("o1", O2),
            ("o3", O2),
            ("o4-mini", O2),
            ("gpt-5", O2),
            ("gpt-4.1", O2),
            ("gpt-4o", O2),
            ("gpt-4", Cl),
            ("gpt-3.5-turbo", Cl),
            ("gpt-3.5", Cl),
            ("gpt-35-turbo", Cl),
            ("davinci-002", Cl),
            ("babbage-002", Cl),
            ("text-embedding-ada-002", Cl),
            ("text-embedding-3-small", Cl),
            ("text-embedding-3-large", Cl),
        ];
        // tiktoken: MODEL_PREFIX_TO_ENCODING, in its order, then the extra
        // prefix of tiktoken-rs; then the wider prefixes (o200k ones first,
        // so that `gpt-4o`, `gpt-4.1`, `gpt-4.5` win over `gpt-4`).
        const PREFIX: &[(&str, Encoding)] = &[
            ("o1-", O2),
            ("o3-", O2),
            ("o4-mini-", O2),
            ("gpt-5", O2),
            ("gpt-4.5-", O2),
            ("gpt-4.1-", O2),
            ("chatgpt-4o-", O2),
            ("gpt-4o-", O2),
            ("gpt-4-", Cl),
            ("gpt-3.5-turbo-", Cl),
            ("gpt-35-turbo-", Cl),
            ("gpt-oss-", O2),
            ("codex-mini", O2),
            // wider
            ("gpt-4o", O2),
            ("gpt-4.1", O2),
            ("gpt-4.5", O2),
            ("chatgpt-4o", O2),
            ("gpt-oss", O2),
            ("o1", O2),
            ("o3", O2),
            ("o4", O2),
            ("gpt-4", Cl),
            ("gpt-3.5", Cl),
            ("gpt-35", Cl),
            ("text-embedding-3-", Cl),
        ];
        if let Some(&(_, e)) = EXACT.iter().find(|(m, _)| *m == model) {
            return Some(e);
        }
        PREFIX
            .iter()
            .find(|(p, _)| model.starts_with(p))
            .map(|&(_, e)| e)
    }
}

static CL100K_BASE: &[u8] = include_bytes!("../data/cl100k_base.bin");
static O200K_BASE: &[u8] = include_bytes!("../data/o200k_base.bin");
/// The ranks of each vocabulary in byte order of their tokens, 3 bytes each
/// (generated with the rank data): `new` walks the tokens in this order to
/// build the prefix table of the linear merge without sorting them.
static CL100K_BASE_ORDER: &[u8] = include_bytes!("../data/cl100k_base.order");
static O200K_BASE_ORDER: &[u8] = include_bytes!("../data/o200k_base.order");

pub use budget::{BoundedCount, HEAVY_ASCII_PIECE, LONG_PIECE_COST};

/// A tokenizer for one encoding. Cheap to share (`Send + Sync`, immutable);
/// build it once per VM / process.
#[derive(Debug)]
pub struct Tokenizer {
    encoding: Encoding,
    ranks: bpe::Ranks,
}

impl Tokenizer {
    /// Builds the rank table of `encoding` from the embedded data (no I/O,
    /// cannot fail).
    pub fn new(encoding: Encoding) -> Tokenizer {
        let (data, order) = match encoding {
            Encoding::Cl100kBase => (CL100K_BASE, CL100K_BASE_ORDER),
            Encoding::O200kBase => (O200K_BASE, O200K_BASE_ORDER),
        };
        Tokenizer {
            encoding,
            ranks: bpe::Ranks::new(data, order),
        }
    }

    /// The encoding this tokenizer implements.
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }

    /// Calls `f` with each piece of the pre-tokenization of `text`.
    #[inline(always)]
    fn for_each_piece(&self, text: &str, f: impl FnMut(&[u8])) {
        match self.encoding {
            Encoding::Cl100kBase => pieces(text.as_bytes(), pretok::piece_end_cl100k, f),
            Encoding::O200kBase => pieces(text.as_bytes(), pretok::piece_end_o200k, f),
        }
    }

    /// The pre-tokenization of `text` (the pieces tiktoken's regex finds).
    /// For the tests; not part of the supported API.
    #[doc(hidden)]
    pub fn split_pieces<'a>(&self, text: &'a str) -> Vec<&'a str> {
        let mut out = Vec::new();
        let mut i = 0;
        self.for_each_piece(text, |piece| {
            out.push(text.get(i..i + piece.len()).unwrap_or(""));
            i += piece.len();
        });
        out
    }

    /// Number of tokens of `text` (ordinary text: special tokens are not
    /// recognised), i.e. `self.encode(text).len()`, without building the list.
    pub fn count(&self, text: &str) -> usize {
        let mut scratch = bpe::Scratch::default();
        self.count_merged_by(text, |piece, count| {
            self.ranks.merge(piece, &mut scratch, |_| *count += 1)
        })
    }

    /// Tokens of `text`: one per piece that is a token, and what `merge`
    /// adds to the count for each other piece.
    #[inline]
    fn count_merged_by(&self, text: &str, mut merge: impl FnMut(&[u8], &mut usize)) -> usize {
        let mut count = 0;
        self.for_each_piece(text, |piece| {
            if self.ranks.get(piece).is_some() {
                count += 1;
            } else {
                merge(piece, &mut count);
            }
        });
        count
    }

    /// Empties the linear merge's cache of pairs of tokens, which all calls
    /// share: for benchmarks that count one text several times (the
    /// second time would find every pair there). Not part of the supported
    /// API.
    #[doc(hidden)]
    pub fn clear_cache(&self) {
        self.ranks.clear_cache();
    }

    /// [`Tokenizer::count`] with the engine of before the linear merge:
    /// tiktoken's merge, its heap-based version for pieces of
    /// [`bpe::LARGE_PIECE`] bytes or more (O(n log n) per piece). For the bench and
    /// the tests (a second reference where tiktoken-rs fails); not part of
    /// the supported API.
    #[doc(hidden)]
    pub fn count_with_tiktoken_merge(&self, text: &str) -> usize {
        let mut parts = Vec::new();
        self.count_merged_by(text, |piece, count| {
            self.ranks.merge_short(piece, &mut parts, |_| *count += 1)
        })
    }

    /// [`Tokenizer::encode`] with tiktoken's merge (see
    /// [`Tokenizer::count_with_tiktoken_merge`]). Not part of the supported API.
    #[doc(hidden)]
    pub fn encode_with_tiktoken_merge(&self, text: &str) -> Vec<u32> {
        let mut parts = Vec::new();
        self.encode_merged_by(text, Vec::new(), |piece, out| {
            self.ranks
                .merge_short(piece, &mut parts, |t| self.push_rank(out, t))
        })
    }

    /// Length in bytes of the encoding's longest token: a text of `n` bytes
    /// has at least `n / max_token_bytes()` tokens (rounded up).
    pub fn max_token_bytes(&self) -> usize {
        self.ranks.max_len().max(1)
    }

    /// Counts `text` exactly while the work fits in `budget` (bytes of text,
    /// a long piece's bytes weighing [`LONG_PIECE_COST`] each), then bounds
    /// the rest by its length: every token of a byte-level BPE covers at
    /// least one byte, so the pieces not counted have at most as many tokens
    /// as bytes. The result is exact, or an upper bound, never less. Takes
    /// from `budget` what it used (all of it once the text did not fit).
    pub fn count_within(&self, text: &str, budget: &mut usize) -> BoundedCount {
        let bytes = text.as_bytes();
        let piece_end = match self.encoding {
            Encoding::Cl100kBase => pretok::piece_end_cl100k,
            Encoding::O200kBase => pretok::piece_end_o200k,
        };
        let mut tokens = 0;
        let mut scratch = bpe::Scratch::default();
        let mut i = 0;
        while i < bytes.len() {
            let mut e = piece_end(bytes, i);
            if e <= i || e > bytes.len() {
                e = bytes.len();
            }
            let piece = &bytes[i..e];
            let n = piece.len();
            let weight = if n >= bpe::LARGE_PIECE
                || n >= HEAVY_ASCII_PIECE && piece[n - 1].is_ascii_graphic()
            {
                LONG_PIECE_COST
            } else {
                1
            };
            let cost = piece.len().saturating_mul(weight);
            if cost > *budget {
                *budget = 0;
                return BoundedCount {
                    tokens: tokens + (bytes.len() - i),
                    exact: false,
                };
            }
            *budget -= cost;
            if self.ranks.get(piece).is_some() {
                tokens += 1;
            } else {
                self.ranks.merge(piece, &mut scratch, |_| tokens += 1);
            }
            i = e;
        }
        BoundedCount {
            tokens,
            exact: true,
        }
    }

    /// The tokens of `text`, as tiktoken's `encode_ordinary`.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        let mut scratch = bpe::Scratch::default();
        let out = Vec::with_capacity(text.len() / 4 + 1);
        self.encode_merged_by(text, out, |piece, out| {
            self.ranks
                .merge(piece, &mut scratch, |t| self.push_rank(out, t))
        })
    }

    /// `out` with the tokens of `text`: each piece that is a token, and
    /// what `merge` pushes for each other piece.
    #[inline]
    fn encode_merged_by(
        &self,
        text: &str,
        mut out: Vec<u32>,
        mut merge: impl FnMut(&[u8], &mut Vec<u32>),
    ) -> Vec<u32> {
        self.for_each_piece(text, |piece| match self.ranks.get(piece) {
            Some(r) => out.push(r),
            None => merge(piece, &mut out),
        });
        out
    }

    /// Pushes the rank of `part`, a part of a merge: every part is a token
    /// (all 256 bytes are).
    #[inline]
    fn push_rank(&self, out: &mut Vec<u32>, part: &[u8]) {
        if let Some(r) = self.ranks.get(part) {
            out.push(r);
        }
    }
}

#[inline(always)]
fn pieces(b: &[u8], piece_end: impl Fn(&[u8], usize) -> usize, mut f: impl FnMut(&[u8])) {
    pretok::tile(b, piece_end, |piece| {
        f(piece);
        true
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Rng;

    #[test]
    fn send_sync() {
        fn is<T: Send + Sync>() {}
        is::<Tokenizer>();
    }

    #[test]
    fn names() {
        for e in [Encoding::Cl100kBase, Encoding::O200kBase] {
            assert_eq!(Encoding::from_name(e.name()), Some(e));
        }
        assert_eq!(Encoding::from_name("p50k_base"), None);
    }

    #[test]
    fn count_within_is_exact_inside_the_budget_and_an_upper_bound_beyond() {
        let t = Tokenizer::new(Encoding::O200kBase);
        let text = "The committee met on Tuesday to review the proposal. ".repeat(50);
        let exact = t.count(&text);
        let mut budget = text.len();
        let within = t.count_within(&text, &mut budget);
        assert_eq!(
            within,
            BoundedCount {
                tokens: exact,
                exact: true
            }
        );
        assert_eq!(budget, 0);
        for budget in [0, 1, 10, 100, text.len() / 2, text.len() - 1] {
            let mut left = budget;
            let bounded = t.count_within(&text, &mut left);
            assert!(!bounded.exact, "budget {budget}");
            assert!(
                bounded.tokens >= exact,
                "budget {budget}: {bounded:?} < {exact}"
            );
            assert!(bounded.tokens <= text.len());
            assert_eq!(left, 0);
        }
    }

    #[test]
    fn long_pieces_weigh_more_and_stay_upper_bounds() {
        let t = Tokenizer::new(Encoding::Cl100kBase);
        let spaces = " ".repeat(1000);
        let exact = t.count(&spaces);
        let mut budget = 1000 * LONG_PIECE_COST;
        assert_eq!(t.count_within(&spaces, &mut budget).tokens, exact);
        let mut budget = 1000 * LONG_PIECE_COST - 1;
        let bounded = t.count_within(&spaces, &mut budget);
        assert_eq!(
            bounded,
            BoundedCount {
                tokens: 1000,
                exact: false
            }
        );
        assert!(bounded.tokens >= exact);
    }

    #[test]
    fn long_ascii_words_weigh_more() {
        let t = Tokenizer::new(Encoding::O200kBase);
        let word = "qwzjxkvbpqwzjxkvbpqwzjxkvbpqwzjxkvbp"; // 36 letters, one piece
        let exact = t.count(word);
        let mut budget = 36 * LONG_PIECE_COST;
        assert_eq!(
            t.count_within(word, &mut budget),
            BoundedCount {
                tokens: exact,
                exact: true
            }
        );
        let mut budget = 36 * LONG_PIECE_COST - 1;
        assert!(!t.count_within(word, &mut budget).exact);
        // Indentation of 40 spaces (then a word) weighs its length.
        let indented = alloc::format!("{}x", " ".repeat(40));
        let mut budget = indented.len();
        assert!(t.count_within(&indented, &mut budget).exact);
    }

    #[test]
    fn max_token_bytes_is_the_longest_token() {
        for e in [Encoding::Cl100kBase, Encoding::O200kBase] {
            let t = Tokenizer::new(e);
            let longest = t.max_token_bytes();
            assert!((16..=256).contains(&longest), "{e:?}: {longest}");
        }
    }

    fn merged(t: &Tokenizer, piece: &[u8], linear: bool) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut scratch = bpe::Scratch::default();
        let mut parts = Vec::new();
        if linear {
            t.ranks
                .merge_linear(piece, &mut scratch, |p| out.push(p.to_vec()));
        } else {
            t.ranks
                .merge_short(piece, &mut parts, |p| out.push(p.to_vec()));
        }
        out
    }

    /// The linear merge against tiktoken's, on byte strings (not only
    /// UTF-8: the merges work on bytes) from small alphabets, so that the
    /// backtracking is exercised: many near-tokens, many rejected pairs.
    #[test]
    fn linear_merge_is_tiktokens_merge() {
        let alphabets: [&[u8]; 9] = [
            b"ab",
            b"abc",
            b"aeinrst",
            b"abcdefghijklmnopqrstuvwxyz",
            b" \t\n",
            b" a",
            b"-=*_#",
            "中文字国人的".as_bytes(),
            &[0xe4, 0xb8, 0xad, 0x80, 0xff, 0x20, 0x61],
        ];
        let mut rng = Rng(0x1234_5678_9abc_def1);
        for e in [Encoding::Cl100kBase, Encoding::O200kBase] {
            let t = Tokenizer::new(e);
            let mut compared = 0;
            for alphabet in alphabets {
                for _ in 0..150 {
                    let max = if rng.below(4) == 0 { 600 } else { 60 };
                    let n = 2 + rng.below(max);
                    let piece: Vec<u8> = (0..n)
                        .map(|_| alphabet[rng.below(alphabet.len())])
                        .collect();
                    let want = merged(&t, &piece, false);
                    let got = merged(&t, &piece, true);
                    assert_eq!(
                        got,
                        want,
                        "{e:?}: {:?}",
                        alloc::string::String::from_utf8_lossy(&piece)
                    );
                    compared += 1;
                }
            }
            // Runs of one byte, every length up to a few times the longest token.
            for b in [b'a', b' ', b'\n', b'-', b'0', 0x80] {
                for n in 2..400 {
                    let piece = alloc::vec![b; n];
                    assert_eq!(
                        merged(&t, &piece, true),
                        merged(&t, &piece, false),
                        "{e:?}: {b} x {n}"
                    );
                    compared += 1;
                }
            }
            assert!(compared > 3000);
        }
    }

    /// The cache of pairs is shared by all calls and threads: counts with
    /// it warm (from the same text, from other texts, from other threads
    /// at the same time) equal the counts with it cold, and tiktoken's.
    #[test]
    fn the_shared_pair_cache_never_changes_a_count() {
        extern crate std;
        let mut rng = Rng(0x5eed_cace);
        let texts: Vec<alloc::string::String> = (0..40)
            .map(|i| {
                let alphabet: &[char] = if i % 2 == 0 {
                    &['a', 'b', 'c', 'd', 'e', 'n', 'r', 's', 't']
                } else {
                    &['中', '文', '字', '国', '人', '的', 'a']
                };
                (0..300 + rng.below(700))
                    .map(|_| alphabet[rng.below(alphabet.len())])
                    .collect()
            })
            .collect();
        for e in [Encoding::Cl100kBase, Encoding::O200kBase] {
            let t = Tokenizer::new(e);
            let want: Vec<usize> = texts
                .iter()
                .map(|s| t.count_with_tiktoken_merge(s))
                .collect();
            let cold: Vec<usize> = texts
                .iter()
                .map(|s| {
                    t.clear_cache();
                    t.count(s)
                })
                .collect();
            assert_eq!(cold, want, "{e:?}: cold");
            let counts =
                |t: &Tokenizer| -> Vec<usize> { texts.iter().map(|s| t.count(s)).collect() };
            assert_eq!(counts(&t), want, "{e:?}: warm");
            std::thread::scope(|scope| {
                let runs: Vec<_> = (0..4).map(|_| scope.spawn(|| counts(&t))).collect();
                for r in runs {
                    assert_eq!(r.join().ok(), Some(want.clone()), "{e:?}: threads");
                }
            });
        }
    }

    #[test]
    fn linear_merge_of_a_single_byte_and_of_nothing() {
        let t = Tokenizer::new(Encoding::O200kBase);
        assert_eq!(merged(&t, b"a", true), [b"a".to_vec()]);
        assert!(merged(&t, b"", true).is_empty());
    }

    #[test]
    fn small() {
        let t = Tokenizer::new(Encoding::Cl100kBase);
        assert_eq!(t.encode("hello world"), [15339, 1917]);
        assert_eq!(t.count(""), 0);
        let t = Tokenizer::new(Encoding::O200kBase);
        assert_eq!(t.encode("hello world"), [24912, 2375]);
    }
}
