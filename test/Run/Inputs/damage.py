"""Writes a damaged copy of a compiled executable: 'flip' changes one byte
of the payload, 'cut' drops the last bytes (a truncated download)."""
import os, sys

src, dst, how = sys.argv[1], sys.argv[2], sys.argv[3]
data = bytearray(open(src, "rb").read())
if how == "flip":
    data[-100] ^= 0x40   # inside the payload, before the 24-byte trailer
else:
    data = data[:-10]
open(dst, "wb").write(data)
os.chmod(dst, 0o755)
