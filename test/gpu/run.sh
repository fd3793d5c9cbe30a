#!/usr/bin/env bash
# The GPU test suite and benchmarks, in one run on a machine with an NVIDIA GPU
# and the CUDA 13 libraries (no LLVM needed). Prints one table at the end.
#
#   test/gpu/run.sh BUNDLE [all | SECTION,SECTION,...]   (the sections: below, at ONLY)
#
# BUNDLE is what `tools/dev.sh gpu-bundle` makes: gtc and gtc-gpu-check built
# with -DGTC_STATIC=ON, the Fashion-MNIST files and torch_reference.py.
set -u
cd "$(dirname "$0")/../.."
B=${1:-gpu-bundle}
RESULTS=${OUT:-}          # the device tool's result folder, if any
[ -n "$RESULTS" ] && mkdir -p "$RESULTS"
OUT=/tmp/gtc-gpu-work     # logs of every step
rm -rf "$OUT" && mkdir -p "$OUT"
BIN=/tmp/gtc-gpu-bin
. test/gpu/unpack.sh
unpack_bundle "$B" "$BIN" gtc gtc-runner gtc-gpu-check
GTC=$BIN/gtc
export GTC_CACHE_DIR=$OUT/kernel-cache
# The suite of one GPU: on a machine of several, the first (examples such as
# gpt2.gt say devices = all, and their compiled executables train on one).
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
rm -rf "$GTC_CACHE_DIR"
ROWS=()
# Each row is also written to $RESULTS/rows.txt as it comes, so a run cut
# short by a time limit still returns what it did.
row() {
  ROWS+=("$(printf '%-64s | %s' "$1" "$2")")
  [ -n "$RESULTS" ] && printf '%s\n' "${ROWS[-1]}" >> "$RESULTS/rows.txt"
}
verdict() { [ "$1" = 0 ] && echo PASS || echo "FAIL (status $1)"; }

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
GPU=$(head -1 "$OUT/gpu.txt" | cut -d, -f1)
# The examples read Fashion-MNIST from Debian's path.
mkdir -p /usr/share/datasets/fashion-mnist
cp -n "$B"/fashion-mnist/* /usr/share/datasets/fashion-mnist/ 2>/dev/null

# Loss curves ($OUT/NAME.jsonl) and the windowed gap of one to a reference.
curve() { # name model steps precision
  "$GTC" run "$2" --device cuda --steps "$3" --precision "$4" --log-every 1 --log "$OUT/$1-$4.jsonl" > "$OUT/$1-$4.txt" 2>&1
}
gap() { # reference other tolerance
  python3 - "$OUT/$1.jsonl" "$OUT/$2.jsonl" "$3" "${1##*-}" <<'PY'
import json, sys
def losses(p):
    return [r["loss"] for r in map(json.loads, open(p)) if "lr" in r]
a, b, tol = losses(sys.argv[1]), losses(sys.argv[2]), float(sys.argv[3])
ref = sys.argv[4]
w = 10
ma = [sum(a[i:i + w]) / w for i in range(0, len(a) - w + 1, w)]
mb = [sum(b[i:i + w]) / w for i in range(0, len(b) - w + 1, w)]
g = max(abs(x - y) / x for x, y in zip(ma, mb)) if len(a) == len(b) and ma else 1e9
print(f"max gap {g * 100:.2f}% (tol {tol * 100:.0f}%), final {b[-1]:.4f} vs {ref} {a[-1]:.4f}")
sys.exit(0 if g <= tol else 1)
PY
}
ONLY=${2:-all}   # the sections to run, comma-separated, or "all":
                 # "check": every op against the CPU (gpu-check at each
                 # precision), GPU/CPU training parity, the kernel cache,
                 # the timeline and profile, accuracy, checkpoints, mixed
                 # precision, fp16 loss scaling, --check-numerics;
                 # "pad": gt-pad-dims; "streams": one stream against two;
                 # "fuse": the fusion profiles and kernel counts;
                 # "precision": bf16 against fp32 speed and memory;
                 # "parity": GPT-2 124M against PyTorch;
                 # "llama": examples/llama.gt (parity, step time);
                 # "dropout": dropout against the CPU;
                 # "micro": gradient accumulation and GTC_NO_GRAPH=1 on one GPU;
                 # "sample": gtc sample (greedy against transformers,
                 # KV cache against recomputation, tokens/s);
                 # "attention": attention alone against SDPA;
                 # "compile": gtc compile's executables;
                 # "bench": the MLP against PyTorch.
                 # "all" is those; it no longer fits one device call of 10
                 # minutes (an H100 took 530 s to the end of "micro"), so
                 # there take two: check,pad,streams,fuse,precision,parity
                 # and llama,dropout,micro,sample,attention,compile,bench.
                 # Not in "all" (benchmarks of many minutes, or experiments):
                 # "llama-sizes": llama124m-t4096 and llama1b against
                 # torch.compile; "gpt2-sizes": GPT-2's sizes against
                 # PyTorch (GPT2_SIZES picks rows); "gemm":
                 # test/bench/gemm_hopper.cu, then gtc with its kernel and
                 # without (GTC_HOPPER_GEMM=0) against the CPU and timed;
                 # "kernels": llama124m's kernels on both sides under ncu;
                 # "energy": GPT-2 124M's joules a step, gtc's and
                 # torch.compile's, and the GEMMs' joules a launch.
ALL=check,pad,streams,fuse,precision,parity,llama,dropout,micro,sample,attention,compile,bench
[ "$ONLY" = all ] && ONLY=$ALL
for s in ${ONLY//,/ }; do
  case ",$ALL,llama-sizes,gpt2-sizes,gemm,kernels,energy," in
    *",$s,"*) ;;
    *) echo "run.sh: no section '$s'; the sections: $ALL, llama-sizes, gpt2-sizes, gemm, kernels, energy" >&2; exit 2 ;;
  esac
done
want() { case ",$ONLY," in *",$1,"*) return 0 ;; esac; return 1; }
# Trains `model` on the GPU and on the CPU from one seed and compares the losses.
parity() { # name model limit-steps [steps (50)] [tolerance (1e-4)]
  local steps=${4:-50}
  "$GTC" run "$2" --device cuda --steps $steps --log-every 1 --log "$OUT/$1-gpu.jsonl" > "$OUT/$1-gpu.txt" 2>&1
  "$GTC" run "$2" --device cpu --steps $steps --log-every 1 --log "$OUT/$1-cpu.jsonl" > "$OUT/$1-cpu.txt" 2>&1
  python3 - "$OUT/$1-gpu.jsonl" "$OUT/$1-cpu.jsonl" "$3" $steps "${5:-1e-4}" > "$OUT/$1-parity.txt" <<'PY'
import json, sys
g = [json.loads(l)["loss"] for l in open(sys.argv[1]) if '"eval"' not in l]
c = [json.loads(l)["loss"] for l in open(sys.argv[2]) if '"eval"' not in l]
n, steps, tol = int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
rel = [abs(a - b) / abs(b) for a, b in zip(g, c)]
print(f"max rel loss diff {max(rel[:n]):.1e} over {n} steps, {max(rel):.1e} over {len(rel)}, final {g[-1]:.6f} vs {c[-1]:.6f}")
print("per-step relative difference:", " ".join(f"{r:.0e}" for r in rel))
sys.exit(0 if len(g) == steps and max(rel[:n]) <= tol else 1)
PY
}
if want check; then
# 1. Every op's kernels (forward and backward) against the CPU.
"$BIN/gtc-gpu-check" "$GTC" > "$OUT/ops-fp32.txt" 2>&1; s=$?
cat "$OUT/ops-fp32.txt"
row "ops fwd+bwd vs CPU, fp32 ($(grep -c PASS "$OUT/ops-fp32.txt") models, rel err <= 1e-4)" "$(verdict $s)"
"$BIN/gtc-gpu-check" "$GTC" --precision tf32 > "$OUT/ops-tf32.txt" 2>&1; s=$?
tail -1 "$OUT/ops-tf32.txt"
row "ops fwd+bwd vs CPU, tf32 GEMMs (rel err <= 5e-3)" "$(verdict $s)"
# Autocast plans: the GPU's 16-bit kernels against the CPU's emulation.
for p in bf16:3e-2 fp16:5e-3; do
  "$BIN/gtc-gpu-check" "$GTC" --precision ${p%:*} > "$OUT/ops-${p%:*}.txt" 2>&1; s=$?
  cat "$OUT/ops-${p%:*}.txt"
  worst=$(awk '$2 ~ /e/ {print $3}' "$OUT/ops-${p%:*}.txt" | sort -g | tail -1)
  row "ops fwd+bwd vs CPU emulation, ${p%:*} (rel err <= ${p#*:}; worst $worst)" "$(verdict $s)"
done
# The same with the models' small 16-bit GEMMs padded (--pad-all): the pad
# and slice kernels, which gtc's default leaves out at these sizes.
for p in bf16 fp16; do
  "$BIN/gtc-gpu-check" "$GTC" --precision $p --pad-all > "$OUT/ops-$p-padded.txt" 2>&1; s=$?
  tail -1 "$OUT/ops-$p-padded.txt"
  row "ops fwd+bwd vs CPU emulation, $p, small GEMMs padded (--pad-all)" "$(verdict $s)"
done
# Classifier regions in chunks of 64 KiB of logits (many chunks, a partial
# last one) instead of 512 MiB.
for p in fp32 bf16; do
  GTC_CLASSIFIER_CHUNK_BYTES=65536 "$BIN/gtc-gpu-check" "$GTC" --precision $p > "$OUT/ops-chunks-$p.txt" 2>&1; s=$?
  grep -i "classifier" "$OUT/ops-chunks-$p.txt"
  row "ops fwd+bwd vs CPU, $p, classifier chunks of 64 KiB" "$(verdict $s)"
done

# 2. MLP: 50 steps on the GPU and on the CPU from the same seed (fp32), with
# SGD (tolerance 1e-4) and with the example's AdamW (Adam divides by the
# root of tiny second moments, so 1e-7 GEMM rounding differences can grow;
# the first 16 steps must agree within 1e-4, the rest is reported). Since
# both devices run ScalarOps.h's update rule (in double where the CPU
# computes in double), 30 steps agreed within 1.0e-7, against 1.7e-4 before
# (H100, test/bench/NOTES.md, twentieth session).
parity sgd test/gpu/mlp_sgd.gt 50; s=$?
head -2 "$OUT/sgd-parity.txt"
row "MLP+SGD 50 steps GPU vs CPU, fp32: $(head -1 "$OUT/sgd-parity.txt")" "$(verdict $s)"
parity adamw examples/mlp.gt 16; s=$?
head -2 "$OUT/adamw-parity.txt"
row "MLP+AdamW GPU vs CPU, fp32: $(head -1 "$OUT/adamw-parity.txt")" "$(verdict $s)"
cp "$OUT/adamw-gpu.txt" "$OUT/gpu50.txt"
# The residual MLP of issue 35 (a layer norm and a per-iteration gain in
# each of 4 residual blocks, AdamW with weight decay, cosine with warm-up):
# within 1e-5 over its 10 steps.
parity resmlp test/gpu/resmlp.gt 10 10 1e-5; s=$?
head -2 "$OUT/resmlp-parity.txt"
row "residual MLP 10 steps GPU vs CPU, fp32: $(head -1 "$OUT/resmlp-parity.txt")" "$(verdict $s)"
# Layer norms over 1600 columns: the gradient kernel's wide-row layout
# (256 threads a row, 3 blocks an SM), within 1e-4 over 10 SGD steps.
parity wide test/gpu/wide_layernorm.gt 10 10; s=$?
head -2 "$OUT/wide-parity.txt"
row "layer norms over 1600 columns, 10 steps GPU vs CPU, fp32: $(head -1 "$OUT/wide-parity.txt")" "$(verdict $s)"

# 3. The kernel cache: with an empty cache the first run compiles every
# kernel; the second compiles nothing.
GTC_CACHE_DIR=$OUT/fresh-cache "$GTC" run examples/mlp.gt --device cuda --steps 5 > "$OUT/cache1.txt" 2>&1
GTC_CACHE_DIR=$OUT/fresh-cache "$GTC" run examples/mlp.gt --device cuda --steps 5 > "$OUT/cache2.txt" 2>&1
first=$(grep -o 'kernels: [0-9]* compiled' "$OUT/cache1.txt" | head -1)
second=$(grep -o 'kernels: [0-9]* compiled.*from the cache' "$OUT/cache2.txt" | head -1)
case "$second" in "kernels: 0 compiled"*) s=0 ;; *) s=1 ;; esac
row "kernel cache: first run '$first'; second '$second'" "$(verdict $s)"

# The copy of a batch overlaps an earlier step (two input slots): `--profile`
# of char_gpt (GPU-bound; the MLP's steps are shorter than loading its
# batches on the host) records the steps' phases and the batches' copies as
# a Chrome trace; count the overlaps.
"$GTC" run examples/char_gpt.gt --device cuda --precision bf16 --profile "$OUT/timeline.json" > "$OUT/timeline-run.txt" 2>&1
python3 - "$OUT/timeline.json" > "$OUT/overlap.txt" <<'PY'
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
tid = {e["args"]["name"]: e["tid"] for e in ev if e.get("name") == "thread_name"}
spans = {}
for e in ev:
    if e.get("ph") == "X" and e["tid"] == tid["phases"]:
        lo, hi = spans.get(e["args"]["step"], (e["ts"], e["ts"] + e["dur"]))
        spans[e["args"]["step"]] = (min(lo, e["ts"]), max(hi, e["ts"] + e["dur"]))
copies = {e["args"]["step"]: e for e in ev
          if e.get("ph") == "X" and e["tid"] == tid["copies"]}
# Every batch after the first is copied while an earlier step computes.
later = [c for n, c in copies.items() if n > 0]
over = sum(1 for c in later
           if any(c["ts"] < hi and c["ts"] + c["dur"] > lo
                  for n, (lo, hi) in spans.items() if n < c["args"]["step"]))
print(f"the copies of {over} of {len(later)} profiled batches overlapped an earlier step")
sys.exit(0 if later and over == len(later) else 1)
PY
s=$?; cat "$OUT/overlap.txt"
row "timeline: $(cat "$OUT/overlap.txt")" "$(verdict $s)"

# The parameters' 16-bit copies (bf16 char_gpt has them) are written by the
# optimizer, not by a kernel of the step: the profile above must not time
# their kernel in its steps.
copies=$("$GTC" run examples/char_gpt.gt --dry-run --explain --device cuda --precision bf16 2>&1 |
  awk '/not in the step: the optimizer writes these copies/ {print $1}')
timed=$(python3 -c "
import json, sys
ev = json.load(open(sys.argv[1]))['traceEvents']
print(sum(1 for e in ev if e.get('ph') == 'X' and e.get('args', {}).get('plan_kernel') == int(sys.argv[2])))
" "$OUT/timeline.json" "${copies:--1}" 2>&1)
[ -n "$copies" ] && [ "$timed" = 0 ] && s=0 || s=1
row "profile: the copies' kernel ${copies:-(none found)} timed $timed times in the profiled steps" "$(verdict $s)"

# 4. Training the MLP example on the GPU: >= 88% test accuracy.
/usr/bin/time -f "%e s" "$GTC" run examples/mlp.gt --device cuda --save "$OUT/mlp.safetensors" > "$OUT/mlp-train.txt" 2>&1
acc=$(grep '^eval' "$OUT/mlp-train.txt" | tail -1 | grep -o 'accuracy [0-9.]*' | cut -d' ' -f2)
python3 -c "import sys; sys.exit(0 if float('${acc:-0}') >= 88 else 1)"; s=$?
row "MLP 5 epochs on the GPU: test accuracy ${acc:-?}% ($(tail -1 "$OUT/mlp-train.txt"))" "$(verdict $s)"
python3 -c "
from safetensors.numpy import load_file
t = load_file('$OUT/mlp.safetensors'); print(len(t), 'tensors', sorted(t)[:3])" > "$OUT/safetensors.txt" 2>&1; s=$?
row "checkpoint loads with Python's safetensors ($(cut -c1-40 "$OUT/safetensors.txt" | head -1))" "$(verdict $s)"

# The character-level GPT (attention, layernorm, embeddings) trains too.
if [ -f /usr/share/common-licenses/GPL-3 ]; then
  "$GTC" run examples/char_gpt.gt --device cuda --steps 300 --log-every 50 > "$OUT/char_gpt.txt" 2>&1; s=$?
  first=$(grep '^step 50/' "$OUT/char_gpt.txt" | grep -o 'loss [0-9.]*')
  last=$(grep '^done' "$OUT/char_gpt.txt")
  row "char_gpt 300 steps on GPL-3: $first at step 50; $last" "$(verdict $s)"
fi
grep -h 'device memory' "$OUT/adamw-gpu.txt" | head -1 > "$OUT/memory.txt"
row "MLP b=128 $(cat "$OUT/memory.txt" | sed 's/^ *//')" "info"

# 6. Precision (gt-autocast). bf16 and fp16 track the fp32 loss curve:
# per-step losses averaged over windows of 10 steps, largest relative gap;
# tolerance 5% for bf16 (8-bit mantissa), 2% for fp16.
for p in fp32 bf16 fp16; do
  curve mlpc examples/mlp.gt 300 $p
  [ -f /usr/share/common-licenses/GPL-3 ] && curve gptc examples/char_gpt.gt 300 $p
done
for p in bf16:0.05 fp16:0.02; do
  gap mlpc-fp32 mlpc-${p%:*} ${p#*:} > "$OUT/mlpc-gap-${p%:*}.txt"; s=$?
  row "MLP 300 steps ${p%:*} vs fp32: $(cat "$OUT/mlpc-gap-${p%:*}.txt")" "$(verdict $s)"
  if [ -f /usr/share/common-licenses/GPL-3 ]; then
    gap gptc-fp32 gptc-${p%:*} ${p#*:} > "$OUT/gptc-gap-${p%:*}.txt"; s=$?
    row "char_gpt 300 steps ${p%:*} vs fp32: $(cat "$OUT/gptc-gap-${p%:*}.txt")" "$(verdict $s)"
  fi
done
# fp16 with an overflow injected at step 4: that step is skipped, the scale
# halves, training goes on (the same check as test/Run/loss-scaling.test).
"$GTC" run examples/mlp.gt --device cuda --precision fp16 --batch 16 --steps 8 --log-every 1 --log "$OUT/ovf-clean.jsonl" > "$OUT/ovf-clean.txt" 2>&1
GTC_INJECT_OVERFLOW=4 "$GTC" run examples/mlp.gt --device cuda --precision fp16 --batch 16 --steps 8 --log-every 1 --log "$OUT/ovf-inj.jsonl" > "$OUT/ovf-inj.txt" 2>&1
python3 test/Run/Inputs/check_scaling.py "$OUT/ovf-clean.jsonl" "$OUT/ovf-inj.jsonl" 4 > "$OUT/ovf.txt" 2>&1; s=$?
row "fp16 injected overflow: $(tail -1 "$OUT/ovf.txt" | cut -c1-70)" "$(verdict $s)"
# An fp16 run interrupted after a skipped step resumes bit for bit (the
# loss scaler and Adam's update count are in the checkpoint).
GTC_INJECT_OVERFLOW=2 python3 test/Run/Inputs/kill_resume.py "$GTC" examples/mlp.gt "$OUT/kr" 60 --device cuda --precision fp16 --batch 16 > "$OUT/resume.txt" 2>&1; s=$?
row "fp16 resume: $(tail -1 "$OUT/resume.txt" | cut -c1-70)" "$(verdict $s)"
# --check-numerics names the first op whose output is not finite (eager,
# each plan kernel's outputs downloaded).
sed "s|h = relu(linear(h, 1024))|h = log(relu(linear(h, 1024)) - 1.0)|" examples/mlp.gt > "$OUT/log.gt"
"$GTC" run "$OUT/log.gt" --device cuda --batch 8 --steps 3 --check-numerics > "$OUT/numerics.txt" 2>&1
# (On the GPU the op is the fused kernel that holds the log: fused(sub, log).)
grep -q "check-numerics: .*log.* at .*log.gt:7:[0-9]* (forward, layer fc2) is the step's first op whose output is not finite" "$OUT/numerics.txt"; s=$?
row "--check-numerics on the GPU: $(grep -o "fused.* at [^ ]*" "$OUT/numerics.txt" | cut -c1-60)" "$(verdict $s)"
# --threads sets the CPU's threads, which a GPU run does not use: refused
# (by gtc run, and by a launcher before its workers start), not ignored.
"$GTC" run examples/mlp.gt --device cuda --threads 2 --steps 1 > "$OUT/threads.txt" 2>&1; s=$?
"$GTC" run examples/mlp.gt --devices 2 --threads 2 --steps 1 > "$OUT/threads2.txt" 2>&1; s2=$?
[ $s != 0 ] && [ $s2 != 0 ] && grep -q "^gtc: error: --threads sets the CPU's threads" "$OUT/threads.txt" &&
  [ "$(grep -c "error: --threads" "$OUT/threads2.txt")" = 1 ]; s=$?
row "--threads with a GPU refused (one process; a launcher of 2, once)" "$(verdict $s)"
# Token ids beyond the model's vocabulary stop the run before it trains
# (not a NaN loss on the GPU).
python3 test/Run/Inputs/make_tokens.py "$OUT/wide.bin" 4000 512
"$GTC" run test/CLI/Inputs/tiny_tokens.gt --device cuda --data "$OUT/wide.bin" --steps 2 > "$OUT/vocab.txt" 2>&1; s=$?
[ $s != 0 ] && grep -q "error: the training data .* holds id" "$OUT/vocab.txt"; s=$?
row "token ids beyond the vocabulary refused on the GPU" "$(verdict $s)"
fi
if want pad; then
# gt-pad-dims keeps the function: the odd-sized MLP (hidden 1001) trains
# to the same curve padded and unpadded on the GPU (bf16; the GEMMs differ in
# summation order, so section 6's windowed-loss tolerance for bf16 applies:
# 5%; the 2% this check had was fp16's, and the two bf16 curves drift 2.3%
# apart at steps 150-160 on an H100). At its batch of 128 the GEMMs are
# small, so --pad-all makes gtc pad them.
"$GTC" run test/Run/Inputs/odd_mlp.gt --device cuda --precision bf16 --steps 300 --log-every 1 --pad-all --log "$OUT/oddc-padded.jsonl" > "$OUT/oddc-pad.txt" 2>&1
"$GTC" run test/Run/Inputs/odd_mlp.gt --device cuda --precision bf16 --steps 300 --log-every 1 --no-pad --log "$OUT/oddc-nopad.jsonl" > "$OUT/oddc-nopad.txt" 2>&1
gap oddc-padded oddc-nopad 0.05 > "$OUT/oddc-gap.txt"; s=$?
row "odd MLP bf16 300 steps, unpadded vs padded: $(cat "$OUT/oddc-gap.txt")" "$(verdict $s)"
# Padded vs unpadded speed: hidden 1001, vocabulary 50257, bf16.
for b in 512 4096; do
  for pad in "" --no-pad; do
    echo "$("$GTC" run test/gpu/odd.gt --device cuda --batch $b --precision bf16 --bench 50 $pad 2>&1 | tail -1) ${pad:-padded}" >> "$OUT/bench-pad.txt"
  done
done
cat "$OUT/bench-pad.txt"
python3 - "$OUT/bench-pad.txt" > "$OUT/pad-speedup.txt" <<'PY'
import re, sys
t = {}
for l in open(sys.argv[1]):
    m = re.search(r"batch (\d+) cuda bf16: ([0-9.]+) ms/step.* (padded|--no-pad)", l)
    if m: t[(int(m[1]), m[3])] = float(m[2])
print("; ".join(f"b={b}: {t[(b, 'padded')]:.3f} vs {t[(b, '--no-pad')]:.3f} ms ({t[(b, '--no-pad')] / t[(b, 'padded')]:.2f}x)"
                for b in sorted({k[0] for k in t})))
PY
row "odd sizes bf16 padded vs unpadded: $(cat "$OUT/pad-speedup.txt")" "info"
fi
if want streams; then
# Two streams (scheduleStreams) change no arithmetic: every loss equals the
# one-stream run's, bit for bit; and the step times of both.
for m in "examples/mlp.gt --batch 64 --precision tf32" "examples/mlp.gt --batch 64 --precision bf16" \
         "examples/char_gpt.gt --precision bf16"; do
  tag=$(echo "$m" | tr -cd 'a-z0-9')
  GTC_ONE_STREAM=1 "$GTC" run $m --device cuda --steps 40 --log-every 1 --log "$OUT/one-$tag.jsonl" > "$OUT/one-$tag.txt" 2>&1
  "$GTC" run $m --device cuda --steps 40 --log-every 1 --log "$OUT/two-$tag.jsonl" > "$OUT/two-$tag.txt" 2>&1
  if [ -s "$OUT/one-$tag.jsonl" ] && cmp -s <(grep -o '"loss": *[^,}]*' "$OUT/one-$tag.jsonl") \
                                        <(grep -o '"loss": *[^,}]*' "$OUT/two-$tag.jsonl"); then s=0; else s=1; fi
  row "two streams: 40 losses equal one stream's, $m" "$(verdict $s)"
done
for m in "examples/mlp.gt --batch 64 --precision tf32" "examples/mlp.gt --batch 64 --precision bf16"; do
  for one in 1 0; do
    echo "GTC_ONE_STREAM=$one $m: $(GTC_ONE_STREAM=$one "$GTC" run $m --device cuda --bench 500 2>&1 | tail -1)" >> "$OUT/bench-streams.txt"
  done
done
cat "$OUT/bench-streams.txt"
row "streams: $(grep -c . "$OUT/bench-streams.txt") measurements in bench-streams.txt" "info"
fi
if want fuse; then
# gt-fuse: kernels per step, step time and the profile of GPT-2 (bf16, B=16),
# its attention-free variant, and the MLP at batch 64, fused and --no-fuse.
sed 's/attention(layernorm(x, name: "ln_1"), heads: H, causal: true, std: 0.02, name: "attn")/linear(linear(layernorm(x, name: "ln_1"), 3 * D, name: "attn.c_attn"), D, name: "attn.c_proj")/' \
  examples/gpt2.gt > "$OUT/gpt2_noattn.gt"
grep -q "attention(" "$OUT/gpt2_noattn.gt" && echo "gpt2_noattn.gt still has attention"
for fuse in "" --no-fuse; do
  tag=${fuse:-fused}
  "$GTC" run examples/gpt2.gt --device cuda --batch 16 --precision bf16 --bench 20 \
    --profile "$OUT/gpt2-$tag.json" $fuse > "$OUT/profile-gpt2-$tag.txt" 2>&1
  head -22 "$OUT/profile-gpt2-$tag.txt"
  "$GTC" run "$OUT/gpt2_noattn.gt" --device cuda --batch 16 --precision bf16 --bench 50 \
    --profile "$OUT/noattn-$tag.json" $fuse > "$OUT/profile-noattn-$tag.txt" 2>&1
  head -12 "$OUT/profile-noattn-$tag.txt"
  for p in tf32 bf16; do
    "$GTC" run examples/mlp.gt --device cuda --batch 64 --precision $p --bench 500 $fuse 2>&1 | tail -1 >> "$OUT/bench-fuse.txt"
  done
  for f in gpt2 noattn; do
    echo "$f $tag: $(grep -o '^bench.*' "$OUT/profile-$f-$tag.txt"); $(grep -o '[0-9]* launches a step' "$OUT/profile-$f-$tag.txt")" >> "$OUT/bench-fuse.txt"
  done
done
[ -n "$RESULTS" ] && cp "$OUT"/gpt2-fused.json "$OUT"/profile-*.txt "$RESULTS"/ 2>/dev/null
cat "$OUT/bench-fuse.txt"
row "gt-fuse: $(grep -c . "$OUT/bench-fuse.txt") measurements in bench-fuse.txt" "info"
fi
if want precision; then
# bf16 vs fp32 speed and device memory (one job, same GPU).
for m in "examples/mlp.gt --batch 16384" "examples/char_gpt.gt"; do
  for p in fp32 tf32 bf16 fp16; do
    "$GTC" run $m --device cuda --precision $p --bench 100 2>&1 | tail -1 >> "$OUT/bench-precision.txt"
  done
done
cat "$OUT/bench-precision.txt"
python3 - "$OUT/bench-precision.txt" > "$OUT/speedup.txt" <<'PY'
import re, sys
t = {}
for l in open(sys.argv[1]):
    m = re.search(r"bench (\w+) batch (\d+) cuda (\w+): ([0-9.]+) ms/step", l)
    if m: t[(m[1], m[3])] = float(m[4])
r = t[("mlp", "fp32")] / t[("mlp", "bf16")]
print(f"MLP b=16384 bf16 {t[('mlp', 'bf16')]:.3f} ms vs fp32 {t[('mlp', 'fp32')]:.3f} ms: {r:.2f}x")
sys.exit(0 if r >= 2 else 1)
PY
s=$?
row "$(cat "$OUT/speedup.txt") (>= 2x)" "$(verdict $s)"

fi
if want parity; then
# GPT-2 124M parity with PyTorch on this GPU (test/Parity: one safetensors
# file of weights, 50 AdamW steps on the same batches, every loss compared).
# bf16: the 50 losses within 1.5e-5: above the difference measured (5.4e-6
# to 6.2e-6 on H100 and H200) and below gtc fp32 against PyTorch bf16
# (2.0e-5 on an H200), so that this run must fail. (The first step cannot
# tell them apart for GPT-2: gtc's bf16 loss, its logits in f32, is nearer
# PyTorch's fp32 than PyTorch's autocast is: 4.5e-6 against 8.7e-7.)
GPT2_BF16="--tol ${GPT2_BF16_TOL:-1.5e-5}"
gp() { # tag, then gpt2_parity.py's options
  local tag=$1; shift
  python3 test/Parity/gpt2_parity.py --gtc "$GTC" --size full --device cuda --dir "$OUT/parity-$tag" "$@" > "$OUT/parity-$tag.txt" 2>&1
}
for p in fp32 bf16; do
  gp $p --precision $p $([ $p = bf16 ] && echo "$GPT2_BF16"); s=$?
  tail -5 "$OUT/parity-$p.txt"
  row "GPT-2 124M parity vs PyTorch, $p: $(grep -o 'max relative difference [^ ]*' "$OUT/parity-$p.txt")" "$(verdict $s)"
done
# tf32 (PyTorch's TF32 matmuls, gtc's TF32 GEMMs and attention): within
# 1e-5 (6.1e-7 measured on an H200). At this learning rate it cannot tell
# tf32 from fp32 (gtc fp32 against PyTorch tf32: 7.8e-7); it catches wrong
# tf32 kernels, and gpu-check's tf32 rows each op.
gp tf32 --precision tf32 --tol 1e-5; s=$?
tail -5 "$OUT/parity-tf32.txt"
row "GPT-2 124M parity vs PyTorch, tf32: $(grep -o 'max relative difference [^ ]*' "$OUT/parity-tf32.txt")" "$(verdict $s)"
gp against-fp32 --precision bf16 --gtc-precision fp32 $GPT2_BF16; s=$?
tail -3 "$OUT/parity-against-fp32.txt"
row "GPT-2: the bf16 check fails gtc fp32 vs PyTorch bf16: $(grep -o 'max relative difference [^ ]*' "$OUT/parity-against-fp32.txt")" "$([ $s != 0 ] && echo PASS || echo "FAIL (it passed)")"
fi
if want llama; then
# examples/llama.gt (llama124m) on this GPU: parity with a PyTorch Llama and
# with transformers' LlamaForCausalLM (50 AdamW steps from one safetensors
# file), the bf16 check run against an fp32 gtc to show it fails, and the
# step against shared/bench/torch_llama.py in the same job.
lp() { # tag, then llama_parity.py's options
  local tag=$1; shift
  python3 test/Parity/llama_parity.py --gtc "$GTC" --size full --device cuda --dir "$OUT/llama-$tag" "$@" > "$OUT/llama-$tag.txt" 2>&1
}
# bf16: the 50 losses within 10x the difference measured (1.2e-5 on an
# H200), the first within 8e-6 (measured 1.6e-6; gtc fp32 against PyTorch
# bf16, 1.4e-5).
LLAMA_BF16="--tol ${LLAMA_BF16_TOL:-1.2e-4} --tol-first ${LLAMA_BF16_FIRST:-8e-6}"
lopts() { [ "$1" = fp32 ] && echo "--tol 1e-4" || echo "$LLAMA_BF16"; }
for p in fp32 bf16; do
  lp $p --precision $p $(lopts $p); s=$?
  tail -4 "$OUT/llama-$p.txt"
  row "llama124m parity vs PyTorch, $p: $(grep -o 'max relative difference [^ ]*' "$OUT/llama-$p.txt"), first $(grep -o 'same weights): relative [^ ]*' "$OUT/llama-$p.txt" | awk '{print $3}')" "$(verdict $s)"
done
# Whether the bf16 check can fail: gtc in fp32 against PyTorch in bf16. On
# an H200 this differed by 2.1e-5, as much as gtc's bf16 (2.2e-5): over these
# 50 steps the loss does not tell bf16 from fp32 (test/bench/NOTES.md).
lp against-fp32 --precision bf16 --gtc-precision fp32 $LLAMA_BF16; s=$?
row "llama124m: the bf16 check fails gtc fp32 vs PyTorch bf16: $(grep -o 'max relative difference [^ ]*' "$OUT/llama-against-fp32.txt"), first $(grep -o 'same weights): relative [^ ]*' "$OUT/llama-against-fp32.txt" | awk '{print $3}')" "$([ $s != 0 ] && echo PASS || echo "FAIL (it passed)")"
if python3 -c "import transformers" 2>/dev/null; then
  for p in fp32 bf16; do
    lp hf-$p --hf --precision $p $(lopts $p); s=$?
    tail -3 "$OUT/llama-hf-$p.txt"
    row "llama124m parity vs transformers.LlamaForCausalLM, $p: $(grep -o 'max relative difference [^ ]*' "$OUT/llama-hf-$p.txt")" "$(verdict $s)"
  done
else
  row "llama124m parity vs transformers: transformers is not installed" "SKIP"
fi
# torch_llama.py's protocol: 5 steps (its first and 4), then 20 back to back.
"$GTC" run examples/llama.gt --device cuda --bench-warmup 5 --bench 20 > "$OUT/llama-bench.txt" 2>&1
"$GTC" run examples/llama.gt --device cuda --dry-run > "$OUT/llama-plan.txt" 2>&1
CONFIG=llama124m MODES=bf16,compile timeout 400 python3 "$B/torch_llama.py" > "$OUT/llama-torch.txt" 2>&1
{ tail -1 "$OUT/llama-bench.txt"; grep "predicted peak" "$OUT/llama-plan.txt"; grep '^{' "$OUT/llama-torch.txt"; } | tee "$OUT/bench-llama.txt"
# Where the step's time goes, by kind of kernel (launches one by one).
"$GTC" run examples/llama.gt --device cuda --bench 10 --profile "$OUT/llama-profile.json" > "$OUT/llama-profile.txt" 2>&1
grep -A30 "^kernel  " "$OUT/llama-profile.txt" | head -32
fi
if want dropout; then
# Dropout: the GPU draws the CPU's masks in every one of 30 steps, and its
# kernels match the CPU's.
parity dropout test/gpu/dropout.gt 30 30; s=$?
head -2 "$OUT/dropout-parity.txt"
row "MLP+dropout 30 steps GPU vs CPU, fp32: $(head -1 "$OUT/dropout-parity.txt")" "$(verdict $s)"
for p in fp32 bf16; do
  "$BIN/gtc-gpu-check" "$GTC" --precision $p --only Dropout > "$OUT/ops-dropout-$p.txt" 2>&1; s=$?
  tail -1 "$OUT/ops-dropout-$p.txt"
  row "dropout fwd+bwd vs CPU, $p" "$(verdict $s)"
done
fi
if want micro; then
# Gradient accumulation on one GPU (the gradients lie inside the
# activations' memory, Plan::gradsInTemp, and each micro-batch's are summed
# into the accumulator before the next forward pass overwrites them):
# char_gpt fp32, 4 micro-batches of 8 against the batch of 32, 50 steps.
# Then the step launch by launch (GTC_NO_GRAPH=1) against the graph's: the
# same kernels, so the same losses, and --bench times it.
"$GTC" run examples/char_gpt.gt --device cuda --precision fp32 --batch 32 --steps 50 --log-every 1 --log "$OUT/micro-1.jsonl" > "$OUT/micro-1.txt" 2>&1
"$GTC" run examples/char_gpt.gt --device cuda --precision fp32 --batch 32 --micro-batch 8 --steps 50 --log-every 1 --log "$OUT/micro-4.jsonl" > "$OUT/micro-4.txt" 2>&1; s=$?
r=$(python3 test/Run/Inputs/compare_losses.py "$OUT/micro-1.jsonl" "$OUT/micro-4.jsonl" 1e-5 2>&1); s2=$?
row "char_gpt fp32, 4 micro-batches of 8 vs batch 32, one GPU: $r" "$(verdict $((s + s2)))"
"$GTC" run examples/gpt2.gt --device cuda --batch 32 --micro-batch 16 --bench 10 > "$OUT/micro-gpt2.txt" 2>&1; s=$?
row "GPT-2 bf16, 2 micro-batches of 16: $(tail -1 "$OUT/micro-gpt2.txt")" "$(verdict $s)"
GTC_NO_GRAPH=1 "$GTC" run examples/char_gpt.gt --device cuda --precision fp32 --batch 32 --steps 50 --log-every 1 --log "$OUT/nograph.jsonl" > "$OUT/nograph.txt" 2>&1; s=$?
r=$(python3 test/Run/Inputs/compare_losses.py "$OUT/micro-1.jsonl" "$OUT/nograph.jsonl" 0 2>&1); s2=$?
row "char_gpt fp32, GTC_NO_GRAPH=1 vs the graph: $r" "$(verdict $((s + s2)))"
GTC_NO_GRAPH=1 "$GTC" run examples/llama.gt --device cuda --bench 10 > "$OUT/nograph-llama.txt" 2>&1; s=$?
"$GTC" run examples/llama.gt --device cuda --bench 10 > "$OUT/graph-llama.txt" 2>&1
row "llama124m --bench launch by launch: $(tail -1 "$OUT/nograph-llama.txt" | grep -o '[0-9.]* ms/step'), graph $(tail -1 "$OUT/graph-llama.txt" | grep -o '[0-9.]* ms/step')" "$(verdict $s)"
fi
if want kernels; then
# Every kernel of llama124m's step on both sides under Nsight Compute, one at
# a time (no overlap, no launch gaps): gtc's --profile launches in NVTX
# ranges of its profile's names, PyTorch's compiled step (2 steps after 5
# warm-ups, test/gpu/torch_step_prof.py). Not part of "all": it takes
# minutes. The tables go to kernels-gtc.txt and kernels-torch.txt.
NCU="ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv --print-units base"
$NCU --nvtx --print-nvtx-rename kernel "$GTC" run examples/llama.gt --device cuda --bench 2 --profile "$OUT/kernels.json" > "$OUT/ncu-gtc.csv" 2> "$OUT/ncu-gtc.err"; s=$?
python3 test/gpu/ncu_table.py gtc "$OUT/ncu-gtc.csv" > "$OUT/kernels-gtc.txt" 2>&1; s2=$?
row "ncu: gtc llama124m, $(tail -1 "$OUT/kernels-gtc.txt")" "$(verdict $((s + s2)))"
CONFIG=llama124m BUNDLE="$B" $NCU --profile-from-start off python3 test/gpu/torch_step_prof.py > "$OUT/ncu-torch.csv" 2> "$OUT/ncu-torch.err"; s=$?
python3 test/gpu/ncu_table.py torch "$OUT/ncu-torch.csv" 2 > "$OUT/kernels-torch.txt" 2>&1; s2=$?
row "ncu: torch.compile llama124m, $(tail -1 "$OUT/kernels-torch.txt")" "$(verdict $((s + s2)))"
[ -n "$RESULTS" ] && cp "$OUT/kernels-gtc.txt" "$OUT/kernels-torch.txt" "$RESULTS/"
fi
if want sample; then
# gtc sample: GPT-2 124M's greedy tokens equal transformers' generate, the KV
# cache equals recomputation (GPT-2, Llama), tokens/s against generate.
python3 test/gpu/sample_gpu.py "$GTC" "$OUT/sample" > "$OUT/sample.txt" 2>&1; s=$?
cat "$OUT/sample.txt"
row "gtc sample: greedy vs transformers, KV cache vs recomputed" "$(verdict $s)"
for b in 1 16; do
  row "gtc sample tokens/s, batch $b, vs transformers generate (bf16)" \
      "$(grep "throughput batch $b:" "$OUT/sample.txt" | sed 's/.*: gtc //')"
done
fi

# One row: gtc's `--bench` line against a PyTorch script's JSON line of
# the same workload ({"ms_per_step": .., "peak_gib": ..}), in the same job:
# the step's ratio within `target`, and with `peak` gtc's peak at most
# PyTorch's.
vs_torch() { # name gtc-bench-file torch-json-file target [peak]
  python3 - "$2" "$3" "$1" "$4" "${5:-}" > "$OUT/$1-summary.txt" <<'PY'
import json, re, sys
bench = open(sys.argv[1]).read()
g = re.search(r"([0-9.]+) ms/step, device memory ([0-9.]+) MiB", bench)
t = [json.loads(l) for l in open(sys.argv[2]) if l.startswith('{"')]
if not g or not t:
    print(f"{sys.argv[3]}: no result"); sys.exit(1)
# The last line: test/gpu/torch_energy.py's adds the energy to torch_reference.py's.
ms, gib, c = float(g[1]), float(g[2]) / 1024, t[-1]
r = ms / c["ms_per_step"]
peak = sys.argv[5] == "peak"
# Both steps run at the power limit on an H100 or H200, so the energy ratio
# explains the time ratio (test/bench/NOTES.md, fiftieth session).
j = re.search(r"([0-9.]+) J/step", bench)
energy = (f"; {float(j[1]):.2f} against {c['j_per_step']:.2f} J/step: {float(j[1]) / c['j_per_step']:.3f}x"
          if j and c.get("j_per_step") else "")
print(f"{sys.argv[3]}: gtc {ms:.2f} ms {gib:.2f} GiB, torch {c['mode']} "
      f"{c['ms_per_step']:.2f} ms {c['peak_gib']:.2f} GiB: {r:.3f}x (<= {sys.argv[4]}x"
      + (", peak <= torch's)" if peak else ")") + energy)
sys.exit(0 if r <= float(sys.argv[4]) and (not peak or gib <= c["peak_gib"]) else 1)
PY
  local s=$?
  row "$(cat "$OUT/$1-summary.txt")" "$(verdict $s)"
}
if want llama-sizes; then
# The larger Llamas of shared/bench/torch_llama.py: examples/llama.gt with
# its sizes set, against torch.compile's step and memory in the same job.
lsize() { # config, batch, let line, the target ratio to torch.compile
  sed "s/  let V = 32000, T = 1024, D = 768, H = 12, KV = 4, FF = 2048, L = 12/  let $3/" examples/llama.gt > "$OUT/$1.gt"
  # torch_llama.py's protocol: 5 steps (its first and 4), then 20 back to
  # back (NOTES, forty-second session: both sides run into the power cap).
  "$GTC" run "$OUT/$1.gt" --device cuda --batch $2 --bench-warmup 5 --bench 20 > "$OUT/$1-bench.txt" 2>&1
  CONFIG=$1 MODES=compile timeout 300 python3 "$B/torch_llama.py" > "$OUT/$1-torch.txt" 2>&1
  { tail -1 "$OUT/$1-bench.txt"; grep '^{' "$OUT/$1-torch.txt"; } | tee -a "$OUT/bench-llama-sizes.txt"
  vs_torch "$1" "$OUT/$1-bench.txt" "$OUT/$1-torch.txt" "$4"
}
lsize llama124m-t4096 4 "V = 32000, T = 4096, D = 768, H = 12, KV = 4, FF = 2048, L = 12" 0.9
lsize llama1b 8 "V = 32000, T = 2048, D = 2048, H = 32, KV = 8, FF = 8192, L = 16" 1.0
fi
if want gpt2-sizes; then
# Issue 37's table: examples/gpt2.gt with its sizes set against
# torch_reference.py's GPT-2 of the same size (GPT_SIZE, GPT_T, GPT_B,
# MODES) in the same job, no checkpointing on either side. Both take 6 steps
# (torch_reference.py's first and 5), then time 20 back to back; each side's
# joules a step (gtc's --bench line, test/gpu/torch_energy.py around
# torch_reference.py's step) go beside the times. Not part
# of "all": with torch.compile's first steps (up to 90 s at 1558M) it takes
# about 10 minutes, so GPT2_SIZES (names below, e.g. "gpt2-774m gpt2-1558m")
# runs some of the rows, for a device call's time limit.
gsize() { # name, GPT_SIZE, "L D H", T, batch, precision, PyTorch's mode, target [peak]
  case " ${GPT2_SIZES:-$1} " in *" $1 "*) ;; *) return 0 ;; esac
  local l d h
  read -r l d h <<< "$3"
  sed "s/let V = 50304, T = 1024, D = 768, H = 12, L = 12/let V = 50304, T = $4, D = $d, H = $h, L = $l/" examples/gpt2.gt > "$OUT/$1.gt"
  "$GTC" run "$OUT/$1.gt" --device cuda --batch $5 --precision $6 --bench-warmup 6 --bench 20 > "$OUT/$1-bench.txt" 2>&1
  # torch_reference.py's step and timing, with NVML's energy counter around it.
  BUNDLE=$B GPT_SIZE=$2 GPT_T=$4 GPT_B=$5 MODES=$7 timeout 300 python3 test/gpu/torch_energy.py > "$OUT/$1-torch.txt" 2>&1
  grep '^{"what": "gpt2' "$OUT/$1-torch.txt" > "$OUT/$1-torch.json"
  { tail -1 "$OUT/$1-bench.txt"; cat "$OUT/$1-torch.json"; } | tee -a "$OUT/bench-gpt2-sizes.txt"
  vs_torch "$1" "$OUT/$1-bench.txt" "$OUT/$1-torch.json" "$8" "${9:-}"
}
# A name in GPT2_SIZES that is no row is an error, not a table of nothing.
rows="gpt2-124m gpt2-124m-t4096 gpt2-124m-tf32 gpt2-355m gpt2-774m gpt2-1558m"
for name in ${GPT2_SIZES:-}; do
  case " $rows " in
    *" $name "*) ;;
    *) echo "run.sh: GPT2_SIZES names '$name', which is no row; the rows: $rows" >&2; exit 2 ;;
  esac
done
gsize gpt2-124m 124m "12 768 12" 1024 16 bf16 compile 0.8
gsize gpt2-124m-t4096 124m "12 768 12" 4096 4 bf16 compile 0.85 peak
gsize gpt2-124m-tf32 124m "12 768 12" 1024 16 tf32 tf32 0.75
gsize gpt2-355m 355m "24 1024 16" 1024 16 bf16 compile 0.85 peak
gsize gpt2-774m 774m "36 1280 20" 1024 16 bf16 compile 0.85 peak
gsize gpt2-1558m 1558m "48 1600 25" 1024 16 bf16 compile 0.85 peak
fi
if want energy; then
# On an H100 or H200 at 700 W GPT-2's step holds the power limit throughout,
# so its time is about its energy over the limit (test/bench/NOTES.md,
# forty-ninth and fiftieth sessions). GPT-2 124M bf16 B 16, gtc's --bench
# line and torch.compile's step (test/gpu/torch_energy.py, NVML's energy
# counter around torch_reference.py's step) on issue 37's protocol (6
# warm-up steps, 20 timed) and in the steady state of a long run (50, 200),
# with nvidia-smi's power and clock sampled every 50 ms alongside the first.
# Then gemm_hopper's GEMMs, joules a launch, at c_fc's and c_attn's shapes.
# A mean power above the card's limit by more than 10% is a window measured
# wrong (a poll after a stall once gave 1313 W on a 700 W H100; the limit
# holds over about a second, 20 steps of 124M measured 724-736 W).
power_ok() {
  python3 - "$1" <<'PY'
import re, sys
m = re.search(r"J/step at ([0-9.]+) W over [0-9.]+ s \(limit ([0-9.]+) W\)", open(sys.argv[1]).read())
sys.exit(0 if m and float(m[1]) <= 1.1 * float(m[2]) else 1)
PY
}
nvidia-smi --query-gpu=power.draw,clocks.sm,clocks_event_reasons.sw_power_cap --format=csv,noheader,nounits -lms 50 > "$OUT/gtc-smi.csv" 2>&1 &
pid=$!
for wi in "6 20" "50 200"; do
  read -r warm n <<< "$wi"
  "$GTC" run examples/gpt2.gt --device cuda --batch 16 --bench-warmup $warm --bench $n > "$OUT/energy-gtc-$n.txt" 2>&1; s=$?
  [ -n "${pid:-}" ] && { kill $pid; pid=; }
  power_ok "$OUT/energy-gtc-$n.txt" || s=1  # the driver has NVML here
  row "energy, gtc GPT-2 124M, $warm + $n steps: $(grep -o '[0-9.]* ms/step' "$OUT/energy-gtc-$n.txt"); $(grep -o '[0-9.]* J/step.*' "$OUT/energy-gtc-$n.txt")" "$(verdict $s)"
  WARM=$warm ITERS=$n BUNDLE=$B GPT_SIZE=124m GPT_B=16 MODES=compile timeout 300 python3 test/gpu/torch_energy.py > "$OUT/energy-torch-$n.txt" 2>&1; s=$?
  power_ok "$OUT/energy-torch-$n.txt" || s=1
  row "energy, $(grep -o 'torch compile.*' "$OUT/energy-torch-$n.txt")" "$(verdict $s)"
done
python3 - "$OUT/gtc-smi.csv" > "$OUT/gtc-smi.txt" <<'PY'
import sys
rows = []
for line in open(sys.argv[1]):
    f = [x.strip() for x in line.split(",")]
    try:
        rows.append((float(f[0]), float(f[1]), f[2] == "Active"))
    except (ValueError, IndexError):
        pass
busy = [r for r in rows if r[0] > 250]
print(f"{sum(r[0] for r in busy) / len(busy):.0f} W over {len(busy)} busy samples, SM {sum(r[1] for r in busy) / len(busy):.0f} MHz, power-capped in {sum(r[2] for r in busy)}" if busy else "no busy samples")
PY
row "energy, gtc GPT-2 124M 6 + 20 by nvidia-smi: $(cat "$OUT/gtc-smi.txt")" info
unpack_bundle "$B" "$BIN" gemm_hopper
for shape in "16384 3072 768" "16384 2304 768"; do
  GEMM_ENERGY=1 timeout 200 "$BIN/gemm_hopper" $shape > "$OUT/gemm-energy-${shape// /x}.txt" 2>&1; s=$?
  grep 'mJ a launch' "$OUT/gemm-energy-${shape// /x}.txt"
  row "gemm_hopper $shape, joules a launch: $(grep -c 'mJ a launch' "$OUT/gemm-energy-${shape// /x}.txt") kernels measured" "$(verdict $s)"
done
fi
if want gemm; then
# test/bench/gemm_hopper.cu (tools/dev.sh gpu-bundle builds it): gtc's own
# Hopper GEMM, cooperative and pingpong, against cuBLASLt at GPT-2's MLP
# shape, each kernel's output within 2e-2 of cuBLASLt's (relative to its
# largest element; it exits 1 otherwise). An experiment (test/bench/NOTES.md,
# forty-fourth session), not part of "all".
unpack_bundle "$B" "$BIN" gemm_hopper
LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} timeout 300 "$BIN/gemm_hopper" > "$OUT/gemm.txt" 2>&1; s=$?
cat "$OUT/gemm.txt"
row "gemm_hopper: $(grep -c 'max |diff|' "$OUT/gemm.txt") kernel runs checked against cuBLASLt" "$(verdict $s)"
# At GPT-2 1558M's MLP shape (K 1600, where gtc keeps cuBLASLt's GEMM) row
# by row and by groups of 8 tile rows (GEMM_GROUP).
for g in 0 8; do
  GEMM_GROUP=$g LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} timeout 300 "$BIN/gemm_hopper" 16384 6400 1600 \
    > "$OUT/gemm-1558m-group$g.txt" 2>&1; s=$?
  cat "$OUT/gemm-1558m-group$g.txt"
  row "gemm_hopper 16384 x 6400 x 1600, GEMM_GROUP=$g: $(grep -c 'max |diff|' "$OUT/gemm-1558m-group$g.txt") runs checked" "$(verdict $s)"
done
# The same kernels in gtc (the default on sm_90; GTC_HOPPER_GEMM=0 keeps
# cuBLASLt's, and for the GELU gradient's column sums the column-sum
# kernel): against the CPU on OpModels' HopperGemmGelu (the forward) and
# HopperGemmGeluGrad (the gradient with its sums) both ways, then GPT-2
# 124M's step with and without.
for model in HopperGemmGelu HopperGemmGeluGrad; do
  for own in 1 0; do
    GTC_HOPPER_GEMM=$own timeout 120 "$BIN/gtc-gpu-check" "$GTC" --precision bf16 --only $model \
      > "$OUT/gemm-check-$model-$own.txt" 2>&1; s=$?
    tail -2 "$OUT/gemm-check-$model-$own.txt"
    row "$model against the CPU, bf16, GTC_HOPPER_GEMM=$own" "$(verdict $s)"
  done
done
for own in 1 0 1 0; do
  t=$(GTC_HOPPER_GEMM=$own timeout 120 "$GTC" run examples/gpt2.gt --device cuda --batch 16 \
        --bench-warmup 6 --bench 20 2>&1 | tail -1)
  row "GPT-2 124M bf16 B 16, GTC_HOPPER_GEMM=$own: $t" info
done
fi
if want attention; then
# Attention alone, fwd + bwd, bf16, B 16, T 1024, heads of 64, causal: the
# sum of the attention kernels' mean times in gtc's profile against SDPA's
# medians of 20 (test/gpu/sdpa_bench.py), multi-head (12 heads) and
# grouped-query (12 query heads over 4 key heads; SDPA with enable_gqa and
# on K, V repeated, the faster of the two).
attn_ms() { # model -> the attention kernels' fwd + bwd ms in its profile
  "$GTC" run "$1" --device cuda --precision bf16 --batch 16 --bench 20 --profile "$OUT/$(basename "$1" .gt).json" > "$OUT/$(basename "$1" .gt).txt" 2>&1
  awk '$1 ~ /^attention/ {s += $4} END {printf "%.3f", s / 1000}' "$OUT/$(basename "$1" .gt).txt"
}
for m in attention attention_gqa; do
  hkv=$([ $m = attention ] && echo 12 || echo 4)
  g=$(attn_ms test/gpu/$m.gt)
  grep "^attention" "$OUT/$m.txt"
  python3 test/gpu/sdpa_bench.py 64 $hkv > "$OUT/sdpa-$m.txt" 2>&1
  cat "$OUT/sdpa-$m.txt"
  t=$(grep -o 'forward+backward [0-9.]*' "$OUT/sdpa-$m.txt" | awk '{print $2}' | sort -g | head -1)
  awk -v g="$g" -v t="$t" 'BEGIN {exit !(g > 0 && t > 0 && g <= t)}'; s=$?
  row "attention fwd+bwd, H 12 Hkv $hkv: gtc $g ms vs SDPA's best ${t:-?} ms (<= 1x)" "$(verdict $s)"
done
fi
if want compile; then
# 7. gtc compile: standalone executables, run from a directory without gtc,
# against `gtc run` with the same seed (identical losses expected: the same
# plan and kernels). GPT-2 124M trains on a synthetic token file.
python3 - "$OUT/tokens.bin" <<'PY'
import random, struct, sys
random.seed(1)
n = 1 << 20
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<3i", 20240520, 1, n) + bytes(253 * 4))
    f.write(struct.pack("<%dH" % n, *(random.randrange(50257) for _ in range(n))))
PY
mkdir -p "$OUT/alone"
GTC_CACHE_DIR=$OUT/compile-cache /usr/bin/time -f "%e" -o "$OUT/compile-time.txt" "$GTC" compile examples/gpt2.gt -o "$OUT/alone/gpt2" > "$OUT/compile-gpt2.txt" 2>&1; s=$?
cat "$OUT/compile-gpt2.txt"
"$GTC" compile examples/mlp.gt -o "$OUT/alone/mlp" > "$OUT/compile-mlp.txt" 2>&1
ldd "$OUT/alone/gpt2" > "$OUT/ldd.txt" 2>&1
# An empty kernel cache: every kernel must come from the executable.
( cd "$OUT/alone" && GTC_CACHE_DIR=$OUT/empty-cache ./gpt2 --steps 20 --log-every 1 --data "$OUT/tokens.bin" --eval "$OUT/tokens.bin" --log "$OUT/gpt2-exe.jsonl" ) > "$OUT/gpt2-exe.txt" 2>&1; s1=$?
"$GTC" run examples/gpt2.gt --steps 20 --log-every 1 --data "$OUT/tokens.bin" --eval "$OUT/tokens.bin" --log "$OUT/gpt2-run.jsonl" > "$OUT/gpt2-run.txt" 2>&1
tail -3 "$OUT/gpt2-exe.txt"
python3 test/Run/Inputs/compare_losses.py "$OUT/gpt2-run.jsonl" "$OUT/gpt2-exe.jsonl" 0 > "$OUT/gpt2-same.txt" 2>&1; s2=$?
grep -qi "llvm\|mlir" "$OUT/ldd.txt"; nollvm=$?
grep -q "kernels: 0 compiled" "$OUT/gpt2-exe.txt"; shipped=$?
row "gtc compile gpt2: $(grep -m1 '^wrote' "$OUT/compile-gpt2.txt" | sed 's/^wrote [^:]*: //' | cut -c1-60), $(cat "$OUT/compile-time.txt") s wall" "info"
row "compiled gpt2 --steps 20 on the GPU vs gtc run: $(tail -1 "$OUT/gpt2-same.txt" | cut -c1-50); $(grep -o 'kernels: .*' "$OUT/gpt2-exe.txt" | head -1)" "$(verdict $((s1 + s2 + (nollvm == 0) + shipped)))"
( cd "$OUT/alone" && GTC_CACHE_DIR=$OUT/empty-cache2 ./mlp --steps 50 --log-every 1 --log "$OUT/mlp-exe.jsonl" ) > "$OUT/mlp-exe.txt" 2>&1; s1=$?
"$GTC" run examples/mlp.gt --steps 50 --log-every 1 --log "$OUT/mlp-run.jsonl" > "$OUT/mlp-run.txt" 2>&1
python3 test/Run/Inputs/compare_losses.py "$OUT/mlp-run.jsonl" "$OUT/mlp-exe.jsonl" 0 > "$OUT/mlp-same.txt" 2>&1; s2=$?
row "compiled mlp 50 steps on the GPU vs gtc run: $(tail -1 "$OUT/mlp-same.txt" | cut -c1-50)" "$(verdict $((s1 + s2)))"

fi
if want bench; then
# 5. Benchmark: gtc vs PyTorch, same GPU, same job.
for b in 64 1024 16384; do
  for p in fp32 tf32 bf16; do
    "$GTC" run examples/mlp.gt --device cuda --batch $b --precision $p --bench 200 2>&1 | tail -1 >> "$OUT/bench.txt"
  done
done
# Run-to-run spread of the launch-bound case.
for i in 1 2 3; do
  "$GTC" run examples/mlp.gt --device cuda --batch 64 --precision tf32 --bench 500 2>&1 | tail -1 >> "$OUT/bench-b64-repeats.txt"
done
cat "$OUT/bench-b64-repeats.txt"
cat "$OUT/bench.txt"
PYTHONUNBUFFERED=1 OUT=$OUT python3 test/bench/torch_mlp.py "$B" > "$OUT/torch.txt" 2>&1
tail -3 "$OUT/torch.txt"
python3 - "$OUT/bench.txt" "$OUT/torch_mlp.json" > "$OUT/bench-table.txt" <<'PY'
import json, re, sys
gtc = {}
for line in open(sys.argv[1]):
    m = re.search(r"batch (\d+) cuda (\w+): ([0-9.]+) ms/step", line)
    if m:
        gtc[(int(m[1]), m[2])] = float(m[3])
torch = {}
try:
    for r in json.load(open(sys.argv[2])):
        if r["what"].startswith("mlp-b"):
            torch[(int(r["what"][5:]), r["mode"])] = r["ms_per_step"]
except Exception as e:
    print("no torch results:", e)
print(f"{'MLP step':<16}{'gtc ms':>10}{'torch eager':>13}{'ratio':>8}{'torch.compile':>15}")
for (b, p), ms in sorted(gtc.items()):
    t = torch.get((b, p))
    c = torch.get((b, "compile"))
    print(f"b={b:<6} {p:<7}{ms:>10.4f}{(t or 0):>13.4f}{(t / ms if t else 0):>8.2f}{(c or 0):>15.4f}")
PY

fi
if [ -n "$RESULTS" ]; then
  tar czf "$RESULTS/gpu-logs.tgz" --exclude=kernel-cache --exclude=fresh-cache \
    --exclude=compile-cache --exclude=alone --exclude=tokens.bin \
    --exclude='*.safetensors' -C "$OUT" .
fi
echo
echo "== gtc GPU suite on $GPU"
printf '%s\n' "${ROWS[@]}"
echo "== MLP training step, ms (mean of 200 CUDA-graph steps back to back; torch: torch_reference.py timing)"
cat "$OUT/bench-table.txt" 2>/dev/null || echo "(not run)"
echo "== precision: ms/step and device memory (mean of 100 CUDA-graph steps back to back)"
cat "$OUT/bench-precision.txt" 2>/dev/null || echo "(not run)"
echo "== gt-pad-dims: odd sizes (hidden 1001, vocabulary 50257), bf16"
cat "$OUT/bench-pad.txt" 2>/dev/null || echo "(not run)"
echo "== gt-fuse: fused vs --no-fuse (GPT-2 and its attention-free variant: bf16, B=16)"
cat "$OUT/bench-fuse.txt" 2>/dev/null || echo "(not run)"
echo "== llama124m bf16 B=16 T=1024: gtc --bench, its predicted peak, torch_llama.py"
cat "$OUT/bench-llama.txt" 2>/dev/null || echo "(not run)"
