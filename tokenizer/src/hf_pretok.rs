//! Hand-written pre-tokenizers for the `Split` regexes of the Hugging Face
//! byte-level BPE tokenizers Sluice supports, with the semantics of the
//! backtracking engine `tokenizers` runs them on (Oniguruma): leftmost-first
//! alternation, greedy quantifiers that give characters back.
//!
//! Each scanner returns the end of the piece starting at `i`; every
//! supported pattern matches at every position, so the pieces tile the
//! text. A loaded `tokenizer.json` whose pattern is not one of [`Rule`]'s is
//! refused when it is loaded (no regex engine at run time).

use crate::pretok::{piece_end_cl100k_like, piece_end_o200k, piece_end_o200k_like, tile};

/// Llama 3 (and 3.1–3.3): the original cl100k_base pattern of 2023 (it
/// differs from tiktoken's current one in how a text's trailing whitespace
/// is split).
pub const LLAMA3: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Qwen2, Qwen2.5, Qwen3: Llama 3's with single digits.
pub const QWEN2: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// gpt-oss (`o200k_harmony`): o200k_base's pattern.
pub const O200K: &str = r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Mistral's tekken (`tekken.json`, the `config.pattern` tiktoken runs):
/// o200k_base's without the contractions, with single digits.
pub const TEKKEN: &str = r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// DeepSeek V3 (and R1): three `Split`s (`Isolated`) applied in turn, each
/// to the pieces of the one before.
pub const DEEPSEEK_V3: [&str; 3] = [
    r"\p{N}{1,3}",
    "[\u{4e00}-\u{9fa5}\u{3040}-\u{309f}\u{30a0}-\u{30ff}]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
];

/// A supported pre-tokenization (`Split` regexes, `Isolated`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// [`LLAMA3`]
    Llama3,
    /// [`QWEN2`]
    Qwen2,
    /// [`O200K`]
    O200k,
    /// [`DEEPSEEK_V3`]
    DeepSeekV3,
    /// [`TEKKEN`]
    Tekken,
}

impl Rule {
    /// The rule of a sequence of `Split` patterns (the regex texts,
    /// JSON-unescaped).
    pub fn of_patterns(patterns: &[&str]) -> Option<Rule> {
        match patterns {
            [LLAMA3] => Some(Rule::Llama3),
            [QWEN2] => Some(Rule::Qwen2),
            [O200K] => Some(Rule::O200k),
            [TEKKEN] => Some(Rule::Tekken),
            [a, b, c] if [*a, *b, *c] == DEEPSEEK_V3 => Some(Rule::DeepSeekV3),
            _ => None,
        }
    }

    /// Calls `f` with each piece of `b`, in order; the pieces tile `b`.
    #[inline]
    pub fn for_each_piece(self, b: &[u8], f: impl FnMut(&[u8]) -> bool) -> bool {
        match self {
            Rule::Llama3 => tile(b, |b, i| piece_end_cl100k_like::<false>(b, i, 3), f),
            Rule::Qwen2 => tile(b, |b, i| piece_end_cl100k_like::<false>(b, i, 1), f),
            Rule::O200k => tile(b, piece_end_o200k, f),
            Rule::DeepSeekV3 => deepseek_v3(b, f),
            Rule::Tekken => tile(b, piece_end_o200k_like::<false, 1>, f),
        }
    }
}

// DeepSeek V3's classes, from Oniguruma (tests/hf/gen_classes.py).
const DL: u8 = 1; // \p{L}
const DM: u8 = 2; // \p{M}
const DP: u8 = 4; // \p{P}
const DS: u8 = 8; // \p{S}
const DN: u8 = 16; // \p{N}
const DW: u8 = 32; // \s

static HF_CLASSES: &[u8] = include_bytes!("../data/hf_classes.bin");
const STAGE1: usize = 0x11_0000 >> 7;

/// The code point and byte length of the character at `i` of valid UTF-8
/// (`(0, 0)` at the end).
#[inline(always)]
fn decode(b: &[u8], i: usize) -> (u32, usize) {
    let Some(&b0) = b.get(i) else {
        return (0, 0);
    };
    let cont = |k: usize| -> u32 { b.get(i + k).map_or(0, |&x| (x & 0x3f) as u32) };
    match b0 {
        0..=0x7f => (b0 as u32, 1),
        0x80..=0xdf => ((((b0 & 0x1f) as u32) << 6) | cont(1), 2),
        0xe0..=0xef => ((((b0 & 0x0f) as u32) << 12) | (cont(1) << 6) | cont(2), 3),
        _ => (
            (((b0 & 0x07) as u32) << 18) | (cont(1) << 12) | (cont(2) << 6) | cont(3),
            4,
        ),
    }
}

#[inline(always)]
fn dclass(cp: u32) -> u8 {
    let cp = cp as usize;
    let hi = match (
        HF_CLASSES.get(2 * (cp >> 7)),
        HF_CLASSES.get(2 * (cp >> 7) + 1),
    ) {
        (Some(&a), Some(&b)) => (a as usize) | ((b as usize) << 8),
        _ => return 0,
    };
    HF_CLASSES
        .get(2 * STAGE1 + (hi << 7) + (cp & 127))
        .copied()
        .unwrap_or(0)
}

/// Class bits and length of the character at `i`; `(0, 0)` at the end.
#[inline(always)]
fn dpeek(b: &[u8], i: usize) -> (u8, usize, u32) {
    let (cp, n) = decode(b, i);
    if n == 0 {
        return (0, 0, 0);
    }
    (dclass(cp), n, cp)
}

fn drun(b: &[u8], mut i: usize, mask: u8) -> usize {
    loop {
        let (c, n, _) = dpeek(b, i);
        if n == 0 || c & mask == 0 {
            return i;
        }
        i += n;
    }
}

fn is_cjk(cp: u32) -> bool {
    matches!(cp, 0x4e00..=0x9fa5 | 0x3040..=0x309f | 0x30a0..=0x30ff)
}

/// DeepSeek V3: `\p{N}{1,3}`, then the CJK runs, then the third pattern,
/// each `Isolated` (the text between matches is a piece too).
fn deepseek_v3(b: &[u8], mut f: impl FnMut(&[u8]) -> bool) -> bool {
    let mut i = 0;
    let mut gap = 0;
    while i < b.len() {
        let (c, n, _) = dpeek(b, i);
        if c & DN == 0 {
            i += n.max(1);
            continue;
        }
        if gap < i && !deepseek_cjk(&b[gap..i], &mut f) {
            return false;
        }
        let mut e = i + n;
        for _ in 0..2 {
            let (d, m, _) = dpeek(b, e);
            if m == 0 || d & DN == 0 {
                break;
            }
            e += m;
        }
        // A digit piece matches nothing of the later patterns: one piece.
        if !f(&b[i..e]) {
            return false;
        }
        i = e;
        gap = e;
    }
    gap >= b.len() || deepseek_cjk(&b[gap..], &mut f)
}

/// The second split (CJK runs), then the third on each of its pieces.
fn deepseek_cjk(b: &[u8], f: &mut impl FnMut(&[u8]) -> bool) -> bool {
    let mut i = 0;
    let mut start = 0;
    let mut in_cjk = false;
    while i < b.len() {
        let (cp, n) = decode(b, i);
        let cjk = is_cjk(cp);
        if cjk != in_cjk && i > start {
            if !deepseek_third(&b[start..i], f) {
                return false;
            }
            start = i;
        }
        in_cjk = cjk;
        i += n.max(1);
    }
    start >= b.len() || deepseek_third(&b[start..], f)
}

/// `[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
/// the characters no alternative matches at making pieces of their own.
fn deepseek_third(b: &[u8], f: &mut impl FnMut(&[u8]) -> bool) -> bool {
    let mut i = 0;
    let mut gap = 0;
    while i < b.len() {
        let e = deepseek_match(b, i);
        if e == i {
            let (_, n, _) = dpeek(b, i);
            i += n.max(1);
            continue;
        }
        if gap < i && !f(&b[gap..i]) {
            return false;
        }
        if !f(&b[i..e]) {
            return false;
        }
        i = e;
        gap = e;
    }
    gap >= b.len() || f(&b[gap..])
}

/// End of the third pattern's match at `i`, or `i` if none.
fn deepseek_match(b: &[u8], i: usize) -> usize {
    let (c, n, cp) = dpeek(b, i);
    // [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+
    if cp < 0x80 && (cp as u8).is_ascii_punctuation() {
        let mut e = i + 1;
        while b.get(e).is_some_and(|x| x.is_ascii_alphabetic()) {
            e += 1;
        }
        if e > i + 1 {
            return e;
        }
    }
    // [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
    if cp != 0x0d && cp != 0x0a && c & (DL | DP | DS) == 0 {
        let (d, m, _) = dpeek(b, i + n);
        if m > 0 && d & (DL | DM) != 0 {
            return drun(b, i + n + m, DL | DM);
        }
    }
    if c & (DL | DM) != 0 {
        return drun(b, i + n, DL | DM);
    }
    // ' ?[\p{P}\p{S}]+[\r\n]*'
    let nl = |mut e: usize| {
        while let Some(b'\r' | b'\n') = b.get(e) {
            e += 1;
        }
        e
    };
    if cp == 0x20 {
        let (d, m, _) = dpeek(b, i + 1);
        if m > 0 && d & (DP | DS) != 0 {
            return nl(drun(b, i + 1 + m, DP | DS));
        }
    }
    if c & (DP | DS) != 0 {
        return nl(drun(b, i + n, DP | DS));
    }
    // \s*[\r\n]+|\s+(?!\S)|\s+
    if c & DW == 0 {
        return i;
    }
    let mut j = i;
    let mut last_nl = None;
    let mut last_start = i;
    let mut count = 0;
    loop {
        let (d, m, x) = dpeek(b, j);
        if m == 0 || d & DW == 0 {
            break;
        }
        last_start = j;
        j += m;
        count += 1;
        if x == 0x0a || x == 0x0d {
            last_nl = Some(j);
        }
    }
    if let Some(k) = last_nl {
        return k;
    }
    if j >= b.len() || count < 2 {
        return j;
    }
    last_start
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    fn split(text: &str, rule: Rule) -> Vec<&str> {
        let mut out = Vec::new();
        let mut i = 0;
        rule.for_each_piece(text.as_bytes(), |p| {
            out.push(&text[i..i + p.len()]);
            i += p.len();
            true
        });
        out
    }

    #[test]
    fn llama3_and_qwen_pieces() {
        assert_eq!(
            split("Hello world's  end\n\n  x 123456 !!\n\n  ", Rule::Llama3),
            [
                "Hello", " world", "'s", " ", " end", "\n\n", " ", " x", " ", "123", "456",
                " !!\n\n", "  "
            ]
        );
        assert_eq!(split("a 1234", Rule::Qwen2), ["a", " ", "1", "2", "3", "4"]);
    }

    #[test]
    fn deepseek_pieces() {
        assert_eq!(
            split(
                "Hello world's 12345中文abc.txt  x\u{200d}",
                Rule::DeepSeekV3
            ),
            [
                "Hello", " world", "'s", " ", "123", "45", "中文", "abc", ".txt", " ", " x",
                "\u{200d}"
            ]
        );
    }
}
