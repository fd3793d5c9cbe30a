"""Writes a token file in the llm.c / nanoGPT format (256 int32 header,
uint16 tokens): argv[1] the path, argv[2] how many tokens, argv[3] the
vocabulary size; a fixed pseudo-random sequence."""
import struct
import sys

path, n, vocab = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
header = [20240520, 1, n] + [0] * 253
state = 12345
tokens = []
for _ in range(n):
    state = (state * 1103515245 + 12345) % (1 << 31)
    tokens.append((state >> 8) % vocab)
with open(path, "wb") as f:
    f.write(struct.pack("<256i", *header))
    f.write(struct.pack("<%dH" % n, *tokens))
