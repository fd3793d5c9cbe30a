"""Runs `gtc run MODEL` without --save in the directory DIR, stops it with
SIGTERM once training is under way, and prints its exit status, its
standard error, and the step of the checkpoint it left there (NAME, by
default mlp-interrupted.safetensors; the arguments after NAME go to gtc run).
Files already in DIR must be left as they were; it says so, or names the one
that changed."""
import json
import os
import signal
import struct
import subprocess
import sys
import time

gtc, model, workdir = sys.argv[1:4]
name = sys.argv[4] if len(sys.argv) > 4 else "mlp-interrupted.safetensors"
os.makedirs(workdir, exist_ok=True)
before = {f: open(os.path.join(workdir, f), "rb").read()
          for f in os.listdir(workdir) if f.endswith(".safetensors")}
log = os.path.join(workdir, "log.jsonl")
if os.path.exists(log):
    os.remove(log)  # an earlier run's: its lines would end the wait at once
with open(os.path.join(workdir, "err.txt"), "w") as err:
    gtc = os.path.abspath(gtc) if os.sep in gtc else gtc
    p = subprocess.Popen([gtc, "run", os.path.abspath(model), "--device", "cpu",
                          "--steps", "1000000", "--log-every", "1", "--log",
                          log] + sys.argv[5:], cwd=workdir, stdout=subprocess.DEVNULL,
                         stderr=err)
    deadline = time.time() + 60
    while time.time() < deadline and (
            not os.path.exists(log) or len(open(log).readlines()) < 3):
        time.sleep(0.05)
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=60)
print("status", p.returncode)
print(open(os.path.join(workdir, "err.txt")).read().strip())
for f, content in sorted(before.items()):
    with open(os.path.join(workdir, f), "rb") as now:
        if now.read() != content:
            print("changed:", f)
print(len(before), "earlier files checked")
data = open(os.path.join(workdir, name), "rb").read()
(n,) = struct.unpack("<Q", data[:8])
print("checkpoint at step", json.loads(data[8:8 + n])["__metadata__"]["step"])
