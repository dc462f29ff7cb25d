//! The rank table (bytes -> rank) and tiktoken's byte-pair merge.

use alloc::borrow::Cow;
use alloc::collections::BinaryHeap;
use alloc::vec::Vec;
use core::cmp::Reverse;
use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

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
/// tiktoken's simple O(n²) loop, where tiktoken's merge is used (the engine
/// of before [`Ranks::merge_linear`], and pairs of long tokens); both give
/// the same result.
pub const LARGE_PIECE: usize = 128;

/// Pieces of non-ASCII text (ending in a multi-byte character) at least
/// this long go to the linear merge ([`Ranks::merge_linear`]), all pieces
/// from [`LARGE_PIECE`] bytes on; the others to tiktoken's simple loop,
/// faster on them. Measured (o200k, native): with 8 rather than 32 bytes
/// Arabic words count about 1.35x faster, Hindi 1.1-1.7x, CJK the same (and
/// 3x faster than with 128, CJK sentences being long pieces); on random
/// ASCII letters the linear merge is slower than the simple loop up to about
/// 128 bytes, hence ASCII pieces stay on the loop until then (re-measured
/// 2026-12-06 with [`Ranks::merge_small`]: on words of 24 to 120 random
/// letters the linear merge runs at 0.36-0.46x of it).
pub const LINEAR_PIECE: usize = 8;

/// Pieces at least this long (and shorter than [`LARGE_PIECE`]) are
/// merged by [`Ranks::merge_small`], the shorter ones by tiktoken's loop
/// as tiktoken writes it, cheaper to set up (the two measured even at
/// about 9-13 bytes of random letters).
const SMALL_PIECE: usize = 12;

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
    /// The tokens, length-prefixed, in rank order: embedded (OpenAI's
    /// encodings) or built from a loaded vocabulary (Mistral's tekken).
    data: Cow<'static, [u8]>,
    /// Open addressing, linear probing; see `RANK_BITS` for the slots.
    table: Vec<u64>,
    mask: usize,
    shift: u32,
    /// One bit per hash value of the tokens of 3 bytes or more (8 bits
    /// per slot of `table`, 10 to 20 per token; `filter_shift` selects
    /// hash bits that neither the slot index nor the tag uses): most
    /// look-ups of strings that are not tokens, which are most of the
    /// merges' look-ups in random text, stop at this bit (a table of
    /// 128-256 KiB, mostly in cache) instead of walking the probe sequence
    /// to an empty slot (about 9 slots at the table's load, in a table of
    /// megabytes).
    filter: Vec<u64>,
    filter_shift: u32,
    filter_mask: usize,
    /// Per pair of bytes: the rank of the two-byte token (`PAIR_NONE` if
    /// it is none), and above it (`BLOCK_SHIFT`) one more than the index
    /// of the pair's block of [`Trigrams`] (0 if no token of three bytes
    /// begins with the pair).
    pairs: Vec<u32>,
    /// Rank of every single byte.
    bytes: [Rank; 256],
    /// The tokens of three bytes, the most frequent look-up of the merges
    /// of short pieces, without hashing (see [`Trigrams`]).
    trigrams: Trigrams,
    /// A bit filter of the tokens of four bytes alone (8 to 16 bits per
    /// token, 16-32 KiB: mostly in the first-level cache), with a cheaper
    /// hash than `filter`'s: most look-ups of four bytes are of strings
    /// that are no token.
    quad_filter: Vec<u64>,
    quad_shift: u32,
    max_len: usize,
    /// The prefixes of the tokens, for the linear merge of long pieces:
    /// every string of 3 bytes or more that is a proper prefix of some
    /// token, with the longest token that is a prefix of it (see
    /// [`Prefix`]). Open addressing, linear probing, `EMPTY` for none.
    prefixes: Vec<u64>,
    pmask: usize,
    pshift: u32,
    /// One bit per hash value of the prefixes, as `filter` for the
    /// tokens: the walk of a longest match ends with a look-up of a string
    /// that begins no token, which this stops (4 bits per slot of
    /// `prefixes`, about 7 per prefix).
    pfilter: Vec<u64>,
    pfilter_shift: u32,
    pfilter_mask: usize,
    /// One bit per byte pair: some token of 3 bytes or more starts with it.
    extends: Vec<u64>,
    /// Compatibility of pairs of ranks (see [`Ranks::compatible`]), shared
    /// by all calls: an entry is `(key + 1) << 1 | compatible`, 0 when
    /// empty. Each entry is one atomic word holding its own key, so
    /// concurrent callers at worst overwrite each other's entries (a
    /// miss later), never read a wrong answer; it is a memo of a pure
    /// function, so what it holds never changes a result.
    compatible: Vec<AtomicU64>,
    /// The last merge of each token (see [`Ranks::split_of`]), filled on
    /// first use and shared by all calls like `compatible`: 0 while not
    /// known, else a [`Split`] entry.
    splits: Vec<AtomicU64>,
}

/// A slot of the prefix table: the longest token that is a prefix of the
/// key: its rank (18 bits) and length (8); the key's length (8) and offset
/// of a token that starts with it in the data (21); a tag from the hash (9).
const P_TOKEN_LEN_SHIFT: u32 = 18;
const P_LEN_SHIFT: u32 = 26;
const P_OFFSET_SHIFT: u32 = 34;
const P_OFFSET_BITS: u32 = 21;
const P_TAG_SHIFT: u32 = 55;
const P_TAG_BITS: u32 = 64 - P_TAG_SHIFT;

impl Ranks {
    /// Builds the table from length-prefixed tokens in rank order, and
    /// `order`, their ranks in byte order (3 bytes each, little-endian; if
    /// it is not that, the order is computed here instead, slower).
    pub fn new(data: &'static [u8], order: &[u8]) -> Ranks {
        // About the number of tokens (average length 6.4 and 7.0 bytes, plus
        // the length byte).
        Self::build(Cow::Borrowed(data), order, data.len() / 8).0
    }

    #[cfg(feature = "hf")]
    /// Builds the table of a loaded vocabulary: its tokens in rank order
    /// (the ranks are `0..tokens.len()`). `None` where the tables cannot
    /// hold it: a token empty or longer than 255 bytes, a byte that is not
    /// a token, a token listed twice, 2^18 tokens or more, or 2 MiB of
    /// token bytes or more (the offsets of the prefix table).
    pub fn from_tokens<'a>(tokens: impl ExactSizeIterator<Item = &'a [u8]>) -> Option<Ranks> {
        let n = tokens.len();
        if n as u64 >= RANK_MASK {
            return None;
        }
        let mut data = Vec::new();
        for t in tokens {
            if t.is_empty() || t.len() > 255 {
                return None;
            }
            data.push(t.len() as u8);
            data.extend_from_slice(t);
        }
        if data.len() >= 1 << P_OFFSET_BITS {
            return None;
        }
        let (ranks, complete) = Self::build(Cow::Owned(data), &[], n);
        let distinct = ranks
            .tokens()
            .enumerate()
            .all(|(r, t)| ranks.get(t) == Some(r as Rank));
        (complete && distinct && ranks.bytes.iter().all(|&r| r != NONE)).then_some(ranks)
    }

    #[cfg(any(test, feature = "hf"))]
    /// The tokens in rank order.
    fn tokens(&self) -> impl Iterator<Item = &[u8]> + '_ {
        let data: &[u8] = &self.data;
        let mut i = 0;
        core::iter::from_fn(move || {
            let len = *data.get(i)? as usize;
            let t = data.get(i + 1..i + 1 + len)?;
            i += 1 + len;
            Some(t)
        })
    }

    /// The tables of about `n` tokens; whether every token went in.
    fn build(data: Cow<'static, [u8]>, order: &[u8], n: usize) -> (Ranks, bool) {
        // The table is the power of two above 1.25 times the tokens: a load
        // of about 0.76 for both OpenAI vocabularies, which measured faster
        // than a sparser (bigger, so less cache-friendly) table.
        let bits = (n + n / 4).next_power_of_two().trailing_zeros().max(4);
        let mut ranks = Ranks {
            data: Cow::Borrowed(&[]),
            table: alloc::vec![EMPTY; 1 << bits],
            mask: (1 << bits) - 1,
            shift: 64 - bits,
            filter: alloc::vec![0; 1 << (bits + 3 - 6)],
            filter_shift: 64 - bits - TAG_BITS - (bits + 3),
            filter_mask: (1 << (bits + 3)) - 1,
            pairs: alloc::vec![PAIR_NONE; 1 << 16],
            bytes: [NONE; 256],
            trigrams: Trigrams::default(),
            quad_filter: Vec::new(),
            quad_shift: 0,
            max_len: 0,
            prefixes: Vec::new(),
            pmask: 0,
            pshift: 0,
            pfilter: Vec::new(),
            pfilter_shift: 0,
            pfilter_mask: 0,
            extends: alloc::vec![0; 1 << 10],
            compatible: (0..1 << CACHE_BITS).map(|_| AtomicU64::new(0)).collect(),
            splits: Vec::new(),
        };
        let mut i = 0;
        let mut rank: u64 = 0;
        let mut complete = true;
        let mut three = Vec::new();
        let mut four = Vec::new();
        while let Some(&len) = data.get(i) {
            let start = i + 1;
            i = start + len as usize;
            let Some(t) = data.get(start..i) else {
                complete = false;
                break;
            };
            // None of this happens with the embedded data; the last check
            // keeps empty slots, which end every probe sequence.
            if len == 0
                || start >= 1 << 24
                || rank >= RANK_MASK
                || rank >= (ranks.mask as u64) * 7 / 8
            {
                complete = false;
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
                [a, b, c] => three.push(((a, b, c), rank as Rank)),
                [a, b, c, d] => four.push(u32::from_le_bytes([a, b, c, d])),
                _ => {
                    let f = ranks.filter_bit(h);
                    set_bit(&mut ranks.filter, f);
                }
            }
            ranks.max_len = ranks.max_len.max(len as usize);
            rank += 1;
        }
        ranks.trigrams = Trigrams::new(&three, &mut ranks.pairs);
        if ranks.trigrams.hashed {
            for &((a, b, c), _) in &three {
                let f = ranks.filter_bit(hash(&[a, b, c]));
                set_bit(&mut ranks.filter, f);
            }
        }
        let quad_bits = (four.len() * 8).next_power_of_two().max(1 << 12);
        ranks.quad_filter = alloc::vec![0; quad_bits / 64];
        ranks.quad_shift = 64 - quad_bits.trailing_zeros();
        for &k in &four {
            let f = ranks.quad_bit(k);
            set_bit(&mut ranks.quad_filter, f);
        }
        ranks.data = data;
        ranks.splits = (0..rank).map(|_| AtomicU64::new(0)).collect();
        // About one prefix of 3 bytes or more per token (measured: 1.49 per
        // token for cl100k_base, 1.44 for o200k_base): a table of the power
        // of two above 2.5 times the tokens, doubled until the prefixes fit
        // in at most 7/8 of it (which never happens with the embedded data).
        let mut bits = (rank as usize * 5 / 2)
            .next_power_of_two()
            .trailing_zeros()
            .max(4);
        let mut order: Option<&[u8]> = Some(order);
        loop {
            match ranks.build_prefixes(bits, order) {
                Built::Yes => break,
                Built::TooFull if bits < 30 => bits += 1,
                Built::TooFull => {
                    complete = false;
                    break;
                }
                Built::NotInOrder => order = None,
            }
        }
        (ranks, complete)
    }

    /// Fills the prefix table with `1 << bits` slots; false if it got too
    /// full (the caller tries again with a bigger table).
    ///
    /// The tokens are visited in byte order, as a walk of their trie: a
    /// prefix of a token that is longer than what it shares with the token
    /// before it is new (no earlier token starts with it), and is not a
    /// token (it would sort between the two); so each prefix is inserted
    /// once, without looking it up, and the longest token that is a prefix
    /// of it is known from the walk. (Looking every prefix up instead made
    /// `new` about ten times slower.)
    fn build_prefixes(&mut self, bits: u32, order: Option<&[u8]>) -> Built {
        let size = 1usize << bits;
        self.prefixes = alloc::vec![EMPTY; size];
        self.pmask = size - 1;
        self.pshift = 64 - bits;
        let filter_bits = bits + 2;
        self.pfilter = alloc::vec![0; 1 << (filter_bits - 6)];
        self.pfilter_shift = (64 - bits - P_TAG_BITS).saturating_sub(filter_bits);
        self.pfilter_mask = (1 << filter_bits) - 1;
        let data: &[u8] = &self.data;
        // (offset, length) of every token, in rank order.
        let mut tokens: Vec<(u32, u32)> = Vec::new();
        let mut i = 0;
        while let Some(&len) = data.get(i) {
            let start = i + 1;
            i = start + len as usize;
            if i > data.len() || tokens.len() as u64 >= RANK_MASK {
                break;
            }
            tokens.push((start as u32, len as u32));
        }
        let bytes = |t: u32| -> &[u8] {
            match tokens.get(t as usize) {
                Some(&(start, len)) => data
                    .get(start as usize..(start + len) as usize)
                    .unwrap_or(&[]),
                None => &[],
            }
        };
        let order: Vec<u32> = match order {
            Some(o) if o.len() == tokens.len() * 3 => o
                .chunks_exact(3)
                .map(|c| c[0] as u32 | (c[1] as u32) << 8 | (c[2] as u32) << 16)
                .collect(),
            _ => {
                // Sorting here takes about as long as all the rest of `new`.
                let mut o: Vec<u32> = (0..tokens.len() as u32).collect();
                o.sort_unstable_by(|&a, &b| bytes(a).cmp(bytes(b)));
                o
            }
        };
        // Along the walk, for each depth k of the current token: the longest
        // token that is a prefix of its first k bytes, and whether those k
        // bytes are in the table yet.
        let mut best = [(0usize, NONE); 257];
        let mut inserted = [false; 257];
        let mut prev: &[u8] = &[];
        let mut first = true;
        let mut filled = 0usize;
        for &rank in &order {
            let t = bytes(rank);
            let n = t.len();
            if n == 0 || n > 255 {
                continue;
            }
            let common = prev.iter().zip(t).take_while(|(a, b)| a == b).count();
            // Strictly increasing, so `order` is a permutation of the ranks
            // (the walk relies on it).
            let increasing = match (prev.get(common), t.get(common)) {
                (None, Some(_)) => true, // prev is a proper prefix of t
                (Some(a), Some(b)) => b > a,
                _ => false,
            };
            if !increasing && !first {
                return Built::NotInOrder;
            }
            first = false;
            for k in common + 1..=n {
                best[k] = if k == n { (n, rank) } else { best[k - 1] };
                inserted[k] = false;
            }
            if n >= 3 {
                let w = ((t[0] as usize) << 8) | t[1] as usize;
                self.extends[w >> 6] |= 1 << (w & 63);
            }
            let start = tokens[rank as usize].0 as u64;
            for k in 3..n {
                if inserted[k] {
                    continue;
                }
                if start >= 1 << P_OFFSET_BITS || filled >= size / 8 * 7 {
                    return Built::TooFull;
                }
                let h = hash(&t[..k]);
                let f = self.pfilter_bit(h);
                set_bit(&mut self.pfilter, f);
                let mut idx = (h >> self.pshift) as usize;
                while self.prefixes[idx] != EMPTY {
                    idx = (idx + 1) & self.pmask;
                }
                self.prefixes[idx] =
                    (((h >> (self.pshift - P_TAG_BITS)) & ((1 << P_TAG_BITS) - 1)) << P_TAG_SHIFT)
                        | (start << P_OFFSET_SHIFT)
                        | ((k as u64) << P_LEN_SHIFT)
                        | ((best[k].0 as u64) << P_TOKEN_LEN_SHIFT)
                        | best[k].1 as u64;
                inserted[k] = true;
                filled += 1;
            }
            prev = t;
        }
        Built::Yes
    }

    #[inline(always)]
    fn prefix_slot_is(&self, slot: u64, h: u64, key: &[u8]) -> bool {
        let want = ((h >> (self.pshift - P_TAG_BITS)) << P_TAG_SHIFT)
            | ((key.len() as u64) << P_LEN_SHIFT);
        const CHECK: u64 = !((1 << P_TAG_SHIFT) - 1) | (0xff << P_LEN_SHIFT);
        if slot & CHECK != want & CHECK {
            return false;
        }
        let start = ((slot >> P_OFFSET_SHIFT) & ((1 << P_OFFSET_BITS) - 1)) as usize;
        match self.data.as_ref().get(start..start + key.len()) {
            Some(t) => eq(t, key),
            None => false,
        }
    }

    /// The longest token that is a prefix of `key`, if `key` (3 bytes or
    /// more) is a proper prefix of some token.
    #[inline]
    fn prefix(&self, key: &[u8]) -> Option<(usize, Rank)> {
        let h = hash(key);
        if !bit_is_set(&self.pfilter, self.pfilter_bit(h)) {
            return None;
        }
        let mut idx = (h >> self.pshift) as usize;
        loop {
            let slot = *self.prefixes.get(idx)?;
            if slot == EMPTY {
                return None;
            }
            if self.prefix_slot_is(slot, h, key) {
                return Some(Prefix(slot).token());
            }
            idx = (idx + 1) & self.pmask;
        }
    }

    /// The longest token at the start of `b` (not empty): (length, rank).
    #[inline]
    fn longest_match(&self, b: &[u8]) -> (usize, Rank) {
        let b0 = b[0];
        let mut best = (1, self.bytes[b0 as usize]);
        let Some(&b1) = b.get(1) else { return best };
        if let Some(r) = self.pair(b0, b1) {
            best = (2, r);
        }
        let w = ((b0 as usize) << 8) | b1 as usize;
        if self.extends[w >> 6] & (1 << (w & 63)) == 0 {
            return best;
        }
        let mut k = 3;
        while k <= b.len() {
            match self.prefix(&b[..k]) {
                Some(t) => best = t,
                None => {
                    if let Some(r) = self.get(&b[..k]) {
                        best = (k, r);
                    }
                    break;
                }
            }
            k += 1;
        }
        best
    }

    /// The longest token that is a proper prefix of the token `b` (at
    /// least 2 bytes long): (length, rank).
    #[inline]
    fn shorter_prefix(&self, b: &[u8]) -> (usize, Rank) {
        let k = b.len() - 1;
        if k >= 3 {
            if let Some(t) = self.prefix(&b[..k]) {
                return t;
            }
        }
        if k >= 2 {
            if let Some(r) = self.pair(b[0], b[1]) {
                return (2, r);
            }
        }
        (1, self.bytes[b[0] as usize])
    }

    #[cfg(feature = "hf")]
    /// Heap memory held by the tables, in bytes (the token data too where
    /// it is not embedded).
    pub fn memory_bytes(&self) -> usize {
        let data = match &self.data {
            Cow::Borrowed(_) => 0,
            Cow::Owned(d) => d.capacity(),
        };
        data + (self.table.capacity()
            + self.filter.capacity()
            + self.quad_filter.capacity()
            + self.prefixes.capacity()
            + self.pfilter.capacity()
            + self.extends.capacity())
            * 8
            + self.pairs.capacity() * 4
            + self.trigrams.memory_bytes()
            + (self.compatible.capacity() + self.splits.capacity()) * 8
    }

    /// Empties the compatibility cache, so that a benchmark counting the
    /// same text again measures it cold.
    pub fn clear_cache(&self) {
        for e in self.compatible.iter().chain(&self.splits) {
            e.store(0, Relaxed);
        }
    }

    /// Length in bytes of the longest token.
    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// Rank of a byte string, if it is a token.
    #[inline]
    pub fn get(&self, key: &[u8]) -> Option<Rank> {
        self.get_inline(key)
    }

    /// [`Ranks::get`], its short cases inlined (the merge of short
    /// pieces), the hash look-up not.
    #[inline(always)]
    fn get_inline(&self, key: &[u8]) -> Option<Rank> {
        match *key {
            [a] => Some(self.bytes[a as usize]).filter(|&r| r != NONE),
            [a, b] => self.pair(a, b),
            _ => self.get_long(key),
        }
    }

    /// [`Ranks::get_inline`] of a key of three bytes or more (what the
    /// merge of short pieces looks up: two parts, one merged).
    #[inline(always)]
    fn get_long(&self, key: &[u8]) -> Option<Rank> {
        match *key {
            [a, b, c] => {
                let block = self.pairs[((a as usize) << 8) | b as usize] >> BLOCK_SHIFT;
                if block != 0 {
                    self.trigrams.get(block as usize - 1, c)
                } else if self.trigrams.hashed {
                    self.get_hashed(key)
                } else {
                    None
                }
            }
            [a, b, c, d] => {
                if bit_is_set(
                    &self.quad_filter,
                    self.quad_bit(u32::from_le_bytes([a, b, c, d])),
                ) {
                    self.get_hashed(key)
                } else {
                    None
                }
            }
            _ if key.len() > self.max_len => None,
            _ => self.get_hashed(key),
        }
    }

    /// The look-up of `key` in the hash table (behind `filter`, but for
    /// keys of four bytes, whose filter is `quad_filter`).
    #[inline(never)]
    fn get_hashed(&self, key: &[u8]) -> Option<Rank> {
        let h = hash(key);
        if key.len() != 4 && !bit_is_set(&self.filter, self.filter_bit(h)) {
            return None;
        }
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
                if let Some(t) = self.data.as_ref().get(start..start + key.len()) {
                    if eq(t, key) {
                        return Some((slot & RANK_MASK) as Rank);
                    }
                }
            }
            idx = (idx + 1) & self.mask;
        }
    }

    /// The bit of `pfilter` for a hash.
    #[inline(always)]
    fn pfilter_bit(&self, h: u64) -> usize {
        (h >> self.pfilter_shift) as usize & self.pfilter_mask
    }

    /// The bit of `quad_filter` for a key of four bytes.
    #[inline(always)]
    fn quad_bit(&self, key: u32) -> usize {
        ((key as u64 | 1 << 40).wrapping_mul(K) >> self.quad_shift) as usize
    }

    /// The bit of `filter` for a hash.
    #[inline(always)]
    fn filter_bit(&self, h: u64) -> usize {
        (h >> self.filter_shift) as usize & self.filter_mask
    }

    #[inline(always)]
    fn pair(&self, a: u8, b: u8) -> Option<Rank> {
        let r = self.pairs[((a as usize) << 8) | b as usize] & PAIR_NONE;
        (r != PAIR_NONE).then_some(r)
    }

    #[inline(always)]
    fn get_or_none(&self, key: &[u8]) -> Rank {
        self.get(key).unwrap_or(NONE)
    }

    /// Splits a piece that is not itself a token as tiktoken does, calling
    /// `emit` with each resulting token's bytes: tiktoken's merge for short
    /// pieces (its loop as written under [`SMALL_PIECE`] bytes,
    /// [`Ranks::merge_small`] above), the linear one
    /// ([`Ranks::merge_linear`]) for long ones (see [`LINEAR_PIECE`]).
    #[inline]
    pub fn merge(&self, piece: &[u8], scratch: &mut Scratch, emit: impl FnMut(&[u8])) {
        let n = piece.len();
        if n >= LARGE_PIECE || n >= LINEAR_PIECE && piece[n - 1] >= 0x80 {
            self.merge_linear(piece, scratch, emit);
        } else if n >= SMALL_PIECE {
            if n < 32 {
                self.merge_small::<32, 4>(piece, emit);
            } else if n < 64 {
                self.merge_small::<64, 8>(piece, emit);
            } else {
                self.merge_small::<128, 16>(piece, emit);
            }
        } else {
            self.merge_short(piece, &mut scratch.parts, emit);
        }
    }

    /// tiktoken's simple loop on a piece of fewer than `N` bytes (`N` a
    /// power of two up to 128, `G = N / 8` groups), the same merges in the
    /// same order, with the parts kept in place: part `i` starts at byte
    /// `i` for as long as it lives (a merged part is marked `DEAD`, not
    /// removed), so the lowest part's start is its index (no search for
    /// it, no move of the later parts), and neighbours are found by links.
    /// The minimum is kept in two levels: the lowest part of each group of
    /// 8, and of each quarter of the groups. A merge changes at most three
    /// parts, so at most three groups and quarters are recomputed, where a
    /// scan of all the parts cost a third of the instructions on long
    /// random words. (Scalar: lows stored one by one and then read as a
    /// vector stalled on the stores, measured 5-20 % slower.)
    #[inline]
    fn merge_small<const N: usize, const G: usize>(
        &self,
        piece: &[u8],
        mut emit: impl FnMut(&[u8]),
    ) {
        let m = N - 1;
        let n = piece.len().min(m);
        let mut parts = [[DEAD; 8]; G];
        let mut lows = [DEAD; G];
        let mut next = [0u8; N];
        let mut prev = [0u8; N];
        next.copy_from_slice(&NEXT[..N]);
        prev.copy_from_slice(&PREV[..N]);
        let flat = parts.as_flattened_mut();
        for (i, (w, p)) in piece.windows(2).zip(flat.iter_mut()).enumerate() {
            *p = small_part(i, self.pair(w[0], w[1]).unwrap_or(NONE));
        }
        if let Some(last) = flat.get_mut(n.wrapping_sub(1)) {
            *last = small_part(n - 1, NONE);
        }
        for (low, group) in lows.iter_mut().zip(&parts) {
            *low = min8(group);
        }
        let mut tops = [DEAD; 4];
        for (t, quad) in tops.iter_mut().zip(lows.chunks_exact(G / 4)) {
            *t = quad.iter().copied().min().unwrap_or(DEAD);
        }
        loop {
            let lowest = tops[0].min(tops[1]).min(tops[2].min(tops[3]));
            if lowest >> START_BITS >= SMALL_NO_MERGE {
                break;
            }
            let i = lowest as usize & m;
            let j = next[i] as usize & m;
            let k = next[j] as usize;
            parts[j >> 3][j & 7] = DEAD;
            next[i] = k as u8;
            parts[i >> 3][i & 7] = small_part(
                i,
                if k < n {
                    prev[k & m] = i as u8;
                    let key = piece.get(i..next[k & m] as usize).unwrap_or(&[]);
                    self.get_long(key).unwrap_or(NONE)
                } else {
                    NONE
                },
            );
            let p = prev[i] as usize & m;
            if i > 0 {
                let key = piece.get(p..k).unwrap_or(&[]);
                parts[p >> 3][p & 7] = small_part(p, self.get_long(key).unwrap_or(NONE));
            }
            for g in [p >> 3, i >> 3, j >> 3] {
                let g = g & (G - 1);
                lows[g] = min8(&parts[g]);
                let q = g / (G / 4);
                let quad = &lows[q * (G / 4)..(q + 1) * (G / 4)];
                tops[q & 3] = quad.iter().copied().fold(DEAD, i32::min);
            }
        }
        let mut i = 0;
        while i < n {
            let j = next[i & m] as usize;
            emit(piece.get(i..j).unwrap_or(&[]));
            i = j;
        }
    }

    /// tiktoken's merge itself: its simple loop (quadratic, fastest on short
    /// pieces), and from [`LARGE_PIECE`] bytes on its heap-based version
    /// (O(n log n)). The engine before [`Ranks::merge_linear`]; still used
    /// for pieces under [`SMALL_PIECE`] bytes, to check pairs of tokens, and
    /// as the reference of [`Ranks::merge_small`].
    #[inline]
    pub fn merge_short(&self, piece: &[u8], parts: &mut Vec<Part>, mut emit: impl FnMut(&[u8])) {
        if piece.len() < 2 {
            emit(piece);
            return;
        }
        if piece.len() >= LARGE_PIECE {
            self.merge_large(piece, emit);
            return;
        }
        self.merge_parts(piece, parts, |_, _| false);
        for w in parts.windows(2) {
            emit(&piece[start(w[0])..start(w[1])]);
        }
    }

    /// The linear merge for long pieces: the backtracking encoder of GitHub's
    /// `bpe` crate (rust-gems, "So many tokens, so little time", 2024).
    ///
    /// It rests on a property of BPE: a sequence of tokens is the BPE
    /// encoding of its concatenation if and only if every two neighbouring
    /// tokens are "compatible", i.e. BPE leaves the two of them alone as
    /// that very pair. So: take the longest token at the current position;
    /// if it is compatible with the previous one (and its end is not a
    /// position already known to lead nowhere), keep it and go on;
    /// otherwise try the next shorter token that is a prefix of it; when
    /// none is left, mark this position as a dead end and take the
    /// previous token back. Each position is given up at most once and
    /// tries at most one token per length, so the work is linear in the
    /// piece (in practice the longest token is nearly always the right
    /// one).
    ///
    /// Compatibility is decided from the two tokens' merge trees
    /// ([`Ranks::compatible_by_trees`]), or where those do not describe the
    /// merge by tiktoken's own merge ([`Ranks::merge_short`]) of the two
    /// tokens' bytes, and remembered per pair of ranks in a cache shared by
    /// all calls.
    pub fn merge_linear(&self, piece: &[u8], s: &mut Scratch, mut emit: impl FnMut(&[u8])) {
        let n = piece.len();
        if n == 0 {
            return;
        }
        s.alive.clear();
        s.alive.resize(n / 64 + 1, u64::MAX);
        s.stack.clear();
        let mut pos = 0;
        let mut next = self.longest_match(piece);
        loop {
            let (mut len, mut rank) = next;
            loop {
                let end = pos + len;
                let alive = s.alive[end >> 6] & (1 << (end & 63)) != 0;
                let ok = alive
                    && match s.stack.last() {
                        None => true,
                        Some(&(start, plen, prank)) => {
                            self.compatible(&piece[start..end], plen, prank, rank, &mut s.parts)
                        }
                    };
                if ok {
                    s.stack.push((pos, len, rank));
                    pos = end;
                    if pos >= n {
                        for &(start, len, _) in &s.stack {
                            emit(&piece[start..start + len]);
                        }
                        return;
                    }
                    next = self.longest_match(&piece[pos..]);
                    break;
                } else if len > 1 {
                    (len, rank) = self.shorter_prefix(&piece[pos..end]);
                } else {
                    s.alive[pos >> 6] &= !(1 << (pos & 63));
                    match s.stack.pop() {
                        Some((start, len, rank)) => {
                            pos = start;
                            next = (len, rank);
                        }
                        None => {
                            // Cannot happen (the BPE encoding of the piece is
                            // a sequence of compatible tokens, so the search
                            // finds one); tiktoken's merge if it did.
                            self.merge_short(piece, &mut s.parts, emit);
                            return;
                        }
                    }
                    break;
                }
            }
        }
    }

    /// Whether tiktoken's merge of `pair` (two tokens: the first `split`
    /// bytes, rank `left`, and the rest, rank `right`) leaves exactly these
    /// two tokens.
    #[inline]
    fn compatible(
        &self,
        pair: &[u8],
        split: usize,
        left: Rank,
        right: Rank,
        parts: &mut Vec<Part>,
    ) -> bool {
        let key = ((left as u64) << RANK_BITS) | right as u64;
        let idx = (key.wrapping_mul(K) >> (64 - CACHE_BITS)) as usize & ((1 << CACHE_BITS) - 1);
        let entry = self.compatible.get(idx).map_or(0, |e| e.load(Relaxed));
        if entry >> 1 == key + 1 {
            return entry & 1 != 0;
        }
        let by_trees = self.compatible_by_trees(pair, split, left, right, parts);
        let ok = if let Some(ok) = by_trees {
            ok
        } else if pair.len() < LARGE_PIECE {
            self.merges_to_pair(pair, split, parts)
        } else {
            let mut count = 0;
            let mut first = 0;
            self.merge_short(pair, parts, |t| {
                if count == 0 {
                    first = t.len();
                }
                count += 1;
            });
            count == 2 && first == split
        };
        if let Some(e) = self.compatible.get(idx) {
            e.store(((key + 1) << 1) | ok as u64, Relaxed);
        }
        ok
    }

    /// Whether BPE leaves the tokens `pair[..split]` (rank `left`) and
    /// `pair[split..]` (rank `right`) as that pair, decided from the two
    /// tokens' own merge trees instead of a merge of their bytes: the
    /// `bpe` crate's `is_valid_token_pair`. BPE on the pair joins the two
    /// sides iff some token across the split is formed, from the two
    /// subtrees that meet there, before those subtrees are completed: so
    /// the trees are taken apart from the top, the higher-ranked (later)
    /// merge first, and at each step the two innermost subtrees are
    /// checked for a token that merges exactly them with a rank below the
    /// merge taken apart last (below or equal for the right side's:
    /// tiktoken merges the leftmost of equal ranks first). Each step is a
    /// look-up of the span across the split (mostly stopped by the
    /// filter) and a read of one token's split; a merge of the bytes makes
    /// about two look-ups per byte. `None` where a token met is not the
    /// result of its own merge ([`Ranks::split_of`]): the caller merges.
    fn compatible_by_trees(
        &self,
        pair: &[u8],
        split: usize,
        mut left: Rank,
        mut right: Rank,
        parts: &mut Vec<Part>,
    ) -> Option<bool> {
        // The two subtrees are pair[a..split] (rank `left`) and
        // pair[split..b] (rank `right`).
        let (mut a, mut b) = (0, pair.len());
        let mut limit = NONE;
        loop {
            if let Some(across) = self.get(pair.get(a..b)?) {
                if across < limit && self.split_of(across, &pair[a..b], parts)?.len == split - a {
                    return Some(false);
                }
            }
            // The later merge of the two is undone first; a single byte
            // has none.
            let left_first = left > right && split - a > 1 || b - split == 1;
            if left_first && split - a > 1 {
                limit = left;
                let s = self.split_of(left, &pair[a..split], parts)?;
                a += s.len;
                left = s.right;
            } else if b - split > 1 {
                limit = right.saturating_add(1);
                let s = self.split_of(right, &pair[split..b], parts)?;
                b = split + s.len;
                right = s.left;
            } else {
                return Some(true);
            }
        }
    }

    /// The last merge that forms token `rank` (whose bytes are `token`, 2
    /// or more) when BPE runs on its own bytes, remembered in `splits`;
    /// `None` if BPE does not form it (the token is reached only as a
    /// whole piece) or forms it from a token of a higher rank, where the
    /// merge trees do not describe the merge order.
    fn split_of(&self, rank: Rank, token: &[u8], parts: &mut Vec<Part>) -> Option<Split> {
        let memo = self.splits.get(rank as usize)?;
        let known = Split::decode(memo.load(Relaxed));
        if let Some(known) = known {
            return known;
        }
        // A part holds its start in `START_BITS`: a longer token (none in
        // the embedded vocabularies; loaded ones may have them) is left to
        // the caller's merge.
        let formed = token.len() <= START_MASK as usize
            && !self.merge_parts(token, parts, |parts, _| parts.len() == 3);
        let split = parts
            .get(1)
            .map(|&p| start(p))
            .filter(|_| formed)
            .and_then(|k| {
                let left = self.get(token.get(..k)?)?;
                let right = self.get(token.get(k..)?)?;
                (left < rank && right < rank).then_some(Split {
                    len: k,
                    left,
                    right,
                })
            });
        memo.store(Split::encode(split), Relaxed);
        split
    }

    /// tiktoken's `_byte_pair_merge` start: one part per byte of `bytes`
    /// (2 to 255), then the end.
    fn start_parts(&self, bytes: &[u8], parts: &mut Vec<Part>) {
        parts.clear();
        let n = bytes.len();
        parts.extend(
            bytes
                .windows(2)
                .enumerate()
                .map(|(i, w)| part(i, self.pair(w[0], w[1]).unwrap_or(NONE))),
        );
        parts.push(part(n - 1, NONE));
        parts.push(part(n, NONE));
    }

    /// tiktoken's simple merge of `pair` (2 to 255 bytes, `split` inside),
    /// stopped as soon as a merge joins the two sides: whether it ends with
    /// the two parts `pair[..split]` and `pair[split..]`.
    fn merges_to_pair(&self, pair: &[u8], split: usize, parts: &mut Vec<Part>) -> bool {
        self.merge_parts(pair, parts, |parts, i| start(parts[i + 1]) == split) && parts.len() == 3
    }

    /// tiktoken's `_byte_pair_merge` of `piece` (2 to 255 bytes: every
    /// caller's piece is shorter than [`LARGE_PIECE`] or a token) into
    /// `parts`: merges the lowest-ranked pair of neighbouring parts (the
    /// leftmost among equals) until none is left (true), or stops before
    /// the merge of parts `i` and `i + 1` when `stop(parts, i)` says so
    /// (false).
    #[inline]
    fn merge_parts(
        &self,
        piece: &[u8],
        parts: &mut Vec<Part>,
        stop: impl Fn(&[Part], usize) -> bool,
    ) -> bool {
        self.start_parts(piece, parts);
        let rank_at = |parts: &[Part], i: usize| -> Rank {
            match (parts.get(i), parts.get(i + 3)) {
                (Some(&a), Some(&b)) => self.get_or_none(&piece[start(a)..start(b)]),
                _ => NONE,
            }
        };
        loop {
            // The lowest part is the next merge: lowest rank, then leftmost.
            let lowest = parts.iter().copied().min().unwrap_or(u32::MAX);
            if lowest >> START_BITS == NO_MERGE {
                return true;
            }
            let Ok(i) = parts.binary_search_by_key(&start(lowest), |&p| start(p)) else {
                return true; // cannot happen: `lowest` is one of the parts
            };
            if stop(parts, i) {
                return false;
            }
            if i > 0 {
                parts[i - 1] = part(start(parts[i - 1]), rank_at(parts, i - 1));
            }
            parts[i] = part(start(parts[i]), rank_at(parts, i));
            parts.remove(i + 1);
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
                initial.push(Reverse(Merge { rank: r, start: i }));
            }
        }
        let mut heap = BinaryHeap::from(initial);
        while let Some(Reverse(Merge { rank, start })) = heap.pop() {
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
                    heap.push(Reverse(Merge { rank: r, start }));
                }
            } else {
                next_rank[start] = NONE;
            }
            if start > 0 {
                let p = prev[start];
                let r = self.get_or_none(&piece[p..right_end]);
                next_rank[p] = r;
                if r != NONE {
                    heap.push(Reverse(Merge { rank: r, start: p }));
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

/// How [`Ranks::build_prefixes`] went.
enum Built {
    Yes,
    /// More prefixes than the table can take.
    TooFull,
    /// The byte order given is not one.
    NotInOrder,
}

/// A part of tiktoken's simple merge: the rank of it merged with the next
/// part (`NO_MERGE` if none) above its start in the piece (8 bits). One
/// `u32` whose order is the order in which tiktoken picks merges (lowest
/// rank, then leftmost), so the next merge is a plain minimum over the
/// parts, which the compiler vectorizes; a minimum kept with its position
/// was a chain of dependent compare-and-moves, 80 % of the loop's time on
/// long random words.
type Part = u32;
const START_BITS: u32 = 8;
const START_MASK: u32 = (1 << START_BITS) - 1;
const NO_MERGE: u32 = u32::MAX >> START_BITS;
/// The links of [`Ranks::merge_small`] before any merge: part `i` is
/// followed by `i + 1` and preceded by `i - 1` (wrapping, unused).
const NEXT: [u8; LARGE_PIECE] = {
    let mut a = [0u8; LARGE_PIECE];
    let mut i = 0;
    while i < LARGE_PIECE {
        a[i] = (i + 1) as u8;
        i += 1;
    }
    a
};
const PREV: [u8; LARGE_PIECE] = {
    let mut a = [0u8; LARGE_PIECE];
    let mut i = 0;
    while i < LARGE_PIECE {
        a[i] = (i as u8).wrapping_sub(1);
        i += 1;
    }
    a
};

/// A part of [`Ranks::merge_small`]: as a [`Part`], but an `i32` (a signed
/// minimum is one SSE2 instruction per 4 parts where an unsigned one takes
/// three), hence `SMALL_NO_MERGE` below 2^23, and `DEAD` above all.
const SMALL_NO_MERGE: i32 = i32::MAX >> START_BITS;
/// A merged part in [`Ranks::merge_small`]: above every live one.
const DEAD: i32 = i32::MAX;

/// The lowest of a group of parts.
#[inline(always)]
fn min8(group: &[i32; 8]) -> i32 {
    let mut low = [DEAD; 4];
    for (k, l) in low.iter_mut().enumerate() {
        *l = group[k].min(group[k + 4]);
    }
    low[0].min(low[1]).min(low[2].min(low[3]))
}

#[inline(always)]
fn small_part(start: usize, rank: Rank) -> i32 {
    ((rank.min(SMALL_NO_MERGE as u32) as i32) << START_BITS) | (start as i32 & START_MASK as i32)
}

#[inline(always)]
fn part(start: usize, rank: Rank) -> Part {
    (rank.min(NO_MERGE) << START_BITS) | (start as u32 & START_MASK)
}

#[inline(always)]
fn start(p: Part) -> usize {
    (p & START_MASK) as usize
}

/// The tokens of three bytes `abc`: for each pair `ab` that begins one
/// (its block, numbered in `Ranks::pairs`), a bitmap of the third bytes
/// and the index of its first token in `ranks`, which lists the tokens in
/// that order. A look-up reads the pair's entry, its block and the rank
/// (o200k: 2 796 pairs, 18 185 tokens, 185 KB), where a hash look-up reads
/// a bit filter, then a slot of the rank table and the token's bytes (in
/// tables of megabytes).
#[derive(Debug, Default)]
struct Trigrams {
    /// Per pair: the bitmap of the third bytes (4 words), then the index
    /// in `ranks` of its first token, with the set bits before each of the
    /// four words in the bytes above (8 bits each, from bit 32).
    blocks: Vec<[u64; 5]>,
    ranks: Vec<Rank>,
    /// More pairs than `Ranks::pairs` can number (none in the embedded
    /// vocabularies): the tokens of three bytes are looked up by hash.
    hashed: bool,
}

/// Where `Ranks::pairs` holds a pair's block of [`Trigrams`].
const BLOCK_SHIFT: u32 = RANK_BITS;
/// A pair of bytes that is no token, in `Ranks::pairs`.
const PAIR_NONE: u32 = RANK_MASK as u32;

impl Trigrams {
    /// The blocks of `tokens`, numbered in `pairs`.
    fn new(tokens: &[((u8, u8, u8), Rank)], pairs: &mut [u32]) -> Trigrams {
        let mut blocks: Vec<[u64; 5]> = Vec::new();
        for &((a, b, c), _) in tokens {
            let Some(e) = pairs.get_mut(((a as usize) << 8) | b as usize) else {
                continue;
            };
            if *e >> BLOCK_SHIFT == 0 {
                if blocks.len() + 1 >= 1 << (32 - BLOCK_SHIFT) {
                    for e in pairs.iter_mut() {
                        *e &= PAIR_NONE;
                    }
                    return Trigrams {
                        hashed: true,
                        ..Trigrams::default()
                    };
                }
                blocks.push([0; 5]);
                *e |= (blocks.len() as u32) << BLOCK_SHIFT;
            }
            if let Some(block) = blocks.get_mut((*e >> BLOCK_SHIFT) as usize - 1) {
                block[c as usize >> 6] |= 1 << (c & 63);
            }
        }
        blocks.shrink_to_fit();
        let mut first = 0u64;
        for block in &mut blocks {
            let mut seen = 0u64;
            let mut bases = 0u64;
            for (k, w) in block.iter().take(4).enumerate() {
                bases |= seen << (32 + 8 * k);
                seen += w.count_ones() as u64;
            }
            block[4] = first | bases;
            first += seen;
        }
        let mut t = Trigrams {
            blocks,
            ranks: alloc::vec![NONE; first as usize],
            hashed: false,
        };
        for &((a, b, c), rank) in tokens {
            let block = pairs[((a as usize) << 8) | b as usize] >> BLOCK_SHIFT;
            if let Some(slot) = t
                .index(block as usize - 1, c)
                .and_then(|i| t.ranks.get_mut(i))
            {
                *slot = rank;
            }
        }
        t
    }

    /// The index in `ranks` of the token made of the pair of `block` and
    /// `c`, if it is one.
    #[inline(always)]
    fn index(&self, block: usize, c: u8) -> Option<usize> {
        let block = self.blocks.get(block)?;
        let k = c as usize >> 6;
        let w = block[k];
        let bit = 1u64 << (c & 63);
        if w & bit == 0 {
            return None;
        }
        let head = block[4];
        Some(
            (head as u32) as usize
                + ((head >> (32 + 8 * k)) & 0xff) as usize
                + (w & (bit - 1)).count_ones() as usize,
        )
    }

    #[inline(always)]
    fn get(&self, block: usize, c: u8) -> Option<Rank> {
        let r = *self.ranks.get(self.index(block, c)?)?;
        (r != NONE).then_some(r)
    }

    #[cfg(feature = "hf")]
    fn memory_bytes(&self) -> usize {
        self.blocks.capacity() * 40 + self.ranks.capacity() * 4
    }
}

/// Whether bit `f` of a bit filter is set (out of range: not set).
#[inline(always)]
fn bit_is_set(bits: &[u64], f: usize) -> bool {
    bits.get(f >> 6).is_some_and(|w| w & (1 << (f & 63)) != 0)
}

/// Sets bit `f` of a bit filter, which is sized for every `f` its mask
/// gives (indexed, as before: a bit left unset would drop a token).
fn set_bit(bits: &mut [u64], f: usize) {
    bits[f >> 6] |= 1 << (f & 63);
}

/// Reusable buffers of the merges (one per counting call).
#[derive(Default)]
pub struct Scratch {
    parts: Vec<Part>,
    /// Tokens chosen so far by the linear merge: (start, length, rank).
    stack: Vec<(usize, usize, Rank)>,
    /// Positions of the piece not (yet) known to be dead ends.
    alive: Vec<u64>,
}

/// log2 of the entries of the compatibility cache (512 KiB per
/// vocabulary: shared by all calls, it stays warm from one prompt to the
/// next, where a cache per call started cold on every prompt).
const CACHE_BITS: u32 = 16;

/// The last merge of a token: its left part's length and rank, and its
/// right part's rank.
#[derive(Clone, Copy)]
struct Split {
    len: usize,
    left: Rank,
    right: Rank,
}

impl Split {
    const KNOWN: u64 = 1 << 63;
    const NOT_A_MERGE: u64 = 1 << 62;

    /// An entry of `Ranks::splits`: `left | right << 18 | len << 36`,
    /// with `KNOWN` set (and `NOT_A_MERGE` for `None`).
    fn encode(split: Option<Split>) -> u64 {
        match split {
            Some(s) => {
                Self::KNOWN
                    | s.left as u64
                    | (s.right as u64) << RANK_BITS
                    | (s.len as u64) << (2 * RANK_BITS)
            }
            None => Self::KNOWN | Self::NOT_A_MERGE,
        }
    }

    /// The split an entry holds, `None` while unknown.
    #[inline(always)]
    fn decode(entry: u64) -> Option<Option<Split>> {
        if entry & Self::KNOWN == 0 {
            return None;
        }
        if entry & Self::NOT_A_MERGE != 0 {
            return Some(None);
        }
        Some(Some(Split {
            len: ((entry >> (2 * RANK_BITS)) & 0xff) as usize,
            left: (entry & RANK_MASK) as Rank,
            right: ((entry >> RANK_BITS) & RANK_MASK) as Rank,
        }))
    }
}

#[derive(Clone, Copy)]
struct Prefix(u64);

impl Prefix {
    /// (length, rank) of the longest token that is a prefix of the key.
    #[inline(always)]
    fn token(self) -> (usize, Rank) {
        (
            ((self.0 >> P_TOKEN_LEN_SHIFT) & 0xff) as usize,
            (self.0 & RANK_MASK) as Rank,
        )
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

/// A merge waiting in the heap, ordered by rank, then start (fields in that
/// order); the heap holds it in [`Reverse`], so it pops the lowest rank, then
/// the lowest start.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Merge {
    rank: Rank,
    start: usize,
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use crate::testing::Rng;

    /// The merge-tree pair check against tiktoken's merge of the pair's
    /// bytes: on random pairs of tokens (of any length, and of 4 bytes or
    /// less, the tokens of the pathological classes), and on every way to
    /// cut each two neighbouring tokens of random letters, random CJK and
    /// random bytes into two tokens (near misses of real boundaries).
    fn pair_check_is_tiktokens(ranks: &Ranks) {
        let tokens: Vec<&[u8]> = ranks.tokens().collect();
        let short: Vec<&[u8]> = tokens.iter().copied().filter(|t| t.len() <= 4).collect();
        let mut rng = Rng(31);
        let mut pairs: Vec<Vec<u8>> = Vec::new();
        for pool in [&tokens, &short] {
            for _ in 0..20_000 {
                let a = pool[rng.below(pool.len())];
                let b = pool[rng.below(pool.len())];
                pairs.push([a, b].concat());
            }
        }
        let texts: [Vec<u8>; 3] = [
            (0..20_000).map(|_| b'a' + rng.below(26) as u8).collect(),
            (0..7_000)
                .flat_map(|_| {
                    let c = char::from_u32(0x4e00 + rng.below(0x5000) as u32).unwrap_or('中');
                    let mut buf = [0u8; 4];
                    c.encode_utf8(&mut buf).as_bytes().to_vec()
                })
                .collect(),
            (0..20_000).map(|_| rng.below(256) as u8).collect(),
        ];
        let mut scratch = Scratch::default();
        for text in &texts {
            let mut merged: Vec<Vec<u8>> = Vec::new();
            ranks.merge_linear(text, &mut scratch, |t| merged.push(t.to_vec()));
            for w in merged.windows(2) {
                pairs.push([w[0].as_slice(), &w[1]].concat());
            }
        }
        let mut parts = Vec::new();
        let (mut checked, mut answered, mut compatible) = (0, 0, 0);
        for pair in pairs.iter().filter(|p| p.len() < LARGE_PIECE) {
            for split in 1..pair.len() {
                let (Some(left), Some(right)) =
                    (ranks.get(&pair[..split]), ranks.get(&pair[split..]))
                else {
                    continue;
                };
                let want = ranks.merges_to_pair(pair, split, &mut parts);
                checked += 1;
                compatible += want as usize;
                if let Some(got) = ranks.compatible_by_trees(pair, split, left, right, &mut parts) {
                    answered += 1;
                    assert_eq!(got, want, "{pair:?} split at {split}");
                }
            }
        }
        // Every token of both vocabularies is formed by BPE on its own
        // bytes, from two tokens of lower ranks: the fallback to the merge
        // is there for loaded vocabularies.
        for (r, t) in tokens.iter().enumerate().filter(|(_, t)| t.len() >= 2) {
            assert!(ranks.split_of(r as Rank, t, &mut parts).is_some(), "{t:?}");
        }
        // The check answers always here, and the pairs hold both answers
        // (about 8 % are not compatible).
        assert_eq!(answered, checked);
        assert!(
            compatible * 10 >= checked && compatible * 20 <= checked * 19,
            "{compatible} of {checked}"
        );
    }

    #[test]
    fn merge_tree_pair_check_is_tiktokens_cl100k() {
        pair_check_is_tiktokens(&Ranks::new(crate::CL100K_BASE, crate::CL100K_BASE_ORDER));
    }

    #[test]
    fn merge_tree_pair_check_is_tiktokens_o200k() {
        pair_check_is_tiktokens(&Ranks::new(crate::O200K_BASE, crate::O200K_BASE_ORDER));
    }

    /// `get` (the tokens of three bytes in their own tables, those of four
    /// behind their own filter) against a plain map of the vocabulary: every
    /// token, every string of three bytes that begins with a pair that
    /// begins a token of three bytes, and random strings of 3 to 6 bytes
    /// (letters, and any bytes).
    fn lookups_match_the_vocabulary(ranks: &Ranks) {
        let tokens: Vec<&[u8]> = ranks.tokens().collect();
        for (r, &t) in tokens.iter().enumerate() {
            assert_eq!(ranks.get(t), Some(r as Rank), "{t:?}");
        }
        let three: std::collections::HashMap<[u8; 3], Rank> = tokens
            .iter()
            .enumerate()
            .filter_map(|(r, t)| Some(((*t).try_into().ok()?, r as Rank)))
            .collect();
        let mut pairs: Vec<[u8; 2]> = three.keys().map(|k| [k[0], k[1]]).collect();
        pairs.sort_unstable();
        pairs.dedup();
        let mut found = 0;
        for [a, b] in pairs {
            for c in 0..=255u8 {
                let key = [a, b, c];
                let want = three.get(&key).copied();
                assert_eq!(ranks.get(&key), want, "{key:?}");
                found += want.is_some() as usize;
            }
        }
        assert_eq!(found, three.len());
        let short: std::collections::HashMap<&[u8], Rank> = tokens
            .iter()
            .enumerate()
            .filter(|(_, t)| (3..=6).contains(&t.len()))
            .map(|(r, &t)| (t, r as Rank))
            .collect();
        let mut rng = Rng(0x3a4b);
        let mut key = Vec::new();
        let mut found = 0;
        for _ in 0..100_000 {
            let n = 3 + rng.below(4);
            key.clear();
            if rng.below(2) == 0 {
                key.extend((0..n).map(|_| b'a' + rng.below(26) as u8));
            } else {
                key.extend((0..n).map(|_| rng.below(256) as u8));
            }
            let want = short.get(key.as_slice()).copied();
            assert_eq!(ranks.get(&key), want, "{key:?}");
            found += want.is_some() as usize;
        }
        assert!(found > 1_000, "{found}");
    }

    #[test]
    fn lookups_are_the_vocabularys() {
        for (base, order) in [
            (crate::CL100K_BASE, crate::CL100K_BASE_ORDER),
            (crate::O200K_BASE, crate::O200K_BASE_ORDER),
        ] {
            lookups_match_the_vocabulary(&Ranks::new(base, order));
        }
    }

    /// A vocabulary with more pairs beginning tokens of three bytes than
    /// `Ranks::pairs` can number: those tokens are found by hash.
    #[test]
    fn too_many_pairs_for_the_trigram_blocks_fall_back_to_the_hash() {
        let mut data = Vec::new();
        for b in 0..=255u8 {
            data.extend_from_slice(&[1, b]);
        }
        let pairs = 1usize << (32 - BLOCK_SHIFT);
        for ab in 0..pairs {
            data.extend_from_slice(&[3, (ab >> 8) as u8, ab as u8, b'x']);
        }
        let (ranks, complete) = Ranks::build(Cow::Owned(data), &[], 256 + pairs);
        assert!(complete && ranks.trigrams.hashed);
        for ab in 0..pairs {
            let key = [(ab >> 8) as u8, ab as u8, b'x'];
            assert_eq!(ranks.get(&key), Some((256 + ab) as Rank), "{key:?}");
            assert_eq!(ranks.get(&[key[0], key[1], b'y']), None);
        }
    }

    /// [`Ranks::merge_small`] (at every size it is built for) against
    /// tiktoken's loop as written ([`Ranks::merge_short`]), on byte strings
    /// of every length it takes, from small alphabets, letters and any
    /// bytes, and on runs of one byte.
    #[test]
    fn in_place_merge_is_tiktokens_loop() {
        let alphabets: [&[u8]; 6] = [
            b"ab",
            b"aeinrst",
            b"abcdefghijklmnopqrstuvwxyz",
            b" \t\n-=a",
            "中文字国人的".as_bytes(),
            &[0xe4, 0xb8, 0xad, 0x80, 0xff, 0x20, 0x61, 0x00],
        ];
        let mut rng = Rng(0x1_0ace);
        for ranks in [
            Ranks::new(crate::CL100K_BASE, crate::CL100K_BASE_ORDER),
            Ranks::new(crate::O200K_BASE, crate::O200K_BASE_ORDER),
        ] {
            let mut parts = Vec::new();
            let mut pieces: Vec<Vec<u8>> = Vec::new();
            for n in 2..LARGE_PIECE {
                for alphabet in alphabets {
                    for _ in 0..3 {
                        pieces.push(
                            (0..n)
                                .map(|_| alphabet[rng.below(alphabet.len())])
                                .collect(),
                        );
                    }
                }
                pieces.push((0..n).map(|_| rng.below(256) as u8).collect());
                for b in [b'a', b' ', 0x80] {
                    pieces.push(alloc::vec![b; n]);
                }
            }
            for piece in &pieces {
                let mut want: Vec<Vec<u8>> = Vec::new();
                ranks.merge_short(piece, &mut parts, |t| want.push(t.to_vec()));
                let n = piece.len();
                let mut got: [Vec<Vec<u8>>; 3] = Default::default();
                if n < 32 {
                    ranks.merge_small::<32, 4>(piece, |t| got[0].push(t.to_vec()));
                } else {
                    got[0] = want.clone();
                }
                if n < 64 {
                    ranks.merge_small::<64, 8>(piece, |t| got[1].push(t.to_vec()));
                } else {
                    got[1] = want.clone();
                }
                ranks.merge_small::<128, 16>(piece, |t| got[2].push(t.to_vec()));
                for g in &got {
                    assert_eq!(g, &want, "{piece:?}");
                }
            }
        }
    }
}
