//! Differential tests against tiktoken-rs 0.12 (the reference: OpenAI's
//! tiktoken core with fancy-regex), plus the generator and the checks of the
//! embedded data.
//!
//! Regenerate `data/` with
//! `cargo test -p sluice-tokenizer --release --test reference -- --ignored generate_data`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod gen;

use std::sync::OnceLock;

use sluice_tokenizer::testing::Rng;
use sluice_tokenizer::{Encoding, Tokenizer};
use tiktoken_rs::CoreBPE;

const ENCODINGS: [Encoding; 2] = [Encoding::Cl100kBase, Encoding::O200kBase];

fn ours(e: Encoding) -> &'static Tokenizer {
    static CL: OnceLock<Tokenizer> = OnceLock::new();
    static O2: OnceLock<Tokenizer> = OnceLock::new();
    match e {
        Encoding::Cl100kBase => CL.get_or_init(|| Tokenizer::new(e)),
        Encoding::O200kBase => O2.get_or_init(|| Tokenizer::new(e)),
    }
}

fn reference(e: Encoding) -> &'static CoreBPE {
    match e {
        Encoding::Cl100kBase => tiktoken_rs::cl100k_base_singleton(),
        Encoding::O200kBase => tiktoken_rs::o200k_base_singleton(),
    }
}

/// tiktoken's pre-tokenization regexes, exactly as tiktoken-rs 0.12 builds
/// its `CoreBPE`s with them.
const CL100K_PAT_STR: &str = "'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}++|\\p{N}{1,3}+| ?[^\\s\\p{L}\\p{N}]++[\\r\\n]*+|\\s++$|\\s*[\\r\\n]|\\s+(?!\\S)|\\s";

fn reference_regex(e: Encoding) -> &'static fancy_regex::Regex {
    static CL: OnceLock<fancy_regex::Regex> = OnceLock::new();
    static O2: OnceLock<fancy_regex::Regex> = OnceLock::new();
    match e {
        Encoding::Cl100kBase => CL.get_or_init(|| fancy_regex::Regex::new(CL100K_PAT_STR).unwrap()),
        Encoding::O200kBase => {
            O2.get_or_init(|| fancy_regex::Regex::new(tiktoken_rs::O200K_BASE_PAT_STR).unwrap())
        }
    }
}

/// Compares, for both encodings, the pre-tokenization with tiktoken's regex
/// and `encode` and `count` with tiktoken-rs's `encode_ordinary` on every
/// text; fails listing the texts that differ. Returns the number of (text,
/// encoding) comparisons.
fn check_all<S: AsRef<str>>(texts: &[S]) -> usize {
    let mut failures = Vec::new();
    for e in ENCODINGS {
        let (ours, reference, regex) = (ours(e), reference(e), reference_regex(e));
        for t in texts {
            let t = t.as_ref();
            let want_pieces: Vec<&str> = regex.find_iter(t).map(|m| m.unwrap().as_str()).collect();
            let got_pieces = ours.split_pieces(t);
            let want = reference.encode_ordinary(t);
            let got = ours.encode(t);
            let count = ours.count(t);
            if got != want || count != want.len() || got_pieces != want_pieces {
                failures.push(format!(
                    "{}: {:?}\n  tiktoken: {:?} {:?}\n  ours:     {:?} {:?} (count {})",
                    e.name(),
                    t,
                    want_pieces,
                    want,
                    got_pieces,
                    got,
                    count
                ));
            }
        }
    }
    println!(
        "compared {} texts ({} bytes) x {} encodings",
        texts.len(),
        texts.iter().map(|t| t.as_ref().len()).sum::<usize>(),
        ENCODINGS.len()
    );
    if !failures.is_empty() {
        let n = failures.len();
        failures.truncate(20);
        panic!("{n} mismatch(es):\n{}", failures.join("\n"));
    }
    texts.len() * ENCODINGS.len()
}

// ---------------------------------------------------------------- data

#[test]
#[ignore = "writes data/; run by hand after changing the generator"]
fn generate_data() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/data");
    std::fs::create_dir_all(dir).unwrap();
    for e in ENCODINGS {
        let data = gen::rank_data(reference(e));
        std::fs::write(format!("{dir}/{}.order", e.name()), gen::byte_order(&data)).unwrap();
        std::fs::write(format!("{dir}/{}.bin", e.name()), data).unwrap();
    }
    std::fs::write(format!("{dir}/unicode_classes.bin"), gen::unicode_table()).unwrap();
}

#[test]
fn embedded_byte_order_is_the_tokens_order() {
    let files: [(&[u8], &[u8]); 2] = [
        (
            include_bytes!("../data/cl100k_base.bin"),
            include_bytes!("../data/cl100k_base.order"),
        ),
        (
            include_bytes!("../data/o200k_base.bin"),
            include_bytes!("../data/o200k_base.order"),
        ),
    ];
    for (data, order) in files {
        assert!(gen::byte_order(data) == order, "data/*.order is stale");
    }
}

#[test]
fn embedded_rank_data_is_tiktokens() {
    let files: [(Encoding, &[u8], usize); 2] = [
        (
            Encoding::Cl100kBase,
            include_bytes!("../data/cl100k_base.bin"),
            100_256,
        ),
        (
            Encoding::O200kBase,
            include_bytes!("../data/o200k_base.bin"),
            199_998,
        ),
    ];
    for (e, file, n) in files {
        let data = gen::rank_data(reference(e));
        assert!(
            data == file,
            "data/{}.bin is not tiktoken-rs's vocabulary",
            e.name()
        );
        // n tokens, each of which encodes to itself when it is valid UTF-8.
        let mut i = 0;
        let mut count = 0;
        while i < data.len() {
            let len = data[i] as usize;
            if let Ok(s) = std::str::from_utf8(&data[i + 1..i + 1 + len]) {
                assert_eq!(ours(e).encode(s), reference(e).encode_ordinary(s), "{s:?}");
            }
            i += 1 + len;
            count += 1;
        }
        assert_eq!(count, n);
    }
}

#[test]
fn embedded_unicode_table_is_regexs() {
    let table = gen::unicode_table();
    assert!(
        table == include_bytes!("../data/unicode_classes.bin"),
        "data/unicode_classes.bin differs from the regex crate's classes"
    );
}

/// The contractions are matched by hand, assuming that under the regex
/// crate's case-insensitive matching only ASCII case and `ſ` (U+017F, which
/// folds to `s`) are involved. Check that assumption on every code point.
#[test]
fn contraction_case_folds() {
    let all: String = (0u32..0x11_0000).filter_map(char::from_u32).collect();
    let re = regex::Regex::new(r"(?i:[sdmtlver])").unwrap();
    let got: String = re.find_iter(&all).map(|m| m.as_str()).collect();
    assert_eq!(got, "DELMRSTVdelmrstvſ");
}

// ---------------------------------------------------------------- corpora

const MULTILINGUAL: &[&str] = &[
    "The quick brown fox jumps over the lazy dog. It's 3:45pm; we'll see what they've done.",
    "Falsches Üben von Xylophonmusik quält jeden größeren Zwerg. Straße, Fußgängerübergänge, ÄÖÜäöüß.",
    "Portez ce vieux whisky au juge blond qui fume. L'été dernier, j'ai vu l'œuvre d'Émile à l'hôtel.",
    "我能吞下玻璃而不伤身体。今天天气很好，我们去公园散步吧！人工智能正在改变世界。",
    "私はガラスを食べられます。それは私を傷つけません。東京タワーはとても高いです。カタカナとひらがな。",
    "나는 유리를 먹을 수 있어요. 그래도 아프지 않아요. 안녕하세요, 만나서 반갑습니다!",
    "أنا قادر على أكل الزجاج و هذا لا يؤلمني. مرحبا بالعالم! اللُّغَةُ العَرَبِيَّةُ",
    "मैं काँच खा सकता हूँ और मुझे उससे कोई चोट नहीं पहुंचती। नमस्ते दुनिया! हिन्दी भाषा",
    "Я могу есть стекло, оно мне не вредит. Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "ฉันกินกระจกได้ แต่มันไม่ทำให้ฉันเจ็บ สวัสดีครับ ภาษาไทยไม่มีช่องว่างระหว่างคำ",
    "Μπορώ να φάω σπασμένα γυαλιά χωρίς να πάθω τίποτα. Ξεσκεπάζω την ψυχοφθόρα βδελυγμία.",
    "אני יכול לאכול זכוכית וזה לא מזיק לי. שָׁלוֹם עוֹלָם",
    "Tôi có thể ăn thủy tinh mà không hại gì. Tiếng Việt có dấu: ắ ằ ẳ ẵ ặ ễ ệ ổ ỡ ự",
    "Emoji: 😀😃😄 👍🏽 👩‍👩‍👧‍👦 👨🏿‍💻 🏳️‍🌈 ❤️‍🔥 🇩🇪🇯🇵 1️⃣ #️⃣ 🧑🏻‍🤝‍🧑🏿 ✌🏾",
    "Combining: e\u{301} a\u{308} o\u{302}\u{323} n\u{303} Z\u{335}\u{321}a\u{337}l\u{338}g\u{334}o\u{336} \u{301}\u{302}x A\u{301}B",
    "Mixed: naïve café résumé coöperate; ﬁnance ﬂow; ǅungla ǈudi ǋ; ʰʲʷ ˢᵗ; Ⅻ ⅻ ½ ¾ ² ³ ٣٤٥ ४५६ 一二三",
    "Math: ∀x∈ℝ: x² ≥ 0, ∑ᵢ aᵢ = ∫₀^∞ f(x) dx ≈ 3.14159… π≠22/7 ⟨ψ|φ⟩ ℏω",
    "Spaces: a\u{a0}b\u{2009}c\u{3000}d\u{200b}e\u{feff}f\u{85}g\u{2028}h\u{2029}i\u{1680}j\u{202f}k",
    "ſ 'ſ I'ſ we'ſ ſt ÿ K Å ǰ ΐ ẞ ß İ ı ﬀ",
    "Zero width joiner\u{200d}and non\u{200c}joiner, soft\u{ad}hyphen, BOM\u{feff}x, RTL\u{202e}txt\u{202c}",
];

const CODE: &[&str] = &[
    r#"fn main() {
    let v: Vec<u32> = (0..10).map(|x| x * 2).collect();
    for (i, x) in v.iter().enumerate() {
        if *x > 4 && i % 2 == 0 { println!("{i}: {x:>4}"); }
    }
    // comment with 'quotes' and "strings" and \n escapes
    let s = r"raw\string"; let c = b'\''; let path = "/usr/local/bin//x";
}
"#,
    "def fib(n: int) -> int:\n    \"\"\"Return the n'th Fibonacci number.\"\"\"\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n\n\nif __name__ == '__main__':\n    print(f\"{fib(30)=}\")\r\n",
    "{\n  \"a\": {\n    \"b\": {\n      \"c\": {\n        \"d\": {\n          \"e\": [1, 2.5, -3e10, true, null, \"x\\\"y\"],\n          \"f\": {}\n        }\n      }\n    }\n  },\n  \"url\": \"https://example.com/path/to?q=1&r=2#frag\"\n}\n",
    "<html><body><div class=\"x\">&nbsp;Hello&amp;bye</div><!-- c --></body></html>",
    "SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%o''brien%' ORDER BY id DESC;",
    "\t\tif (x) {\n\t\t\treturn y;\n\t\t}\n\t\t\n\t}\n",
    "#include <stdio.h>\nint main(void){printf(\"%d\\n\",42);return 0;}// done\n",
    "$ ls -la /var/log/*.log | grep -E '^-rw' | awk '{print $5}' >> /tmp/out.txt 2>&1",
];

const WHITESPACE: &[&str] = &[
    "\n",
    "\n\n",
    "\n\n\n",
    " ",
    "  ",
    "   ",
    "\t",
    "  \t x",
    "x  ",
    "x   ",
    "x \n",
    "x  \n",
    "x \n ",
    "x \n  ",
    "a\n b",
    "a\n  b",
    "\r\n",
    "\r\n\r\n",
    "a\r\nb",
    "\r",
    "a\rb",
    "\r\r\n",
    " \r\n",
    "  \n\n  ",
    "a  \n\n  b",
    "a\t\tb",
    "a\t\t",
    "\u{a0}\u{a0}a",
    " \u{3000}x",
    "\n\u{85}",
    "x\u{85}\u{85}y",
    "\u{2028}\n",
    "   \n   \n   ",
    " .",
    "  .",
    " \n.",
    "\n \n x",
    "x\n\n\n\n ",
    "\u{b}\u{c}x",
    "\u{1c}\u{1d}\u{1e}\u{1f}",
    " x \t y \r z ",
    "end with space ",
    "end with spaces   ",
    "end with newline\n",
    "  leading",
    "\n\nleading",
    "a /b //\nc/\n/",
];

const NUMBERS: &[&str] = &[
    "1",
    "12",
    "123",
    "1234",
    "1234567",
    "3.14159",
    "-42",
    "1,000,000",
    "0x1F",
    "1e-9",
    "²³",
    "١٢٣٤٥",
    "۱۲۳۴",
    "१२३४५",
    "一二三四",
    "Ⅷ",
    "½¼",
    "12ab34",
    "ab1234cd",
    "v1.2.3-beta.4",
    "2024-05-13T12:34:56Z",
    "+1 (555) 123-4567",
    "😀123",
    " 123",
    "  123",
];

const SPECIAL: &[&str] = &[
    "<|endoftext|>",
    "a<|endoftext|>b",
    "<|fim_prefix|>x<|fim_middle|>y<|fim_suffix|>",
    "<|endofprompt|>",
    "<|im_start|>user\nhi<|im_end|>",
    "<|",
    "|>",
    "<||>",
];

#[test]
fn multilingual() {
    check_all(MULTILINGUAL);
    check_all(&[MULTILINGUAL.concat()]);
}

#[test]
fn source_code() {
    check_all(CODE);
    // JSON nested 40 deep, two-space and tab indentation.
    for indent in ["  ", "\t", "    "] {
        let mut json = String::new();
        for d in 0..40 {
            json.push_str(&format!(
                "{}{{\n{}\"k{d}\": [1, \"v\"],\n",
                indent.repeat(d),
                indent.repeat(d + 1)
            ));
        }
        for d in (0..40).rev() {
            json.push_str(&format!(
                "{}\"end\": null\n{}}}\n",
                indent.repeat(d + 1),
                indent.repeat(d)
            ));
        }
        check_all(&[json]);
    }
}

#[test]
fn whitespace() {
    check_all(WHITESPACE);
}

#[test]
fn numbers_and_special_looking_text() {
    check_all(NUMBERS);
    check_all(SPECIAL);
}

#[test]
fn contractions_in_all_cases() {
    let mut texts = Vec::new();
    for c in [
        "s", "t", "re", "ve", "m", "ll", "d", "ſ", "x", "l", "r", "v",
    ] {
        // every upper/lower combination of the letters
        let letters: Vec<char> = c.chars().collect();
        for mask in 0..(1u32 << letters.len()) {
            let v: String = letters
                .iter()
                .enumerate()
                .map(|(i, ch)| {
                    if mask & (1 << i) != 0 {
                        ch.to_uppercase().next().unwrap()
                    } else {
                        *ch
                    }
                })
                .collect();
            for ctx in [
                "I'{}",
                "WE'{}",
                "we'{}",
                "We'{} x",
                " x'{}",
                "'{}",
                "''{}",
                " '{}",
                "1'{}",
                "é'{}",
                "ÉÉ'{}",
                "x'{}y",
                "A'{}B",
                "\u{301}'{}",
                "'{}'{}",
            ] {
                texts.push(ctx.replace("{}", &v));
            }
        }
    }
    texts.extend(
        [
            "I'M",
            "we'Ve",
            "they'RE",
            "DON'T",
            "don't",
            "Don'T",
            "y'all",
            "rock'n'roll",
        ]
        .map(String::from),
    );
    check_all(&texts);
}

#[test]
fn every_ascii_char_and_pair() {
    let mut texts = Vec::new();
    for a in 0u8..128 {
        texts.push((a as char).to_string());
        for b in 0u8..128 {
            texts.push(format!("{}{}", a as char, b as char));
        }
    }
    check_all(&texts);
}

/// Characters chosen to hit every class the regexes distinguish, and the
/// boundaries between them.
const PALETTE: &[char] = &[
    'a', 'b', 'z', 'A', 'B', 'Z', 's', 'S', 't', 'T', 'l', 'L', 'e', 'r', 'v', 'm', 'd', 'ſ', 'é',
    'É', 'ß', 'ǅ', 'ǈ', 'ʰ', 'ª', 'º', 'ｶ', 'ア', '中', '文', '한', 'ㄱ', 'д', 'Д', 'ω', 'Ω', 'ا',
    'ب', 'क', 'ि', 'ก', 'ั', '\u{301}', '\u{308}', '\u{20dd}', '\u{903}', '0', '5', '9', '٣', '४',
    'Ⅷ', '½', '²', '\u{200d}', '\u{200c}', '\u{fe0f}', '😀', '👍', '🏽', '\r', '\n', '\t', ' ',
    ' ', ' ', '\u{a0}', '\u{3000}', '\u{85}', '\u{2028}', '\u{b}', '\'', '\'', '"', '.', ',', '!',
    '?', '-', '_', '/', '/', '\\', '(', ')', '{', '}', '<', '|', '>', '#', '$', '€', '©', '\u{0}',
    '\u{7f}', '\u{ad}', '\u{feff}',
];

#[test]
fn random_mixed_script() {
    let texts = Rng(0x5eed_1234_abcd_0001).texts(3000, |rng| {
        let len = 1 + rng.below(24);
        (0..len)
            .map(|_| PALETTE[rng.below(PALETTE.len())])
            .collect()
    });
    check_all(&texts);
}

/// Longer strings from the same palette, weighted towards letters so that
/// words get long.
#[test]
fn random_mixed_script_long() {
    let letters = &PALETTE[..42];
    let texts = Rng(0xfeed_beef_0000_0002).texts(500, |rng| {
        let len = 20 + rng.below(180);
        (0..len)
            .map(|_| {
                if rng.below(4) == 0 {
                    PALETTE[rng.below(PALETTE.len())]
                } else {
                    letters[rng.below(letters.len())]
                }
            })
            .collect()
    });
    check_all(&texts);
}

/// Random code points from the whole range (every plane, unassigned ones,
/// private use, noncharacters), mixed with spaces, newlines and apostrophes.
#[test]
fn random_code_points() {
    let texts = Rng(0x0c0d_e901_2345_6789).texts(3000, |rng| {
        let len = 1 + rng.below(10);
        (0..len)
            .map(|_| match rng.below(8) {
                0 => [' ', '\n', '\'', 'a', 'A', '1'][rng.below(6)],
                1 => char::from_u32(rng.below(0x800) as u32).unwrap_or('x'),
                2..=4 => char::from_u32(rng.below(0x1_0000) as u32).unwrap_or('x'),
                _ => char::from_u32(rng.below(0x11_0000) as u32).unwrap_or('x'),
            })
            .collect()
    });
    check_all(&texts);
}

/// Longer random texts from words (so pieces get long and merge-heavy).
#[test]
fn random_words() {
    let words = [
        "the",
        "The",
        "THE",
        "of",
        "and",
        "ing",
        "tion",
        "über",
        "ÜBER",
        "naïve",
        "日本語",
        "中文",
        "한국어",
        "العربية",
        "हिन्दी",
        "русский",
        "ไทย",
        "😀",
        "👩‍💻",
        "e\u{301}",
        "123",
        "4567",
        "3.14",
        "don't",
        "WE'LL",
        "  ",
        "\n",
        "\r\n",
        "\t",
        "//",
        "/*",
        "*/",
        "::",
        "->",
        "x_y",
        "camelCase",
        "PascalCase",
        "snake_case",
        "SCREAMING",
        "ŁÓDŹ",
        "ǅemal",
        "\u{a0}",
        " ",
    ];
    let texts = Rng(0x0123_4567_89ab_cdef).texts(400, |rng| {
        let n = 1 + rng.below(40);
        let mut s = String::new();
        for _ in 0..n {
            if rng.below(3) == 0 {
                s.push(' ');
            }
            s.push_str(words[rng.below(words.len())]);
        }
        s
    });
    check_all(&texts);
}

/// Pieces longer than the heap-merge threshold, so both merge algorithms
/// are compared with tiktoken's.
#[test]
fn long_pieces() {
    let mut rng = Rng(42);
    let mut texts = Vec::new();
    let alphabets: [&[char]; 5] = [
        &['a', 'b', 'c', 'e', 'n', 't'],
        &['a'],
        &['中', '文', '字', '国'],
        &['д', 'а', 'н', 'о'],
        &['x', 'y', 'X', 'Y'],
    ];
    for alphabet in alphabets {
        for len in [60, 120, 127, 128, 129, 200, 700, 3000] {
            let s: String = (0..len)
                .map(|_| alphabet[rng.below(alphabet.len())])
                .collect();
            texts.push(s);
        }
    }
    texts.push(" ".repeat(5000));
    texts.push(format!("x{}y", " ".repeat(3000)));
    texts.push("\n".repeat(1000));
    texts.push("!".repeat(2000));
    texts.push("1".repeat(1000));
    texts.push("ab".repeat(1500));
    texts.push("😀".repeat(300));
    check_all(&texts);
}

/// One text per pathological class (each one long piece, or pieces new to
/// any cache), of sizes tiktoken-rs still handles in a debug build, token
/// for token against it: the linear merge on the inputs it is for.
#[test]
fn pathological_classes() {
    let mut rng = Rng(0x0bad_1297);
    let letters = |rng: &mut Rng, alphabet: &[char], n: usize| -> String {
        (0..n)
            .map(|_| alphabet[rng.below(alphabet.len())])
            .collect()
    };
    let az: Vec<char> = ('a'..='z').collect();
    let cjk: Vec<char> = (0x4e00..0x9fff).filter_map(char::from_u32).collect();
    let mut texts = vec![
        "a".repeat(20_000),
        "A".repeat(5_000),
        "中".repeat(5_000),
        "-".repeat(20_000),
        "=".repeat(3_001),
        "😀".repeat(2_000),
        "\n".repeat(20_000),
        "\t".repeat(5_000),
        " ".repeat(10_000) + "x",
        "ab".repeat(5_000),
        "abc".repeat(3_000),
        "1".repeat(10_000),
    ];
    for n in [31, 32, 33, 100, 1_000, 20_000] {
        texts.push(letters(&mut rng, &az, n));
        texts.push(letters(&mut rng, &cjk, n));
        texts.push(letters(&mut rng, &['a', 'b'], n));
        texts.push(letters(&mut rng, &['x', 'X', 'y', 'Y'], n));
        texts.push(letters(&mut rng, &[' ', '\t', '\n', ' '], n));
        texts.push(letters(&mut rng, &['-', '=', '*', '!', '.', '/'], n));
        texts.push(letters(&mut rng, &['न', 'म', 'स', '्', 'ा', 'े'], n));
        texts.push(letters(&mut rng, &['ا', 'ل', 'م', 'ع', 'ر', 'ب'], n));
    }
    // Random words around the switch to the linear merge (32 bytes).
    texts.extend(rng.texts(300, |rng| {
        (0..20)
            .map(|_| {
                let n = 1 + rng.below(45);
                let mut w: String = (0..n).map(|_| az[rng.below(26)]).collect();
                w.push(' ');
                w
            })
            .collect()
    }));
    check_all(&texts);
}

/// Inputs too big for tiktoken-rs (which panics on long whitespace runs)
/// or too slow for it in a debug build: against the previous engine,
/// tiktoken's merge (heap-based for long pieces), which the tests above
/// compare with tiktoken-rs.
#[test]
fn big_pathological_inputs_against_tiktokens_merge() {
    let mut rng = Rng(77);
    let random: String = (0..60_000)
        .map(|_| (b'a' + rng.below(26) as u8) as char)
        .collect();
    for e in ENCODINGS {
        let t = ours(e);
        for text in [
            " ".repeat(300_000),
            format!("x{}y", " \t".repeat(100_000)),
            "a".repeat(200_000),
            random.clone(),
        ] {
            assert_eq!(
                t.encode(&text),
                t.encode_with_tiktoken_merge(&text),
                "{}: {}...",
                e.name(),
                &text[..20]
            );
            assert_eq!(t.count(&text), t.count_with_tiktoken_merge(&text));
        }
    }
}

/// Pathological inputs must stay fast (tiktoken's O(n²) merge would take
/// seconds here in debug builds).
#[test]
fn pathological_inputs_are_fast() {
    let start = std::time::Instant::now();
    for e in ENCODINGS {
        let t = ours(e);
        for text in [
            "a".repeat(100_000),
            " ".repeat(1_000_000),
            "\n".repeat(200_000),
        ] {
            assert!(t.count(&text) > 0);
        }
    }
    let secs = start.elapsed().as_secs_f64();
    assert!(secs < 30.0, "took {secs}s");
}

#[test]
fn for_model() {
    use Encoding::{Cl100kBase as Cl, O200kBase as O2};
    let cases: &[(&str, Option<Encoding>)] = &[
        ("gpt-4o", Some(O2)),
        ("gpt-4o-mini", Some(O2)),
        ("gpt-4o-2024-05-13", Some(O2)),
        ("chatgpt-4o-latest", Some(O2)),
        ("gpt-4.1", Some(O2)),
        ("gpt-4.1-mini", Some(O2)),
        ("gpt-4.1-nano-2025-04-14", Some(O2)),
        ("gpt-4.5-preview", Some(O2)),
        ("gpt-4.5", Some(O2)),
        ("o1", Some(O2)),
        ("o1-mini", Some(O2)),
        ("o1-preview-2024-09-12", Some(O2)),
        ("o3", Some(O2)),
        ("o3-mini", Some(O2)),
        ("o3-pro", Some(O2)),
        ("o4-mini", Some(O2)),
        ("o4-mini-2025-04-16", Some(O2)),
        ("o4", Some(O2)),
        ("gpt-5", Some(O2)),
        ("gpt-5-mini", Some(O2)),
        ("gpt-5.1-codex", Some(O2)),
        ("gpt-oss-120b", Some(O2)),
        ("gpt-oss-20b", Some(O2)),
        ("codex-mini-latest", Some(O2)),
        ("gpt-4", Some(Cl)),
        ("gpt-4-0613", Some(Cl)),
        ("gpt-4-32k", Some(Cl)),
        ("gpt-4-turbo", Some(Cl)),
        ("gpt-4-turbo-2024-04-09", Some(Cl)),
        ("gpt-3.5-turbo", Some(Cl)),
        ("gpt-3.5-turbo-0125", Some(Cl)),
        ("gpt-3.5-turbo-16k", Some(Cl)),
        ("gpt-35-turbo", Some(Cl)),
        ("gpt-35-turbo-16k", Some(Cl)),
        ("text-embedding-ada-002", Some(Cl)),
        ("text-embedding-3-small", Some(Cl)),
        ("text-embedding-3-large", Some(Cl)),
        ("davinci-002", Some(Cl)),
        ("babbage-002", Some(Cl)),
        ("ft:gpt-4o-mini:org::id", Some(O2)),
        ("ft:gpt-4o-mini-2024-07-18:my-org:custom:abc123", Some(O2)),
        ("ft:gpt-3.5-turbo:XXXXXX:2023-11-11", Some(Cl)),
        ("ft:gpt-4-0613:org", Some(Cl)),
        ("ft:davinci-002:org", Some(Cl)),
        ("ft:llama:org", None),
        ("text-davinci-003", None),
        ("davinci", None),
        ("gpt2", None),
        ("claude-3-opus", None),
        ("llama-3-70b", None),
        ("", None),
        ("GPT-4O", None),
    ];
    for &(model, want) in cases {
        assert_eq!(Encoding::for_model(model), want, "{model}");
    }
    // Agrees with tiktoken-rs wherever tiktoken-rs knows the model and maps
    // it to one of these encodings.
    for &(model, _) in cases {
        use tiktoken_rs::tokenizer::{get_tokenizer, Tokenizer as T};
        let theirs = match get_tokenizer(model) {
            Some(T::Cl100kBase) => Some(Cl),
            Some(T::O200kBase | T::O200kHarmony) => Some(O2),
            _ => continue,
        };
        assert_eq!(Encoding::for_model(model), theirs, "{model}");
    }
}
