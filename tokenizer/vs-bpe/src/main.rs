//! `cargo run --release [-- MIB ROUNDS]`: 4 MiB (default) of each class,
//! counted by sluice-tokenizer (its caches emptied before every count, as
//! in its own benchmark) and by bpe-openai, alternated `ROUNDS` times
//! (default 3); the fastest of each, in ms and MB/s, and whether the counts
//! agree.

use sluice_tokenizer::{Encoding, Tokenizer};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// xorshift64*: the same texts on every run, no dependency.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

fn classes(size: usize) -> Vec<(&'static str, String)> {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let letters = |rng: &mut Rng, n: usize| -> String {
        (0..n)
            .map(|_| (b'a' + rng.below(26) as u8) as char)
            .collect()
    };
    let words = |rng: &mut Rng, min: u64, max: u64| -> String {
        let mut text = String::with_capacity(size + 128);
        while text.len() < size {
            let n = (min + rng.below(max - min + 1)) as usize;
            text.push_str(&letters(rng, n));
            text.push(' ');
        }
        text.truncate(size);
        text
    };
    let cjk = |rng: &mut Rng| -> String {
        let mut text = String::with_capacity(size + 4);
        while text.len() < size {
            text.extend(char::from_u32(0x4e00 + rng.below(0x5000) as u32));
        }
        text
    };
    vec![
        ("random letters, no space", letters(&mut rng, size)),
        ("random words, 32-127 letters", words(&mut rng, 32, 127)),
        ("random words, 1-12 letters", words(&mut rng, 1, 12)),
        ("random CJK characters", cjk(&mut rng)),
        ("spaces and tabs", " \t".repeat(size / 2)),
    ]
}

fn fastest(mut count: impl FnMut() -> usize, rounds: usize) -> (Duration, usize) {
    let mut best = Duration::MAX;
    let mut tokens = 0;
    for _ in 0..rounds {
        let started = Instant::now();
        tokens = black_box(count());
        best = best.min(started.elapsed());
    }
    (best, tokens)
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let mib = args.first().copied().unwrap_or(4);
    let rounds = args.get(1).copied().unwrap_or(3);
    let texts = classes(mib << 20);
    println!("| encoding | class | sluice ms | bpe-openai ms | sluice MB/s | bpe-openai MB/s | sluice ÷ bpe-openai speed | counts equal |");
    println!("|---|---|---:|---:|---:|---:|---:|---|");
    for (name, sluice, bpe) in [
        (
            "o200k",
            Tokenizer::new(Encoding::O200kBase),
            bpe_openai::o200k_base(),
        ),
        (
            "cl100k",
            Tokenizer::new(Encoding::Cl100kBase),
            bpe_openai::cl100k_base(),
        ),
    ] {
        for (class, text) in &texts {
            // Alternate the two, one count each per round.
            let (mut ours, mut theirs) = ((Duration::MAX, 0), (Duration::MAX, 0));
            for _ in 0..rounds {
                let (t, n) = fastest(
                    || {
                        sluice.clear_cache();
                        sluice.count(text)
                    },
                    1,
                );
                ours = (ours.0.min(t), n);
                let (t, n) = fastest(|| bpe.count(text), 1);
                theirs = (theirs.0.min(t), n);
            }
            let mb_s = |d: Duration| text.len() as f64 / 1e6 / d.as_secs_f64();
            println!(
                "| {name} | {class} | {:.1} | {:.1} | {:.1} | {:.1} | {:.2}× | {} |",
                ours.0.as_secs_f64() * 1e3,
                theirs.0.as_secs_f64() * 1e3,
                mb_s(ours.0),
                mb_s(theirs.0),
                theirs.0.as_secs_f64() / ours.0.as_secs_f64(),
                if ours.1 == theirs.1 {
                    "yes".to_string()
                } else {
                    format!("no: {} / {}", ours.1, theirs.1)
                }
            );
        }
    }
}
