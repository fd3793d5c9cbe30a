"""Starts `gtc run MODEL --devices 2` on the CPU for a long run, kills its
launcher (SIGKILL, which it cannot catch) once both ranks train, and prints
how many of the two workers stopped within 60 s (they used to train on,
adopted by init)."""
import os
import signal
import subprocess
import sys
import time

gtc, model = sys.argv[1:3]
p = subprocess.Popen([gtc, "run", model, "--device", "cpu", "--devices", "2",
                      "--steps", "1000000", "--log-every", "1"],
                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                     text=True)
for _ in range(3):  # the header, then a step: both ranks are training
    p.stdout.readline()
workers = [int(c) for c in
           open(f"/proc/{p.pid}/task/{p.pid}/children").read().split()]
p.kill()
p.wait()


def running(pid):
    try:  # a zombie has stopped; init reaps it
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


deadline = time.time() + 60
while time.time() < deadline and any(running(w) for w in workers):
    time.sleep(0.2)
left = [w for w in workers if running(w)]
for w in left:
    os.kill(w, signal.SIGKILL)
print(f"workers stopped: {len(workers) - len(left)} of {len(workers)}")
