"""Compares the JSONL logs of an fp16 run with an injected overflow at step
N and of the same run without it: identical before N, step N skipped (the
scale halves, skipped_steps becomes 1), finite and close losses after."""
import json, math, sys

clean, injected, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
a = [r for r in map(json.loads, open(clean)) if "step" in r and "lr" in r]
b = [r for r in map(json.loads, open(injected)) if "step" in r and "lr" in r]
assert len(a) == len(b) and len(a) > n, (len(a), len(b))
for ra, rb in zip(a, b):
    s = ra["step"]
    if s < n:
        assert ra["loss"] == rb["loss"], (s, ra["loss"], rb["loss"])
        assert rb["loss_scale"] == 65536 and rb["skipped_steps"] == 0, rb
    else:
        assert rb["loss_scale"] == 32768 and rb["skipped_steps"] == 1, rb
        assert ra["skipped_steps"] == 0, ra
        if s > n:
            assert rb["loss"] is not None and math.isfinite(rb["loss"]), rb
            assert abs(rb["loss"] - ra["loss"]) < 0.25 * ra["loss"], (s, ra, rb)
print("identical before step %d; step %d skipped (scale 65536 -> 32768); "
      "%d later steps finite" % (n, n, len(a) - n))
