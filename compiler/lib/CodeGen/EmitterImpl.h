//===- EmitterImpl.h - Shared pieces of the CUDA emitter --------*- C++ -*-===//
//
// Private to compiler/lib/CodeGen (not installed): the constants, helper
// functions, device-code snippets and the Emitter class that the emitter
// core (CudaEmitter.cpp) and the kernel-family files (*Kernels.cpp) share.
//===----------------------------------------------------------------------===//

#ifndef GTC_LIB_CODEGEN_EMITTERIMPL_H
#define GTC_LIB_CODEGEN_EMITTERIMPL_H

#include "gtc/CodeGen/CudaEmitter.h"
#include "gtc/Runtime/Capabilities.h"
// cuh::<name>: the CUDA text of kernels/<name>.cuh (kernels/README.md).
#include "CudaTexts.inc"
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <initializer_list>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace gtc::codegen::detail {

using namespace gtc::rt;

inline constexpr int kBlock = 256;
/// Cross-entropies of at most this many rows and logits run in one block
/// (no second launch for the mean; with the gradient in a loss region, one
/// launch in all); larger ones
/// spread the rows over the GPU (a 512 x 50257 one took 55 ms in one block).
inline constexpr int64_t kOneBlockRows = 1024, kOneBlockLogits = 1 << 16;

/// The SMs of an H100 or H200, which grids of a few blocks an SM assume.
inline constexpr int64_t kSMs = 132;
/// Grid cap of grid-stride elementwise kernels: 8 blocks per SM of an H100.
inline constexpr int64_t kMaxGrid = kSMs * 8;
/// Rows up to which a fused column sum (Emitter::columnSums) runs in one
/// launch, a thread a column.
inline constexpr int64_t kFewRows = 512;
/// Grid cap of kernels with one block (or a few threads) per row or tile.
inline constexpr int64_t kMaxRowGrid = 65535;
/// Static shared memory available without an opt-in.
inline constexpr int64_t kSharedLimit = 48 * 1024;

inline std::string str(int64_t v) { return std::to_string(v); }

/// A float literal that reads back as `v` (9 significant digits).
inline std::string flt(float v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(v));
  std::string s = buf;
  if (s.find_first_of(".en") == std::string::npos)
    s += ".0";
  return s + "f";
}

/// A double literal that reads back as `v`.
inline std::string dbl(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  std::string s = buf;
  if (s.find_first_of(".en") == std::string::npos)
    s += ".0";
  return s;
}

inline int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
inline int64_t alignUp(int64_t a, int64_t b) { return ceilDiv(a, b) * b; }

/// An attention kernel's shape constants (B, T, H, HKV, G, HD, D, QROW,
/// KVROW, CAUSAL), shared by the CUDA-core and tensor-core kernels.
std::string attentionShapeConsts(const AttentionLayout &a);

/// `text` with its MMA operand type `MMA_T` spelled (bf16 or f16).
std::string mmaTyped(std::string text, bool bf16);

inline std::string shapeStr(const std::vector<int64_t> &s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i)
    r += (i ? "," : "") + str(s[i]);
  return r + "]";
}

inline int64_t product(const std::vector<int64_t> &s) {
  int64_t n = 1;
  for (int64_t d : s)
    n *= d;
  return n;
}

/// Row-major strides of `shape` aligned to the right of an `rank`-dimensional
/// result, with 0 where the dimension is broadcast (CpuExecutor's
/// broadcastStrides).
inline std::vector<int64_t>
broadcastStrides(const std::vector<int64_t> &shape, size_t rank) {
  std::vector<int64_t> strides(rank, 0);
  int64_t s = 1;
  for (size_t i = 0; i < shape.size() && i < rank; ++i) {
    size_t d = shape.size() - 1 - i;
    size_t o = rank - 1 - i;
    strides[o] = shape[d] == 1 ? 0 : s;
    s *= shape[d];
  }
  return strides;
}

/// Whether `small` equals the trailing dimensions of `big` (leading 1s of
/// `small` ignored): then small[i % count(small)] pairs with big[i].
inline bool isTrailing(std::vector<int64_t> small,
                       const std::vector<int64_t> &big) {
  while (!small.empty() && small.front() == 1)
    small.erase(small.begin());
  if (small.size() > big.size())
    return false;
  for (size_t i = 0; i < small.size(); ++i)
    if (small[small.size() - 1 - i] != big[big.size() - 1 - i])
      return false;
  return true;
}

//===----------------------------------------------------------------------===//
// Device-code snippets
//===----------------------------------------------------------------------===//

enum Helper : unsigned {
  kWarpHelpers = 1,   ///< warp_sum (float, double), warp_max
  kRowHelpers = 2,    ///< row_sum, row_max (needs kWarpHelpers)
  kArgmaxHelpers = 4, ///< row_argmax (needs kWarpHelpers)
  kPackHelpers = 8,   ///< pack_t, loadv, storev
  kAsyncHelpers = 16, ///< u32, smem_u32, cp_async<B>, copy_async, commit, wait
  kClusterHelpers = 32, ///< CLUSTERS, GTC_CLUSTER, cluster barriers, ranks
                        ///< and remote stores (needs kAsyncHelpers)
};

/// runtime/include/gtc/Runtime/ScalarOps.h as it is: the activations'
/// formulas, which the CPU executor compiles too. Added to a kernel that
/// calls them (gtc_scalar::).
inline const char *const kScalarOpsSnippet =
#include "gtc/Runtime/ScalarOpsText.inc"
    ;

/// Threads per row for a row-wise kernel over rows of `n`: a warp for short
/// rows, up to the whole block for long ones (at most 8 elements a thread
/// below 2048).
inline int threadsPerRow(int64_t n) {
  for (int rt : {32, 64, 128})
    if (ceilDiv(n, rt) <= 8)
      return rt;
  return 256;
}

/// Merged dimensions of a strided gather: out index i -> one offset per
/// operand. Size-1 dimensions are dropped and neighbours merged when every
/// operand walks them contiguously.
struct Gather {
  std::vector<int64_t> dims;
  std::vector<std::vector<int64_t>> strides; // [operand][dim]
};

inline Gather makeGather(const std::vector<int64_t> &out,
                         const std::vector<std::vector<int64_t>> &strides) {
  Gather g;
  g.strides.resize(strides.size());
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] == 1)
      continue;
    bool merge = !g.dims.empty();
    for (size_t o = 0; merge && o < strides.size(); ++o)
      merge = g.strides[o].back() == strides[o][d] * out[d];
    if (merge) {
      g.dims.back() *= out[d];
      for (size_t o = 0; o < strides.size(); ++o)
        g.strides[o].back() = strides[o][d];
      continue;
    }
    g.dims.push_back(out[d]);
    for (size_t o = 0; o < strides.size(); ++o)
      g.strides[o].push_back(strides[o][d]);
  }
  return g;
}

/// Code computing `offsets[o]` (declared here) from the flat index `index`.
inline std::string emitGather(const Gather &g, const std::string &index,
                              const std::vector<std::string> &offsets,
                              const std::string &type,
                              const std::string &ind) {
  std::string s;
  s += ind + type + " ";
  for (size_t o = 0; o < offsets.size(); ++o)
    s += (o ? ", " : "") + offsets[o] + " = 0";
  s += ";\n";
  // Dimensions outside the outermost one with a nonzero stride need no
  // coordinate.
  size_t first = g.dims.size();
  for (size_t d = 0; d < g.dims.size() && first == g.dims.size(); ++d)
    for (const auto &st : g.strides)
      if (st[d] != 0) {
        first = d;
        break;
      }
  if (first == g.dims.size())
    return s;
  s += ind + "{\n";
  s += ind + "  " + type + " rem = " + index + ";\n";
  for (size_t d = g.dims.size(); d-- > first;) {
    bool used = false;
    for (const auto &st : g.strides)
      used |= st[d] != 0;
    if (!used) { // a broadcast dimension: skip its coordinate
      s += ind + "  rem /= " + str(g.dims[d]) + ";\n";
      continue;
    }
    std::string coord = "rem";
    if (d != first) {
      s += ind + "  const " + type + " q" + str(d) + " = rem / " +
           str(g.dims[d]) + ";\n";
      s += ind + "  const " + type + " c" + str(d) + " = rem - q" + str(d) +
           " * " + str(g.dims[d]) + ";\n";
      coord = "c" + str(d);
    } else if (d != 0) {
      coord = "(rem % " + str(g.dims[d]) + ")";
    }
    for (size_t o = 0; o < offsets.size(); ++o) {
      int64_t st = g.strides[o][d];
      if (st == 0)
        continue;
      s += ind + "  " + offsets[o] + " += " + coord +
           (st == 1 ? "" : " * " + str(st)) + ";\n";
    }
    if (d != first)
      s += ind + "  rem = q" + str(d) + ";\n";
  }
  s += ind + "}\n";
  return s;
}

//===----------------------------------------------------------------------===//
// Row-wise kernels
//===----------------------------------------------------------------------===//

/// Constants and the opening of a loop that gives each group of RT threads
/// one row (`row`, `active` false past the end; the loop is uniform over the
/// block, so row reductions may synchronize it).
inline std::string rowConsts(int64_t rows, int64_t n, int rt,
                             int block = kBlock) {
  return "constexpr i64 ROWS = " + str(rows) + ";\nconstexpr int N = " +
         str(n) + ";\nconstexpr int RT = " + str(rt) +
         ";  // threads per row\nconstexpr int RPB = " + str(block / rt) +
         ";  // rows per block\n";
}

inline const char *const kRowLoop =
    "  const int lane = threadIdx.x % RT;\n"
    "  for (i64 first = (i64)blockIdx.x * RPB; first < ROWS;\n"
    "       first += (i64)gridDim.x * RPB) {\n"
    "    const i64 row = first + threadIdx.x / RT;\n"
    "    const bool active = row < ROWS;\n";

/// Inside kRowLoop: `xr` at the row and its maximum `m`, reduced through
/// the shared float array `red` (softmax and cross-entropy).
inline std::string rowMax(const std::string &red) {
  return "    const auto *xr = x + row * N;\n"
         "    float m = -GTC_INF;\n"
         "    if (active)\n"
         "      for (int j = lane; j < N; j += RT)\n"
         "        m = fmaxf(m, xr[j]);\n"
         "    m = row_max<RT>(m, " +
         red + ");\n";
}

inline int64_t rowGrid(int64_t rows, int rt, int block = kBlock) {
  return std::min(ceilDiv(rows, block / rt), kMaxRowGrid);
}

inline std::string rowWhat(int64_t rows, int64_t n, int rt) {
  return (rt == 32 ? std::string("one warp") : str(rt) + " threads") +
         " per row (" + str(rows) + " rows of " + str(n) + ")";
}

//===----------------------------------------------------------------------===//
// The emitter
//===----------------------------------------------------------------------===//

/// A kernel parameter: a plan buffer (or the workspace) with its name.
struct Arg {
  int buffer;
  std::string name;
  bool output;
  std::string wsType; ///< For the workspace: the pointee type.
  /// With rows > 0: the kernel takes a TMA tensor map of the buffer
  /// (`const __grid_constant__ gtc_tensor_map`, gemm_wgmma.cuh) instead of
  /// its pointer (CudaLaunch::maps).
  rt::CudaLaunch::TensorMap map = {};
};

/// How an elementwise operand is indexed by the output index i.
enum class Access { Full, Scalar, Trailing, Strided };

struct Operand {
  Operand(int buffer, std::string name, Access access = Access::Full)
      : buffer(buffer), name(std::move(name)), access(access) {}
  int buffer;
  std::string name; ///< The value's name in the expression.
  Access access;
  int64_t period = 0;           ///< Trailing: the operand's element count.
  std::vector<int64_t> strides; ///< Strided: per output dimension.
};

/// The function of one element of an elementwise op: statements that
/// assign `r` from the parameters.
struct ElementFn {
  std::vector<std::string> params;
  std::string expr;
};

class Emitter {
public:
  Emitter(const Plan &plan, CudaProgram &program, std::string &error)
      : plan(plan), program(program), error(error) {}

  bool run();

private:
  bool emitKernel();
  bool fail(const std::string &message);

  const std::vector<int64_t> &shape(int id) const {
    return plan.buffers[id].shape;
  }
  int64_t count(int id) const { return plan.buffers[id].elements(); }
  bool isF32(int id) const { return plan.buffers[id].dtype == DType::F32; }
  bool isFloat(int id) const { return rt::isFloat(plan.buffers[id].dtype); }
  /// The C type a kernel stores the buffer's elements in.
  std::string ctype(int id) const { return ctypeOf(plan.buffers[id].dtype); }
  static std::string ctypeOf(DType dtype) {
    switch (dtype) {
    case DType::F32:
      return "float";
    case DType::I32:
      return "int";
    case DType::BF16:
      return "bf16_t";
    case DType::F16:
      return "f16_t";
    }
    return "?";
  }
  /// The C type it computes in: float for every float type.
  std::string computeType(int id) const {
    return isFloat(id) ? "float" : "int";
  }
  /// Fails unless every float operand of the kernel is f32 (the ops that
  /// gt-autocast keeps in f32 have f32 kernels only).
  bool needF32();
  std::string describe(int id) const;
  Arg in(int id, const std::string &name) const { return {id, name, false, ""}; }
  Arg out(int id, const std::string &name) const { return {id, name, true, ""}; }
  /// The workspace, written (ws) or read (wsIn) as `type`.
  Arg ws(const std::string &type, const std::string &name) const {
    return {CudaLaunch::kWorkspace, name, true, type};
  }
  Arg wsIn(const std::string &type, const std::string &name) const {
    return {CudaLaunch::kWorkspace, name, false, type};
  }
  /// A tensor map of 16-bit buffer `id` as rows x cols, in boxes of
  /// boxRows x 64 (Arg::map).
  Arg tensorMap(int id, const std::string &name, int64_t rows, int64_t cols,
                int boxRows) const {
    return {id, name, false, "", {rows, cols, boxRows, 64}};
  }
  /// The step's device counters (CudaLaunch::kStepCounter), read.
  Arg stepCounter(const std::string &name) const {
    return {CudaLaunch::kStepCounter, name, false, "long long"};
  }
  void needWorkspace(int64_t bytes) {
    workspace = std::max(workspace, alignUp(bytes, 256));
  }

  /// Adds a kernel launch; `consts` are declarations at file scope and `body`
  /// the statements of the entry function (indented by two spaces).
  /// `minBlocks` (0: none), the blocks an SM should hold at once, bounds
  /// the registers a thread may take (__launch_bounds__); `attributes`
  /// follow it in the declaration (a macro of `consts`, such as
  /// __cluster_dims__ where the architecture has clusters).
  void launch(const std::string &suffix, const std::string &what,
              const std::vector<Arg> &args, unsigned helpers,
              const std::string &consts, const std::string &body,
              int64_t grid, int64_t block = kBlock, int minBlocks = 0,
              const std::string &attributes = "");

  // Op families.
  /// One value of an elementwise kernel: `fn` applied to `args` (input or
  /// earlier step names), named `result`, of type `dtype`.
  struct Step {
    ElementFn fn;
    std::vector<std::string> args;
    std::string result;
    DType dtype = DType::F32;
  };
  bool elementwise(const std::vector<Operand> &ops,
                   const std::vector<Step> &steps,
                   const std::vector<std::pair<int, std::string>> &outs,
                   const std::string &what);
  bool elementwise(const std::vector<Operand> &ops, int outBuf,
                   const std::string &expr, const std::string &what);
  bool columnSums(const std::vector<Operand> &ops,
                  const std::vector<Step> &steps,
                  const std::vector<std::pair<int, std::string>> &outs,
                  const std::vector<std::pair<int, std::string>> &sums,
                  const std::vector<int64_t> &ys, const std::string &what);
  /// `chunkRows` > 0: chunks of that many rows (else its own choice).
  bool columnSumTiles(const std::vector<Operand> &ops,
                      const std::vector<Step> &steps,
                      const std::vector<std::pair<int, std::string>> &outs,
                      const std::vector<std::pair<int, std::string>> &sums,
                      const std::vector<int64_t> &ys, const std::string &what,
                      int64_t chunkRows = 0);
  /// The launch that adds the chunks' column sums of the workspace's
  /// part[sum][chunk][column] (doubles from double `partAt` on) in order.
  void columnSumsFinal(const std::vector<std::pair<int, std::string>> &sums,
                       const std::string &dims, int64_t chunks, int64_t cols,
                       int64_t partAt = 0);
  std::string operandArgs(const std::vector<Operand> &ops,
                          const std::vector<std::pair<int, std::string>> &outs,
                          const std::string &it, std::vector<Arg> &args);
  std::string stepFunctions(const std::vector<Operand> &ops,
                            const std::vector<Step> &steps,
                            std::map<std::string, std::string> &typeOf);
  std::string
  computeSteps(const std::vector<Operand> &ops, const std::vector<Step> &steps,
               const std::map<std::string, std::string> &typeOf,
               const std::function<std::string(const Operand &)> &load,
               const std::string &indent);
  std::string gatherStrided(const std::vector<Operand> &ops,
                            const std::vector<int64_t> &ys,
                            const std::string &it, const std::string &indent);
  Operand operand(int buffer, const std::string &name,
                  const std::vector<int64_t> &ys) const;
  bool elementFn(const Kernel &kernel, ElementFn &fn);
  bool fused();
  bool multiTensor();
  bool epilogue();
  bool gemmRegion();
  /// On sm_90, gtc's own GEMM (gemm_wgmma.cuh) as a variant of GEMM `l`
  /// where it is faster than cuBLASLt's: a bf16 linear with a bias and a
  /// GELU saving its input, in whole tiles; with `sums` (a workspace of
  /// doubles, a row of columns a 128-row tile), a bf16 GELU gradient that
  /// also sums each tile's columns. Returns whether it did.
  bool hopperGemm(rt::CudaLaunch &l, bool sums = false);
  /// The last launch, cuBLASLt's DGELU GEMM, with the column sums of its
  /// result to buffer `colSum` (a gemm region's, rt::dgeluSumsFit).
  bool dgeluColumnSums(int colSum);
  bool normRegion();
  bool unary();
  bool binary();
  bool activationGrad();
  /// gt.glu (`grad` false) or gt.glu_grad.
  bool glu(bool grad);
  bool copy();
  bool cast();
  bool broadcast();
  bool transpose();
  bool padOrSlice();
  bool matmul();
  bool linear();
  bool layernorm();
  bool layernormGrad();
  bool softmax(bool grad);
  bool attention();
  bool attentionGrad();
  /// Whether attention over the buffers `ids` (all bf16, all f16, or all
  /// f32 at --precision tf32) with head size `hd` takes the tensor-core
  /// kernels (FlashAttention.cpp).
  bool tensorCoreAttention(int64_t hd, std::initializer_list<int> ids);
  /// An attention kernel's operand buffers and the body's first lines,
  /// which name head 0's column of each: qp, kp, vp, and the gradients'
  /// dqp (Dq) or dkp and dvp (Dkdv).
  enum class AttnGrad { None, Dq, Dkdv };
  struct AttnArgs {
    std::vector<Arg> args;
    std::string pointers;
  };
  AttnArgs attentionOperands(const rt::AttentionLayout &a, AttnGrad grad);
  /// The constants and helpers of the tensor-core kernels.
  std::string flashConsts(const rt::AttentionLayout &a);
  /// The tensor-core kernels' element type (bf16, f16 or f32).
  rt::DType flashType(const rt::AttentionLayout &a);
  bool flashAttention(const rt::AttentionLayout &a);
  /// Makes the last launch a variant of the one before it for devices of
  /// compute capability major.minor, compiled for `arch`
  /// (CudaLaunch::Variant).
  void asVariant(int major, int minor, const std::string &arch);
  /// The gradient's two launches; with `sums` (a buffer, packed heads)
  /// also the column sums of dqkv as stored, by the same kernels and a third
  /// launch that adds their chunks in order (flash_rope.cuh).
  bool flashAttentionGrad(const rt::AttentionLayout &a, int sums = -1);
  /// gt-fuse's "attention_grad" region: flashAttentionGrad storing dq and
  /// dk turned back by the region's ropes and summing the columns of the
  /// packed gradient when the region sums them.
  bool attentionGradRegion();
  bool embedding();
  bool rope();
  /// rope at given positions ([B, T] i32, gt-decode's windows).
  bool ropeAt();
  bool cacheUpdate();
  bool cachedAttention();
  bool dropout();
  bool embeddingGrad();
  bool scatterAddRegion();
  /// Adds row i of `dy` into row ids[i] of `dt` (zeroed first when `zero`).
  bool scatterRows(int dy, int ids, int dt, bool zero);
  bool crossEntropy();
  bool crossEntropyGrad();
  /// The buffers of a cross-entropy kernel: the logits and labels, and the
  /// loss, the loss's gradient (a scalar) and the logits' gradient, each -1
  /// when the kernel has none.
  struct LossBuffers {
    int logits, labels;
    int loss = -1, grad = -1, dlogits = -1;
    /// The accuracy of the same logits and labels (with a loss).
    int accuracy = -1;
  };
  bool crossEntropyKernel(const LossBuffers &b);
  bool lossRegion();
  /// Appends a cuBLASLt GEMM, C = op(A) op(B) with op(A) m x k and op(B)
  /// k x n (CudaLaunch's Gemm), named k<index>_<suffix>; the caller sets
  /// batching, epilogues and offsets on the result.
  CudaLaunch &gemm(const std::string &suffix, int a, int b, int c, bool ta,
                   bool tb, int64_t m, int64_t n, int64_t kk);
  /// Whether gtc's own GEMM for few rows (GemmKernels.cpp) computes the
  /// cuBLASLt GEMM `l`: at most kSmallGemmRows rows or a K of at most
  /// kSmallGemmRows, one matrix, operands of one float type, no epilogue but
  /// a bias, a ReLU and the bias gradient (BGRADB).
  bool smallGemmFits(const CudaLaunch &l) const;
  /// Replaces the GEMM `l`, the last launch, by that kernel; its epilogue
  /// also multiplies by (mask > 0) when `mask` >= 0 (a ReLU gradient) and
  /// writes the column sums of the result, rounded to `sumType`, to
  /// `colSum` when >= 0; l's bias gradient is rounded to `rowSumType`.
  /// Fails when the kernel cannot compute `l`.
  bool smallGemm(const CudaLaunch &l, int mask = -1, int colSum = -1,
                 DType sumType = DType::F32,
                 DType rowSumType = DType::F32);
  /// Replaces the last launch by gtc's own kernel when it is a GEMM that
  /// kernel computes.
  bool preferSmallGemm() {
    return !smallGemmFits(launches.back()) || smallGemm(launches.back());
  }
  bool classifierRegion();
  /// What a small classifier head computes besides its loss, dh (or dh's
  /// ReLU gradient) and dW, and the types its values are rounded to (those
  /// of the region's ops: the logits, the gradient the GEMMs read, dh, dW,
  /// the bias gradient and dh's column sums).
  struct SmallHead {
    /// The head's buffers: its input h, weight w, the labels, the loss's
    /// gradient (a scalar), the loss, dh and dW.
    int h = -1, w = -1, labels = -1, grad = -1, loss = -1, dh = -1, dw = -1;
    int bias = -1, biasGrad = -1, colSum = -1;
    bool reluGrad = false;
    DType logitType = DType::F32, gradType = DType::F32, dhType = DType::F32,
          dwType = DType::F32, biasGradType = DType::F32,
          colSumType = DType::F32;
  };
  /// The classifier region as one kernel (LossKernels.cpp).
  bool smallHead(const SmallHead &head);
  bool accuracy();
  bool columnTiles(int x, int y, int64_t a, int64_t r, int64_t kk, int vec,
                   const std::string &sc, const std::string &what);
  void finalColumns(int y, int64_t outputs, const std::string &consts);
  bool reduce(int inBuf, int outBuf, const std::vector<int64_t> &kept,
              double scale);
  bool reduceAll(int x, int y, int64_t r, double scale,
                 const std::string &what);
  bool reduceColumns(int x, int y, int64_t a, int64_t r, int64_t kk,
                     const std::string &sc, const std::string &what);
  bool sumOrMean(bool mean);
  bool sumTo();

  /// Launches the final pass of a two-stage reduction: one block sums the
  /// `n` values (of `valueType`) in the workspace into s, in a fixed order,
  /// and writes `result` (an expression of s) to y[0].
  void finalSum(const std::string &suffix, int outBuf, int64_t n,
                const std::string &valueType, const std::string &result,
                int64_t first = 0);

  const Plan &plan;
  CudaProgram &program;
  std::string &error;
  int index = 0;
  const Kernel *k = nullptr;
  std::vector<CudaLaunch> launches;
  int64_t workspace = 0;
  /// Emitting the op of an epilogue region: its output has the cast's float
  /// type, which may differ from its operands'.
  bool castOutput = false;
  /// Emitting the layer norm of a norm region: what its row kernel also
  /// does (NormRegion).
  struct NormFusion {
    /// Forward: the norm's input x = residual + addend, computed and stored.
    int residual = -1, addend = -1, sum = -1;
    /// Backward: total = residualGrad + dx, stored in f32 (total) and/or
    /// in the type of its cast (totalCast); without a residual add the cast
    /// is dx's.
    int residualGrad = -1, total = -1, totalCast = -1;
    /// Backward: the column sums of total or of its cast (colSumOfCast), a
    /// linear's bias gradient, stored as biasGrad (the sum or its cast).
    int biasGrad = -1;
    bool colSumOfCast = false;
  };
  const NormFusion *normFusion = nullptr;
};

} // namespace gtc::codegen::detail

#endif // GTC_LIB_CODEGEN_EMITTERIMPL_H
