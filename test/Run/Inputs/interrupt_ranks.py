"""Starts `gtc run MODEL --devices 2 --save CKPT` on the CPU for a long run,
sends SIGTERM (a scheduler's preemption) to gtc, which passes it to its
workers, or SIGINT to the whole process group (a terminal's Ctrl-C), once
training is under way, and prints how the run ended: the exit status,
whether it ended within 60 s, its standard error and the checkpoint's step."""
import json
import os
import signal
import struct
import subprocess
import sys
import time

gtc, model, how, ckpt, log = sys.argv[1:6]
for stale in (ckpt, log):  # from an earlier run of the test
    if os.path.exists(stale):
        os.remove(stale)
with open(log + ".err", "w") as err:
    p = subprocess.Popen([gtc, "run", model, "--device", "cpu", "--devices",
                          "2", "--steps", "1000000", "--log-every", "1",
                          "--log", log, "--save", ckpt],
                         stdout=subprocess.DEVNULL, stderr=err,
                         start_new_session=True)
    deadline = time.time() + 60
    while time.time() < deadline and (
            not os.path.exists(log) or len(open(log).readlines()) < 3):
        time.sleep(0.05)
    t0 = time.time()
    if how == "term":
        os.kill(p.pid, signal.SIGTERM)
    else:
        os.killpg(p.pid, signal.SIGINT)
    try:
        p.wait(timeout=90)
    except subprocess.TimeoutExpired:
        pass
    finally:
        if p.poll() is None:  # hung: say so, with what it printed
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            print("still running after 90 s; killed")
elapsed = time.time() - t0
print(f"status {p.returncode}; ended {'within' if elapsed < 60 else 'after'} 60 s")
print(open(log + ".err").read().strip())
if not os.path.exists(ckpt):
    sys.exit("no checkpoint at " + ckpt)
data = open(ckpt, "rb").read()
(n,) = struct.unpack("<Q", data[:8])
print("checkpoint at step", json.loads(data[8:8 + n])["__metadata__"]["step"])
