"""Writes a copy of a safetensors checkpoint with the first f32 element of
the first tensor whose name starts with PREFIX set to VALUE (nan, inf, -1,
...): a damaged checkpoint, or one from a run that diverged.
usage: set_value.py IN OUT PREFIX VALUE"""
import json, struct, sys

src, dst, prefix, value = sys.argv[1:5]
data = bytearray(open(src, "rb").read())
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
name = sorted(k for k in header if k != "__metadata__" and k.startswith(prefix))[0]
assert header[name]["dtype"] == "F32", name
at = 8 + n + header[name]["data_offsets"][0]
data[at:at + 4] = struct.pack("<f", float(value))
open(dst, "wb").write(data)
print(name)
