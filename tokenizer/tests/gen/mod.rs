//! Builders for the embedded data in `data/`, shared by the generator (the
//! ignored `generate_data` test) and by the tests that check the committed
//! files are exactly what these builders produce.
//!
//! * `data/{cl100k_base,o200k_base}.bin`: the ordinary (non-special) tokens in
//!   rank order, each as one length byte followed by its bytes. Taken from
//!   tiktoken-rs (which embeds OpenAI's `.tiktoken` files); the ranks there
//!   are `0..n` with no gap, checked here.
//! * `data/{cl100k_base,o200k_base}.order`: the ranks in the byte order of
//!   their tokens, 3 bytes each, little-endian (`Tokenizer::new` walks the
//!   tokens in this order to build its prefix table without sorting).
//! * `data/unicode_classes.bin`: a two-stage table giving, for every code
//!   point, the class bits the pre-tokenizer needs (see `src/classes.rs`),
//!   computed with the `regex` crate, i.e. with the exact Unicode tables the
//!   regexes of tiktoken (fancy-regex delegating to regex) use.

use std::collections::HashMap;

/// Class bits; keep in sync with `src/classes.rs`.
pub const L: u8 = 1; // \p{L}
pub const U: u8 = 2; // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
pub const W: u8 = 4; // [\p{Ll}\p{Lm}\p{Lo}\p{M}]
pub const N: u8 = 8; // \p{N}
pub const S: u8 = 16; // \s
pub const NL: u8 = 32; // [\r\n]
pub const P: u8 = 64; // [^\s\p{L}\p{N}]
pub const Q: u8 = 128; // [^\r\n\p{L}\p{N}]

pub const BLOCK_SHIFT: u32 = 7;
pub const BLOCK: usize = 1 << BLOCK_SHIFT;
pub const STAGE1_LEN: usize = 0x11_0000 >> BLOCK_SHIFT;

/// Class bits of every code point (surrogates: 0), as the regex crate sees them.
pub fn classes_from_regex() -> Vec<u8> {
    let all: String = (0u32..0x11_0000).filter_map(char::from_u32).collect();
    let mut classes = vec![0u8; 0x11_0000];
    let props: [(u8, &str); 8] = [
        (L, r"\p{L}+"),
        (U, r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+"),
        (W, r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"),
        (N, r"\p{N}+"),
        (S, r"\s+"),
        (NL, r"[\r\n]+"),
        (P, r"[^\s\p{L}\p{N}]+"),
        (Q, r"[^\r\n\p{L}\p{N}]+"),
    ];
    for (bit, pat) in props {
        let re = regex::Regex::new(pat).unwrap();
        for m in re.find_iter(&all) {
            for c in m.as_str().chars() {
                classes[c as usize] |= bit;
            }
        }
    }
    classes
}

/// The two-stage table: `STAGE1_LEN` block numbers (one byte each), then the
/// distinct blocks of `BLOCK` class bytes.
pub fn unicode_table() -> Vec<u8> {
    let classes = classes_from_regex();
    let mut stage1 = Vec::with_capacity(STAGE1_LEN);
    let mut blocks: Vec<&[u8]> = Vec::new();
    let mut seen: HashMap<&[u8], usize> = HashMap::new();
    for chunk in classes.chunks(BLOCK) {
        let n = *seen.entry(chunk).or_insert_with(|| {
            blocks.push(chunk);
            blocks.len() - 1
        });
        assert!(n < 256, "more than 256 distinct blocks");
        stage1.push(n as u8);
    }
    let mut out = stage1;
    for b in blocks {
        out.extend_from_slice(b);
    }
    out
}

/// The ordinary tokens of `bpe`, in rank order, length-prefixed.
pub fn rank_data(bpe: &tiktoken_rs::CoreBPE) -> Vec<u8> {
    let mut out = Vec::new();
    let mut rank: u32 = 0;
    // Ordinary ranks are 0..n without gap; the first rank that does not
    // decode ends them (special tokens start higher up and are not wanted).
    while let Ok(bytes) = bpe.decode_bytes(&[rank]) {
        assert!(!bytes.is_empty() && bytes.len() < 256);
        out.push(bytes.len() as u8);
        out.extend_from_slice(&bytes);
        rank += 1;
    }
    out
}

/// The ranks of the tokens of `rank_data` (see `rank_data`) in the byte order
/// of the tokens, 3 bytes each, little-endian.
pub fn byte_order(rank_data: &[u8]) -> Vec<u8> {
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < rank_data.len() {
        let len = rank_data[i] as usize;
        tokens.push(&rank_data[i + 1..i + 1 + len]);
        i += 1 + len;
    }
    let mut order: Vec<u32> = (0..tokens.len() as u32).collect();
    order.sort_by_key(|&r| tokens[r as usize]);
    order
        .iter()
        .flat_map(|r| r.to_le_bytes().into_iter().take(3))
        .collect()
}
