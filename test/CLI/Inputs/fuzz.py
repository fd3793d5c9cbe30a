"""Feeds gtc random bytes, random tokens and every truncation of the examples.

Each run must end with status 0 (a valid file) or 1 (a reported error, with
an 'error:' line on stderr); a signal, another status or silence fails.
"""
import os
import random
import subprocess
import sys
import tempfile

gtc, examples = sys.argv[1], sys.argv[2]
rng = random.Random(20261121)
inputs = []
for name in sorted(os.listdir(examples)):
    if name.endswith(".gt"):
        data = open(os.path.join(examples, name), "rb").read()
        step = max(1, len(data) // 60)
        inputs += [data[:n] for n in range(0, len(data), step)]
        for _ in range(30):  # random byte flips inside a real model
            b = bytearray(data)
            for _ in range(rng.randint(1, 4)):
                b[rng.randrange(len(b))] = rng.randrange(256)
            inputs.append(bytes(b))
tokens = [b"model", b"train", b"{", b"}", b"(", b")", b"[", b"]", b",", b":", b"=",
          b"+", b"-", b"*", b"/", b"x", b"f32", b"1", b"1e9", b"\"s\"", b"relu",
          b"linear", b"repeat", b"def", b"return", b"let", b"input", b"param", b"\n"]
for _ in range(60):
    inputs.append(bytes(rng.randrange(256) for _ in range(rng.randint(0, 300))))
    inputs.append(b" ".join(rng.choice(tokens) for _ in range(rng.randint(0, 60))))

with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "fuzz.gt")
    for i, data in enumerate(inputs):
        open(path, "wb").write(data)
        r = subprocess.run([gtc, "check", path], capture_output=True, timeout=30)
        bad = r.returncode not in (0, 1) or (r.returncode == 1 and b"error:" not in r.stderr)
        if bad:
            print(f"FAIL input {i}: status {r.returncode}\n{data!r}\n{r.stderr.decode(errors='replace')}")
            sys.exit(1)
print(f"fuzz: {len(inputs)} inputs, no crash")
