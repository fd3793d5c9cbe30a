"""Checks a --profile Chrome trace: valid JSON, kernel events with the
fields Perfetto needs, phase and layer spans. Prints a summary line."""
import json
import sys

trace = json.load(open(sys.argv[1]))
events = trace["traceEvents"]
kernels = [e for e in events if e.get("ph") == "X" and e["cat"] != "phase" and e["cat"] != "layer"]
for e in kernels:
    for key in ("name", "ts", "dur", "pid", "tid"):
        assert key in e, (key, e)
    assert e["dur"] >= 0, e
phases = sorted({e["name"] for e in events if e.get("cat") == "phase"})
layers = sorted({e["name"] for e in events if e.get("cat") == "layer"})
steps = sorted({e["args"]["step"] for e in kernels})
print("steps", len(steps), "kernels per step", len(kernels) // len(steps))
print("phases", " ".join(phases))
print("layers", " ".join(layers))
