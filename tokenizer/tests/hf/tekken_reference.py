#!/usr/bin/env python3
"""Reference token ids of a Mistral tekken vocabulary for
tests/hf_reference.rs, from PyPI mistral-common (the tokenizer vLLM and
mistral-inference count Mistral models with): for each directory given
(holding a tekken.json), the corpus of reference.py, with the vocabulary
entries in use in place of a tokenizer.json's, and Mistral's control-token
names as its "added" texts (ordinary text to tekken's encode), encoded by
`Tekkenizer.encode(text, bos=False, eos=False)`. Writes reference.bin in
reference.py's format.

    pip install mistral-common==1.13.1
    python3 tokenizer/tests/hf/tekken_reference.py [--size N] DIR...
"""
import base64
import json
import os
import random
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference import bytes_to_unicode, corpus, size_and_args  # noqa: E402

from mistral_common.tokens.tokenizers.tekken import Tekkenizer  # noqa: E402

CONTROL = ["<s>", "</s>", "[INST]", "[/INST]", "[AVAILABLE_TOOLS]", "[TOOL_CALLS]", "[SYSTEM_PROMPT]", "<unk>", "[IMG]"]


def main():
    size, args = size_and_args(1_000_000)
    to_char = {b: c for c, b in bytes_to_unicode().items()}
    for d in args:
        d = d.rstrip("/")
        path = d + "/tekken.json"
        tok = Tekkenizer.from_file(path)
        with open(path, encoding="utf-8") as f:
            tj = json.load(f)
        in_use = tj["config"]["default_vocab_size"] - tj["config"]["default_num_special_tokens"]
        # reference.py reads a byte-level tokenizer.json vocabulary.
        vocab = {"".join(to_char[b] for b in base64.b64decode(t["token_bytes"])): t["rank"] for t in tj["vocab"][:in_use]}
        texts = corpus({"model": {"vocab": vocab}}, CONTROL, size, random.Random(20261204))
        out_path = d + "/reference.bin"
        with open(out_path, "wb") as out:
            out.write(b"SLHFREF1")
            out.write(struct.pack("<I", len(texts)))
            for t in texts:
                ids = tok.encode(t, bos=False, eos=False)
                b = t.encode("utf-8")
                out.write(struct.pack("<I", len(b)))
                out.write(b)
                out.write(struct.pack("<I", len(ids)))
                out.write(struct.pack("<%dI" % len(ids), *ids))
        print(f"{out_path}: {len(texts)} texts (mistral-common {__import__('mistral_common').__version__})")


if __name__ == "__main__":
    main()
