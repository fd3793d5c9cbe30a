"""Reads a gtc checkpoint with nothing but Python's json and struct modules."""
import json
import struct
import sys
data = open(sys.argv[1], "rb").read()
(n,) = struct.unpack("<Q", data[:8])
header = json.loads(data[8:8 + n])
meta = header.pop("__metadata__")
body = data[8 + n:]
total = 0
for name, t in sorted(header.items()):
    begin, end = t["data_offsets"]
    count = 1
    for d in t["shape"]:
        count *= d
    assert t["dtype"] == "F32" and end - begin == 4 * count and end <= len(body), name
    if not name.startswith("optimizer."):
        total += count
print("format", meta["format"], "model", meta["model"], "step", meta["step"])
print("tensors", len(header), "parameters", total)
for name in sys.argv[2:]:
    print(name, "present" if name in header else "MISSING")
