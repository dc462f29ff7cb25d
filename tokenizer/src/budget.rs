//! What a bounded count spends and returns: the budget weights that
//! [`crate::Tokenizer::count_within`] and the Hugging Face tokenizer's share,
//! in a module of their own so neither counter imports the other's file.

/// What [`crate::Tokenizer::count_within`] found: `tokens` is exact when `exact`,
/// else an upper bound (never less than the exact count).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BoundedCount {
    pub tokens: usize,
    pub exact: bool,
}

/// Budget bytes a byte of a long piece (at least [`crate::bpe::LARGE_PIECE`] bytes)
/// costs in [`crate::Tokenizer::count_within`]. Such pieces are merged in linear
/// time, but the worst of them (random letters without a space) still cost
/// about 3-4x more per byte than the worst short pieces (random words)
/// natively, so one budget byte buys about the same worst-case time
/// whatever the text. (Measured before the linear merge: 0.5 µs per byte
/// for long pieces, merged with a heap, against at most 0.15 µs for short
/// ones and 0.004 µs for ordinary text.)
pub const LONG_PIECE_COST: usize = 4;

/// ASCII pieces from this long (ending in a letter, digit or punctuation)
/// also weigh [`LONG_PIECE_COST`] per byte in [`crate::Tokenizer::count_within`]:
/// they stay on tiktoken's quadratic loop up to [`crate::bpe::LARGE_PIECE`] bytes,
/// and random letters in pieces of 32-127 bytes measured about 4x slower
/// per byte than random words of 1-12 letters (the slowest class per budget
/// byte with weight 1: 107 ms per 128 KiB budget natively, loaded).
/// Runs of spaces (indentation) are whole tokens or nearly, and weigh 1.
pub const HEAVY_ASCII_PIECE: usize = 32;
