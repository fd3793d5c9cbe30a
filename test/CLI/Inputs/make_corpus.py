"""Writes a small English-like corpus (fixed seed) for spm_train."""
import random
import sys

random.seed(1)
words = ("the quick brown fox jumps over lazy dog hello world model train "
         "token sample gradient layer attention cache").split()
with open(sys.argv[1], "w") as f:
    for _ in range(400):
        f.write(" ".join(random.choice(words) for _ in range(12)) + "\n")
