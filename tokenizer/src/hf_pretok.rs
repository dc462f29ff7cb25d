//! Hand-written pre-tokenizers for the `Split` regexes of the Hugging Face
//! byte-level BPE tokenizers Sluice supports, with the semantics of the
//! backtracking engine `tokenizers` runs them on (Oniguruma): leftmost-first
//! alternation, greedy quantifiers that give characters back.
//!
//! Each scanner returns the end of the piece starting at `i`; every
//! supported pattern matches at every position, so the pieces tile the
//! text. A loaded `tokenizer.json` whose pattern is not one of [`Rule`]'s is
//! refused when it is loaded (no regex engine at run time).

use crate::classes::{peek, run, L, N, NL, P, Q, S};
use crate::pretok::piece_end_o200k;

/// Llama 3 (and 3.1–3.3): the original cl100k_base pattern of 2023 (it
/// differs from tiktoken's current one in how a text's trailing whitespace
/// is split).
pub const LLAMA3: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Qwen2, Qwen2.5, Qwen3: Llama 3's with single digits.
pub const QWEN2: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// gpt-oss (`o200k_harmony`): o200k_base's pattern.
pub const O200K: &str = r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// A supported pre-tokenization (one `Split` regex, `Isolated`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// [`LLAMA3`]
    Llama3,
    /// [`QWEN2`]
    Qwen2,
    /// [`O200K`]
    O200k,
}

impl Rule {
    /// The rule of a `Split` pattern (the regex text, JSON-unescaped).
    pub fn of_pattern(pattern: &str) -> Option<Rule> {
        match pattern {
            LLAMA3 => Some(Rule::Llama3),
            QWEN2 => Some(Rule::Qwen2),
            O200K => Some(Rule::O200k),
            _ => None,
        }
    }

    /// End of the piece starting at byte `i` of `b` (`i < b.len()`).
    #[inline]
    pub fn piece_end(self, b: &[u8], i: usize) -> usize {
        match self {
            Rule::Llama3 => piece_end_cl100k_2023(b, i, 3),
            Rule::Qwen2 => piece_end_cl100k_2023(b, i, 1),
            Rule::O200k => piece_end_o200k(b, i),
        }
    }
}

/// `(?i:'s|'t|'re|'ve|'m|'ll|'d)` at byte `i`: its length in bytes, or 0.
/// Case-insensitive: of the letters involved only `s` has a non-ASCII fold,
/// `ſ` (U+017F).
#[inline]
fn contraction(b: &[u8], i: usize) -> usize {
    if b.get(i) != Some(&b'\'') {
        return 0;
    }
    let c1 = b.get(i + 1).copied().unwrap_or(0);
    let c2 = b.get(i + 2).copied().unwrap_or(0);
    match c1 | 0x20 {
        b's' | b't' | b'm' | b'd' if c1.is_ascii_alphabetic() => 2,
        b'l' if c1.is_ascii_alphabetic() && c2 | 0x20 == b'l' => 3,
        b'v' | b'r' if c1.is_ascii_alphabetic() && c2 | 0x20 == b'e' => 3,
        _ if c1 == 0xc5 && c2 == 0xbf => 3, // 'ſ
        _ => 0,
    }
}

/// The original cl100k_base pattern with `\p{N}{1,max_digits}`:
/// `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
pub fn piece_end_cl100k_2023(b: &[u8], i: usize, max_digits: usize) -> usize {
    let (c, n) = peek(b, i);
    let b0 = b.get(i).copied().unwrap_or(0);
    if b0 == b'\'' {
        let k = contraction(b, i);
        if k != 0 {
            return i + k;
        }
    }
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if c & L != 0 {
        return run(b, i + n, L);
    }
    if c & Q != 0 {
        let (d, m) = peek(b, i + n);
        if d & L != 0 {
            return run(b, i + n + m, L);
        }
    }
    // \p{N}{1,max_digits}
    if c & N != 0 {
        let mut e = i + n;
        for _ in 1..max_digits {
            let (d, m) = peek(b, e);
            if d & N == 0 {
                break;
            }
            e += m;
        }
        return e;
    }
    // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
    if b0 == b' ' {
        let (d, m) = peek(b, i + 1);
        if d & P != 0 {
            let e = run(b, i + 1 + m, P);
            return run(b, e, NL);
        }
    }
    if c & P != 0 {
        let e = run(b, i + n, P);
        return run(b, e, NL);
    }
    // Whitespace: the run of \s from i.
    let mut j = i;
    let mut last_nl = None;
    let mut last_start = i;
    let mut count = 0;
    loop {
        let (d, m) = peek(b, j);
        if d & S == 0 {
            break;
        }
        last_start = j;
        j += m;
        count += 1;
        if d & NL != 0 {
            last_nl = Some(j);
        }
    }
    if count == 0 {
        return i + n.max(1); // unreachable for valid input
    }
    // \s*[\r\n]+: backtracks to the last newline of the run
    if let Some(k) = last_nl {
        return k;
    }
    // \s+(?!\S): the whole run at the end of the text, else all but its
    // last character (which then starts the next piece)
    if j >= b.len() {
        return j;
    }
    if count >= 2 {
        return last_start;
    }
    // \s+
    j
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    fn split(text: &str, rule: Rule) -> Vec<&str> {
        let b = text.as_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < b.len() {
            let e = rule.piece_end(b, i);
            out.push(&text[i..e]);
            i = e;
        }
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
}
