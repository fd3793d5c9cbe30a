#!/usr/bin/env bash
# Runs every fuzz target: first its regression inputs (test/fuzz/regressions/
# TARGET/, inputs that once crashed it), then SECONDS of fuzzing from the
# seed corpus (make_corpus.py) plus what earlier runs in BUILD_DIR found.
#
#   test/fuzz/run.sh BUILD_DIR [SECONDS] [TARGET...]
#
# BUILD_DIR is a GTC_FUZZ build (tools/dev.sh fuzz makes build-asan). A crash
# leaves its input in BUILD_DIR/fuzz/artifacts/TARGET/ and fails the run:
# copy it into test/fuzz/regressions/TARGET/ when fixing it. Prints one line
# per target: executions, coverage (libFuzzer's cov: edges) and corpus size.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="$(cd "$1" && pwd)"
seconds="${2:-30}"
shift $(( $# >= 2 ? 2 : 1 ))
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(gt safetensors idx tokens text bundle plan)

export ASAN_OPTIONS=detect_container_overflow=0:detect_leaks=0:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
work="$build/fuzz"
python3 "$here/make_corpus.py" "$build/bin/gtc" "$work/seeds"
status=0
for t in "${targets[@]}"; do
  bin="$build/bin/gtc-fuzz-$t"
  corpus="$work/corpus/$t"
  artifacts="$work/artifacts/$t"
  mkdir -p "$corpus" "$artifacts"
  if [ -d "$here/regressions/$t" ] && [ -n "$(ls -A "$here/regressions/$t")" ]; then
    if ! "$bin" -runs=0 "$here/regressions/$t"/* > "$work/$t.regressions.log" 2>&1; then
      echo "fuzz $t: a regression input crashes again; see $work/$t.regressions.log"
      status=1
      continue
    fi
  fi
  # Inputs over 4 KiB add little for these formats and slow every run;
  # plans (and payloads holding them) need more.
  maxlen=4096
  case $t in plan|bundle) maxlen=16384 ;; esac
  if "$bin" -max_total_time="$seconds" -max_len=$maxlen -timeout=60 -rss_limit_mb=4096 \
      -artifact_prefix="$artifacts/" -print_final_stats=1 \
      "$corpus" "$work/seeds/$t" > "$work/$t.log" 2>&1; then
    result=ok
  else
    result="CRASH (input in $artifacts; log $work/$t.log)"
    status=1
  fi
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/$t.log" | grep -o '[0-9]*$' || echo "?")
  cov=$(grep -o 'cov: [0-9]*' "$work/$t.log" | tail -1 | grep -o '[0-9]*' || echo "?")
  echo "fuzz $t: $result; ${seconds} s, $execs executions, coverage $cov edges, corpus $(ls "$corpus" | wc -l) files"
done
exit $status
