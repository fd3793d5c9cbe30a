"""Runs `gtc run MODEL` without --save in the directory DIR, stops it with
SIGTERM once training is under way, and prints its exit status, its
standard error, and the step of the checkpoint it left there."""
import json
import os
import signal
import struct
import subprocess
import sys
import time

gtc, model, workdir = sys.argv[1:4]
os.makedirs(workdir, exist_ok=True)
log = os.path.join(workdir, "log.jsonl")
with open(os.path.join(workdir, "err.txt"), "w") as err:
    gtc = os.path.abspath(gtc) if os.sep in gtc else gtc
    p = subprocess.Popen([gtc, "run", os.path.abspath(model), "--device", "cpu",
                          "--steps", "1000000", "--log-every", "1", "--log",
                          log], cwd=workdir, stdout=subprocess.DEVNULL,
                         stderr=err)
    deadline = time.time() + 60
    while time.time() < deadline and (
            not os.path.exists(log) or len(open(log).readlines()) < 3):
        time.sleep(0.05)
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=60)
print("status", p.returncode)
print(open(os.path.join(workdir, "err.txt")).read().strip())
data = open(os.path.join(workdir, "mlp-interrupted.safetensors"), "rb").read()
(n,) = struct.unpack("<Q", data[:8])
print("checkpoint at step", json.loads(data[8:8 + n])["__metadata__"]["step"])
