//===- CudaProgram.h - A plan's GPU launches --------------------*- C++ -*-===//
//
// What the CUDA code generator (compiler/lib/CodeGen) makes of a plan and the
// CUDA executor runs: for every plan kernel, in order, a list of launches.
// Kernels are complete CUDA C++ translation units for NVRTC (no #include; all
// shapes baked in as constants; pointer arguments only); GEMMs go to
// cuBLASLt; memsets clear buffers. No MLIR, no CUDA headers here.
//===----------------------------------------------------------------------===//

#ifndef GTC_RUNTIME_CUDAPROGRAM_H
#define GTC_RUNTIME_CUDAPROGRAM_H

#include <cstdint>
#include <string>
#include <vector>

namespace gtc::rt {

/// One GPU operation.
struct CudaLaunch {
  enum class Kind { Kernel, Gemm, Memset, AllReduce };
  Kind kind = Kind::Kernel;

  // Kernel: `source` defines `extern "C" __global__ void gtc_kernel(T0 *p0,
  // T1 *p1, ...)` (kKernelEntry), one pointer per entry of `buffers` (float*
  // for f32 buffers, int* for i32), launched as grid x block threads (1-D)
  // with `shared` bytes of dynamic shared memory. An entry kWorkspace stands
  // for the program's workspace (see CudaProgram::workspaceBytes); the kernel
  // declares the pointer type it wants (double*, float*, int*). The source
  // holds nothing that names the plan kernel, so identical kernels (the
  // layers of a repeat) are one source, compiled and loaded once; `name`
  // (profiles, errors) and `comment` (listings: the plan kernel, its
  // buffers, what the launch does) say which launch it is.
  static constexpr int kWorkspace = -2;
  /// An entry kStepCounter stands for the training step's device counters
  /// (`const long long *`, read only): slot kStepsSlot holds the steps done,
  /// which the optimizer's update advances at the end of the step, and
  /// kSeedSlot the run's seed: what changes from step to step in a
  /// replayed CUDA graph (dropout's masks).
  static constexpr int kStepCounter = -3;
  static constexpr int kStepsSlot = 0, kSeedSlot = 8;
  static constexpr const char *kKernelEntry = "gtc_kernel";
  /// The first statement of every kernel's body. On sm_90 and newer the
  /// executor launches kernels as programmatic dependents of the launch
  /// before them on their stream (programmatic dependent launch): a kernel
  /// may be scheduled as soon as every block of its predecessor has exited,
  /// before the predecessor's completion is signalled, which hides part of
  /// the launch latency. griddepcontrol.wait holds each block until the
  /// predecessor has completed and its writes are visible; launched without
  /// the attribute it returns at once. (Also calling
  /// griddepcontrol.launch_dependents first, so that the next kernel's
  /// blocks are scheduled during this one's last wave, made examples/mlp.gt
  /// at batch 64 slower: test/bench/NOTES.md, eighteenth session.)
  static constexpr const char *kDependentWait =
      "#if __CUDA_ARCH__ >= 900\n"
      "  asm volatile(\"griddepcontrol.wait;\" ::: \"memory\");\n"
      "#endif\n";
  std::string name;
  std::string comment;
  std::string source;
  int64_t grid = 1;
  int64_t block = 256;
  int64_t shared = 0;
  std::vector<int> buffers;
  /// Bytes added to each buffer's address (empty: none): a launch over a
  /// slice of its buffers, such as one chunk of a classifier's rows.
  std::vector<int64_t> offsets;
  /// A 2-D TMA tensor map of a buffer of 16-bit elements (Hopper's bulk
  /// tensor copies): the buffer as `rows` x `cols` row-major, copied in
  /// boxes of boxRows x boxCols elements in the 128-byte swizzle (boxCols
  /// 64: one 128-byte row a box row).
  struct TensorMap {
    int64_t rows = 0, cols = 0;
    int boxRows = 0, boxCols = 0;
  };
  /// Per entry of `buffers` (empty: none): with rows > 0 the kernel takes a
  /// tensor map of that buffer, a 128-byte `const __grid_constant__`
  /// parameter that the executor encodes at launch, instead of its pointer.
  std::vector<TensorMap> maps;
  /// A persistent kernel (each block loops over tiles): `grid` is the most
  /// blocks it can use, and the executor launches at most one an SM.
  bool persistent = false;
  /// Whether it computes on tensor cores (mma.sync): the profile compares
  /// its FLOP rate with the tensor-core peak instead of the CUDA cores'.
  bool tensorCores = false;
  /// The same kernel written for one architecture (Hopper's warpgroup MMA
  /// needs sm_90a code): on a device of compute capability major.minor
  /// the executor compiles `source` for `arch` and launches it with this
  /// grid, block and shared memory in place of the portable kernel. A
  /// GEMM's variant is a kernel in place of cuBLASLt, with its own
  /// `buffers`, `maps` and `persistent`. A kernel's variant with no
  /// `source` drops the launch there (another launch's variant does its
  /// work). `withOwnGemm`: a kernel's variant that goes with a GEMM's
  /// (taken only where gtc's own GEMMs are, unless GTC_HOPPER_GEMM=0).
  struct Variant {
    int major = 0, minor = 0;
    std::string arch, what, source;
    int64_t grid = 1, block = 256, shared = 0;
    std::vector<int> buffers;
    std::vector<TensorMap> maps;
    bool persistent = false;
    bool withOwnGemm = false;
  };
  std::vector<Variant> variants;

  // Gemm (row-major, f32): for i in [0, batch):
  //   C_i = alpha * op(A_i) @ op(B_i) + beta * C_i  (+ bias[n] per row)
  // with A_i = A + i * strideA (in elements; 0 broadcasts), op(A_i) M x K,
  // op(B_i) K x N, C_i M x N, C_i = C + i * strideC.
  int a = -1, b = -1, c = -1, bias = -1;
  bool transA = false, transB = false;
  int64_t m = 0, n = 0, k = 0, batch = 1;
  int64_t strideA = 0, strideB = 0, strideC = 0;
  float alpha = 1.0f, beta = 0.0f;
  /// Bytes added to the addresses of A, B and C (multiples of 256): a GEMM
  /// over a slice of rows.
  int64_t offsetA = 0, offsetB = 0, offsetC = 0;
  // cuBLASLt epilogues (a gt.fused "gemm" region):
  /// An activation after the bias: max(x, 0) (RELU) or the tanh-approximated
  /// GELU (GELU); with `aux` >= 0, GELU also stores its input (the
  /// pre-activation) in buffer `aux` (GELU_AUX).
  enum class Activation { None, Relu, Gelu };
  Activation act = Activation::None;
  int aux = -1;
  /// Multiplies the product by gelu'(aux), the GELU gradient of the input
  /// that a GELU_AUX epilogue saved (DGELU).
  bool dgelu = false;
  /// Writes the row sums of op(A) (length m, the type of C) to buffer
  /// `biasGrad`: the bias gradient next to a weight gradient (BGRADB).
  int biasGrad = -1;
  /// With beta = 1, the GEMM adds buffer `addend` (C's type and layout)
  /// instead of C's own contents: C = op(A) op(B) + addend (cuBLASLt's C
  /// and D matrices apart). A gradient that is the sum of two GEMMs' (a
  /// SwiGLU's gate and up inputs, q, k and v's) is added as the second
  /// GEMM stores it, not by a kernel that reads both again.
  int addend = -1;

  /// A GEMM's multiply-adds times 2: cuBLASLt's, or a kernel's that
  /// computes one (gtc's small GEMM sets m, n and k); 0 for others.
  double gemmFlops() const {
    return 2.0 * double(m) * double(n) * double(k) * double(batch);
  }

  /// The epilogue in words (" +bias +gelu"), for profiles and listings.
  std::string epilogueName() const {
    std::string s;
    if (bias >= 0)
      s += " +bias";
    if (act == Activation::Relu)
      s += " +relu";
    if (act == Activation::Gelu)
      s += aux >= 0 ? " +gelu(saving its input)" : " +gelu";
    if (dgelu)
      s += " *gelu'";
    if (biasGrad >= 0)
      s += " +bias gradient";
    if (addend >= 0)
      s += " +addend";
    return s;
  }

  // Memset: clear buffer `c` (all of it) to zero.

  // AllReduce (gt-bucket's all_reduce): `buffers` holds the bucket's n
  // inputs, then their n outputs; each output becomes the mean over the
  // data-parallel processes of its input (in place when the two are one
  // buffer). The CUDA executor issues the bucket as one NCCL group on its
  // communication stream; in one process it copies.
};

/// The launches of every plan kernel (same order and count as Plan::kernels).
/// A plan kernel's list is empty when an earlier launch does its work (the
/// cross-entropy gradient computed with the loss).
struct CudaProgram {
  std::vector<std::vector<CudaLaunch>> kernels;
  /// Bytes of device scratch memory (256-byte aligned) that the executor
  /// allocates once and passes for every kWorkspace entry. Its contents are
  /// undefined when a plan kernel starts; the launches of one plan kernel run
  /// in order on one stream, so a launch reads what an earlier launch of the
  /// same plan kernel wrote there (partial sums of deterministic two-stage
  /// reductions, attention statistics). No data lives there across plan
  /// kernels.
  int64_t workspaceBytes = 0;
};

} // namespace gtc::rt

#endif // GTC_RUNTIME_CUDAPROGRAM_H
