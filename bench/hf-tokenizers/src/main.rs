//! Sluice's Hugging Face tokenizers against the reference implementations:
//! Hugging Face `tokenizers` (Rust crate, Oniguruma, as PyPI's) for the
//! `tokenizer.json` vocabularies, tiktoken-rs (the core of the tiktoken
//! mistral-common runs) for Mistral's tekken. Same process, same texts, one
//! run: per vocabulary and text class, MB/s of each and their ratio, after
//! checking both count the same; and per vocabulary the load time and the
//! heap it keeps (a counting allocator).
//!
//!   SLUICE_HF_TOKENIZERS_DIR=~/.cache/sluice/hf-tokenizers \
//!   cargo run --release --manifest-path bench/hf-tokenizers/Cargo.toml -- [KIB_PER_CLASS] [ROUNDS]

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use base64::Engine;
use sluice_tokenizer::HfTokenizer;

/// Bytes allocated and not yet freed.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size(), Ordering::Relaxed);
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new, Ordering::Relaxed);
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        System.realloc(p, l, new)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// A small deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[(self.next() % xs.len() as u64) as usize]
    }
}

const ENGLISH: &[&str] = &[
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "lazy",
    "dog",
    "rate",
    "limit",
    "tokens",
    "request",
    "budget",
    "model",
    "server",
    "pacing",
    "queue",
    "tenant",
    "window",
    "Envoy",
    "mesh",
    "admission",
    "I'm",
    "they'll",
    "we've",
    "don't",
    "It's",
    "exactly",
    "counted",
    "because",
    "prompt",
    "answer",
    "Hello,",
    "world.",
    "However,",
    "(see",
    "below)",
    "and",
    "of",
];
const CODE: &[&str] = &[
    "fn main() {\n    let x: Vec<u32> = (0..10).map(|i| i * 2).collect();\n    println!(\"{x:?}\");\n}\n",
    "def f(a, b=2, *args, **kw):\n\treturn {'a': a, \"b\": b}  # comment\n\n",
    "SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%o''neil%';\n",
    "<div class=\"main\">\n  <p>Hello&nbsp;world</p>\n</div>\n",
    "    if (err != nil) {\n        return fmt.Errorf(\"open %s: %w\", path, err)\n    }\n",
    "{\"model\": \"llama-3.1-8b\", \"messages\": [{\"role\": \"user\", \"content\": \"Hi!\"}]}\n",
];
const CJK: &str = "人工智能正在改变世界我们需要新的规则日本語のテキストも正しく数えられますかカタカナとひらがな한국어문장도테스트합니다，。「」";
const HINDI: &[&str] = &[
    "नमस्ते",
    "दुनिया",
    "यह",
    "एक",
    "परीक्षण",
    "है।",
    "भारत",
    "भाषा",
    "मॉडल",
    "टोकन",
    "४५६",
];
const ARABIC: &[&str] = &[
    "مرحبا",
    "بالعالم",
    "هذا",
    "اختبار",
    "للمقطع",
    "النموذج",
    "اللغة",
    "٣٤٥",
    "،",
    ".",
];

/// The text classes, each made of texts of about `text_bytes`, `total`
/// bytes in all.
fn classes(total: usize, text_bytes: usize) -> Vec<(&'static str, Vec<String>)> {
    let mut rng = Rng(0x5eed_1234_abcd_ef01);
    let cjk: Vec<char> = CJK.chars().collect();
    let mut gen = |f: &mut dyn FnMut(&mut Rng, &mut String)| {
        let mut texts = Vec::new();
        let mut n = 0;
        while n < total {
            let mut s = String::new();
            while s.len() < text_bytes {
                f(&mut rng, &mut s);
            }
            n += s.len();
            texts.push(s);
        }
        texts
    };
    let words = |ws: &'static [&'static str]| {
        move |r: &mut Rng, s: &mut String| {
            s.push_str(r.pick::<&str>(ws));
            s.push(if r.next().is_multiple_of(12) {
                '\n'
            } else {
                ' '
            });
        }
    };
    vec![
        ("English", gen(&mut words(ENGLISH))),
        ("code", gen(&mut |r, s| s.push_str(r.pick::<&str>(CODE)))),
        ("CJK", gen(&mut |r, s| s.push(*r.pick(&cjk)))),
        ("Hindi", gen(&mut words(HINDI))),
        ("Arabic", gen(&mut words(ARABIC))),
        (
            "digits",
            gen(&mut |r, s| {
                s.push((b'0' + (r.next() % 10) as u8) as char);
                if r.next().is_multiple_of(16) {
                    s.push_str(if r.next().is_multiple_of(2) {
                        ", "
                    } else {
                        " "
                    });
                }
            }),
        ),
        (
            "random letters",
            gen(&mut |r, s| s.push((b'a' + (r.next() % 26) as u8) as char)),
        ),
        ("repeated chars", gen(&mut |_, s| s.push('a'))),
    ]
}

/// A vocabulary and its reference.
enum Reference {
    Hf(Box<tokenizers::Tokenizer>),
    Tiktoken(Box<tiktoken_rs::CoreBPE>, u32),
}

impl Reference {
    fn count(&self, text: &str) -> usize {
        match self {
            Reference::Hf(t) => t
                .encode_fast(text, false)
                .map(|e| e.len())
                .unwrap_or(usize::MAX),
            Reference::Tiktoken(t, _) => t.encode_ordinary(text).len(),
        }
    }
}

/// tiktoken-rs over a tekken.json's ranks in use, as mistral-common builds
/// its tiktoken encoding.
fn tekken_reference(json: &[u8]) -> Result<Reference, String> {
    let v: serde_json::Value = serde_json::from_slice(json).map_err(|e| e.to_string())?;
    let config = &v["config"];
    let num_special = config["default_num_special_tokens"].as_u64().unwrap_or(0);
    let in_use = config["default_vocab_size"].as_u64().unwrap_or(0) - num_special;
    let mut ranks = HashMap::default();
    for t in v["vocab"]
        .as_array()
        .ok_or("no vocab")?
        .iter()
        .take(in_use as usize)
    {
        let b64 = t["token_bytes"].as_str().ok_or("token_bytes")?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .map_err(|e| e.to_string())?;
        ranks.insert(bytes, t["rank"].as_u64().ok_or("rank")? as u32);
    }
    let pattern = config["pattern"].as_str().ok_or("pattern")?;
    let bpe =
        tiktoken_rs::CoreBPE::new(ranks, HashMap::default(), pattern).map_err(|e| e.to_string())?;
    Ok(Reference::Tiktoken(Box::new(bpe), num_special as u32))
}

/// Load time and heap kept.
fn measure_load<T>(f: impl FnOnce() -> Result<T, String>) -> Result<(T, Duration, usize), String> {
    let before = LIVE.load(Ordering::Relaxed);
    let t0 = Instant::now();
    let t = f()?;
    let took = t0.elapsed();
    Ok((t, took, LIVE.load(Ordering::Relaxed).saturating_sub(before)))
}

/// Seconds for one run of `count` over `texts`, and the total count.
fn run(texts: &[String], count: &dyn Fn(&str) -> usize) -> (f64, usize) {
    let t0 = Instant::now();
    let total = texts.iter().map(|t| count(t)).sum();
    (t0.elapsed().as_secs_f64(), total)
}

/// The best of `rounds` runs of each counter over `texts`, the two taking
/// turns (a load that drifts during the run weighs on both): seconds and
/// total count of each.
fn time_all<const N: usize>(
    rounds: usize,
    texts: &[String],
    counters: [&dyn Fn(&str) -> usize; N],
    reset: &dyn Fn(),
) -> [(f64, usize); N] {
    let mut best = [(f64::MAX, 0); N];
    for _ in 0..rounds {
        for (b, count) in best.iter_mut().zip(counters) {
            reset();
            let (s, n) = run(texts, count);
            *b = (b.0.min(s), n);
        }
    }
    best
}

fn mib(b: usize) -> f64 {
    b as f64 / (1 << 20) as f64
}

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    let kib: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(256);
    let rounds: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(3);
    let dir = std::env::var_os("SLUICE_HF_TOKENIZERS_DIR")
        .map(PathBuf::from)
        .ok_or("set SLUICE_HF_TOKENIZERS_DIR (scripts/fetch-hf-tokenizers)")?;
    // Texts of 4 KiB: a prompt's size, and tiktoken's merge is quadratic in
    // a piece, so one piece of a MiB (repeated characters) would take minutes.
    let classes = classes(kib * 1024, 4096);
    let all = ["llama3", "qwen3", "deepseek_v3", "gptoss", "mistral_tekken"];
    // A third argument picks vocabularies: `mistral_tekken,llama3`.
    let models: Vec<&str> = match args.get(3) {
        Some(pick) => all
            .into_iter()
            .filter(|m| pick.split(',').any(|p| p == *m))
            .collect(),
        None => all.to_vec(),
    };
    let mut speed = Vec::new();
    let mut memory = Vec::new();
    for model in models {
        let d = dir.join(model);
        let tekken = d.join("tekken.json").exists();
        let file = d.join(if tekken {
            "tekken.json"
        } else {
            "tokenizer.json"
        });
        let json = std::fs::read(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        let (ours, our_load, our_heap) = measure_load(|| {
            HfTokenizer::from_vocabulary_file(&json).map_err(|e| format!("{model}: {e}"))
        })?;
        let (reference, ref_load, ref_heap) = measure_load(|| {
            if tekken {
                tekken_reference(&json)
            } else {
                tokenizers::Tokenizer::from_bytes(&json)
                    .map(|t| Reference::Hf(Box::new(t)))
                    .map_err(|e| format!("{model}: {e}"))
            }
        })?;
        memory.push(format!(
            "| {model} | {:.0} | {:.1} | {:.0} | {:.1} | {:.2}× |",
            our_load.as_secs_f64() * 1e3,
            mib(our_heap),
            ref_load.as_secs_f64() * 1e3,
            mib(ref_heap),
            ref_heap as f64 / our_heap.max(1) as f64,
        ));
        for (class, texts) in &classes {
            let bytes: usize = texts.iter().map(String::len).sum();
            // Sluice, Sluice's engine of before (the heap merge, where the
            // linear merge now serves: tekken; else the same engine twice),
            // the reference.
            let [(ours_s, ours_n), (old_s, old_n), (ref_s, ref_n)] = time_all(
                rounds,
                texts,
                [
                    &|t| ours.count(t),
                    &|t| ours.count_with_heap_merge(t),
                    &|t| reference.count(t),
                ],
                // Cold per round: the linear merge's cache of pairs is
                // shared by all calls (and rounds) and would otherwise hold
                // every pair of these texts in the next round.
                &|| ours.clear_cache(),
            );
            let same = if ours_n == ref_n && old_n == ref_n {
                ""
            } else {
                " **counts differ**"
            };
            speed.push(format!(
                "| {model} | {class} | {:.1} | {:.1} | {:.1} | {:.2}×{same} | {:.2}× |",
                bytes as f64 / 1e6 / ours_s,
                bytes as f64 / 1e6 / old_s,
                bytes as f64 / 1e6 / ref_s,
                ref_s / ours_s,
                old_s / ours_s,
            ));
            eprintln!("{}", speed.last().map_or("", |s| s.as_str()));
        }
        if let Reference::Tiktoken(_, n) = reference {
            eprintln!("{model}: ids offset by {n} special tokens in Sluice; counts compared");
        }
    }
    println!(
        "{kib} KiB per class in texts of 4 KiB, best of {rounds} rounds taken in turns, one thread\n"
    );
    println!(
        "| vocabulary | text | Sluice MB/s | Sluice heap merge MB/s | reference MB/s | Sluice / reference | Sluice / heap merge |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|");
    speed.iter().for_each(|r| println!("{r}"));
    println!("\n| vocabulary | Sluice load ms | Sluice heap MiB | reference load ms | reference heap MiB | reference / Sluice heap |");
    println!("|---|---:|---:|---:|---:|---:|");
    memory.iter().for_each(|r| println!("{r}"));
    Ok(())
}
