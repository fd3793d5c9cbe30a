"""Starts `gtc run MODEL --devices 2` on the CPU for a long run, then kills
(SIGKILL) or stops (SIGSTOP: a hang) rank 1 once training is under way, and
prints how the run ended: its exit status, whether it ended within 60 s of
the fault, and the last lines of its standard error."""
import os
import signal
import subprocess
import sys
import time

gtc, model, fault = sys.argv[1:4]
env = dict(os.environ, GTC_TIMEOUT="5")  # a hang is noticed after 5 s
p = subprocess.Popen([gtc, "run", model, "--device", "cpu", "--devices", "2",
                      "--steps", "1000000", "--log-every", "1"],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                     env=env)
for _ in range(3):  # the header, then a step: both ranks are training
    p.stdout.readline()


def rank_of(pid):
    try:
        stat = open(f"/proc/{pid}/stat").read()
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
    except OSError:
        return None
    return next((int(e[5:]) for e in env if e.startswith(b"RANK=")), None) \
        if ppid == p.pid else None


victim = next(int(d) for d in os.listdir("/proc")
              if d.isdigit() and rank_of(d) == 1)
t0 = time.time()
os.kill(victim, signal.SIGKILL if fault == "kill" else signal.SIGSTOP)
try:
    _, err = p.communicate(timeout=90)
finally:
    if fault != "kill":
        try:
            os.kill(victim, signal.SIGKILL)
        except OSError:
            pass
    if p.poll() is None:
        p.kill()
elapsed = time.time() - t0
print(f"status {p.returncode}; ended {'within' if elapsed < 60 else 'after'} 60 s")
print("\n".join(l for l in err.splitlines() if "error:" in l))
