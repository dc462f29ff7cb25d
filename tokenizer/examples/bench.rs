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

use sluice_tokenizer::testing::Rng;
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

const HINDI: &str = "भारत में मानसून के आगमन के साथ ही कई राज्यों में भारी बारिश की चेतावनी जारी की गई है। मौसम विभाग ने अगले तीन दिनों तक सतर्क रहने की सलाह दी है और लोगों से अनावश्यक यात्रा न करने का अनुरोध किया है।";
const ARABIC: &str = "أعلنت الشركة عن نتائجها المالية للربع الثالث، والتي جاءت أفضل من توقعات المحللين بفضل ارتفاع المبيعات في الأسواق الخارجية وتحسن هوامش الربح.";
const CJK: &[&str] = &[
    "人工智能技术的快速发展正在深刻改变我们的生活方式和工作方式，同时也带来了新的挑战和机遇。",
    "東京の天気は明日から崩れる見込みで、週末にかけて広い範囲で雨が降るでしょう。お出かけの際は傘をお持ちください。",
    "오늘 회의에서는 다음 분기 예산안과 신규 프로젝트 일정에 대해 논의할 예정입니다. 참석 여부를 알려 주세요.",
];

/// Text of about `size` bytes made of items drawn by `item`.
fn fill(size: usize, mut item: impl FnMut(&mut String)) -> String {
    let mut s = String::with_capacity(size + 64);
    while s.len() < size {
        item(&mut s);
    }
    s
}

/// The classes of text of the per-class table, each about `size` bytes:
/// ordinary text of several kinds, then the pathological ones (one long
/// piece, or pieces that are all new to any cache).
fn classes(size: usize) -> Vec<(&'static str, String)> {
    let mut rng = Rng(0x5eed);
    let pick = |rng: &mut Rng, words: &[&'static str]| words[rng.below(words.len())];
    let shuffled = |paragraphs: &[&str], seed| {
        let w = words(paragraphs);
        let mut rng = Rng(seed);
        fill(size, |s| {
            s.push_str(w[rng.below(w.len())]);
            s.push(if rng.below(12) == 0 { '\n' } else { ' ' });
        })
    };
    let code = [MIXED[10], MIXED[11], MIXED[12]];
    let random_letters = |rng: &mut Rng, n| -> String {
        (0..n)
            .map(|_| (b'a' + rng.below(26) as u8) as char)
            .collect()
    };
    vec![
        ("english", shuffled(ENGLISH, 1)),
        ("mixed", shuffled(&[ENGLISH, MIXED].concat(), 2)),
        ("CJK", {
            let mut r = Rng(3);
            fill(size, |s| s.push_str(CJK[r.below(CJK.len())]))
        }),
        ("Hindi", shuffled(&[HINDI], 4)),
        ("Arabic", shuffled(&[ARABIC], 5)),
        ("code", {
            let mut r = Rng(6);
            fill(size, |s| s.push_str(code[r.below(code.len())]))
        }),
        (
            "digits",
            fill(size, |s| s.push((b'0' + rng.below(10) as u8) as char)),
        ),
        (
            "random words",
            fill(size, |s| {
                let n = 1 + rng.below(12);
                s.push_str(&random_letters(&mut rng, n));
                s.push(' ');
            }),
        ),
        (
            "long random words",
            fill(size, |s| {
                let n = 32 + rng.below(96);
                s.push_str(&random_letters(&mut rng, n));
                s.push(' ');
            }),
        ),
        // One piece each from here on.
        ("one letter", "a".repeat(size)),
        ("one CJK char", "中".repeat(size / 3)),
        (
            "punctuation run",
            fill(size, |s| {
                s.push_str(pick(&mut rng, &["-", "=", "*", "!", "."]))
            }),
        ),
        ("random letters", random_letters(&mut rng, size)),
        (
            "random CJK",
            fill(size, |s| {
                s.push(char::from_u32(0x4e00 + rng.below(0x5000) as u32).unwrap())
            }),
        ),
        ("spaces", " ".repeat(size)),
        ("newlines", "\n".repeat(size)),
        (
            "whitespace mix",
            fill(size, |s| {
                s.push(
                    pick(&mut rng, &[" ", " ", "\t", "  "])
                        .chars()
                        .next()
                        .unwrap(),
                )
            }),
        ),
    ]
}

/// The classes named in `SLUICE_BENCH_CLASSES` (comma-separated), all
/// where it is not set: to time a few classes side by side with another
/// build.
fn selected(classes: Vec<(&'static str, String)>) -> Vec<(&'static str, String)> {
    match std::env::var("SLUICE_BENCH_CLASSES") {
        Ok(names) => classes
            .into_iter()
            .filter(|(n, _)| names.split(',').any(|w| w == *n))
            .collect(),
        Err(_) => classes,
    }
}

/// tiktoken-rs's count, or None where it panics (fancy-regex gives up on
/// long whitespace runs).
fn tiktoken_count(reference: &tiktoken_rs::CoreBPE, text: &str) -> Option<usize> {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let r = std::panic::catch_unwind(|| reference.encode_ordinary(text).len()).ok();
    std::panic::set_hook(hook);
    r
}

/// `bench classes [SIZE_KIB] [ROUNDS] [o200k|cl100k]`: MB/s per class of
/// text, old engine (tiktoken's merge, heap-based for long pieces) vs the
/// linear one vs tiktoken-rs, timed in turn (interleaved) for ROUNDS
/// rounds, the fastest of each kept; then the time of the new engine on
/// 4 MiB of each class.
fn bench_classes(args: &[String]) {
    let kib: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(1024);
    let rounds: usize = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(3);
    let encodings: Vec<Encoding> = match args.get(4).map(String::as_str) {
        Some("o200k") => vec![Encoding::O200kBase],
        Some("cl100k") => vec![Encoding::Cl100kBase],
        _ => vec![Encoding::O200kBase, Encoding::Cl100kBase],
    };
    let size = kib * 1024;
    println!("per class, {kib} KiB each, fastest of {rounds} interleaved rounds; MB/s (1 MB = 10^6 bytes)");
    for e in encodings {
        let tok = Tokenizer::new(e);
        let reference = match e {
            Encoding::Cl100kBase => tiktoken_rs::cl100k_base().unwrap(),
            Encoding::O200kBase => tiktoken_rs::o200k_base().unwrap(),
        };
        println!("\n{}", e.name());
        println!(
            "| class | bytes | tokens | old MB/s | new MB/s | tiktoken-rs MB/s | new/old | new/tiktoken-rs |"
        );
        println!("|---|---:|---:|---:|---:|---:|---:|---:|");
        for (name, text) in selected(classes(size)) {
            let n = tok.count(&text);
            assert_eq!(
                n,
                tok.count_with_tiktoken_merge(&text),
                "{name}: engines differ"
            );
            let mut best = [Duration::MAX; 3];
            let mut theirs = None;
            for _ in 0..rounds {
                let t = Instant::now();
                black_box(tok.count_with_tiktoken_merge(black_box(&text)));
                best[0] = best[0].min(t.elapsed());
                // Cold: the cache of pairs, shared by all calls, would
                // otherwise hold every pair of this very text.
                tok.clear_cache();
                let t = Instant::now();
                black_box(tok.count(black_box(&text)));
                best[1] = best[1].min(t.elapsed());
                let t = Instant::now();
                theirs = tiktoken_count(&reference, black_box(&text));
                best[2] = best[2].min(t.elapsed());
                if let Some(want) = theirs {
                    assert_eq!(n, want, "{name}: tiktoken-rs counts differently");
                }
            }
            let mbs = |d: Duration| text.len() as f64 / 1e6 / d.as_secs_f64();
            let (tik, ratio) = match theirs {
                Some(_) => (
                    format!("{:.1}", mbs(best[2])),
                    format!("{:.1}x", mbs(best[1]) / mbs(best[2])),
                ),
                None => ("panics".to_string(), "-".to_string()),
            };
            println!(
                "| {name} | {} | {n} | {:.1} | {:.1} | {tik} | {:.1}x | {ratio} |",
                text.len(),
                mbs(best[0]),
                mbs(best[1]),
                mbs(best[1]) / mbs(best[0]),
            );
        }
        println!(
            "\n{}: new engine on 4 MiB of each class, fastest (median) of {rounds}: `count`, and \
             `count_within` with admission's default budget of 128 KiB",
            e.name()
        );
        println!("| class | count ms | MB/s | count_within ms | exact |");
        println!("|---|---:|---:|---:|---|");
        for (name, text) in selected(classes(4 << 20)) {
            let (fastest, median) = times(rounds, || {
                tok.clear_cache();
                tok.count(black_box(&text))
            });
            let mut exact = false;
            let (w_fastest, w_median) = times(rounds, || {
                let mut budget = 128 * 1024;
                exact = tok.count_within(black_box(&text), &mut budget).exact;
            });
            println!(
                "| {name} | {:.1} ({:.1}) | {:.1} | {:.2} ({:.2}) | {} |",
                ms(fastest),
                ms(median),
                text.len() as f64 / 1e6 / fastest.as_secs_f64(),
                ms(w_fastest),
                ms(w_median),
                if exact { "yes" } else { "no" }
            );
        }
    }
}

/// `bench prompts [KIB] [ROUNDS] [o200k|cl100k]`: each class cut into
/// prompts of about 4 KiB (at character boundaries), all counted in turn by
/// one tokenizer, as a filter counts request after request: MB/s, fastest
/// of ROUNDS, the linear merge's pair cache emptied before each round (so
/// what it holds comes from the earlier prompts of the same round only).
fn bench_prompts(args: &[String]) {
    let kib: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(256);
    let rounds: usize = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(3);
    let e = match args.get(4).map(String::as_str) {
        Some("cl100k") => Encoding::Cl100kBase,
        _ => Encoding::O200kBase,
    };
    let tok = Tokenizer::new(e);
    println!(
        "{}: {kib} KiB per class in prompts of about 4 KiB, fastest of {rounds}",
        e.name()
    );
    println!("| class | prompts | tokens | MB/s |");
    println!("|---|---:|---:|---:|");
    for (name, text) in classes(kib * 1024) {
        let mut prompts = Vec::new();
        let mut start = 0;
        while start < text.len() {
            let mut end = (start + 4096).min(text.len());
            while !text.is_char_boundary(end) {
                end += 1;
            }
            prompts.push(&text[start..end]);
            start = end;
        }
        let mut n = 0;
        let (best, _) = times(rounds, || {
            tok.clear_cache();
            n = prompts
                .iter()
                .map(|p| tok.count(black_box(p)))
                .sum::<usize>();
        });
        println!(
            "| {name} | {} | {n} | {:.1} |",
            prompts.len(),
            text.len() as f64 / 1e6 / best.as_secs_f64()
        );
    }
}

fn main() {
    // `bench profile [cl100k]`: just count the mixed text in a loop, for perf.
    // `bench dump DIR`: write the texts and tiktoken-rs's counts of them, for
    // the Wasm bench (wasm-bench/).
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("one") {
        // `bench one CLASS [KIB] [cl100k]`: count one class in a loop, for
        // perf, or to compare builds by CPU time (`time`); each count cold,
        // as in `classes`.
        let kib: usize = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(1024);
        let t = Instant::now();
        let tok = Tokenizer::new(match args.get(4).map(String::as_str) {
            Some("cl100k") => Encoding::Cl100kBase,
            _ => Encoding::O200kBase,
        });
        println!("new: {:.1} ms", ms(t.elapsed()));
        let text = classes(kib * 1024)
            .into_iter()
            .find(|(n, _)| n == &args[2])
            .unwrap()
            .1;
        let t = Instant::now();
        let mut n = 0;
        for _ in 0..5 {
            tok.clear_cache();
            n += tok.count(black_box(&text));
        }
        println!(
            "{n} {:.1} MB/s",
            5.0 * text.len() as f64 / 1e6 / t.elapsed().as_secs_f64()
        );
        return;
    }
    if args.get(1).map(String::as_str) == Some("classes") {
        bench_classes(&args);
        return;
    }
    if args.get(1).map(String::as_str) == Some("prompts") {
        bench_prompts(&args);
        return;
    }
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
            // The per-class texts (256 KiB each), for the per-class table in
            // V8: counted by tiktoken-rs where it can, else by the old engine.
            let kib: usize = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(256);
            for (name, text) in classes(kib * 1024) {
                let n = tiktoken_count(&reference, &text)
                    .unwrap_or_else(|| tok.count_with_tiktoken_merge(&text));
                let name = name.replace(' ', "_");
                std::fs::write(format!("{dir}/{}-class-{name}.txt", e.name()), &text).unwrap();
                std::fs::write(
                    format!("{dir}/{}-class-{name}.count", e.name()),
                    n.to_string(),
                )
                .unwrap();
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
            // Each timed call cold (see `bench_classes`).
            let (ours_min, ours) = times(21, || {
                tok.clear_cache();
                tok.count(text)
            });
            let ours_enc = time(21, || {
                tok.clear_cache();
                tok.encode(text)
            });
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
        let d = time(3, || {
            tok.clear_cache();
            tok.count(&text)
        });
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
