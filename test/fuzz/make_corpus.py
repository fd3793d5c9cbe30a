"""Writes the seed corpora of the fuzz targets: argv[1] the gtc binary (for
plan texts), argv[2] the output directory (one subdirectory per target).
Seeds are small valid inputs of each format, in the layout the target reads
(see the comment at the top of each *Fuzzer.cpp)."""
import gzip
import json
import os
import struct
import subprocess
import sys

gtc, out = sys.argv[1], sys.argv[2]
root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def put(target, name, data):
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# .gt: the examples and every .gt file under test/ (valid and invalid ones).
for base in ("examples", "test"):
    for dirpath, _, files in os.walk(os.path.join(root, base)):
        for f in sorted(files):
            if f.endswith(".gt"):
                rel = os.path.relpath(os.path.join(dirpath, f), root)
                put("gt", rel.replace("/", "_"), open(os.path.join(dirpath, f), "rb").read())

# safetensors: a checkpoint-like file with f32, bf16 and i32 tensors.
def safetensors(tensors, metadata):
    header, blobs, at = {"__metadata__": metadata}, b"", 0
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [at, at + len(data)]}
        blobs += data
        at += len(data)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + blobs

put("safetensors", "checkpoint", safetensors({
    "w": ("F32", [2, 3], struct.pack("<6f", *range(6))),
    "adam.m.w": ("F32", [2, 3], bytes(24)),
    "b": ("BF16", [2], b"\x80\x3f\x00\x40"),
    "steps": ("I32", [], struct.pack("<i", 7))},
    {"format": "gtc-checkpoint-1", "model": "mlp", "step": "10"}))
put("safetensors", "empty", safetensors({}, {}))

# idx: u32 length of the images file, the images file, the labels file.
images = struct.pack(">iiii", 0x803, 3, 2, 2) + bytes(range(12))
labels = struct.pack(">ii", 0x801, 3) + bytes([0, 1, 2])
for name, (i, l) in {"raw": (images, labels),
                     "gzip": (gzip.compress(images), gzip.compress(labels))}.items():
    put("idx", name, struct.pack("<I", len(i)) + i + l)

# tokens: u8 window length - 1, then an llm.c token file (uint16 tokens).
n = 40
put("tokens", "llmc", bytes([7]) + struct.pack("<256i", 20240520, 1, n, *([0] * 253))
    + struct.pack("<%dH" % n, *[(i * 37) % 50257 for i in range(n)]))

# text: u8 window length - 1, then text.
put("text", "shakespeare", bytes([15]) + b"First Citizen:\nBefore we proceed any further, hear me speak.\n")

# plan and bundle: the plans of the examples' training steps.
def record(tag, data):
    return struct.pack("<I", len(tag)) + tag + struct.pack("<Q", len(data)) + data

# Small models, so that a plan fits the targets' 16 KiB inputs.
for example in ("examples/mlp.gt", "test/Run/Inputs/tiny_char.gt",
                "test/Run/Inputs/odd_mlp.gt", "test/Run/Inputs/bf16_param.gt"):
    plan = subprocess.run([gtc, "run", os.path.join(root, example), "--batch", "2",
                           "--emit=plan"], check=True, stdout=subprocess.PIPE).stdout
    example = os.path.basename(example)[:-3]
    put("plan", example, plan)
    records = (record(b"step", plan) + record(b"eval 2", plan) + record(b"arch sm_90", b"")
               + record(b"kernel 0123456789abcdef@sm_90", b"\x7fELF") + record(b"processes", b"2"))
    put("bundle", example, b"\x00" + records)
