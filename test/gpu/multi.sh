#!/usr/bin/env bash
# Data parallelism on the GPUs of one host (NCCL), in one run on a machine
# with 2 or more GPUs: losses against one GPU, throughput against one GPU
# and against PyTorch DDP, launchers (gtc run --devices, torchrun, two nodes
# simulated on one host, compiled executables), faults, and a profile of the
# overlap. Prints one table at the end.
#
#   test/gpu/multi.sh BUNDLE [SECTIONS]
#
# BUNDLE is what `tools/dev.sh gpu-bundle` makes; SECTIONS is a comma list
# of parity, scale, small, profile, micro, launch, exe, fault, zero, resume
# (default: all of them). TORCH_MODES (default "eager compile") are the
# PyTorch DDP modes timed beside gtc.
set -u
cd "$(dirname "$0")/../.."
B=${1:-gpu-bundle}
SECTIONS=${2:-parity,scale,small,profile,micro,launch,exe,fault,zero,resume}
RESULTS=${OUT:-}
W=/tmp/gtc-multi
rm -rf "$W" && mkdir -p "$W"
BIN=/tmp/gtc-gpu-bin
. test/gpu/unpack.sh
unpack_bundle "$B" "$BIN" gtc gtc-runner
GTC=$BIN/gtc
# Every run has a time limit: a hang fails its row instead of the whole run.
gtc() { timeout -k 10 "${LIMIT:-240}" "$GTC" "$@"; }
export GTC_CACHE_DIR=$W/kernel-cache
# NVLink multicast stays off on these machines, in every process.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
ROWS=()
row() {
  ROWS+=("$(printf '%-78s | %s' "$1" "$2")")
  [ -n "$RESULTS" ] && printf '%s\n' "${ROWS[-1]}" >> "$RESULTS/rows.txt"
}
# DEADLINE (seconds, default none): sections that would start later are
# skipped, so that a device call's limit leaves time for the table.
DEADLINE=${DEADLINE:-100000}
has() {
  case ",$SECTIONS," in *",$1,"*) ;; *) return 1 ;; esac
  if [ $SECONDS -ge $DEADLINE ]; then row "section $1 skipped: past the deadline ($SECONDS s)" "SKIP"; return 1; fi
  return 0
}
finish() {
  if [ -n "$RESULTS" ]; then
    cp "$W"/scale.txt "$W"/memory.txt "$RESULTS"/ 2>/dev/null
    tar czf "$RESULTS/multi-logs.tgz" --exclude=kernel-cache --exclude=alone \
      --exclude=tokens.bin --exclude=eval.bin --exclude='*.safetensors' --exclude='*.json' -C "$W" .
  fi
  echo
  echo "== gtc data parallelism on $NGPU x $GPU ($SECONDS s)"
  printf '%s\n' "${ROWS[@]}"
  cat "$W/memory.txt" 2>/dev/null
  echo "== throughput (GPT-2 124M bf16, T = 1024; gtc: samples/s after the first step of 30; PyTorch: torch_ddp.py)"
  cat "$W/scale.txt" 2>/dev/null || echo "(not run)"
}
trap finish EXIT
verdict() { [ "$1" = 0 ] && echo PASS || echo "FAIL (status $1)"; }

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$W/gpu.txt"
nvidia-smi topo -m > "$W/topo.txt" 2>&1
GPU=$(head -1 "$W/gpu.txt" | cut -d, -f1)
NGPU=$(wc -l < "$W/gpu.txt")
mkdir -p /usr/share/datasets/fashion-mnist
cp -n "$B"/fashion-mnist/* /usr/share/datasets/fashion-mnist/ 2>/dev/null
# Synthetic token files (GPT-2's vocabulary): 8M tokens to train on, 64
# sequences to evaluate.
python3 - "$W" <<'PY'
import numpy as np, sys
rng = np.random.default_rng(1)
for name, n in (("tokens.bin", 1 << 23), ("eval.bin", 1 << 16)):
    with open(f"{sys.argv[1]}/{name}", "wb") as f:
        np.array([20240520, 1, n] + [0] * 253, dtype="<i4").tofile(f)
        rng.integers(0, 50257, n, dtype=np.uint16).tofile(f)
PY
same() { # reference other tolerance -> prints the comparison, status
  python3 test/Run/Inputs/compare_losses.py "$1" "$2" "$3"
}
steady() { # log -> samples/s after the first step
  grep -o '[0-9.]* samples/s after the first step' "$1" | cut -d' ' -f1
}

if has parity; then
# (examples/gpt2.gt says devices = all: one GPU is --devices 1.)
# Losses on 2 and N GPUs against one with the same global batch: fp32
# (char_gpt, 50 steps, rel 1e-5) and bf16 (GPT-2 124M, 20 steps, rel 1e-3).
GPT="--data $W/tokens.bin --eval $W/eval.bin"
gtc run examples/char_gpt.gt --device cuda --precision fp32 --batch 32 --steps 50 --log-every 1 --log "$W/c1.jsonl" > "$W/c1.txt" 2>&1
for n in 2 $NGPU; do
  gtc run examples/char_gpt.gt --device cuda --devices $n --precision fp32 --batch 32 --steps 50 --log-every 1 --log "$W/c$n.jsonl" > "$W/c$n.txt" 2>&1; s=$?
  tail -2 "$W/c$n.txt"
  r=$(same "$W/c1.jsonl" "$W/c$n.jsonl" 1e-5 2>&1); s2=$?
  row "char_gpt fp32, $n GPUs vs 1, batch 32: $r" "$(verdict $((s + s2)))"
done
gtc run examples/gpt2.gt --device cuda --devices 1 --batch 16 --steps 20 --log-every 1 $GPT --log "$W/g1.jsonl" > "$W/g1.txt" 2>&1
for n in 2 $NGPU; do
  gtc run examples/gpt2.gt --device cuda --devices $n --batch 16 --steps 20 --log-every 1 $GPT --log "$W/g$n.jsonl" > "$W/g$n.txt" 2>&1; s=$?
  tail -2 "$W/g$n.txt"
  r=$(same "$W/g1.jsonl" "$W/g$n.jsonl" 1e-3 2>&1); s2=$?
  row "GPT-2 124M bf16, $n GPUs vs 1, batch 16: $r" "$(verdict $((s + s2)))"
done
fi

scale() { # sequences per GPU, tag, PyTorch modes
  local b=$1 tag=$2 modes=$3 one
  # One GPU: plain gtc run (gpt2.gt's devices = all sees one GPU).
  CUDA_VISIBLE_DEVICES=0 gtc run examples/gpt2.gt --device cuda --batch $b --steps 30 --data "$W/tokens.bin" --eval "$W/eval.bin" > "$W/s$tag-1.txt" 2>&1
  one=$(steady "$W/s$tag-1.txt")
  echo "gtc 1 GPU B=$b: $one samples/s" | tee -a "$W/scale.txt"
  # The other GPUs alone: a data-parallel step runs at its slowest GPU's
  # pace, and GPUs of one machine differ (2.2% on one pair of H200s).
  local d alone=""
  for ((d = 1; d < NGPU && d < 4; d++)); do
    CUDA_VISIBLE_DEVICES=$d gtc run examples/gpt2.gt --device cuda --batch $b --steps 30 --data "$W/tokens.bin" --eval "$W/eval.bin" > "$W/s$tag-1-gpu$d.txt" 2>&1
    alone="$alone GPU $d $(steady "$W/s$tag-1-gpu$d.txt"),"
  done
  [ -n "$alone" ] && echo "gtc 1 GPU B=$b, the other GPUs alone (samples/s):${alone%,}" | tee -a "$W/scale.txt"
  for n in 2 4; do
    [ $n -le $NGPU ] || continue
    # NCCL_ENVS: ';'-separated settings to time beside the default (such
    # as NCCL_MAX_CTAS=8).
    local IFS_=$IFS; IFS=';'; local envs=("" ${NCCL_ENVS:-}); IFS=$IFS_
    for e in "${envs[@]}"; do
      local f="$W/s$tag-$n${e:+-${e//[^A-Za-z0-9]/_}}.txt"
      env $e timeout -k 10 "${LIMIT:-240}" "$GTC" run examples/gpt2.gt --device cuda --devices $n --batch $((b * n)) --steps 30 --data "$W/tokens.bin" --eval "$W/eval.bin" > "$f" 2>&1
      local r; r=$(steady "$f")
      tail -1 "$f"
      python3 - "$one" "$r" $n $b "$e" >> "$W/scale.txt" <<'PY'
import sys
one, r, n, b = float(sys.argv[1] or 0), float(sys.argv[2] or 0), int(sys.argv[3]), int(sys.argv[4])
e = f" ({sys.argv[5]})" if sys.argv[5] else ""
print(f"gtc {n} GPUs B={b}/GPU{e}: {r:.1f} samples/s = {r*1024/1e3:.0f}k tokens/s, {r/one if one else 0:.3f}x of 1 GPU; step {1e3*n*b/r if r else 0:.2f} ms vs {1e3*b/one if one else 0:.2f} ms on 1 (exposed {1e3*n*b/r - 1e3*b/one if r and one else 0:.2f} ms)")
PY
      tail -1 "$W/scale.txt"
    done
  done
  for mode in $modes; do
    for n in ${TORCH_GPUS:-1 2 4}; do
      [ $n -le $NGPU ] || continue
      MODE=$mode B=$b timeout 300 torchrun --standalone --nproc_per_node=$n "$B/torch_ddp.py" > "$W/ddp-$mode-$n-$b.txt" 2>&1
      grep '^{' "$W/ddp-$mode-$n-$b.txt" | tee -a "$W/scale.txt"
    done
  done
}
has scale && scale 16 16 "${TORCH_MODES-eager compile}"
has small && scale 4 4 ""

if has profile; then
gtc run examples/gpt2.gt --device cuda --devices 2 --batch 32 --bench 20 --profile "$W/gpt2-dp2.json" > "$W/profile-dp2.txt" 2>&1; s=$?
head -40 "$W/profile-dp2.txt"
grep "collectives" "$W/profile-dp2.txt"
row "--profile on 2 GPUs: $(grep -o 'collectives.*' "$W/profile-dp2.txt" | cut -c1-70)" "$(verdict $s)"
# One GPU's profile of the same step (16 sequences), to compare kernel by
# kernel what the collectives beside them cost.
CUDA_VISIBLE_DEVICES=0 gtc run examples/gpt2.gt --device cuda --batch 16 --bench 20 --profile "$W/gpt2-dp1.json" > "$W/profile-dp1.txt" 2>&1
[ -n "$RESULTS" ] && cp "$W/gpt2-dp2.json" "$W/gpt2-dp1.json" "$W/profile-dp1.txt" "$W/profile-dp2.txt" "$RESULTS/" 2>/dev/null
fi


if has micro; then
# Gradient accumulation on 2 GPUs: the buckets are reduced during the last
# micro-batch's backward, each as the mean over the micro-batches. fp32
# char_gpt (2 micro-batches of 8 a GPU) against one GPU's batch of 32.
[ -f "$W/c1.jsonl" ] || gtc run examples/char_gpt.gt --device cuda --precision fp32 --batch 32 --steps 50 --log-every 1 --log "$W/c1.jsonl" > "$W/c1.txt" 2>&1
gtc run examples/char_gpt.gt --device cuda --devices 2 --micro-batch 8 --precision fp32 --batch 32 --steps 50 --log-every 1 --log "$W/m2.jsonl" > "$W/m2.txt" 2>&1; s=$?
tail -2 "$W/m2.txt"
r=$(same "$W/c1.jsonl" "$W/m2.jsonl" 1e-5 2>&1); s2=$?
row "char_gpt fp32, 2 GPUs x 2 micro-batches vs 1 GPU, batch 32: $r" "$(verdict $((s + s2)))"
gtc run examples/gpt2.gt --device cuda --devices 2 --batch 32 --micro-batch 8 --steps 30 --data "$W/tokens.bin" --eval "$W/eval.bin" > "$W/m-gpt.txt" 2>&1; s=$?
row "GPT-2 bf16, 2 GPUs x 2 micro-batches of 8: $(steady "$W/m-gpt.txt") samples/s" "$(verdict $s)"
fi

if has launch; then
# Launchers: real torchrun, two nodes simulated on one host (network
# transport), a compiled executable: 20 GPT-2 steps each, losses equal to
# gtc run --devices 2.
GPT="--data $W/tokens.bin --eval $W/eval.bin"
gtc run examples/gpt2.gt --device cuda --devices 2 --batch 32 --steps 20 --log-every 1 $GPT --log "$W/l-dev.jsonl" > "$W/l-dev.txt" 2>&1; s0=$?
torchrun --standalone --nproc_per_node=2 --no_python -- "$GTC" run examples/gpt2.gt --device cuda --batch 32 --steps 20 --log-every 1 $GPT --log "$W/l-tr.jsonl" > "$W/l-tr.txt" 2>&1; s=$?
tail -2 "$W/l-tr.txt"
r=$(same "$W/l-dev.jsonl" "$W/l-tr.jsonl" 1e-6 2>&1); s2=$?
row "torchrun --nproc_per_node 2 vs gtc run --devices 2 (GPT-2, 20 steps): $r" "$(verdict $((s0 + s + s2)))"
# Two nodes simulated on one host: 2 GPUs each on 4, 1 each on 2.
PER=$((NGPU >= 4 ? 2 : 1)); ALL=$((2 * PER))
PORT=29611
for node in 0 1; do
  VIS=$((PER * node)); [ $PER = 2 ] && VIS=$VIS,$((PER * node + 1))
  CUDA_VISIBLE_DEVICES=$VIS NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_DEBUG=INFO \
    timeout -k 10 "${LIMIT:-240}" torchrun --no_python --nnodes 2 --node_rank $node --nproc_per_node $PER --master_addr 127.0.0.1 --master_port $PORT -- \
    "$GTC" run examples/gpt2.gt --device cuda --batch $((16 * ALL)) --steps 20 --log-every 1 $GPT --log "$W/l-nodes$node.jsonl" > "$W/l-nodes$node.txt" 2>&1 &
done
wait
gtc run examples/gpt2.gt --device cuda --devices $ALL --batch $((16 * ALL)) --steps 20 --log-every 1 $GPT --log "$W/l-devn.jsonl" > "$W/l-devn.txt" 2>&1
tail -2 "$W/l-nodes0.txt"
net=$(grep -ho "via NET/[A-Za-z]*\|Using network [A-Za-z]*" "$W"/l-nodes*.txt | sort -u | tr '\n' ' ')
echo "transport: $net"
# Over the network NCCL reduces with other algorithms (trees between the
# nodes, fewer channels) than over NVLink, so in another order: the bf16
# losses agree within 2e-6 relative, not bit for bit (4 x H200).
r=$(same "$W/l-devn.jsonl" "$W/l-nodes0.jsonl" 1e-5 2>&1); s2=$?
row "2 nodes x $PER GPU (torchrun --nnodes 2, P2P/SHM off; $net) vs --devices $ALL: $r" "$(verdict $s2)"
fi

if has exe; then
GPT="--data $W/tokens.bin --eval $W/eval.bin"
[ -f "$W/l-dev.jsonl" ] || gtc run examples/gpt2.gt --device cuda --devices 2 --batch 32 --steps 20 --log-every 1 $GPT --log "$W/l-dev.jsonl" > "$W/l-dev.txt" 2>&1
mkdir -p "$W/alone"
gtc compile examples/gpt2.gt --devices 2 --batch 32 -o "$W/alone/gpt2x2" > "$W/l-compile.txt" 2>&1
( cd "$W/alone" && ./gpt2x2 --device cuda --steps 20 --log-every 1 $GPT --log "$W/l-exe.jsonl" ) > "$W/l-exe.txt" 2>&1; s=$?
tail -2 "$W/l-exe.txt"
r=$(same "$W/l-dev.jsonl" "$W/l-exe.jsonl" 1e-6 2>&1); s2=$?
row "compiled executable (devices = 2) vs gtc run --devices 2: $r" "$(verdict $((s + s2)))"
fi

if has fault; then
# Faults on 2 GPUs: each case must end every rank within 60 s, naming the rank.
for how in kill0 kill1 stop1; do
  start=$(date +%s)
  python3 - "$GTC" "$W" $how > "$W/fault-$how.txt" 2>&1 <<'PY'
import os, signal, subprocess, sys, time
gtc, w, how = sys.argv[1:4]
env = dict(os.environ, GTC_TIMEOUT="10")
p = subprocess.Popen(["torchrun", "--standalone", "--nproc_per_node=2", "--max_restarts=0", "--no_python", "--", gtc, "run",
                      "examples/gpt2.gt", "--device", "cuda", "--batch", "32", "--steps", "100000",
                      "--data", f"{w}/tokens.bin", "--eval", f"{w}/eval.bin", "--log-every", "1", "--log", f"{w}/fault-{how}.jsonl"],
                     env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
# Wait for training to run, then find the ranks' processes (gtc children of torchrun).
t0 = time.time()
while time.time() - t0 < 120 and p.poll() is None:
    if os.path.exists(f"{w}/fault-{how}.jsonl") and sum(1 for _ in open(f"{w}/fault-{how}.jsonl")) > 5:
        break
    time.sleep(0.5)
pids = {}
for d in os.listdir("/proc"):
    if d.isdigit():
        try:
            env_ = open(f"/proc/{d}/environ", "rb").read().split(b"\0")
            cmd = open(f"/proc/{d}/cmdline", "rb").read()
        except Exception:
            continue
        if b"gtc" in cmd.split(b"\0")[0] and any(e.startswith(b"RANK=") for e in env_):
            rank = int([e for e in env_ if e.startswith(b"RANK=")][0][5:])
            pids[rank] = int(d)
print("ranks", pids, flush=True)
rank = 0 if how == "kill0" else 1
if rank not in pids:
    p.kill(); out, _ = p.communicate()
    print(out[-3000:]); print("training did not start"); sys.exit(1)
killed = time.time()
os.kill(pids[rank], signal.SIGSTOP if how.startswith("stop") else signal.SIGKILL)
try:
    out, _ = p.communicate(timeout=90)
except subprocess.TimeoutExpired:
    p.kill(); out, _ = p.communicate()
    print(out); print("NOT ENDED within 90 s"); sys.exit(1)
print(out[-3000:])
others = [r for r in pids if r != rank]
alive = [r for r in others if os.path.exists(f"/proc/{pids[r]}") and open(f"/proc/{pids[r]}/stat").read().split()[2] != "Z"]
print(f"ended {time.time() - killed:.1f} s after the signal; other ranks alive: {alive}")
if how.startswith("stop"):
    try:  # torchrun may have killed it already
        os.kill(pids[rank], signal.SIGKILL)
    except ProcessLookupError:
        pass
sys.exit(0 if not alive and time.time() - killed < 60 else 1)
PY
  s=$?
  msg=$(grep -h "gtc: error: rank" "$W/fault-$how.txt" | head -1 | cut -c1-90)
  row "fault $how: $(tail -1 "$W/fault-$how.txt" | cut -c1-40); $msg" "$(verdict $s)"
done
# Ctrl-C: SIGINT to the whole process group, as a terminal sends it. Every
# rank stops at the same step, rank 0 writes the checkpoint, and training
# resumes from it.
python3 - "$GTC" "$W" > "$W/fault-ctrlc.txt" 2>&1 <<'PY'
import os, re, signal, subprocess, sys, time
gtc, w = sys.argv[1:3]
ck = f"{w}/ctrlc.safetensors"
p = subprocess.Popen([gtc, "run", "examples/gpt2.gt", "--device", "cuda", "--devices", "2", "--batch", "32",
                      "--steps", "100000", "--data", f"{w}/tokens.bin", "--eval", f"{w}/eval.bin",
                      "--log-every", "1", "--log", f"{w}/ctrlc.jsonl", "--save", ck],
                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
t0 = time.time()
while time.time() - t0 < 120 and p.poll() is None:
    if os.path.exists(f"{w}/ctrlc.jsonl") and sum(1 for _ in open(f"{w}/ctrlc.jsonl")) > 5:
        break
    time.sleep(0.5)
os.killpg(p.pid, signal.SIGINT)
t = time.time()
try:
    out, _ = p.communicate(timeout=90)
except subprocess.TimeoutExpired:
    os.killpg(p.pid, signal.SIGKILL); out, _ = p.communicate()
    print(out[-3000:]); print("NOT ENDED within 90 s"); sys.exit(1)
print(out[-2000:])
m = re.search(r"interrupted at step (\d+)", out)
print(f"status {p.returncode}, ended {time.time() - t:.1f} s after SIGINT")
if p.returncode != 130 or not m or not os.path.exists(ck):
    print("no clean stop"); sys.exit(1)
s = int(m.group(1))
r = subprocess.run([gtc, "run", "examples/gpt2.gt", "--device", "cuda", "--devices", "2", "--batch", "32",
                    "--steps", str(s + 2), "--data", f"{w}/tokens.bin", "--eval", f"{w}/eval.bin",
                    "--resume", ck], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=200)
print(r.stdout[-1500:])
print(f"stopped at step {s}; resumed to {s + 2}: status {r.returncode}")
sys.exit(r.returncode)
PY
s=$?
row "fault ctrl-c (2 GPUs): $(tail -1 "$W/fault-ctrlc.txt" | cut -c1-60)" "$(verdict $s)"
fi

if has zero; then
# ZeRO-1 (shard = optimizer) against unsharded on 2 GPUs: fp32 losses, and
# the GPU memory each saves (GPT-2 bf16) against the predicted saving.
gtc run examples/char_gpt.gt --device cuda --devices 2 --precision fp32 --batch 32 --steps 50 --log-every 1 --log "$W/z-none.jsonl" > "$W/z-none.txt" 2>&1
gtc run examples/char_gpt.gt --device cuda --devices 2 --shard optimizer --precision fp32 --batch 32 --steps 50 --log-every 1 --log "$W/z-opt.jsonl" > "$W/z-opt.txt" 2>&1; s=$?
tail -2 "$W/z-opt.txt"
r=$(same "$W/z-none.jsonl" "$W/z-opt.jsonl" 1e-6 2>&1); s2=$?
row "char_gpt fp32 2 GPUs: shard = optimizer vs none: $r" "$(verdict $((s + s2)))"
# ZeRO-2 (shard = gradients): the same against unsharded, on char_gpt and
# on the MLP (whose parameters leave alignment gaps in their buckets).
gtc run examples/char_gpt.gt --device cuda --devices 2 --shard gradients --precision fp32 --batch 32 --steps 50 --log-every 1 --log "$W/z-grad.jsonl" > "$W/z-grad.txt" 2>&1; s=$?
tail -2 "$W/z-grad.txt"
r=$(same "$W/z-none.jsonl" "$W/z-grad.jsonl" 1e-6 2>&1); s2=$?
row "char_gpt fp32 2 GPUs: shard = gradients vs none: $r" "$(verdict $((s + s2)))"
gtc run examples/mlp.gt --device cuda --devices 2 --precision fp32 --batch 64 --steps 50 --log-every 1 --log "$W/zm-mlp-none.jsonl" > "$W/zm-mlp-none.txt" 2>&1
gtc run examples/mlp.gt --device cuda --devices 2 --shard gradients --precision fp32 --batch 64 --steps 50 --log-every 1 --log "$W/zm-mlp-grad.jsonl" > "$W/zm-mlp-grad.txt" 2>&1; s=$?
r=$(same "$W/zm-mlp-none.jsonl" "$W/zm-mlp-grad.jsonl" 1e-6 2>&1); s2=$?
row "mlp fp32 2 GPUs: shard = gradients vs none: $r" "$(verdict $((s + s2)))"
# A small Llama: its packed q, k, v parameter (gt-pack-projections) is one
# member of its bucket, its gradient reduced to owners as one.
sed "s/  let V = 32000, T = 1024, D = 768, H = 12, KV = 4, FF = 2048, L = 12/  let V = 50257, T = 128, D = 256, H = 4, KV = 2, FF = 512, L = 2/" examples/llama.gt > "$W/llama-small.gt"
gtc run "$W/llama-small.gt" --device cuda --devices 2 --precision fp32 --batch 16 --steps 30 --log-every 1 --data "$W/tokens.bin" --log "$W/zl-none.jsonl" > "$W/zl-none.txt" 2>&1
gtc run "$W/llama-small.gt" --device cuda --devices 2 --shard gradients --precision fp32 --batch 16 --steps 30 --log-every 1 --data "$W/tokens.bin" --log "$W/zl-grad.jsonl" > "$W/zl-grad.txt" 2>&1; s=$?
r=$(same "$W/zl-none.jsonl" "$W/zl-grad.jsonl" 1e-6 2>&1); s2=$?
row "small Llama (packed q, k, v) fp32 2 GPUs: shard = gradients vs none: $r" "$(verdict $((s + s2)))"
# ZeRO-2 with gradient accumulation (each micro-batch's buckets reduced to
# their owners, the shares summed): 2 micro-batches of 8 a GPU against
# unsharded 2 GPUs of 16.
gtc run examples/char_gpt.gt --device cuda --devices 2 --shard gradients --micro-batch 8 --precision fp32 --batch 32 --steps 50 --log-every 1 --log "$W/z-grad-micro.jsonl" > "$W/z-grad-micro.txt" 2>&1; s=$?
tail -2 "$W/z-grad-micro.txt"
r=$(same "$W/z-none.jsonl" "$W/z-grad-micro.jsonl" 1e-5 2>&1); s2=$?
row "char_gpt fp32 2 GPUs: shard = gradients x 2 micro-batches vs none: $r" "$(verdict $((s + s2)))"
for shard in none optimizer gradients; do
  gtc run examples/gpt2.gt --device cuda --devices 2 --shard $shard --batch 32 --steps 3 --data "$W/tokens.bin" --eval "$W/eval.bin" > "$W/zm-$shard.txt" 2>&1
  gtc run examples/gpt2.gt --device cuda --devices 2 --shard $shard --batch 32 --dry-run > "$W/zm-$shard-explain.txt" 2>&1
done
grep -h "in use after\|device memory" "$W"/zm-*.txt
grep -h "shard = \|predicted peak\|peak" "$W"/zm-*-explain.txt | head -12
python3 - "$W" >> "$W/memory.txt" <<'PY'
import re, sys
w = sys.argv[1]
def used(s):
    m = re.search(r"in use after the first step: ([0-9.]+) MiB", open(f"{w}/zm-{s}.txt").read())
    return float(m.group(1)) if m else float("nan")
def peak(s):
    m = re.search(r"predicted peak ([0-9.]+) MiB a process", open(f"{w}/zm-{s}-explain.txt").read())
    return float(m.group(1)) if m else float("nan")
none, opt, grad = used("none"), used("optimizer"), used("gradients")
pred = re.search(r"optimizer state ([0-9.]+) MiB a process instead of ([0-9.]+) MiB", open(f"{w}/zm-optimizer-explain.txt").read())
saving = float(pred.group(2)) - float(pred.group(1))
print(f"GPT-2 bf16 on 2 GPUs, rank 0: {none:.0f} MiB unsharded, {opt:.0f} MiB with shard = optimizer: saved {none - opt:.0f} MiB of a predicted {saving:.0f} MiB ({100 * (none - opt) / saving:.0f}%)")
# ZeRO-2's predicted saving: the plans' predicted peaks, unsharded minus sharded.
p_opt, p_grad = peak("optimizer"), peak("gradients")
print(f"GPT-2 bf16 on 2 GPUs, rank 0: {grad:.0f} MiB with shard = gradients: saved {opt - grad:.0f} MiB against shard = optimizer, of a predicted {p_opt - p_grad:.0f} MiB (predicted peaks {p_opt:.0f} and {p_grad:.0f} MiB)")
PY
tail -2 "$W/memory.txt"
# --explain's memory a GPU (the plan's peak and what the run before it
# measured outside the plan: the context, NCCL's buffers) against the
# memory in use after the first step, within 3%.
for shard in none optimizer gradients; do
  r=$(python3 - "$W" $shard <<'PY'
import re, sys
w, s = sys.argv[1], sys.argv[2]
used = re.search(r"in use after the first step: ([0-9.]+) MiB", open(f"{w}/zm-{s}.txt").read())
pred = re.search(r"GPU memory in use, predicted a GPU: ([0-9.]+) MiB", open(f"{w}/zm-{s}-explain.txt").read())
if not used or not pred:
    print("no figure: " + ("--explain" if used else "the run")); sys.exit(1)
u, p = float(used.group(1)), float(pred.group(1))
print(f"in use {u:.0f} MiB, --explain {p:.0f} MiB ({100 * (p - u) / u:+.1f}%)")
sys.exit(0 if abs(p - u) <= 0.03 * u else 1)
PY
); s=$?
  row "GPT-2 bf16 2 GPUs shard = $shard memory: $r" "$(verdict $s)"
done
# What each mode costs a step (GPT-2 bf16, 16 sequences a GPU).
for shard in none optimizer gradients; do
  gtc run examples/gpt2.gt --device cuda --devices 2 --shard $shard --batch 32 --bench 20 > "$W/zb-$shard.txt" 2>&1; s=$?
  row "GPT-2 bf16 2 GPUs shard = $shard: $(grep -o '[0-9.]* ms/step' "$W/zb-$shard.txt" | head -1)" "$(verdict $s)"
done
fi

if has resume; then
# Checkpoints are one file whatever the number of GPUs: written on N GPUs
# (sharded too), resumed on fewer; the steps after it those of one GPU
# trained straight through.
N=$NGPU
C="examples/char_gpt.gt --device cuda --precision fp32 --batch 32"
gtc run $C --steps 20 --log-every 1 --log "$W/r-straight.jsonl" > "$W/r-straight.txt" 2>&1
tail -n 10 "$W/r-straight.jsonl" > "$W/r-last10.jsonl"
gtc run $C --steps 10 --devices $N --shard optimizer --save "$W/r-ck$N.safetensors" > "$W/r-save$N.txt" 2>&1
gtc run $C --steps 20 --devices 2 --log-every 1 --resume "$W/r-ck$N.safetensors" --log "$W/r-on2.jsonl" > "$W/r-on2.txt" 2>&1; s=$?
r=$(same "$W/r-last10.jsonl" "$W/r-on2.jsonl" 1e-5 2>&1); s2=$?
row "checkpoint of $N GPUs (ZeRO-1) resumed on 2: $r" "$(verdict $((s + s2)))"
gtc run $C --steps 20 --log-every 1 --resume "$W/r-ck$N.safetensors" --log "$W/r-on1.jsonl" > "$W/r-on1.txt" 2>&1; s=$?
r=$(same "$W/r-last10.jsonl" "$W/r-on1.jsonl" 1e-5 2>&1); s2=$?
row "checkpoint of $N GPUs (ZeRO-1) resumed on 1: $r" "$(verdict $((s + s2)))"
gtc run $C --steps 10 --save "$W/r-ck1.safetensors" > "$W/r-save1.txt" 2>&1
gtc run $C --steps 20 --devices $N --shard optimizer --log-every 1 --resume "$W/r-ck1.safetensors" --log "$W/r-onN.jsonl" > "$W/r-onN.txt" 2>&1; s=$?
r=$(same "$W/r-last10.jsonl" "$W/r-onN.jsonl" 1e-5 2>&1); s2=$?
row "checkpoint of 1 GPU resumed on $N (ZeRO-1): $r" "$(verdict $((s + s2)))"
gtc run $C --steps 10 --devices $N --shard gradients --save "$W/r-ckz2.safetensors" > "$W/r-savez2.txt" 2>&1
gtc run $C --steps 20 --log-every 1 --resume "$W/r-ckz2.safetensors" --log "$W/r-z2on1.jsonl" > "$W/r-z2on1.txt" 2>&1; s=$?
r=$(same "$W/r-last10.jsonl" "$W/r-z2on1.jsonl" 1e-5 2>&1); s2=$?
row "checkpoint of $N GPUs (ZeRO-2) resumed on 1: $r" "$(verdict $((s + s2)))"
gtc run $C --steps 20 --devices $N --shard gradients --log-every 1 --resume "$W/r-ck1.safetensors" --log "$W/r-z2onN.jsonl" > "$W/r-z2onN.txt" 2>&1; s=$?
r=$(same "$W/r-last10.jsonl" "$W/r-z2onN.jsonl" 1e-5 2>&1); s2=$?
row "checkpoint of 1 GPU resumed on $N (ZeRO-2): $r" "$(verdict $((s + s2)))"
fi

