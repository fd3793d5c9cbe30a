"""Compares the step losses of two JSONL logs: prints the largest relative
difference and fails above the tolerance (argv[3])."""
import json, sys

def losses(path):
    return [r["loss"] for r in map(json.loads, open(path))
            if "lr" in r and r.get("loss") is not None]

a, b, tol = losses(sys.argv[1]), losses(sys.argv[2]), float(sys.argv[3])
assert len(a) == len(b) and a, (len(a), len(b))
worst = max(abs(x - y) / abs(x) for x, y in zip(a, b))
assert worst <= tol, "losses differ by %.3g (> %g)" % (worst, tol)
print("%d losses within %g (largest relative difference %.2g)"
      % (len(a), tol, worst))
