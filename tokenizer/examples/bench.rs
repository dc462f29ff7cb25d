//! Native speed of sluice-tokenizer against tiktoken-rs 0.12.
//!
//! `cargo run --release -p sluice-tokenizer --example bench`
//!
//! Texts are generated deterministically: a mixed-language one (English,
//! German, French, Chinese, Japanese, Korean, Arabic, Hindi, Russian, Thai,
//! emoji, source code, JSON) and a pure-English one, each about 37k tokens.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use sluice_tokenizer::{Encoding, Tokenizer};

const ENGLISH: &[&str] = &[
    "The committee met on Tuesday to review the proposal, and after a long discussion they agreed that the budget would need to be revised before the end of the quarter.",
    "It's not clear whether the new policy will reduce costs; we'll know more once the first reports come in, but early numbers suggest a 12% improvement.",
    "She opened the window, looked at the rain falling over the old harbour, and decided that the letter could wait until tomorrow morning.",
    "Large language models are trained on vast amounts of text, and their inputs and outputs are measured in tokens rather than characters or words.",
    "If you're planning to visit in September, bring a light jacket: evenings can be surprisingly cold, even when the afternoons are warm and sunny.",
    "The results, published in 2023, showed that participants who slept at least seven hours performed significantly better on the memory tests.",
    "\"I don't think that's what he meant,\" she said quietly, \"but I suppose we'll never really know.\"",
    "Please find attached the invoice for March. Payment is due within thirty days; contact accounting@example.com with any questions.",
];

const MIXED: &[&str] = &[
    "Die Überprüfung der Anträge dauert länger als erwartet, weil die zuständige Behörde seit Monaten unterbesetzt ist. Größere Verzögerungen sind möglich.",
    "Le gouvernement a annoncé jeudi une série de mesures destinées à soutenir les entreprises touchées par la hausse des prix de l'énergie.",
    "人工智能技术的快速发展正在深刻改变我们的生活方式和工作方式，同时也带来了新的挑战和机遇。",
    "東京の天気は明日から崩れる見込みで、週末にかけて広い範囲で雨が降るでしょう。お出かけの際は傘をお持ちください。",
    "오늘 회의에서는 다음 분기 예산안과 신규 프로젝트 일정에 대해 논의할 예정입니다. 참석 여부를 알려 주세요.",
    "أعلنت الشركة عن نتائجها المالية للربع الثالث، والتي جاءت أفضل من توقعات المحللين بفضل ارتفاع المبيعات.",
    "भारत में मानसून के आगमन के साथ ही कई राज्यों में भारी बारिश की चेतावनी जारी की गई है।",
    "Сегодня в Москве ожидается переменная облачность, без осадков. Температура воздуха днём составит около двадцати градусов.",
    "กรุงเทพมหานครเป็นเมืองหลวงของประเทศไทยและเป็นศูนย์กลางทางเศรษฐกิจที่สำคัญของภูมิภาค",
    "Great job team! 🎉🚀 Release v2.4.1 is out 👩‍💻👨🏽‍💻 — thanks everyone ❤️🔥 #shipit",
    "fn parse(input: &str) -> Result<Vec<Token>, Error> {\n    let mut out = Vec::new();\n    for (i, c) in input.char_indices() {\n        if c.is_whitespace() { continue; }\n        out.push(Token::new(i, c));\n    }\n    Ok(out)\n}\n",
    "def handler(event, context):\n    body = json.loads(event[\"body\"])\n    if not body.get(\"user_id\"):\n        return {\"statusCode\": 400, \"body\": \"missing user_id\"}\n    return {\"statusCode\": 200}\n",
    "{\n  \"model\": \"gpt-4o\",\n  \"messages\": [\n    {\"role\": \"system\", \"content\": \"You are a helpful assistant.\"},\n    {\"role\": \"user\", \"content\": \"Summarize the document.\"}\n  ],\n  \"max_tokens\": 512\n}\n",
];

struct Rng(u64);
impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n as u64) as usize
    }
}

/// The "words" of some paragraphs: split at spaces, and runs of CJK / Thai
/// (which have no spaces) cut every few characters.
fn words<'a>(paragraphs: &[&'a str]) -> Vec<&'a str> {
    let mut out = Vec::new();
    for p in paragraphs {
        for w in p.split(' ').filter(|w| !w.is_empty()) {
            let cuts: Vec<usize> = w
                .char_indices()
                .map(|(i, _)| i)
                .step_by(
                    if w.chars()
                        .all(|c| (c as u32) < 0x2e80 && !('\u{e00}'..'\u{e80}').contains(&c))
                    {
                        usize::MAX
                    } else {
                        3
                    },
                )
                .chain([w.len()])
                .collect();
            for c in cuts.windows(2) {
                out.push(&w[c[0]..c[1]]);
            }
        }
    }
    out
}

/// Whole paragraphs from `paragraphs` and sentences of words shuffled from
/// them, in turn, until `tok` counts `target` tokens: realistic pieces, but
/// not a text that repeats a few paragraphs (which would flatter caches).
fn generate(paragraphs: &[&str], target: usize, tok: &Tokenizer, seed: u64) -> String {
    let mut rng = Rng(seed);
    let words = words(paragraphs);
    let mut text = String::new();
    while tok.count(&text) < target {
        for _ in 0..20 {
            if rng.below(3) == 0 {
                text.push_str(paragraphs[rng.below(paragraphs.len())]);
            } else {
                for _ in 0..5 + rng.below(25) {
                    text.push_str(words[rng.below(words.len())]);
                    text.push(' ');
                }
                text.push_str([". ", ", ", "? ", "! ", ".\n", ":\n"][rng.below(6)]);
            }
            text.push(if rng.below(4) == 0 { '\n' } else { ' ' });
        }
    }
    text
}

/// Median of `runs` timed calls of `f`.
fn time<T>(runs: usize, f: impl FnMut() -> T) -> Duration {
    times(runs, f).1
}

/// (fastest, median) of `runs` timed calls of `f`. On a busy machine the
/// fastest run is the better estimate of the uncontended speed.
fn times<T>(runs: usize, mut f: impl FnMut() -> T) -> (Duration, Duration) {
    let mut v: Vec<Duration> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            black_box(f());
            t.elapsed()
        })
        .collect();
    v.sort();
    (v[0], v[v.len() / 2])
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    // `bench profile [cl100k]`: just count the mixed text in a loop, for perf.
    // `bench dump DIR`: write the texts and tiktoken-rs's counts of them, for
    // the Wasm bench (wasm-bench/).
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("dump") {
        let dir = args.get(2).expect("bench dump DIR");
        std::fs::create_dir_all(dir).unwrap();
        for e in [Encoding::O200kBase, Encoding::Cl100kBase] {
            let tok = Tokenizer::new(e);
            let reference = match e {
                Encoding::Cl100kBase => tiktoken_rs::cl100k_base().unwrap(),
                Encoding::O200kBase => tiktoken_rs::o200k_base().unwrap(),
            };
            for (name, text) in [
                (
                    "mixed",
                    generate(&[ENGLISH, MIXED].concat(), 37_000, &tok, 7),
                ),
                ("english", generate(ENGLISH, 37_000, &tok, 11)),
            ] {
                let n = reference.encode_ordinary(&text).len();
                std::fs::write(format!("{dir}/{}-{name}.txt", e.name()), &text).unwrap();
                std::fs::write(format!("{dir}/{}-{name}.count", e.name()), n.to_string()).unwrap();
            }
        }
        return;
    }
    if args.get(1).map(String::as_str) == Some("profile") {
        let e = if args.get(2).map(String::as_str) == Some("cl100k") {
            Encoding::Cl100kBase
        } else {
            Encoding::O200kBase
        };
        let tok = Tokenizer::new(e);
        let text = generate(&[ENGLISH, MIXED].concat(), 37_000, &tok, 7);
        let mut n = 0;
        for _ in 0..1000 {
            n += tok.count(black_box(&text));
        }
        println!("{n}");
        return;
    }
    println!("sluice-tokenizer vs tiktoken-rs 0.12 (native, release; medians)\n");
    println!("construction:");
    for e in [Encoding::Cl100kBase, Encoding::O200kBase] {
        let ours = time(7, || Tokenizer::new(e));
        let theirs = time(3, || match e {
            Encoding::Cl100kBase => tiktoken_rs::cl100k_base().unwrap(),
            Encoding::O200kBase => tiktoken_rs::o200k_base().unwrap(),
        });
        println!(
            "  {:<12} sluice {:>7.2} ms   tiktoken-rs {:>8.2} ms",
            e.name(),
            ms(ours),
            ms(theirs)
        );
    }
    println!();
    for e in [Encoding::O200kBase, Encoding::Cl100kBase] {
        let tok = Tokenizer::new(e);
        let reference = match e {
            Encoding::Cl100kBase => tiktoken_rs::cl100k_base().unwrap(),
            Encoding::O200kBase => tiktoken_rs::o200k_base().unwrap(),
        };
        let texts = [
            (
                "mixed",
                generate(&[ENGLISH, MIXED].concat(), 37_000, &tok, 7),
            ),
            ("english", generate(ENGLISH, 37_000, &tok, 11)),
        ];
        for (name, text) in &texts {
            let n = tok.count(text);
            let want = reference.encode_ordinary(text).len();
            let (ours_min, ours) = times(21, || tok.count(text));
            let ours_enc = time(21, || tok.encode(text));
            let (theirs_min, theirs) = times(7, || reference.encode_ordinary(text).len());
            let mb = text.len() as f64 / 1e6;
            println!(
                "{:<12} {:<8} {:>7} bytes {:>6} tokens (tiktoken-rs: {:>6}, {})",
                e.name(),
                name,
                text.len(),
                n,
                want,
                if n == want { "equal" } else { "DIFFERENT" }
            );
            println!(
                "  sluice count  {:>6.3} ms {:>6.1} MB/s (fastest {:.3} ms) | sluice encode {:>6.3} ms | \
                 tiktoken-rs {:>6.3} ms {:>5.1} MB/s (fastest {:.3} ms) | {:.1}x",
                ms(ours),
                mb / ours.as_secs_f64(),
                ms(ours_min),
                ms(ours_enc),
                ms(theirs),
                mb / theirs.as_secs_f64(),
                ms(theirs_min),
                theirs.as_secs_f64() / ours.as_secs_f64()
            );
            assert_eq!(n, want, "token counts differ");
        }
    }
    println!("\npathological inputs, o200k_base (sluice count vs tiktoken-rs encode_ordinary):");
    let tok = Tokenizer::new(Encoding::O200kBase);
    let reference = tiktoken_rs::o200k_base().unwrap();
    for (name, text) in [
        ("100 KB of 'a'", "a".repeat(100_000)),
        ("1 MB of spaces", " ".repeat(1_000_000)),
        ("1 MB of random letters", {
            let mut rng = Rng(3);
            (0..1_000_000)
                .map(|_| (b'a' + rng.below(26) as u8) as char)
                .collect()
        }),
    ] {
        let d = time(3, || tok.count(&text));
        // tiktoken-rs panics on some of these (fancy-regex gives up).
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let t = Instant::now();
        let r = std::panic::catch_unwind(|| reference.encode_ordinary(&text).len());
        let r_time = t.elapsed();
        std::panic::set_hook(hook);
        let theirs = match r {
            Ok(n) => {
                assert_eq!(tok.count(&text), n);
                format!("{:>8.2} ms (same count)", ms(r_time))
            }
            Err(_) => "panics (fancy-regex: StackOverflow)".to_string(),
        };
        println!(
            "  {name:<24} sluice {:>8.2} ms   tiktoken-rs {theirs}",
            ms(d)
        );
    }
}
