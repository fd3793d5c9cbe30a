#!/usr/bin/env bash
# Sets up, builds and exercises gtc on a fresh Debian 12 machine.
#
#   tools/dev.sh demo   install what is missing (apt), build, train the default example
#   tools/dev.sh test   install what is missing (apt), build, run every test;
#                       then again in an ASan+UBSan build, and a fuzz smoke
#   tools/dev.sh build  install what is missing (apt), build
#   tools/dev.sh gpu-bundle  portable binaries and data for test/gpu/run.sh
#   tools/dev.sh sanitize    every test again in an ASan+UBSan build (build-asan,
#                            clang), then a short run of every fuzz target
#   tools/dev.sh kernel-dump FILE  every CUDA kernel the unit tests emit, into
#                            FILE: compare two dumps around an emitter change
#   tools/dev.sh fuzz [SECONDS] [TARGET...]  fuzz (libFuzzer, build-asan);
#                            test/fuzz/run.sh says more
#
# BUILD_DIR (default: build) chooses the build directory.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}

# Pinned to the LLVM/MLIR 22 series (22.1.8 is what the tests were run with).
PACKAGES=(
  cmake ninja-build g++ ccache python3
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools
  libgtest-dev libgloo-dev pkg-config libsentencepiece-dev sentencepiece
  libopenblas-dev zlib1g-dev dataset-fashion-mnist base-files
  python3-torch python3-numpy
)

# The sanitizer and fuzzing build (build-asan) is compiled by clang; its ASan
# and UBSan runtimes (libclang-rt-22-dev) are only a recommendation of clang-22.
SANITIZE_PACKAGES=(clang-22 libclang-rt-22-dev libfuzzer-22-dev)

install_missing() {
  local missing=()
  for p in "${PACKAGES[@]}" "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
      || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "== installing: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing[@]}"
}

build() {
  install_missing
  if [ ! -f "$BUILD_DIR/build.ninja" ]; then
    cmake -G Ninja -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release \
      -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
      -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit
  fi
  ninja -C "$BUILD_DIR" gtc gtc-opt gtc-unittests
}

# The sanitizer and fuzzing build: clang-22, ASan + UBSan, libFuzzer targets.
# Debian's LLVM is not instrumented: container-overflow checks, which need
# every caller instrumented, are off, and so is leak checking (it reports
# allocations the front end keeps to the end of the process after an error).
sanitize_build() {
  install_missing "${SANITIZE_PACKAGES[@]}"
  local dir=build-asan
  if [ -f "$dir/CMakeCache.txt" ] &&
     ! grep -q '^CMAKE_CXX_COMPILER:.*clang' "$dir/CMakeCache.txt"; then
    rm -rf "$dir" # an older build-asan made by g++
  fi
  if [ ! -f "$dir/build.ninja" ]; then
    cmake -G Ninja -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
      -DGTC_SANITIZE=ON -DGTC_FUZZ=ON \
      -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
      -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit
  fi
  ninja -C "$dir" gtc gtc-opt gtc-unittests gtc-fuzzers
}

sanitize_test() {
  export ASAN_OPTIONS=detect_container_overflow=0:detect_leaks=0:abort_on_error=1
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  echo "== lit tests under ASan + UBSan (build-asan)"
  ninja -C build-asan check-gtc
  echo "== unit tests under ASan + UBSan"
  ctest --test-dir build-asan --output-on-failure -j "$(nproc)"
  echo "== fuzz smoke (10 s a target)"
  test/fuzz/run.sh build-asan 10
}

case "${1:-}" in
  build)
    build
    ;;
  demo)
    build
    echo "== gtc run examples/mlp.gt --device cpu   (5 epochs of Fashion-MNIST)"
    "$BUILD_DIR/bin/gtc" run examples/mlp.gt --device cpu
    ;;
  gpu-bundle)
    # Portable binaries for a GPU machine without LLVM: gpu-bundle/ (ignored
    # by git) with gtc, gtc-runner, gtc-gpu-check, the Fashion-MNIST files and PyTorch's
    # reference benchmark; run there: test/gpu/run.sh gpu-bundle
    install_missing xz-utils
    if [ ! -f build-static/build.ninja ]; then
      cmake -G Ninja -S . -B build-static -DCMAKE_BUILD_TYPE=Release -DGTC_STATIC=ON \
        -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
        -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit
    fi
    ninja -C build-static gtc gtc-runner gtc-gpu-check
    rm -rf gpu-bundle && mkdir -p gpu-bundle/fashion-mnist
    # xz: the bundle travels to the GPU machine under a 64 MiB limit
    # (test/gpu/unpack.sh unpacks it there).
    for f in gtc gtc-gpu-check gtc-runner; do
      xz -T2 -6 -c build-static/bin/$f > gpu-bundle/$f.xz
    done
    # test/bench/gemm_hopper.cu, an experiment (run.sh's "gemm" section),
    # built where the CUDA toolkit has nvcc.
    if [ -x /usr/local/cuda/bin/nvcc ]; then
      /usr/local/cuda/bin/nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a \
        test/bench/gemm_hopper.cu -lcublasLt -lcuda -o build-static/bin/gemm_hopper
      xz -T2 -6 -c build-static/bin/gemm_hopper > gpu-bundle/gemm_hopper.xz
    else
      echo "no /usr/local/cuda/bin/nvcc: the bundle has no gemm_hopper" >&2
    fi
    cp /usr/share/datasets/fashion-mnist/*.gz gpu-bundle/fashion-mnist/
    cp ../shared/bench/torch_reference.py ../shared/bench/torch_ddp.py ../shared/bench/torch_llama.py gpu-bundle/ 2>/dev/null || true
    du -sh gpu-bundle
    ;;
  kernel-dump)
    build
    out=$(realpath -m "${2:?usage: tools/dev.sh kernel-dump FILE}")
    rm -f "$out"
    GTC_KERNEL_DUMP="$out" "$BUILD_DIR/test/unit/gtc-unittests" \
      --gtest_filter='CudaEmitterTest.*' >/dev/null
    echo "$(grep -c '^//// ' "$out") kernels in $out"
    ;;
  sanitize)
    sanitize_build
    sanitize_test
    ;;
  fuzz)
    sanitize_build
    shift
    test/fuzz/run.sh build-asan "${1:-600}" "${@:2}"
    ;;
  test)
    build
    echo "== lit tests (check-gtc)"
    ninja -C "$BUILD_DIR" check-gtc
    echo "== unit tests (ctest)"
    ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$(nproc)"
    sanitize_build
    sanitize_test
    ;;
  *)
    echo "usage: tools/dev.sh demo|test|build|gpu-bundle|sanitize|fuzz" >&2
    exit 2
    ;;
esac
