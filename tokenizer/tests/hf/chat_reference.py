#!/usr/bin/env python3
"""Reference renderings and token counts of chat conversations for
tests/hf_chat.rs: for each model directory given (tokenizer.json and
tokenizer_config.json with its chat_template), renders N random text
conversations with Jinja as transformers' apply_chat_template does
(ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks) and tokenizes
the result with PyPI tokenizers (add_special_tokens=False, as
apply_chat_template(tokenize=True) does). Writes chat.jsonl beside them:
{"messages", "add_generation_prompt", "text", "ids"} per line.

    python3 tokenizer/tests/hf/chat_reference.py [--size N] DIR...
"""
import json
import random

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment
from tokenizers import Tokenizer

from reference_args import size_and_dirs

PIECES = [
    "Hello", " world", "!", "\n", "\n\n", "  ", " ", "\t", "What's 2+2?", "中文", "日本語", "😀",
    "<think>", "</think>", "<think>\nreasoning\n</think>\n\n", "<tool_response>", "</tool_response>",
    "<|im_start|>", "<|eot_id|>", "<｜User｜>", "```json\n{\"a\": 1}\n```", "def f():\n    return 1\n",
    "é", "e\u0301", "\u00a0", "\u001f", "1234567", "I'm", " DON'T", "...", "\r\n",
]


def content(rng):
    return "".join(rng.choice(PIECES) for _ in range(rng.choice([0, 1, 2, 3, 5, 8])))


def conversation(rng):
    msgs = []
    if rng.random() < 0.5:
        msgs.append({"role": "system", "content": content(rng)})
    for k in range(rng.randint(1, 5)):
        msgs.append({"role": "user", "content": content(rng)})
        if rng.random() < 0.7:
            msgs.append({"role": "assistant", "content": content(rng)})
        if rng.random() < 0.1:
            msgs.append({"role": "system", "content": content(rng)})
    return msgs


def main():
    size, dirs = size_and_dirs(20000)
    for d in dirs:
        cfg = json.load(open(d + "/tokenizer_config.json", encoding="utf-8"))
        tmpl_src = cfg.get("chat_template")
        if not tmpl_src:
            open(d + "/chat.jsonl", "w").close()
            print(f"{d}: no chat_template, empty chat.jsonl")
            continue
        tok = Tokenizer.from_file(d + "/tokenizer.json")
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
        env.filters["tojson"] = lambda x, **kw: json.dumps(x, ensure_ascii=False, **kw)

        def raise_exception(msg):
            raise jinja2.exceptions.TemplateError(msg)

        env.globals["raise_exception"] = raise_exception
        tmpl = env.from_string(tmpl_src)
        special = {}
        for k in ("bos_token", "eos_token", "pad_token", "unk_token"):
            v = cfg.get(k)
            if isinstance(v, dict):
                v = v.get("content")
            special[k] = v
        rng = random.Random(30)
        n = 0
        with open(d + "/chat.jsonl", "w", encoding="utf-8") as out:
            for _ in range(size):
                msgs = conversation(rng)
                agp = rng.random() < 0.8
                text = tmpl.render(messages=msgs, add_generation_prompt=agp, **special)
                ids = tok.encode(text, add_special_tokens=False).ids
                out.write(json.dumps({"messages": msgs, "add_generation_prompt": agp, "text": text, "ids": ids}, ensure_ascii=False) + "\n")
                n += 1
        print(f"{d}/chat.jsonl: {n} conversations")


if __name__ == "__main__":
    main()
