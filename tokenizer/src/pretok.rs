//! Pre-tokenization: hand-written scanners that split text exactly as
//! tiktoken's regexes do (leftmost-first alternation, greedy quantifiers with
//! backtracking), each returning the end of the piece that starts at `i`.
//!
//! Every position of a text is matched by some alternative of either regex,
//! so the pieces tile the text; a scanner always returns an end past `i`.

use crate::classes::{peek, run, L, N, NL, P, Q, S, U, W};

/// `(?i:'s|'t|'re|'ve|'m|'ll|'d)` at byte `i`: its length in bytes, or 0.
///
/// Case-insensitive as the regex crate folds (Unicode simple case folding):
/// of the letters involved only `s` has a non-ASCII fold, `ſ` (U+017F).
#[inline]
pub(crate) fn contraction(b: &[u8], i: usize) -> usize {
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

/// The whitespace alternatives, for a run of `\s` starting at `i`.
/// Returns (end of the run, end of its last `[\r\n]`, start of its last
/// character, number of characters).
#[inline]
fn space_run(b: &[u8], i: usize) -> (usize, Option<usize>, usize, usize) {
    let mut j = i;
    let mut last_nl = None;
    let mut last_start = i;
    let mut count = 0;
    loop {
        let (c, n) = peek(b, j);
        if c & S == 0 {
            return (j, last_nl, last_start, count);
        }
        last_start = j;
        j += n;
        count += 1;
        if c & NL != 0 {
            last_nl = Some(j);
        }
    }
}

/// `\p{N}{1,max}` at `i` (whose first character, of length `n`, is a digit).
#[inline]
fn digits(b: &[u8], i: usize, n: usize, max: usize) -> usize {
    let mut e = i + n;
    for _ in 1..max {
        let (c, n) = peek(b, e);
        if c & N == 0 {
            break;
        }
        e += n;
    }
    e
}

/// cl100k_base, as tiktoken-rs 0.12 / tiktoken 0.12 write it:
/// `'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s`
/// (equivalent to the original
/// `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`).
pub fn piece_end_cl100k(b: &[u8], i: usize) -> usize {
    piece_end_cl100k_like::<true>(b, i, 3)
}

/// cl100k_base's pattern with `\p{N}{1,max_digits}`, as tiktoken writes it
/// today (`TRAILING_SPACE_FIRST`: `\s++$` before `\s*[\r\n]`) or as
/// written in 2023 and kept by Llama 3 and Qwen2 (`\s*[\r\n]+` first: a
/// text's trailing whitespace after a newline splits at the newline).
#[inline(always)]
pub fn piece_end_cl100k_like<const TRAILING_SPACE_FIRST: bool>(
    b: &[u8],
    i: usize,
    max_digits: usize,
) -> usize {
    let (c, n) = peek(b, i);
    let b0 = b.get(i).copied().unwrap_or(0);
    // '(?i:[sdmt]|ll|ve|re)
    if b0 == b'\'' {
        let k = contraction(b, i);
        if k != 0 {
            return i + k;
        }
    }
    // [^\r\n\p{L}\p{N}]?+\p{L}++
    if c & L != 0 {
        return run(b, i + n, L);
    }
    if c & Q != 0 {
        let (d, m) = peek(b, i + n);
        if d & L != 0 {
            return run(b, i + n + m, L);
        }
    }
    // \p{N}{1,max_digits}+
    if c & N != 0 {
        return digits(b, i, n, max_digits);
    }
    // ' ?[^\s\p{L}\p{N}]++[\r\n]*+'
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
    // Whitespace (every character left is \s).
    space_piece_end::<TRAILING_SPACE_FIRST>(b, i, n)
}

/// The whitespace alternatives at `i` (a `\s` of length `n`): the run to the
/// end of the text (`\s++$`, tried first where `TRAILING_SPACE_FIRST`), the
/// run up to its last newline (`\s*[\r\n]+`, which backtracks to it), all
/// but the run's last character, which then starts the next piece
/// (`\s+(?!\S)`), or the one character.
#[inline(always)]
fn space_piece_end<const TRAILING_SPACE_FIRST: bool>(b: &[u8], i: usize, n: usize) -> usize {
    let (j, last_nl, last_start, count) = space_run(b, i);
    if count == 0 {
        return i + n.max(1); // unreachable for valid input
    }
    if TRAILING_SPACE_FIRST && j >= b.len() {
        return j;
    }
    if let Some(k) = last_nl {
        return k;
    }
    if j >= b.len() {
        return j;
    }
    if count >= 2 {
        return last_start;
    }
    j
}

/// o200k_base's first two alternatives at `i`:
/// `[^\r\n\p{L}\p{N}]?[U]*[W]+(?i:'s|...)?` then
/// `[^\r\n\p{L}\p{N}]?[U]+[W]*(?i:'s|...)?`, trying the optional prefix
/// taken first, then not taken, as a backtracking engine does.
#[inline]
fn o200k_word<const CONTRACTIONS: bool>(b: &[u8], i: usize, c: u8, n: usize) -> Option<usize> {
    let contraction = |b: &[u8], e: usize| if CONTRACTIONS { contraction(b, e) } else { 0 };
    let starts = [i + n, i];
    let starts: &[usize] = if c & Q != 0 { &starts } else { &starts[1..] };
    // Alternative 1: the U* run backs off to the last position from which
    // W+ can match.
    for &a in starts {
        let mut q = a;
        let mut last_w = None;
        loop {
            let (d, m) = peek(b, q);
            if d & U == 0 {
                if d & W != 0 {
                    let e = run(b, q + m, W);
                    return Some(e + contraction(b, e));
                }
                break;
            }
            q += m;
            if d & W != 0 {
                last_w = Some(q);
            }
        }
        // Backing off into the U run: W+ takes the last character of the
        // run that is also W (the ones after it are not W), and only it.
        if let Some(e) = last_w {
            return Some(e + contraction(b, e));
        }
    }
    // Alternative 2.
    for &a in starts {
        let (d, m) = peek(b, a);
        if d & U != 0 {
            let q = run(b, a + m, U);
            let e = run(b, q, W);
            return Some(e + contraction(b, e));
        }
    }
    None
}

/// o200k_base:
/// `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
pub fn piece_end_o200k(b: &[u8], i: usize) -> usize {
    piece_end_o200k_like::<true, 3>(b, i)
}

/// o200k_base's pattern with or without the contraction suffixes and with
/// `\p{N}{1,MAX_DIGITS}`: `<true, 3>` is o200k_base, `<false, 1>` Mistral's
/// tekken
/// (`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`).
#[inline(always)]
pub fn piece_end_o200k_like<const CONTRACTIONS: bool, const MAX_DIGITS: usize>(
    b: &[u8],
    i: usize,
) -> usize {
    let (c, n) = peek(b, i);
    if c & (U | W | Q) != 0 {
        if let Some(e) = o200k_word::<CONTRACTIONS>(b, i, c, n) {
            return e;
        }
    }
    // \p{N}{1,MAX_DIGITS}
    if c & N != 0 {
        return digits(b, i, n, MAX_DIGITS);
    }
    // ' ?[^\s\p{L}\p{N}]+[\r\n/]*'
    let b0 = b.get(i).copied().unwrap_or(0);
    let mut p = None;
    if b0 == b' ' {
        let (d, m) = peek(b, i + 1);
        if d & P != 0 {
            p = Some(i + 1 + m);
        }
    }
    if p.is_none() && c & P != 0 {
        p = Some(i + n);
    }
    if let Some(p) = p {
        let mut e = run(b, p, P);
        while let Some(b'\r' | b'\n' | b'/') = b.get(e) {
            e += 1;
        }
        return e;
    }
    // Whitespace.
    space_piece_end::<false>(b, i, n)
}

/// Calls `f` with each piece of `b` from a scanner that gives the end of the
/// piece at `i`; the pieces tile `b`. Stops (returning false) when `f` does.
#[inline(always)]
pub(crate) fn tile(
    b: &[u8],
    piece_end: impl Fn(&[u8], usize) -> usize,
    mut f: impl FnMut(&[u8]) -> bool,
) -> bool {
    let mut i = 0;
    while i < b.len() {
        let mut e = piece_end(b, i);
        if e <= i || e > b.len() {
            // Never happens; keeps the loop finite whatever the input.
            e = b.len();
        }
        if !f(&b[i..e]) {
            return false;
        }
        i = e;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    fn split(text: &str, f: fn(&[u8], usize) -> usize) -> Vec<&str> {
        let b = text.as_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < b.len() {
            let e = f(b, i);
            out.push(&text[i..e]);
            i = e;
        }
        out
    }

    #[test]
    fn cl100k_pieces() {
        assert_eq!(
            split("Hello world's  end\n\n  x 123456 !!\n", piece_end_cl100k),
            ["Hello", " world", "'s", " ", " end", "\n\n", " ", " x", " ", "123", "456", " !!\n"]
        );
        assert_eq!(split("a  \n  ", piece_end_cl100k), ["a", "  \n  "]);
    }

    #[test]
    fn o200k_pieces() {
        assert_eq!(
            split("HelloWorld DON'T don't a/b//\n  x", piece_end_o200k),
            ["Hello", "World", " DON'T", " don't", " a", "/b", "//\n", " ", " x"]
        );
        assert_eq!(split("a  \n  ", piece_end_o200k), ["a", "  \n", "  "]);
    }
}
