//! Character classes for the pre-tokenizer.
//!
//! Every code point gets a byte of class bits, taken from an embedded
//! two-stage table (`data/unicode_classes.bin`) that was generated with the
//! `regex` crate itself (see `tests/gen/mod.rs`), so `\p{L}`, `\p{N}`, `\s`,
//! ... mean here exactly what they mean in tiktoken's regexes (Unicode 16.0,
//! the tables of regex-syntax 0.8). ASCII has its own 128-entry table.

/// `\p{L}`
pub const L: u8 = 1;
/// `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]` (o200k's "upper" set)
pub const U: u8 = 2;
/// `[\p{Ll}\p{Lm}\p{Lo}\p{M}]` (o200k's "lower" set)
pub const W: u8 = 4;
/// `\p{N}`
pub const N: u8 = 8;
/// `\s` (Unicode White_Space)
pub const S: u8 = 16;
/// `[\r\n]`
pub const NL: u8 = 32;
/// `[^\s\p{L}\p{N}]`
pub const P: u8 = 64;
/// `[^\r\n\p{L}\p{N}]`
pub const Q: u8 = 128;

const BLOCK_SHIFT: u32 = 7;
const BLOCK_MASK: usize = (1 << BLOCK_SHIFT) - 1;
const STAGE1_LEN: usize = 0x11_0000 >> BLOCK_SHIFT;

static TABLE: &[u8] = include_bytes!("../data/unicode_classes.bin");

/// Class bits of ASCII characters (the first block of the table).
static ASCII: [u8; 128] = ascii_table();

const fn ascii_table() -> [u8; 128] {
    let mut t = [0u8; 128];
    let mut i = 0;
    while i < 128 {
        t[i] = TABLE[STAGE1_LEN + i];
        i += 1;
    }
    t
}

/// Class bits of a code point.
#[inline]
pub fn class_of(cp: u32) -> u8 {
    let cp = cp as usize;
    if cp >= 0x11_0000 {
        return 0;
    }
    let block = match TABLE.get(cp >> BLOCK_SHIFT) {
        Some(&b) => b as usize,
        None => return 0,
    };
    match TABLE.get(STAGE1_LEN + (block << BLOCK_SHIFT) + (cp & BLOCK_MASK)) {
        Some(&c) => c,
        None => 0,
    }
}

/// Class bits and byte length of the character starting at byte `i` of `b`
/// (which must be valid UTF-8 and `i` a character boundary); `(0, 0)` at the
/// end of the text.
#[inline(always)]
pub fn peek(b: &[u8], i: usize) -> (u8, usize) {
    let b0 = match b.get(i) {
        Some(&x) => x,
        None => return (0, 0),
    };
    if b0 < 0x80 {
        return (ASCII[b0 as usize], 1);
    }
    peek_multibyte(b, i, b0)
}

#[inline]
fn peek_multibyte(b: &[u8], i: usize, b0: u8) -> (u8, usize) {
    let cont = |k: usize| -> u32 { b.get(i + k).map_or(0, |&x| (x & 0x3f) as u32) };
    if b0 < 0xe0 {
        let cp = ((b0 as u32 & 0x1f) << 6) | cont(1);
        (class_of(cp), 2)
    } else if b0 < 0xf0 {
        let cp = ((b0 as u32 & 0x0f) << 12) | (cont(1) << 6) | cont(2);
        (class_of(cp), 3)
    } else {
        let cp = ((b0 as u32 & 0x07) << 18) | (cont(1) << 12) | (cont(2) << 6) | cont(3);
        (class_of(cp), 4)
    }
}

/// End of the run of characters having any of `mask`'s bits, from byte `i`.
#[inline(always)]
pub fn run(b: &[u8], mut i: usize, mask: u8) -> usize {
    loop {
        let (c, n) = peek(b, i);
        if c & mask == 0 {
            return i;
        }
        i += n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_shape() {
        // stage 1, then whole blocks; every block number points inside.
        assert_eq!((TABLE.len() - STAGE1_LEN) % (BLOCK_MASK + 1), 0);
        let blocks = (TABLE.len() - STAGE1_LEN) >> BLOCK_SHIFT;
        assert!(TABLE[..STAGE1_LEN].iter().all(|&b| (b as usize) < blocks));
    }

    #[test]
    fn some_classes() {
        assert_eq!(class_of('a' as u32), L | W);
        assert_eq!(class_of('A' as u32), L | U);
        assert_eq!(class_of('5' as u32), N);
        assert_eq!(class_of(' ' as u32), S | Q);
        assert_eq!(class_of('\n' as u32), S | NL);
        assert_eq!(class_of('\r' as u32), S | NL);
        assert_eq!(class_of('.' as u32), P | Q);
        assert_eq!(class_of(0x301), U | W | P | Q); // combining acute: \p{M}, not \p{L}
        assert_eq!(class_of('中' as u32), L | U | W); // Lo
        assert_eq!(class_of(0x3000), S | Q); // ideographic space
        assert_eq!(class_of(0x85), S | Q); // NEL is \s but not [\r\n]
        assert_eq!(class_of(0x11_0000), 0);
        assert_eq!(peek("é".as_bytes(), 0), (L | W, 2));
        assert_eq!(peek("😀".as_bytes(), 0), (P | Q, 4));
        assert_eq!(peek(b"", 0), (0, 0));
    }
}
