//! The rank table (bytes -> rank) and tiktoken's byte-pair merge.

use alloc::collections::BinaryHeap;
use alloc::vec::Vec;
use core::cmp::Ordering;

pub type Rank = u32;
const NONE: Rank = Rank::MAX;

/// A table slot: rank (18 bits; 2^18 > 199 998, the size of the largest
/// vocabulary), the token's length (8) and offset in the data (24), and a
/// tag from the hash (14) so that most probes for other keys are rejected
/// without touching the token bytes.
const RANK_BITS: u32 = 18;
const RANK_MASK: u64 = (1 << RANK_BITS) - 1;
const LEN_SHIFT: u32 = 18;
const OFFSET_SHIFT: u32 = 26;
const TAG_SHIFT: u32 = 50;
const TAG_BITS: u32 = 64 - TAG_SHIFT;
const EMPTY: u64 = u64::MAX;

/// Pieces at least this long are merged with a heap (O(n log n)) instead of
/// tiktoken's simple O(n²) loop; both give the same result.
pub const LARGE_PIECE: usize = 128;

const K: u64 = 0x9e37_79b9_7f4a_7c15;

#[inline(always)]
fn read_u64(s: &[u8], i: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&s[i..i + 8]);
    u64::from_le_bytes(a)
}

#[inline(always)]
fn read_u32(s: &[u8], i: usize) -> u64 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&s[i..i + 4]);
    u32::from_le_bytes(a) as u64
}

/// A fast hash of a short byte string (multiplicative; the high bits are the
/// well-mixed ones).
#[inline(always)]
fn hash(s: &[u8]) -> u64 {
    let n = s.len();
    let x = if n >= 8 {
        let mut h = read_u64(s, 0);
        let mut i = 8;
        while i + 8 <= n {
            h = h.wrapping_mul(K).rotate_left(29) ^ read_u64(s, i);
            i += 8;
        }
        if i < n {
            h = h.wrapping_mul(K).rotate_left(29) ^ read_u64(s, n - 8);
        }
        h
    } else if n >= 4 {
        (read_u32(s, 0) << 32) | read_u32(s, n - 4)
    } else if n > 0 {
        ((s[0] as u64) << 16) | ((s[n / 2] as u64) << 8) | s[n - 1] as u64
    } else {
        0
    };
    let h = (x ^ ((n as u64) << 58)).wrapping_mul(K);
    (h ^ (h >> 31)).wrapping_mul(K)
}

#[derive(Debug)]
pub struct Ranks {
    data: &'static [u8],
    /// Open addressing, linear probing; see `RANK_BITS` for the slots.
    table: Vec<u64>,
    mask: usize,
    shift: u32,
    /// Rank of every two-byte token, `NONE` for the other pairs.
    pairs: Vec<Rank>,
    /// Rank of every single byte.
    bytes: [Rank; 256],
    max_len: usize,
}

impl Ranks {
    /// Builds the table from length-prefixed tokens in rank order.
    pub fn new(data: &'static [u8]) -> Ranks {
        // About the number of tokens (average length 6.4 and 7.0 bytes, plus
        // the length byte); the table is the power of two above 1.25 times
        // that: a load of about 0.76 for both vocabularies, which measured
        // faster than a sparser (bigger, so less cache-friendly) table.
        let n = data.len() / 8;
        let bits = (n + n / 4).next_power_of_two().trailing_zeros().max(4);
        let mut ranks = Ranks {
            data,
            table: alloc::vec![EMPTY; 1 << bits],
            mask: (1 << bits) - 1,
            shift: 64 - bits,
            pairs: alloc::vec![NONE; 1 << 16],
            bytes: [NONE; 256],
            max_len: 0,
        };
        let mut i = 0;
        let mut rank: u64 = 0;
        while let Some(&len) = data.get(i) {
            let start = i + 1;
            i = start + len as usize;
            let Some(t) = data.get(start..i) else { break };
            // None of this happens with the embedded data; the last check
            // keeps empty slots, which end every probe sequence.
            if len == 0
                || start >= 1 << 24
                || rank >= RANK_MASK
                || rank >= (ranks.mask as u64) * 7 / 8
            {
                break;
            }
            let h = hash(t);
            let mut idx = (h >> ranks.shift) as usize;
            while ranks.table[idx] != EMPTY {
                idx = (idx + 1) & ranks.mask;
            }
            ranks.table[idx] = ((tag(h, ranks.shift) as u64) << TAG_SHIFT)
                | ((start as u64) << OFFSET_SHIFT)
                | ((len as u64) << LEN_SHIFT)
                | rank;
            match *t {
                [a] => ranks.bytes[a as usize] = rank as Rank,
                [a, b] => ranks.pairs[((a as usize) << 8) | b as usize] = rank as Rank,
                _ => {}
            }
            ranks.max_len = ranks.max_len.max(len as usize);
            rank += 1;
        }
        ranks
    }

    /// Length in bytes of the longest token.
    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// Rank of a byte string, if it is a token.
    #[inline]
    pub fn get(&self, key: &[u8]) -> Option<Rank> {
        match key.len() {
            1 => return Some(self.bytes[key[0] as usize]).filter(|&r| r != NONE),
            2 => return self.pair(key[0], key[1]),
            n if n > self.max_len => return None,
            _ => {}
        }
        let h = hash(key);
        let want = ((tag(h, self.shift) as u64) << TAG_SHIFT) | ((key.len() as u64) << LEN_SHIFT);
        const CHECK: u64 = !((1 << TAG_SHIFT) - 1) | (0xff << LEN_SHIFT);
        let mut idx = (h >> self.shift) as usize;
        loop {
            let slot = *self.table.get(idx)?;
            if slot == EMPTY {
                return None;
            }
            if slot & CHECK == want {
                let start = ((slot >> OFFSET_SHIFT) & ((1 << 24) - 1)) as usize;
                if let Some(t) = self.data.get(start..start + key.len()) {
                    if eq(t, key) {
                        return Some((slot & RANK_MASK) as Rank);
                    }
                }
            }
            idx = (idx + 1) & self.mask;
        }
    }

    #[inline(always)]
    fn pair(&self, a: u8, b: u8) -> Option<Rank> {
        Some(self.pairs[((a as usize) << 8) | b as usize]).filter(|&r| r != NONE)
    }

    #[inline(always)]
    fn get_or_none(&self, key: &[u8]) -> Rank {
        self.get(key).unwrap_or(NONE)
    }

    /// Splits a piece that is not itself a token (at least 2 bytes long) as
    /// tiktoken does, calling `emit` with each resulting token's byte range.
    #[inline]
    pub fn merge(&self, piece: &[u8], parts: &mut Vec<(usize, Rank)>, mut emit: impl FnMut(&[u8])) {
        if piece.len() < 2 {
            emit(piece);
            return;
        }
        if piece.len() >= LARGE_PIECE {
            self.merge_large(piece, emit);
            return;
        }
        // tiktoken's `_byte_pair_merge`: `parts[i]` is (start of part i,
        // rank of part i merged with part i + 1).
        parts.clear();
        let mut min: (Rank, usize) = (NONE, usize::MAX);
        for i in 0..piece.len() - 1 {
            let r = self.pair(piece[i], piece[i + 1]).unwrap_or(NONE);
            if r < min.0 {
                min = (r, i);
            }
            parts.push((i, r));
        }
        parts.push((piece.len() - 1, NONE));
        parts.push((piece.len(), NONE));

        let rank_at = |parts: &Vec<(usize, Rank)>, i: usize| -> Rank {
            if i + 3 < parts.len() {
                self.get_or_none(&piece[parts[i].0..parts[i + 3].0])
            } else {
                NONE
            }
        };
        while min.0 != NONE {
            let i = min.1;
            if i > 0 {
                parts[i - 1].1 = rank_at(parts, i - 1);
            }
            parts[i].1 = rank_at(parts, i);
            parts.remove(i + 1);

            min = (NONE, usize::MAX);
            for (i, &(_, r)) in parts[..parts.len() - 1].iter().enumerate() {
                if r < min.0 {
                    min = (r, i);
                }
            }
        }
        for w in parts.windows(2) {
            emit(&piece[w[0].0..w[1].0]);
        }
    }

    /// The same merge with a heap, for long pieces (tiktoken-rs's
    /// `_byte_pair_merge_large`): lowest rank first, leftmost among equals.
    fn merge_large(&self, piece: &[u8], mut emit: impl FnMut(&[u8])) {
        let n = piece.len();
        // Part starting at byte i (if alive): ends at `end[i]`; `next_rank[i]`
        // is the rank of it merged with the following part.
        let mut end: Vec<usize> = (1..=n).collect();
        let mut prev: Vec<usize> = (0..n).map(|i| i.wrapping_sub(1)).collect();
        let mut next_rank: Vec<Rank> = alloc::vec![NONE; n];
        let mut initial = Vec::with_capacity(n);
        for i in 0..n - 1 {
            let r = self.pair(piece[i], piece[i + 1]).unwrap_or(NONE);
            if r != NONE {
                next_rank[i] = r;
                initial.push(Merge { rank: r, start: i });
            }
        }
        let mut heap = BinaryHeap::from(initial);
        while let Some(Merge { rank, start }) = heap.pop() {
            if rank != next_rank[start] {
                continue; // stale
            }
            let right = end[start];
            let right_end = end[right];
            end[start] = right_end;
            next_rank[right] = NONE;
            if right_end < n {
                prev[right_end] = start;
                let r = self.get_or_none(&piece[start..end[right_end]]);
                next_rank[start] = r;
                if r != NONE {
                    heap.push(Merge { rank: r, start });
                }
            } else {
                next_rank[start] = NONE;
            }
            if start > 0 {
                let p = prev[start];
                let r = self.get_or_none(&piece[p..right_end]);
                next_rank[p] = r;
                if r != NONE {
                    heap.push(Merge { rank: r, start: p });
                }
            }
        }
        let mut i = 0;
        while i < n {
            emit(&piece[i..end[i]]);
            i = end[i];
        }
    }
}

#[inline(always)]
fn tag(h: u64, shift: u32) -> u32 {
    ((h >> (shift - TAG_BITS)) as u32) & ((1 << TAG_BITS) - 1)
}

/// Equality of two slices of the same length (short: no call to memcmp).
#[inline(always)]
fn eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() >= 8 {
        let n = a.len();
        let mut i = 0;
        while i + 8 <= n {
            if read_u64(a, i) != read_u64(b, i) {
                return false;
            }
            i += 8;
        }
        return read_u64(a, n - 8) == read_u64(b, n - 8);
    }
    if a.len() >= 4 {
        let n = a.len();
        return read_u32(a, 0) == read_u32(b, 0) && read_u32(a, n - 4) == read_u32(b, n - 4);
    }
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

#[derive(PartialEq, Eq)]
struct Merge {
    rank: Rank,
    start: usize,
}

impl Ord for Merge {
    // BinaryHeap pops the greatest: make that the lowest rank, then the
    // lowest start.
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .rank
            .cmp(&self.rank)
            .then_with(|| other.start.cmp(&self.start))
    }
}

impl PartialOrd for Merge {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
