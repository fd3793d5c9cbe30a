"""Writes a small, repetitive text file (argv[1]) to train on."""
import sys
words = "the quick brown fox jumps over the lazy dog while the cat sleeps ".split()
out = []
for i in range(4000):
    out.append(words[(i * 7) % len(words)])
open(sys.argv[1], "w").write(" ".join(out) + "\n")
