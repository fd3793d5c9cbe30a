"""Counts the elements of every gt.param in IR read from stdin."""
import re
import sys

total = 0
for m in re.finditer(r'gt\.param "[^"]*" = .* : tensor<([0-9x]+)x?[a-z0-9]+>', sys.stdin.read()):
    n = 1
    for d in m.group(1).split("x"):
        if d:
            n *= int(d)
    total += n
print(f"parameters: {total}")
