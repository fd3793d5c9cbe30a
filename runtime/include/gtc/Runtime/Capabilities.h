//===- Capabilities.h - What cuBLASLt and gtc's kernels accept --*- C++ -*-===//
//
// What a GEMM's epilogue can compute on a GPU (cuBLASLt's and gtc's small
// GEMM's), the sizes up to which the CUDA emitter runs gtc's own kernels
// for a small batch instead of cuBLASLt's, and what the attention kernels
// apply as they store. gt-fuse forms regions only of
// what these accept, gt.fused's verifier checks them, the plan builder
// plans for them and the CUDA emitter runs them: all four read this one
// header. Plain C++ (the emitter and the runtime have no MLIR).
//===----------------------------------------------------------------------===//

#ifndef GTC_RUNTIME_CAPABILITIES_H
#define GTC_RUNTIME_CAPABILITIES_H

#include <cstdint>
#include <string_view>

namespace gtc::rt {

/// The most data-parallel processes (devices = N, --devices N, a plan's
/// shard_gradients): more than any host or cluster runs, and small enough
/// for every count kept as an int.
inline constexpr int64_t kMaxDevices = 65536;

/// The most elements of one tensor (2^44, 64 TiB of f32): the front end's
/// declared shapes and reshapes, and every shape at the batch the run
/// chose (gt-shape-inference), stay within it, so no element count or byte
/// size overflows an int64.
inline constexpr int64_t kMaxElements = int64_t(1) << 44;

/// cuBLASLt's GELU epilogues store or read the GELU's input (the "aux"
/// matrix, for the backward's DGELU) with rows of a multiple of this many
/// elements.
inline constexpr int64_t kGemmAuxAlign = 8;
inline bool gemmAuxFits(int64_t columns) {
  return columns % kGemmAuxAlign == 0;
}

/// The activation gradients a GEMM's epilogue computes: gelu_tanh's
/// (cuBLASLt's DGELU, which has the tanh approximation only) and relu's
/// (gtc's small GEMM, at most kSmallGemmRows rows).
inline bool gemmEpilogueGrad(std::string_view kind) {
  return kind == "gelu_tanh" || kind == "relu";
}

/// Rows (or K) up to which a GEMM runs as gtc's small-GEMM kernel (one
/// 64-row tile; GemmKernels.cpp), whose epilogue also applies a ReLU
/// gradient and sums columns.
inline constexpr int64_t kSmallGemmRows = 64;
/// Over a longer K, f32 GEMMs of few rows go to cuBLASLt instead (unless
/// their epilogue needs the small kernel).
inline constexpr int64_t kSmallGemmLongK = 2048;

/// gtc's own Hopper GEMM (GemmKernels.cpp's hopperGemm; bf16, sm_90):
/// whole 128 x 128 tiles over K in steps of 64, up to K = 2048 (GPT-2 1558M's
/// 1600; beyond, not measured against cuBLASLt).
inline bool hopperGemmFits(int64_t m, int64_t n, int64_t k) {
  return m > 0 && n > 0 && k > 0 && m % 128 == 0 && n % 128 == 0 &&
         k % 64 == 0 && k <= 2048;
}

/// Whether a GELU gradient's GEMM (dy W, DGELU) also sums its result's
/// columns (a "gemm" region with them; the bias gradient of the GELU's
/// linear): in bf16 where gtc's Hopper GEMM computes them as it stores the
/// result (any GPU runs the region: elsewhere cuBLASLt's DGELU and a
/// column-sum kernel), instead of cuBLASLt's BGRADB in the weight
/// gradient's GEMM, which reads the result again.
inline bool dgeluSumsFit(bool bf16, int64_t m, int64_t n, int64_t k) {
  return bf16 && m > kSmallGemmRows && hopperGemmFits(m, n, k);
}

/// The largest classifier head that runs as one kernel (LossKernels.cpp's
/// smallHead): `rows` rows of `classes` logits from a K of `k` (the width
/// of the layer below). One thread-block cluster holds the head's inputs in
/// shared memory: 8 slices of K of the rows and the weight.
inline constexpr int64_t kSmallHeadClasses = 32, kSmallHeadK = 2048;

inline bool isSmallHead(int64_t rows, int64_t classes, int64_t k) {
  return rows >= 1 && rows <= kSmallGemmRows && classes >= 1 &&
         classes <= kSmallHeadClasses && k >= 1 && k <= kSmallHeadK;
}

/// Whether the GPU's attention gradient can turn dq and dk back by a rope
/// as it stores them (an "attention_grad" region: the gradient of attention
/// on rope(q) and rope(k) is the inverse rope of the kernels' dq and dk):
/// the tensor-core kernels do, for 16-bit q, k and v with heads of 64 or
/// 128, where each thread holds both elements of every pair it stores.
inline bool attentionGradTakesRope(int64_t elementBits, int64_t headDim) {
  return elementBits == 16 && (headDim == 64 || headDim == 128);
}

} // namespace gtc::rt

#endif // GTC_RUNTIME_CAPABILITIES_H
