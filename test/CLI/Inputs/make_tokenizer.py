"""Writes a small Hugging Face byte-level BPE tokenizer.json (GPT-2's
format): the 256 byte symbols with id = the byte, and eight merges."""
import json
import sys


def bytes_to_unicode():
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD))
          + list(range(0xAE, 0x100)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


sym = bytes_to_unicode()
vocab = {sym[b]: b for b in range(256)}
merges = [("h", "e"), ("l", "l"), ("he", "ll"), ("hell", "o"),
          ("\u0120", "w"), ("o", "r"), ("\u0120w", "or"), ("\u0120", "t")]
for a, b in merges:
    vocab[a + b] = len(vocab)
# Old-style "a b" strings and new-style pairs, both.
doc = {"version": "1.0", "added_tokens": [],
       "model": {"type": "BPE", "vocab": vocab,
                 "merges": [f"{a} {b}" for a, b in merges[:4]]
                 + [[a, b] for a, b in merges[4:]]}}
json.dump(doc, open(sys.argv[1], "w"), ensure_ascii=False)
