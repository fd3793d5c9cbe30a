# -*- Python -*-
# lit configuration for gtc's FileCheck tests.

import os

import lit.formats
from lit.llvm import llvm_config

config.name = "GTC"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".gt", ".test"]
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "unit", "gpu", "bench", "Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.gtc_obj_root, "test")

config.substitutions.append(("%gtc_src_root", config.gtc_src_root))
config.substitutions.append(("%examples", os.path.join(config.gtc_src_root, "examples")))
config.substitutions.append(("%python", "python3"))
config.substitutions.append(("%gtc_tools_dir", config.gtc_tools_dir))

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.gtc_tools_dir, append_path=True)
llvm_config.add_tool_substitutions(["gtc", "gtc-opt"], [config.gtc_tools_dir])

# gtc sample reads SentencePiece models where gtc links libsentencepiece;
# the tests make theirs with spm_train (Debian's sentencepiece package).
import shutil
if config.gtc_have_sentencepiece and shutil.which("spm_train"):
    config.available_features.add("sentencepiece")
else:
    config.available_features.add("no-sentencepiece")

# AddressSanitizer reserves terabytes of address space: no test under it can
# limit the address space (ulimit -v).
if config.gtc_sanitize:
    config.available_features.add("asan")

# gtc compile precompiles the GPU kernels where NVRTC loads (CUDA 13's, at
# its Debian name or the toolkit's path, as runtime/lib/Cuda/CudaLibs.cpp
# looks for it).
import ctypes
for nvrtc in ("libnvrtc.so.13", "/usr/local/cuda/lib64/libnvrtc.so.13"):
    try:
        ctypes.CDLL(nvrtc)
    except OSError:
        continue
    config.available_features.add("nvrtc")
    break

# The PyTorch parity tests (test/Parity) need a Python with torch and numpy
# (Debian's python3-torch; tools/dev.sh installs it).
import shutil
import subprocess
candidates = []
for python in ("python3", "/usr/bin/python3"):
    path = shutil.which(python)
    if path and os.path.realpath(path) not in map(os.path.realpath, candidates):
        candidates.append(path)
for python in candidates:
    try:
        probe = subprocess.run([python, "-c", "import torch, numpy"],
                               capture_output=True)
    except OSError:
        continue
    if probe.returncode == 0:
        config.available_features.add("torch")
        config.substitutions.append(("%torch_python", python))
        break
