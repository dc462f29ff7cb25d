#!/usr/bin/env python3
"""Which tokenizer.json vocabularies look like tiktoken's merge rule.

bpe.rs's linear merge implements tiktoken's rule (merge the adjacent parts
whose concatenation is the lowest-ranked token); hf_bpe.rs implements
`tokenizers`' (merge the listed pair of lowest merge index). This prints,
per vocabulary, the conditions under which the two could agree:

* ids consecutive from 0 (the ranks), `ignore_merges` true (a piece that is
  a token is that token, as in tiktoken);
* no rank inversion: the merge list, in order, makes tokens of
  non-decreasing id (so a lower merge index never means a higher rank);
* no unlisted split: every split of every token into two tokens is a listed
  merge (tiktoken would merge any such pair).

These are necessary, not sufficient: where two different pairs that make
the same token are available at once, `tokenizers` takes the one listed
first and tiktoken the leftmost, which is not settled here.

  python3 tokenizer/tests/hf/tiktoken_rule.py ~/.cache/sluice/hf-tokenizers
"""
import json
import sys
from pathlib import Path


def check(path: Path) -> str:
    model = json.loads(path.read_text())["model"]
    vocab = model["vocab"]
    merges = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    consecutive = sorted(vocab.values()) == list(range(len(vocab)))
    made = [vocab.get(a + b) for a, b in merges]
    no_token = sum(1 for n in made if n is None)
    known = [n for n in made if n is not None]
    inversions = sum(1 for a, b in zip(known, known[1:]) if a > b)
    listed = set(merges)
    unlisted = sum(
        1
        for t in vocab
        for k in range(1, len(t))
        if t[:k] in vocab and t[k:] in vocab and (t[:k], t[k:]) not in listed
    )
    return (
        f"ignore_merges {model.get('ignore_merges')}, ids consecutive {consecutive}, "
        f"{len(merges)} merges ({no_token} make no token), rank inversions {inversions}, "
        f"unlisted splits {unlisted}"
    )


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "~/.cache/sluice/hf-tokenizers").expanduser()
    for d in sorted(root.iterdir()):
        f = d / "tokenizer.json"
        if f.exists():
            print(f"{d.name}: {check(f)}")


if __name__ == "__main__":
    main()
