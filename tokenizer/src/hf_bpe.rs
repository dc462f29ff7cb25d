//! Hugging Face's BPE model for byte-level vocabularies: merges by *pair*
//! (`merges[i] = (left, right)`, rank `i`), lowest rank first and leftmost
//! among equals, exactly as `tokenizers`' `Word::merge_all` does.
//!
//! This is not tiktoken's rule (merge the adjacent parts whose concatenation
//! has the lowest rank), which `bpe.rs` implements: the two agree on
//! vocabularies converted from tiktoken (Llama 3, gpt-oss) but not in
//! general, since a `tokenizer.json` may list only some of the ways of making
//! a token out of two others. So a loaded vocabulary gets this engine.

use alloc::collections::BinaryHeap;
use alloc::vec::Vec;
use core::cmp::Ordering;

pub type Id = u32;
const NONE: u32 = u32::MAX;
const K: u64 = 0x9e37_79b9_7f4a_7c15;

#[inline(always)]
fn mix(mut h: u64) -> u64 {
    h = (h ^ (h >> 29)).wrapping_mul(K);
    h ^ (h >> 32)
}

fn hash_bytes(s: &[u8]) -> u64 {
    let mut h = (s.len() as u64).wrapping_mul(K);
    let mut chunks = s.chunks_exact(8);
    for c in &mut chunks {
        let mut a = [0u8; 8];
        a.copy_from_slice(c);
        h = (h ^ u64::from_le_bytes(a)).wrapping_mul(K).rotate_left(31);
    }
    let rest = chunks.remainder();
    let mut a = [0u8; 8];
    a[..rest.len()].copy_from_slice(rest);
    h = (h ^ u64::from_le_bytes(a)).wrapping_mul(K);
    mix(h)
}

/// Byte strings to ids: open addressing over an arena of the tokens' bytes.
#[derive(Debug, Default)]
pub struct TokenMap {
    arena: Vec<u8>,
    /// (offset, length, id) of each token.
    entries: Vec<(u32, u32, Id)>,
    /// Index into `entries`, `NONE` when empty.
    table: Vec<u32>,
    max_len: usize,
}

impl TokenMap {
    /// Builds the map; `None` if a token is listed twice.
    pub fn new(tokens: &[(Vec<u8>, Id)]) -> Option<TokenMap> {
        let size = (tokens.len() * 2).next_power_of_two().max(16);
        let mut m = TokenMap {
            arena: Vec::with_capacity(tokens.iter().map(|(t, _)| t.len()).sum()),
            entries: Vec::with_capacity(tokens.len()),
            table: alloc::vec![NONE; size],
            max_len: 0,
        };
        let mask = size - 1;
        for (t, id) in tokens {
            if m.get(t).is_some() {
                return None;
            }
            let mut idx = hash_bytes(t) as usize & mask;
            while m.table[idx] != NONE {
                idx = (idx + 1) & mask;
            }
            m.table[idx] = m.entries.len() as u32;
            m.entries.push((m.arena.len() as u32, t.len() as u32, *id));
            m.arena.extend_from_slice(t);
            m.max_len = m.max_len.max(t.len());
        }
        Some(m)
    }

    #[inline]
    pub fn get(&self, key: &[u8]) -> Option<Id> {
        if key.len() > self.max_len || self.table.is_empty() {
            return None;
        }
        let mask = self.table.len() - 1;
        let mut idx = hash_bytes(key) as usize & mask;
        loop {
            let e = *self.table.get(idx)?;
            if e == NONE {
                return None;
            }
            let (off, len, id) = *self.entries.get(e as usize)?;
            if len as usize == key.len()
                && self.arena.get(off as usize..(off + len) as usize) == Some(key)
            {
                return Some(id);
            }
            idx = (idx + 1) & mask;
        }
    }

    pub fn memory_bytes(&self) -> usize {
        self.arena.capacity() + self.entries.capacity() * 12 + self.table.capacity() * 4
    }

    /// The tokens and their ids, in insertion order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], Id)> + '_ {
        self.entries.iter().map(|&(off, len, id)| {
            let bytes = self
                .arena
                .get(off as usize..(off + len) as usize)
                .unwrap_or(&[]);
            (bytes, id)
        })
    }
}

/// (left id, right id) -> (rank, merged id).
#[derive(Debug, Default)]
pub struct PairMap {
    /// (key, rank, merged); key `u64::MAX` when empty.
    table: Vec<(u64, u32, Id)>,
}

impl PairMap {
    /// Builds the map from the merges in rank order; of a pair listed twice
    /// the last entry wins, as in `tokenizers` (which collects the merges
    /// into a `HashMap`).
    pub fn new(merges: &[(Id, Id, Id)]) -> PairMap {
        Self::ranked(
            merges.len(),
            merges
                .iter()
                .enumerate()
                .map(|(rank, &(a, b, new))| (rank as u32, a, b, new)),
        )
    }

    /// Builds the map from `len` merges (rank, left, right, merged) with
    /// their own ranks (several pairs may share one: tiktoken ranks a pair
    /// by the token it makes).
    pub fn ranked(len: usize, merges: impl Iterator<Item = (u32, Id, Id, Id)>) -> PairMap {
        let size = (len * 2).next_power_of_two().max(16);
        let mut m = PairMap {
            table: alloc::vec![(u64::MAX, 0, 0); size],
        };
        let mask = size - 1;
        for (rank, a, b, new) in merges {
            let key = ((a as u64) << 32) | b as u64;
            let mut idx = mix(key.wrapping_mul(K)) as usize & mask;
            while m.table[idx].0 != u64::MAX && m.table[idx].0 != key {
                idx = (idx + 1) & mask;
            }
            m.table[idx] = (key, rank, new);
        }
        m
    }

    #[inline]
    pub fn get(&self, a: Id, b: Id) -> Option<(u32, Id)> {
        if self.table.is_empty() {
            return None;
        }
        let key = ((a as u64) << 32) | b as u64;
        let mask = self.table.len() - 1;
        let mut idx = mix(key.wrapping_mul(K)) as usize & mask;
        loop {
            let &(k, rank, new) = self.table.get(idx)?;
            if k == key {
                return Some((rank, new));
            }
            if k == u64::MAX {
                return None;
            }
            idx = (idx + 1) & mask;
        }
    }

    pub fn memory_bytes(&self) -> usize {
        self.table.capacity() * 16
    }

    /// The merges (left, right, merged) by rank, lowest first: what
    /// [`PairMap::new`] takes to build the same map again.
    pub fn merges(&self) -> Vec<(u32, Id, Id, Id)> {
        let mut ranked: Vec<(u32, Id, Id, Id)> = self
            .table
            .iter()
            .filter(|e| e.0 != u64::MAX)
            .map(|&(key, rank, new)| (rank, (key >> 32) as Id, key as Id, new))
            .collect();
        ranked.sort_unstable();
        ranked
    }
}

#[derive(PartialEq, Eq)]
struct Merge {
    rank: u32,
    pos: usize,
    new: Id,
    /// The pair it was looked up for: if the symbols at `pos` are still
    /// these, the entry is current without looking the pair up again.
    pair: (Id, Id),
}

impl Ord for Merge {
    // BinaryHeap pops the greatest: make that the lowest rank, then the
    // leftmost position (tokenizers' `Merge` ordering).
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .rank
            .cmp(&self.rank)
            .then_with(|| other.pos.cmp(&self.pos))
    }
}

impl PartialOrd for Merge {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Scratch space reused between pieces.
#[derive(Default)]
pub struct Scratch {
    /// Per symbol: (id, prev, next, alive).
    syms: Vec<(Id, usize, usize, bool)>,
    heap: BinaryHeap<Merge>,
    /// The linear merge's, for vocabularies of tiktoken's rule.
    pub linear: crate::bpe::Scratch,
}

/// Queues the merge of `pair` at `pos` when the vocabulary ranks it.
fn push_if_ranked(heap: &mut BinaryHeap<Merge>, pairs: &PairMap, pos: usize, pair: (Id, Id)) {
    if let Some((rank, new)) = pairs.get(pair.0, pair.1) {
        heap.push(Merge {
            rank,
            pos,
            new,
            pair,
        });
    }
}

/// Merges `piece` (bytes), whose single bytes have the ids `byte_ids`,
/// calling `emit` with each resulting id. Bytes without an id are dropped,
/// as `tokenizers` drops characters missing from the vocabulary when there is
/// no `unk_token` (the loader refuses vocabularies that miss a byte).
pub fn merge(
    piece: &[u8],
    byte_ids: &[Id; 256],
    pairs: &PairMap,
    s: &mut Scratch,
    mut emit: impl FnMut(Id),
) {
    s.syms.clear();
    s.heap.clear();
    for &b in piece {
        let id = byte_ids[b as usize];
        if id != NONE {
            let n = s.syms.len();
            s.syms.push((id, n.wrapping_sub(1), n + 1, true));
        }
    }
    let n = s.syms.len();
    if n == 0 {
        return;
    }
    for i in 0..n - 1 {
        push_if_ranked(&mut s.heap, pairs, i, (s.syms[i].0, s.syms[i + 1].0));
    }
    while let Some(Merge {
        rank: _,
        pos,
        new,
        pair,
    }) = s.heap.pop()
    {
        let (left, prev, next, alive) = s.syms[pos];
        if !alive || next >= n {
            continue;
        }
        let right = s.syms[next].0;
        // Current if the pair is the one it was made for; else the check
        // of `tokenizers` (the pair now there merges to the same id).
        if (left, right) != pair {
            match pairs.get(left, right) {
                Some((_, id)) if id == new => {}
                _ => continue, // stale
            }
        }
        let after = s.syms[next].2;
        s.syms[next].3 = false;
        s.syms[pos] = (new, prev, after, true);
        if after < n {
            s.syms[after].1 = pos;
            push_if_ranked(&mut s.heap, pairs, pos, (new, s.syms[after].0));
        }
        if prev < n {
            push_if_ranked(&mut s.heap, pairs, prev, (s.syms[prev].0, new));
        }
    }
    let mut i = 0;
    while i < n {
        emit(s.syms[i].0);
        i = s.syms[i].2;
    }
}
