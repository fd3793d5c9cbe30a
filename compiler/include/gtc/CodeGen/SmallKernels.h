//===- SmallKernels.h - What gtc's own small GPU kernels compute -*- C++ -*-===//
//
// The sizes up to which the CUDA emitter runs gtc's own kernels for a small
// batch instead of cuBLASLt's, and which gt-fuse and the plan builder plan
// for: gt-fuse folds into such a kernel what it can also compute (a ReLU
// gradient, column sums, a whole classifier head), so the three must agree.
// Plain C++: the emitter has no MLIR.
//===----------------------------------------------------------------------===//

#ifndef GTC_CODEGEN_SMALLKERNELS_H
#define GTC_CODEGEN_SMALLKERNELS_H

#include <cstdint>

namespace gtc::codegen {

/// Rows (or K) up to which a GEMM runs as gtc's small-GEMM kernel (one
/// 64-row tile; GemmKernels.cpp), whose epilogue also applies a ReLU
/// gradient and sums columns.
inline constexpr int64_t kSmallGemmRows = 64;
/// Over a longer K, f32 GEMMs of few rows go to cuBLASLt instead (unless
/// their epilogue needs the small kernel).
inline constexpr int64_t kSmallGemmLongK = 2048;

/// The largest classifier head that runs as one kernel (LossKernels.cpp's
/// smallHead): `rows` rows of `classes` logits from a K of `k` (the width
/// of the layer below). One thread-block cluster holds the head's inputs in
/// shared memory: 8 slices of K of the rows and the weight.
inline constexpr int64_t kSmallHeadClasses = 32, kSmallHeadK = 2048;

inline bool isSmallHead(int64_t rows, int64_t classes, int64_t k) {
  return rows >= 1 && rows <= kSmallGemmRows && classes >= 1 &&
         classes <= kSmallHeadClasses && k >= 1 && k <= kSmallHeadK;
}

} // namespace gtc::codegen

#endif // GTC_CODEGEN_SMALLKERNELS_H
