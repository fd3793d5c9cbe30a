#!/usr/bin/env python3
"""`gtc sample` against PyTorch: greedy generation from one safetensors file.

Writes a nanoGPT-style GPT-2's weights (gpt2_parity.py's model and
initialization, seeded) to a safetensors file, generates 64 tokens greedily
after a prompt with `gtc sample --temperature 0` (with its KV cache and with
--no-cache) and with the PyTorch model recomputing the whole sequence each
token, and compares the tokens one by one.

  --size small   V=512 T=96 D=64 H=4 L=2 (the CPU test in CI)
  --size full    GPT-2 124M as examples/gpt2.gt has it (the GPU test)

Prints the tokens' agreement and "sample: PASS", or exits non-zero.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import torch

from gpt2_parity import GPT, initialize
from parity_common import example_source, make_tokens, write_safetensors, \
    write_tokens

SIZES = {
    "small": dict(V=512, T=96, D=64, H=4, L=2, B=4),
    "full": dict(V=50304, T=1024, D=768, H=12, L=12, B=8),
}


@torch.no_grad()
def greedy(model, prompt, n, device):
    """n tokens after `prompt`, each the argmax of the last position's logits
    of the whole sequence (no cache: the reference)."""
    t = model.transformer
    seq = list(prompt)
    for _ in range(n):
        idx = torch.tensor([seq], device=device)
        pos = torch.arange(len(seq), device=device)
        x = t.wte(idx) + t.wpe(pos)
        for block in t.h:
            x = block(x)
        logits = model.lm_head(t.ln_f(x))[0, -1].float()
        seq.append(int(torch.argmax(logits)))
    return seq[len(prompt):]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gtc", default="gtc")
    ap.add_argument("--size", choices=SIZES, default="small")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--dir", help="keep the files here")
    args = ap.parse_args()
    c = SIZES[args.size]
    work = args.dir or tempfile.mkdtemp(prefix="gtc-sample-")
    os.makedirs(work, exist_ok=True)
    dev = torch.device(args.device)
    if args.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False

    model = GPT(c)
    initialize(model, c)
    # Weights 10x nanoGPT's initial ones: an untrained GPT-2 at 0.02 writes
    # one token over and over; these give every step a different argmax.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 2:
                p.mul_(10)
    init = os.path.join(work, "init.safetensors")
    write_safetensors(init, {k: v.numpy() for k, v in model.state_dict().items()})
    tokens = make_tokens(c, 2)
    data = os.path.join(work, "tokens.bin")
    write_tokens(data, tokens)
    gt = os.path.join(work, "model.gt")
    with open(gt, "w") as f:
        f.write(example_source("gpt2.gt", "VTDHL", c, "fp32", data, 1e-3))
    prompt = [int(x) for x in tokens[:8]]

    want = greedy(model.to(dev), prompt, args.tokens, dev)
    print(f"size {args.size}, {args.device}: PyTorch greedy, {len(want)} "
          f"tokens after {len(prompt)}: {want[:8]} ...")
    ok = True
    for mode in ([], ["--no-cache"]):
        cmd = [args.gtc, "sample", gt, "--init", init, "--device", args.device,
               "--precision", "fp32", "--temperature", "0", "--tokens",
               str(args.tokens), "--prompt-tokens",
               ",".join(map(str, prompt))] + mode
        run = subprocess.run(cmd, capture_output=True, text=True)
        sys.stderr.write(run.stderr)
        if run.returncode != 0:
            sys.exit(f"gtc sample failed with exit status {run.returncode}")
        got = [int(x) for x in run.stdout.strip().split(",")]
        same = sum(a == b for a, b in zip(got, want))
        first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b),
                     None)
        name = "recomputed" if mode else "KV cache"
        print(f"gtc ({name}): {same} of {len(want)} tokens equal"
              + ("" if first is None else f", first difference at {first}"))
        ok = ok and got == want
    if not ok:
        sys.exit("sample: FAIL")
    print("sample: PASS")


if __name__ == "__main__":
    main()
