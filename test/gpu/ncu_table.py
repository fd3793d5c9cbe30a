"""Per-kernel GPU times of one training step from Nsight Compute CSVs
(`ncu --csv --print-units base --metrics gpu__time_duration.sum`).

  ncu_table.py gtc GTC_CSV        gtc run --profile under `ncu --nvtx
                                  --print-nvtx-rename kernel`: its launches
                                  carry the profile's names; only the
                                  profiled steps (named) count
  ncu_table.py torch TORCH_CSV STEPS   PyTorch's kernels of STEPS steps

Prints the kernels by their total time a step (us) and the sum (ms)."""
import collections, csv, re, sys

def rows(path):
    with open(path) as f:
        lines = [l for l in f if l.startswith('"')]
    for r in csv.DictReader(lines):
        if r["Metric Name"] == "gpu__time_duration.sum":
            yield r["Kernel Name"], float(r["Metric Value"].replace(",", "")) / 1e3

side, path = sys.argv[1], sys.argv[2]
kernels = list(rows(path))
if side == "gtc":
    # The bench's graph replays before the profiled steps keep their
    # functions' names (gtc_kernel, gtc_update, cuBLASLt's nvjet_* and the
    # like): left out. The profile's names of gtc's own kernels have words
    # after the function's ("gtc_update (adamw)").
    raw = ("gtc_kernel", "gtc_update", "gtc_sumsq", "gtc_norm", "gtc_init",
           "gtc_accumulate")
    kernels = [(n, t) for n, t in kernels
               if n not in raw and not n.startswith(
                   ("nvjet", "sm90_", "sm80_", "void ", "cutlass"))]
    steps = sum(1 for n, _ in kernels if n.startswith("gtc_update"))
else:
    steps = int(sys.argv[3])
assert steps > 0 and kernels, "no profiled steps in " + path
total = collections.defaultdict(lambda: [0, 0.0])
for n, t in kernels:
    if side == "gtc":
        # "k297_attention_grad_dkdv/gtc_kernel": the profile's name (one
        # kind of kernel over the layers), not the function's.
        n = re.sub(r"^k\d+_", "", n.split("/")[0])
    total[n[:80]][0] += 1
    total[n[:80]][1] += t
print(f"{side}: {steps} steps, {len(kernels) / steps:.0f} kernels a step")
print(f"{'us a step':>10} {'calls':>6} {'mean us':>8}  kernel")
for n, (c, t) in sorted(total.items(), key=lambda kv: -kv[1][1])[:30]:
    print(f"{t / steps:10.1f} {c / steps:6.1f} {t / c:8.1f}  {n}")
print(f"sum of kernels: {sum(t for _, t in kernels) / steps / 1e3:.3f} ms a step")
