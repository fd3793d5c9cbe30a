# How often NVML's total-energy counter (what gtc's --bench energy line and
# torch_energy.py read around the timed steps) changes while the GPU is busy:
# bf16 matmuls queued for about two seconds, the counter polled on the host
# meanwhile, the intervals between its changes and the joules of each change
# printed. A J/step figure over N steps is only as fine as this interval over
# the N steps' time.
import statistics, time
import torch
from torch_energy import nvml, energy_mj

if not nvml:
    raise SystemExit("nvml_interval.py: no NVML energy counter (libnvidia-ml.so.1) on this machine")
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
for _ in range(3):
    a @ a
torch.cuda.synchronize()
t0 = time.perf_counter()
a @ a
torch.cuda.synchronize()
n = int(2.0 / (time.perf_counter() - t0))
for _ in range(n):
    a @ a  # queued: the host polls while these run
changes, last = [], energy_mj()
t_end = time.perf_counter() + 1.5
while time.perf_counter() < t_end:
    e = energy_mj()
    if e != last:
        changes.append((time.perf_counter(), e - last))
        last = e
torch.cuda.synchronize()
gaps = [later[0] - earlier[0] for earlier, later in zip(changes, changes[1:])]
if len(gaps) < 2:
    raise SystemExit(f"nvml_interval.py: the counter changed {len(changes)} times in 1.5 s")
print(f"NVML energy counter: {len(changes)} changes in 1.5 s busy; interval median "
      f"{statistics.median(gaps) * 1e3:.2f} ms (min {min(gaps) * 1e3:.2f}, max {max(gaps) * 1e3:.2f}); "
      f"median step {statistics.median(c[1] for c in changes) / 1e3:.3f} J")
