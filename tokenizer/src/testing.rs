//! What the tests, the examples and the Wasm bench share; not part of the
//! supported API.

use alloc::string::String;
use alloc::vec::Vec;

/// Deterministic xorshift64*: the texts the tests and the bench generate
/// are the same on every run.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// `count` texts, each made by `text` from this generator.
    pub fn texts(&mut self, count: usize, mut text: impl FnMut(&mut Rng) -> String) -> Vec<String> {
        (0..count).map(|_| text(self)).collect()
    }
}
