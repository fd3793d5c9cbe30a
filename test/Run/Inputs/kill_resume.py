"""Interrupts a run with SIGINT, resumes it, and compares the result with an
uninterrupted run, byte for byte."""
import json
import signal
import struct
import subprocess
import sys
import time

gtc, model, prefix = sys.argv[1:4]
steps = "400"
killed = prefix + ".killed.safetensors"
p = subprocess.Popen([gtc, "run", model, "--steps", steps, "--save", killed],
                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
p.stdout.readline()  # training has started once the first line is out
time.sleep(0.3)
p.send_signal(signal.SIGINT)
p.communicate(timeout=120)
status = p.returncode
data = open(killed, "rb").read()
(n,) = struct.unpack("<Q", data[:8])
step = json.loads(data[8:8 + n])["__metadata__"]["step"]
assert status == 130 or step == steps, f"status {status}"
subprocess.run([gtc, "run", model, "--resume", killed,
                "--save", prefix + ".resumed.safetensors"], check=True,
               stdout=subprocess.DEVNULL)
subprocess.run([gtc, "run", model, "--steps", steps,
                "--save", prefix + ".straight.safetensors"], check=True,
               stdout=subprocess.DEVNULL)
a = open(prefix + ".resumed.safetensors", "rb").read()
b = open(prefix + ".straight.safetensors", "rb").read()
assert a == b, "checkpoints differ"
print(f"killed with status {status} at step {step} of {steps}; "
      f"resumed to {steps}: identical to the uninterrupted run")
