"""Writes an IDX pair (uncompressed, unsigned bytes): argv[1] the images'
path, argv[2] the labels' path, argv[3] how many examples, argv[4] and
argv[5] the rows and columns of an image; fixed pseudo-random pixels and
labels 0-9."""
import struct
import sys

images, labels = sys.argv[1], sys.argv[2]
n, rows, cols = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
with open(images, "wb") as f:
    f.write(struct.pack(">iiii", 0x803, n, rows, cols))
    f.write(bytes((i * 37 + 11) % 256 for i in range(n * rows * cols)))
with open(labels, "wb") as f:
    f.write(struct.pack(">ii", 0x801, n))
    f.write(bytes(i % 10 for i in range(n)))
