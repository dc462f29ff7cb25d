#!/usr/bin/env python3
"""Reference token ids for the differential test tests/hf_reference.rs.

For each tokenizer directory given (holding a Hugging Face tokenizer.json),
generates a deterministic corpus and writes reference.bin beside it: the ids
of PyPI `tokenizers`' `encode(text, add_special_tokens=False)` for every
text. Format: b"SLHFREF1", u32 count, then per text: u32 byte length, the
UTF-8 bytes, u32 number of ids, the ids (all little-endian u32).

    pip install tokenizers==0.23.3
    python3 tokenizer/tests/hf/reference.py [--size N] DIR...

The corpus (about N texts, default 1 000 000):
  * every vocabulary entry that decodes to valid UTF-8, alone and after a space;
  * every code point of planes 0-3 and 14 but the surrogates, alone, between
    letters, and after a space and before a digit;
  * random pairs of vocabulary entries, concatenated;
  * digit runs (ASCII, Arabic-Indic, Devanagari, fullwidth, superscripts)
    of 1-12 digits, with separators;
  * whitespace runs (space, tab, CR, LF, NBSP, U+3000, U+2028, NEL, VT, FF)
    before, between and after letters, punctuation and digits;
  * random strings from a palette of tricky characters (the categories the
    regexes distinguish, marks, ZWJ, apostrophes and contractions, `ſ`,
    slashes, CJK, kana, Hangul, emoji), up to the size asked;
  * sentences in many scripts, source code, JSON, and texts holding the
    tokenizer's added tokens (whole, truncated, adjacent, repeated).
"""
import json
import random
import struct
import unicodedata

from tokenizers import Tokenizer

from reference_args import size_and_dirs


def bytes_to_unicode():
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


PALETTE = (
    list("aAzZ eé'sStTmMdDlLvVrR") + ["'s", "'S", "'ll", "'VE", "'re", "'ſ", "ſ", "K", "ǅ", "ʰ"]
    + list("0123456789") + ["٣", "४", "１", "²", "Ⅻ", "½"]
    + [" ", "  ", "\t", "\n", "\r", "\r\n", "\u00a0", "\u3000", "\u2028", "\u0085", "\u000b", "\u000c", "\u200b"]
    + list("!\"#$%&()*+,-./:;<=>?@[\\]^_`{|}~") + ["//", "/*", "…", "—", "«", "€", "©", "™", "°"]
    + ["\u0301", "\u0308", "\u200d", "\ufe0f", "\u0e31", "\u093f", "\u05b7"]
    + list("中文字日本語ひらがなカタカナ한국어Русскийعربيहिन्दीไทยΕλληνικά")
    + ["😀", "👍🏽", "👨‍👩‍👧", "🇫🇷", "1️⃣", "\U0001f9d1", "\U00020000", "\ue000", "\uffff"]
)

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "I'm sure they'll say we've done what's right, DON'T you think? She'd LOVE it.",
    "Größenordnung: 3,14159 × 10⁻⁵ m² — naïve café façade.",
    "人工智能正在改变世界。我们需要新的规则。",
    "日本語のテキストも正しく数えられますか？カタカナとひらがな。",
    "한국어 문장도 테스트합니다. 1234개의 토큰!",
    "Привет, мир! Это тест токенизатора 2024 года.",
    "مرحبا بالعالم! هذا اختبار ٣٤٥ للمقطع.",
    "नमस्ते दुनिया! यह एक परीक्षण है। ४५६",
    "สวัสดีชาวโลก นี่คือการทดสอบ",
    "Γειά σου Κόσμε! Αυτό είναι μια δοκιμή.",
    "שלום עולם! זה מבחן.",
    "Xin chào thế giới! Đây là bài kiểm tra.",
    "fn main() {\n    let x: Vec<u32> = (0..10).map(|i| i * 2).collect();\n    println!(\"{x:?}\");\n}\n",
    "def f(a, b=2, *args, **kw):\n\treturn {'a': a, \"b\": b}  # comment\n\n\n",
    "SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%o''neil%';",
    '{"model": "llama-3.1-8b", "messages": [{"role": "user", "content": "Hi!\\n"}], "max_tokens": 100}',
    "<html>\n  <body class=\"main\">\n    <p>Hello&nbsp;world</p>\n  </body>\n</html>",
    "    indented\n\t\ttabs\r\nwindows line\rold mac\n\n\n   \n  trailing   ",
    "Numbers: 1 12 123 1234 12345 123456 1234567 3.14159 -42 1e10 0xFF 1,000,000",
    "Emoji: 😀👍🏽👨‍👩‍👧🇫🇷 1️⃣ ❤️ mixed中文English日本語한국어",
    "https://example.com/path/to/file.json?query=1&b=2#frag //comment /* block */",
]


def corpus(tok_json, added, size, rng):
    to_byte = bytes_to_unicode()
    vocab = tok_json["model"]["vocab"]
    texts = []
    words = []
    for s in vocab:
        try:
            b = bytes(to_byte[c] for c in s)
            w = b.decode("utf-8")
        except (KeyError, UnicodeDecodeError):
            continue
        words.append(w)
    words.sort()
    for w in words:
        texts.append(w)
        texts.append(" " + w)
    for cp in list(range(0x0, 0x40000)) + list(range(0xE0000, 0xE0200)):
        if 0xD800 <= cp < 0xE000:
            continue
        c = chr(cp)
        texts.append(c)
        if cp < 0x20000 or cp % 7 == 0:
            texts.append("a" + c + "b")
            texts.append(" " + c + "1")
    for _ in range(len(words) // 2):
        texts.append(rng.choice(words) + rng.choice(words))
    digit_sets = ["0123456789", "٠١٢٣٤٥٦٧٨٩", "०१२३४५६७८९", "０１２３４５６７８９", "²³¹⁴"]
    for _ in range(20000):
        ds = rng.choice(digit_sets)
        n = rng.randint(1, 12)
        run = "".join(rng.choice(ds) for _ in range(n))
        texts.append(rng.choice(["", " ", "a", "x=", "$", "\n"]) + run + rng.choice(["", " ", "a", ".5", "%", "\n"]))
    spaces = [" ", "\t", "\n", "\r", "\u00a0", "\u3000", "\u2028", "\u0085", "\u000b", "\u000c"]
    for _ in range(40000):
        ws = "".join(rng.choice(spaces) for _ in range(rng.randint(1, 6)))
        texts.append(rng.choice(["", "a", "!", "1", "中", "a "]) + ws + rng.choice(["", "b", "?", "2", "é", "'s", " c"]))
    for s in SENTENCES:
        texts.append(s)
        for k in range(1, 6):
            texts.append(s * k)
    for a in added:
        texts.append(a)
        texts.append(a + a)
        texts.append("x" + a + " y")
        texts.append(" " + a + "\n\n")
        texts.append(a[:-1])
        texts.append(a[1:] + "hello")
        texts.append("hello " + a + "world" + a)
    long_palette = [p for p in PALETTE]
    while len(texts) < size:
        n = rng.choice([1, 2, 3, 5, 8, 13, 20, 40, 80])
        texts.append("".join(rng.choice(long_palette) for _ in range(n)))
    # A few long ones (pieces over 128 bytes, long space runs).
    for n in [200, 1000, 5000]:
        texts.append("a" * n)
        texts.append(" " * n + "x")
        texts.append("\n" * n)
        texts.append("".join(rng.choice(long_palette) for _ in range(n)))
    return texts


def main():
    size, dirs = size_and_dirs(1_000_000)
    for d in dirs:
        path = d + "/tokenizer.json"
        tok = Tokenizer.from_file(path)
        with open(path, encoding="utf-8") as f:
            tj = json.load(f)
        added = [t["content"] for t in tj.get("added_tokens", [])]
        rng = random.Random(20261204)
        texts = corpus(tj, added, size, rng)
        out_path = d + "/reference.bin"
        with open(out_path, "wb") as out:
            out.write(b"SLHFREF1")
            out.write(struct.pack("<I", len(texts)))
            step = 20000
            for i in range(0, len(texts), step):
                chunk = texts[i:i + step]
                encs = tok.encode_batch(chunk, add_special_tokens=False)
                for t, e in zip(chunk, encs):
                    b = t.encode("utf-8")
                    out.write(struct.pack("<I", len(b)))
                    out.write(b)
                    out.write(struct.pack("<I", len(e.ids)))
                    out.write(struct.pack("<%dI" % len(e.ids), *e.ids))
        print(f"{out_path}: {len(texts)} texts (tokenizers {__import__('tokenizers').__version__}, Unicode {unicodedata.unidata_version})")


if __name__ == "__main__":
    main()
