"""Interrupts a run with SIGINT, resumes it, and compares the result with an
uninterrupted run, byte for byte: argv[1] gtc, argv[2] the model, argv[3] a
prefix for the checkpoints, then optionally the steps (default 400) and
options for every run. With fp16 loss
scaling it also prints the scaler's state in the interrupted checkpoint."""
import json
import re
import signal
import struct
import subprocess
import sys

gtc, model, prefix = sys.argv[1:4]
extra = sys.argv[4:]
steps = extra.pop(0) if extra and extra[0].isdigit() else "400"
killed = prefix + ".killed.safetensors"
p = subprocess.Popen([gtc, "run", model, "--steps", steps, "--save", killed] + extra,
                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
# Interrupt once a progress line says step 3 or later is done.
for line in p.stdout:
    m = re.match(r"step (\d+)/", line)
    if m and int(m.group(1)) >= 3:
        break
p.send_signal(signal.SIGINT)
p.communicate(timeout=120)
status = p.returncode
data = open(killed, "rb").read()
(n,) = struct.unpack("<Q", data[:8])
meta = json.loads(data[8:8 + n])["__metadata__"]
step = meta["step"]
assert status == 130 or step == steps, f"status {status}"
subprocess.run([gtc, "run", model, "--resume", killed,
                "--save", prefix + ".resumed.safetensors"] + extra, check=True,
               stdout=subprocess.DEVNULL)
subprocess.run([gtc, "run", model, "--steps", steps,
                "--save", prefix + ".straight.safetensors"] + extra, check=True,
               stdout=subprocess.DEVNULL)
a = open(prefix + ".resumed.safetensors", "rb").read()
b = open(prefix + ".straight.safetensors", "rb").read()
assert a == b, "checkpoints differ"
if "loss_scale" in meta:
    print(f"interrupted checkpoint: loss scale {meta['loss_scale']}, "
          f"{meta['skipped_steps']} skipped steps")
print(f"killed with status {status} at step {step} of {steps}; "
      f"resumed to {steps}: identical to the uninterrupted run")
