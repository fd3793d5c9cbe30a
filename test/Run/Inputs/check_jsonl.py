"""Checks a metrics log: every line is JSON; steps increase; training loss falls."""
import json
import sys
steps, evals = [], []
for line in open(sys.argv[1]):
    record = json.loads(line)
    (evals if record.get("eval") else steps).append(record)
assert steps, "no step records"
assert all(a["step"] < b["step"] for a, b in zip(steps, steps[1:])), "steps out of order"
for key in ("step", "epoch", "loss", "lr", "samples_per_s", "elapsed_s"):
    assert key in steps[0], key
assert steps[-1]["loss"] < steps[0]["loss"], (steps[0]["loss"], steps[-1]["loss"])
print(f"jsonl: {len(steps)} step records, {len(evals)} eval records, loss {steps[0]['loss']:.3f} -> {steps[-1]['loss']:.3f}")
