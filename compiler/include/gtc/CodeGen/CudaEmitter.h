//===- CudaEmitter.h - CUDA code generation for plans -----------*- C++ -*-===//
//
// Turns a plan into the GPU launches the CUDA executor runs (CudaProgram.h):
// GEMMs for matmul and linear, and for every other kernel one or more NVRTC
// translation units with all shapes and attributes baked in. The kernels
// compute the functions of the CPU executor (runtime/lib/Cpu/CpuExecutor.cpp) in
// fp32, with deterministic reductions (no floating-point atomics), so a step
// is bitwise reproducible from run to run. Plain C++: no MLIR, no CUDA.
//===----------------------------------------------------------------------===//

#ifndef GTC_CODEGEN_CUDAEMITTER_H
#define GTC_CODEGEN_CUDAEMITTER_H

#include "gtc/Runtime/CudaProgram.h"
#include "gtc/Runtime/Plan.h"
#include "gtc/Runtime/Trainer.h"
#include <string>

namespace gtc::codegen {

/// Emits the GPU launches of every kernel of `plan`. Returns false and sets
/// `error` for an op or case it cannot handle.
bool emitCuda(const rt::Plan &plan, rt::CudaProgram &program,
              std::string &error);

/// A RunOptions::programFor that emits each plan's program once and keeps
/// it; errors go to stderr after `tool` ("gtc: error: ...").
rt::CudaProgramFn programCache(const std::string &tool);

} // namespace gtc::codegen

#endif // GTC_CODEGEN_CUDAEMITTER_H
