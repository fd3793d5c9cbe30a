"""Writes a safetensors file holding one f32 tensor of zeros:
one_tensor.py OUT NAME DIM [DIM ...]"""
import json
import struct
import sys

out, name, dims = sys.argv[1], sys.argv[2], [int(d) for d in sys.argv[3:]]
count = 1
for d in dims:
    count *= d
header = json.dumps({name: {"dtype": "F32", "shape": dims,
                            "data_offsets": [0, 4 * count]}}).encode()
with open(out, "wb") as f:
    f.write(struct.pack("<Q", len(header)) + header + bytes(4 * count))
