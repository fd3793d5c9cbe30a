"""Per-kernel GPU times of a training step from test/bench/cupti_kernels.cpp's
records (kernels as they ran, concurrently, graph replays included).

  cupti_table.py KERNELS.tsv MARKER STEPS [TOP]

MARKER is a substring of the optimizer's kernel names (gtc: gtc_update;
PyTorch's fused AdamW: FusedAdam): a step ends where a run of them ends
(runs are told apart by the gaps between marker kernels), and the last STEPS
steps are measured. Kernels are grouped by name, grid, block, registers and
shared memory (gtc's NVRTC kernels share a few names; their shapes tell them
apart). Prints the TOP groups (default 40) by their time a step (us), with
the GPU's idle time just before them (no kernel running), then the busy time
(the kernels' union on the clock), the kernels' sum and the step's period,
ms."""
import collections, sys

path, marker, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
top = int(sys.argv[4]) if len(sys.argv) > 4 else 40
ks = []
for line in open(path):
    f = line.rstrip("\n").split("\t", 7)
    if len(f) == 8:
        ks.append((int(f[0]), int(f[1]), f[2], f[3], f[4], f[5], f[6], f[7]))
ks.sort()
marks = [k for k in ks if marker in k[7]]
if len(marks) < 2:
    sys.exit(f"cupti_table: fewer than 2 kernels named *{marker}* in {path}")
gaps = [b[0] - a[1] for a, b in zip(marks, marks[1:])]
cut = max(gaps) / 2
ends = []  # the end of each run of markers: a step's end
for m, g in zip(marks, gaps + [cut + 1]):
    if g > cut:
        ends.append(m[1])
if len(ends) < steps + 1:
    sys.exit(f"cupti_table: {len(ends)} steps found, {steps + 1} needed")
t0, t1 = ends[-steps - 1], ends[-1]
win = [k for k in ks if t0 < k[0] <= t1]
groups = collections.defaultdict(lambda: [0, 0, 0])
total = sum(k[1] - k[0] for k in win)
busy, reach = 0, t0
for k in win:  # the union of the kernels' intervals; the idle time before each
    g = groups[(k[7][:90], k[3], k[4], k[5], k[6])]
    g[0] += 1
    g[1] += k[1] - k[0]
    g[2] += max(k[0] - reach, 0)
    s, e = max(k[0], reach), max(k[1], reach)
    busy += e - s
    reach = e
print(f"{'us/step':>9} {'n':>4} {'idle':>6}  grid | block | regs | dyn smem | name")
for (name, grid, block, regs, smem), (n, t, idle) in sorted(
        groups.items(), key=lambda x: -x[1][1])[:top]:
    print(f"{t / steps / 1e3:9.1f} {n // steps:4d} {idle / steps / 1e3:6.1f}  "
          f"{grid} | {block} | {regs} | {smem} | {name}")
print(f"{len(groups)} groups, {len(win) // steps} kernels a step; ms a step: "
      f"busy {busy / steps / 1e6:.3f}, sum {total / steps / 1e6:.3f}, "
      f"period {(t1 - t0) / steps / 1e6:.3f}")
