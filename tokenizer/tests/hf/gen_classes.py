#!/usr/bin/env python3
"""Generates data/hf_classes.bin: the character classes of DeepSeek V3's
pre-tokenizer regexes, taken from the engine PyPI `tokenizers` runs them on
(Oniguruma), by splitting every code point with each class:

    python3 tokenizer/tests/hf/gen_classes.py tokenizer/data/hf_classes.bin

One byte of bits per code point (1 \\p{L}, 2 \\p{M}, 4 \\p{P}, 8 \\p{S},
16 \\p{N}, 32 \\s), as a two-stage table: 8704 u16 block numbers (little
endian, one per 128 code points), then the distinct 128-byte blocks."""
import sys
from tokenizers import pre_tokenizers, Regex

BITS = [(1, r"\p{L}"), (2, r"\p{M}"), (4, r"\p{P}"), (8, r"\p{S}"), (16, r"\p{N}"), (32, r"\s")]
N = 0x110000


def members(pattern):
    split = pre_tokenizers.Split(Regex(pattern), behavior="removed")
    out = bytearray(N)
    step = 0x4000
    for base in range(0, N, step):
        cps = [cp for cp in range(base, min(base + step, N)) if not 0xD800 <= cp < 0xE000]
        text = "".join(chr(cp) for cp in cps)
        for cp in cps:
            out[cp] = 1
        # What is left are the non-members; offsets are in characters.
        for _, (a, b) in split.pre_tokenize_str(text):
            for k in range(a, b):
                out[cps[k]] = 0
    return out


cls = bytearray(N)
for bit, pat in BITS:
    m = members(pat)
    for cp in range(N):
        if m[cp]:
            cls[cp] |= bit
for cp in range(0xD800, 0xE000):
    cls[cp] = 0
blocks = {}
stage1 = []
data = []
for base in range(0, N, 128):
    blk = bytes(cls[base:base + 128])
    if blk not in blocks:
        blocks[blk] = len(blocks)
        data.append(blk)
    stage1.append(blocks[blk])
with open(sys.argv[1], "wb") as f:
    for b in stage1:
        f.write(b.to_bytes(2, "little"))
    for blk in data:
        f.write(blk)
print(f"{sys.argv[1]}: {len(data)} blocks")
# Sanity: ASCII
assert cls[ord("a")] == 1 and cls[ord("1")] == 16 and cls[ord(" ")] == 32 and cls[ord("!")] == 4 and cls[ord("+")] == 8
