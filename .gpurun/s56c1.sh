# Next session's first call (copy to .gpurun/; bundle of main's HEAD by tools/dev.sh gpu-bundle):
#   run(command="bash .gpurun/s56c1.sh", carry=["gpu-bundle"], timeout_s=590)
# The fifty-fifth session ran the suite's first half and compile,micro,dropout,attention and
# the 124M row on c8f943c; not run: llama, sample, bench.
set -u; R=/tmp/res; rm -rf $R; mkdir -p $R; FINAL=$OUT
export CUDA_VISIBLE_DEVICES=0 GTC_CACHE_DIR=/tmp/kc
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv > $R/card.txt 2>&1
OUT=$R/suite timeout 560 test/gpu/run.sh gpu-bundle llama,sample,bench > $R/suite.txt 2>&1
tar czf $FINAL/r.tgz -C $R .
grep -h "FAIL" $R/suite/rows.txt; wc -l $R/suite/rows.txt
