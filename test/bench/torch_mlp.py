"""The MLP rows of ../shared/bench/torch_reference.py (same model, optimizer and
timing), without the GPT-2 part: PyTorch eager fp32/tf32/bf16 and torch.compile
at batch 64, 1024 and 16384. Usage: python3 torch_mlp.py DIR_WITH_torch_reference.py
Prints one JSON line per row and writes $OUT/torch_mlp.json."""
import json
import os
import sys

sys.path.insert(0, sys.argv[1])
import torch_reference as tr  # noqa: E402

tr.ceilings()
for B in (64, 1024, 16384):
    for mode in ("fp32", "tf32", "bf16", "compile"):
        m = tr.MLP().to(tr.dev)
        nparam = sum(p.numel() for p in m.parameters())
        tr.run(f"mlp-b{B}", m,
               lambda: (tr.torch.randn(B, 784, device=tr.dev),
                        tr.torch.randint(0, 10, (B,), device=tr.dev)),
               mode, 6 * nparam * B, B, "samples_per_s")
out = os.environ.get("OUT")
if out:
    json.dump(tr.results, open(os.path.join(out, "torch_mlp.json"), "w"), indent=1)
