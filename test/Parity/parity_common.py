"""What the parity tests share (gpt2_parity.py, llama_parity.py): safetensors
and token files, the batches of `shuffle = false`, gtc's schedule, the run of
gtc and of the PyTorch model on the same batches, and the comparison of their
losses and of gtc's saved weights loaded back into PyTorch."""
import argparse
import json
import math
import os
import re
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch

STEPS = 50
BETAS, WD, WARMUP, FINAL, CLIP = (0.9, 0.95), 0.1, 10, 0.1, 1.0


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, a in tensors.items():
        b = np.ascontiguousarray(a, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(b)]}
        offset += len(b)
        blobs.append(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, e in header.items():
        if name == "__metadata__" or name.startswith("optimizer."):
            continue
        assert e["dtype"] == "F32", (name, e["dtype"])
        lo, hi = e["data_offsets"]
        out[name] = np.frombuffer(data[lo:hi], dtype="<f4").reshape(e["shape"])
    return out


def write_tokens(path, tokens):
    """The llm.c / nanoGPT .bin format: 256 int32 header, uint16 tokens."""
    header = np.zeros(256, dtype="<i4")
    header[:3] = [20240520, 1, len(tokens)]
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(tokens.astype("<u2").tobytes())


def make_tokens(c, windows):
    """A learnable sequence: mostly next = (7 * prev + 3) mod V."""
    rng = np.random.default_rng(7)
    n = windows * c["T"] + 1
    vocab = min(c["V"], 50257)
    tok = np.empty(n, dtype=np.int64)
    tok[0] = 1
    noise = rng.random(n) < 0.2
    rand = rng.integers(0, vocab, n)
    for i in range(1, n):
        tok[i] = rand[i] if noise[i] else (7 * tok[i - 1] + 3) % vocab
    return tok


def batch(tokens, c, b, device):
    """Batch b with shuffle = false: windows b*B ... b*B+B-1."""
    B, T = c["B"], c["T"]
    rows = [tokens[(b * B + i) * T:(b * B + i) * T + T + 1] for i in range(B)]
    w = torch.tensor(np.stack(rows), device=device)
    return w[:, :-1].contiguous(), w[:, 1:].contiguous()


def train_block(c, precision, data, lr):
    """The train block both runs follow."""
    return f"""train {{
  data      = tokens("{data}", seq: T)
  batch     = {c["B"]}
  steps     = {STEPS}
  optimizer = adamw(lr: {lr}, betas: ({BETAS[0]}, {BETAS[1]}), weight_decay: {WD})
  schedule  = cosine(warmup: {WARMUP}, final: {FINAL})
  grad_clip = {CLIP}
  precision = {precision}
  shuffle   = false
}}
"""


def lr_at(step, lr):
    """gtc's (and nanoGPT's) warmup + cosine schedule (Optimizer.cpp)."""
    if step < WARMUP:
        return lr * (step + 1) / WARMUP
    progress = min(1.0, (step - WARMUP) / (STEPS - WARMUP))
    return lr * (FINAL + (1 - FINAL) * 0.5 * (1 + math.cos(math.pi * progress)))


def parity(args, c, lr, tol, make_model, source, expect_missing=()):
    """Writes `make_model()`'s weights and the tokens, trains
    `source(data, precision)` (a .gt file's text) with gtc and the model in PyTorch for STEPS steps on
    the same batches, compares every loss, then loads gtc's saved weights into
    a fresh model and compares the loss of an unseen batch. `expect_missing`:
    the model's tensors gtc does not save (a tied copy). Prints "parity: PASS"
    or exits non-zero."""
    work = args.dir or tempfile.mkdtemp(prefix="gtc-parity-")
    os.makedirs(work, exist_ok=True)
    dev = torch.device(args.device)
    if args.device == "cuda":
        # tf32: PyTorch's TF32 matmuls against gtc's TF32 GEMMs and attention.
        tf32 = args.precision == "tf32"
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
    elif args.precision == "tf32":
        sys.exit("--precision tf32 is a GPU precision (--device cuda)")

    # One file of initial weights, one of tokens (STEPS batches + 1 unseen).
    model = make_model()
    init = os.path.join(work, "init.safetensors")
    write_safetensors(init, {k: v.numpy() for k, v in model.state_dict().items()})
    tokens = make_tokens(c, (STEPS + 1) * c["B"])
    data = os.path.join(work, "tokens.bin")
    write_tokens(data, tokens)
    gt = os.path.join(work, "model.gt")
    with open(gt, "w") as f:
        # --gtc-precision: gtc in another precision than PyTorch (fp32
        # against bf16 shows that the bf16 tolerance can fail).
        f.write(source(data, getattr(args, "gtc_precision", None)
                       or args.precision))

    # gtc.
    log = os.path.join(work, "log.jsonl")
    final = os.path.join(work, "final.safetensors")
    cmd = [args.gtc, "run", gt, "--device", args.device, "--init", init,
           "--log", log, "--log-every", "1", "--save", final]
    print("$", " ".join(cmd), flush=True)
    run = subprocess.run(cmd, capture_output=True, text=True)
    # Its summary lines, not the per-step progress.
    sys.stdout.write("".join(line for line in run.stdout.splitlines(True)
                             if not line.startswith("step ")))
    if run.returncode != 0:
        sys.stderr.write(run.stderr)
        sys.exit(f"gtc failed with exit status {run.returncode}")
    gtc_loss = [json.loads(line)["loss"] for line in open(log)]
    assert len(gtc_loss) == STEPS, f"gtc logged {len(gtc_loss)} steps"

    # PyTorch, the same steps.
    model = model.to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=BETAS,
                            weight_decay=WD, eps=1e-8)
    autocast = (torch.autocast(args.device, dtype=torch.bfloat16)
                if args.precision == "bf16" else torch.autocast(
                    args.device, enabled=False))
    torch_loss = []
    for s in range(STEPS):
        x, y = batch(tokens, c, s, dev)
        for g in opt.param_groups:
            g["lr"] = lr_at(s, lr)
        with autocast:
            loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        opt.step()
        torch_loss.append(loss.item())

    ok = True
    rel = [abs(a - b) / abs(b) for a, b in zip(gtc_loss, torch_loss)]
    worst = max(range(STEPS), key=lambda i: rel[i])
    print(f"size {args.size} ({sum(p.numel() for p in model.parameters())} "
          f"parameters), {args.precision}, {args.device}, batch {c['B']}, "
          f"{STEPS} AdamW steps")
    for s in (0, 1, 9, STEPS - 1):
        print(f"  step {s + 1:2d}: gtc {gtc_loss[s]:.6f}  "
              f"torch {torch_loss[s]:.6f}  rel {rel[s]:.2e}")
    print(f"losses: max relative difference {rel[worst]:.2e} at step "
          f"{worst + 1} (tolerance {tol:g})")
    ok &= rel[worst] <= tol
    # The first loss is the forward pass on the same weights, before any
    # update: where both cast to bf16 at the same places it tells a bf16 run
    # from an fp32 one far better than the later steps, whose differences
    # both kinds of rounding noise make alike.
    tol_first = getattr(args, "tol_first", None)
    if tol_first is not None:
        print(f"step 1 (the forward pass on the same weights): relative "
              f"{rel[0]:.2e} (tolerance {tol_first:g})")
        ok &= rel[0] <= tol_first
    ok &= torch_loss[-1] < torch_loss[0]  # it trained

    # gtc's final weights in PyTorch: the loss of an unseen batch.
    saved = read_safetensors(final)
    back = make_model()
    missing, unexpected = back.load_state_dict(
        {k: torch.from_numpy(v.copy()) for k, v in saved.items()},
        strict=False)
    assert list(missing) == list(expect_missing) and not unexpected, (
        missing, unexpected)
    back = back.to(dev)
    x, y = batch(tokens, c, STEPS, dev)
    with torch.no_grad(), autocast:
        ours, theirs = back(x, y).item(), model(x, y).item()
    held = abs(ours - theirs) / abs(theirs)
    print(f"unseen batch, gtc's saved weights in PyTorch {ours:.6f} vs "
          f"PyTorch's {theirs:.6f}: relative {held:.2e} (tolerance {tol:g})")
    ok &= held <= tol
    print("parity:", "PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


def arguments(doc, sizes, extra=lambda ap: None):
    """The parity scripts' options; returns (args, size, lr, tolerance)."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--gtc", default="gtc")
    ap.add_argument("--size", choices=sizes, default="small")
    ap.add_argument("--precision", choices=["fp32", "tf32", "bf16"],
                    default="fp32")
    ap.add_argument("--gtc-precision", choices=["fp32", "tf32", "bf16"],
                    help="gtc's, when not --precision (to show that a "
                    "tolerance can fail)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--dir", help="keep the files here (default: a temporary "
                    "directory)")
    ap.add_argument("--lr", type=float, help="peak learning rate (default: "
                    "the size's)")
    ap.add_argument("--tol", type=float, help="relative tolerance (default: "
                    "1e-4 fp32, 2e-2 tf32 and bf16)")
    ap.add_argument("--tol-first", type=float, help="relative tolerance of "
                    "the first step's loss (default: not checked apart)")
    extra(ap)
    args = ap.parse_args()
    c = sizes[args.size]
    tol = args.tol or (1e-4 if args.precision == "fp32" else 2e-2)
    return args, c, args.lr or c["lr"], tol


def example_source(example, let_names, c, precision, data, lr):
    """examples/EXAMPLE with its `let` line set to size `c`, and the parity
    train block."""
    src = open(os.path.join(os.path.dirname(__file__), "..", "..",
                            "examples", example)).read()
    pattern = ", ".join(f"{n} = \\d+" for n in let_names)
    src, n = re.subn("let " + pattern, "let " + ", ".join(
        f"{n} = {c[n]}" for n in let_names), src)
    assert n == 1, f"examples/{example} no longer has the expected let line"
    return src[:src.index("train {")] + train_block(c, precision, data, lr)
