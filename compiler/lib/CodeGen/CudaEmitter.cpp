//===- CudaEmitter.cpp - CUDA code generation for plans -------------------===//
//
// Every plan kernel becomes GEMMs (matmul, linear) or NVRTC translation units
// whose shapes and attributes are compile-time constants. The functions are
// those of runtime/lib/CpuExecutor.cpp; the comments of each emitter name
// what they mirror. Conventions of the generated code:
//   * 256 threads per block, grid-stride loops, 16-byte vector loads and
//     stores in elementwise kernels when the element count allows (plan
//     buffers start at multiples of 16 elements);
//   * reductions use warp shuffles and fixed-order block reductions; sums that
//     the CPU accumulates in double (normalization statistics, dot products of
//     gradients, sum_to/sum/mean, the cross-entropy) are accumulated in double
//     here too; cross-block reductions are two-stage through the program's
//     workspace, never float atomics, so every result is bitwise reproducible;
//   * precise libm functions (expf, erff, tanhf, logf, sqrtf); the kernels
//     must not be compiled with --use_fast_math.
// Errors that the CPU raises at run time (an embedding index or label outside
// its range) cannot be raised by a kernel: the affected outputs become NaN.
//===----------------------------------------------------------------------===//

#include "gtc/CodeGen/CudaEmitter.h"
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <iostream>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

using namespace gtc;
using namespace gtc::rt;

namespace {

constexpr int kBlock = 256;
/// Cross-entropies of at most this many rows and logits run in one block
/// (no second launch for the mean; fusable with the gradient); larger ones
/// spread the rows over the GPU (a 512 x 50257 one took 55 ms in one block).
constexpr int64_t kOneBlockRows = 1024, kOneBlockLogits = 1 << 16;

/// Grid cap of grid-stride elementwise kernels: 8 blocks per SM of an H100.
constexpr int64_t kMaxGrid = 132 * 8;
/// Grid cap of kernels with one block (or a few threads) per row or tile.
constexpr int64_t kMaxRowGrid = 65535;
/// Static shared memory available without an opt-in.
constexpr int64_t kSharedLimit = 48 * 1024;

std::string str(int64_t v) { return std::to_string(v); }

/// A float literal that reads back as `v` (9 significant digits).
std::string flt(float v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(v));
  std::string s = buf;
  if (s.find_first_of(".en") == std::string::npos)
    s += ".0";
  return s + "f";
}

/// A double literal that reads back as `v`.
std::string dbl(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  std::string s = buf;
  if (s.find_first_of(".en") == std::string::npos)
    s += ".0";
  return s;
}

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t alignUp(int64_t a, int64_t b) { return ceilDiv(a, b) * b; }

std::string shapeStr(const std::vector<int64_t> &s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i)
    r += (i ? "," : "") + str(s[i]);
  return r + "]";
}

int64_t product(const std::vector<int64_t> &s) {
  int64_t n = 1;
  for (int64_t d : s)
    n *= d;
  return n;
}

/// Row-major strides of `shape` aligned to the right of an `rank`-dimensional
/// result, with 0 where the dimension is broadcast (CpuExecutor's
/// broadcastStrides).
std::vector<int64_t> broadcastStrides(const std::vector<int64_t> &shape,
                                      size_t rank) {
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
bool isTrailing(std::vector<int64_t> small, const std::vector<int64_t> &big) {
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
};

const char *kPrelude = R"CU(typedef long long i64;
#define GTC_INF __int_as_float(0x7f800000)
#define GTC_NAN __int_as_float(0x7fffffff)
// 16-bit storage types (no CUDA headers under NVRTC): read as float, assigned
// from float with round-to-nearest-even (PTX cvt.rn; sm_80 and newer).
struct bf16_t {
  unsigned short u;
  __device__ __forceinline__ operator float() const {
    return __uint_as_float((unsigned)u << 16);
  }
  __device__ __forceinline__ bf16_t &operator=(float f) {
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(u) : "f"(f));
    return *this;
  }
};
struct f16_t {
  unsigned short u;
  __device__ __forceinline__ operator float() const {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(u));
    return f;
  }
  __device__ __forceinline__ f16_t &operator=(float f) {
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(u) : "f"(f));
    return *this;
  }
};
struct __align__(8) bf16_t4 { bf16_t x, y, z, w; };
struct __align__(8) f16_t4 { f16_t x, y, z, w; };
)CU";

const char *kWarpSnippet = R"CU(
// Butterfly reductions: every lane gets the same, deterministic result.
struct Add {
  template <typename T> __device__ T operator()(T a, T b) const { return a + b; }
};
struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
template <typename T, typename Op>
__device__ __forceinline__ T warp_reduce(T v, Op op) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) { return warp_reduce(v, Add()); }
__device__ __forceinline__ double warp_sum(double v) { return warp_reduce(v, Add()); }
__device__ __forceinline__ float warp_max(float v) { return warp_reduce(v, Max()); }
)CU";

const char *kRowSnippet = R"CU(
// Reductions over the RT threads that share a row: one warp (RT = 32) or
// RT / 32 consecutive warps. Every thread of the block must call them (they
// synchronize the block when RT > 32); every thread of the row gets the
// result, combined in a fixed order. `sh` holds one value per warp.
template <int RT, typename T, typename Op>
__device__ __forceinline__ T row_reduce(T v, T *sh, Op op) {
  v = warp_reduce(v, op);
  if (RT > 32) {
    __syncthreads();
    if ((threadIdx.x & 31) == 0)
      sh[threadIdx.x >> 5] = v;
    __syncthreads();
    const int first = threadIdx.x / RT * (RT / 32);
    v = sh[first];
    for (int w = 1; w < RT / 32; ++w)
      v = op(v, sh[first + w]);
  }
  return v;
}
template <int RT, typename T>
__device__ __forceinline__ T row_sum(T v, T *sh) { return row_reduce<RT>(v, sh, Add()); }
template <int RT>
__device__ __forceinline__ float row_max(float v, float *sh) {
  return row_reduce<RT>(v, sh, Max());
}
)CU";

const char *kArgmaxSnippet = R"CU(
// The largest value of a row and its first index (ties: the smaller index
// wins, as std::max_element). Same calling rules as row_sum.
__device__ __forceinline__ void argmax_combine(float &v, int &i, float ov,
                                               int oi) {
  if (ov > v || (ov == v && oi < i)) {
    v = ov;
    i = oi;
  }
}
template <int RT>
__device__ __forceinline__ void row_argmax(float &v, int &i, float *shv,
                                           int *shi) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    argmax_combine(v, i, __shfl_xor_sync(0xffffffffu, v, o),
                   __shfl_xor_sync(0xffffffffu, i, o));
  if (RT > 32) {
    __syncthreads();
    if ((threadIdx.x & 31) == 0) {
      shv[threadIdx.x >> 5] = v;
      shi[threadIdx.x >> 5] = i;
    }
    __syncthreads();
    const int first = threadIdx.x / RT * (RT / 32);
    v = shv[first];
    i = shi[first];
    for (int w = 1; w < RT / 32; ++w)
      argmax_combine(v, i, shv[first + w], shi[first + w]);
  }
}
)CU";

/// Threads per row for a row-wise kernel over rows of `n`: a warp for short
/// rows, up to the whole block for long ones (at most 8 elements a thread
/// below 2048).
int threadsPerRow(int64_t n) {
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

Gather makeGather(const std::vector<int64_t> &out,
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
std::string emitGather(const Gather &g, const std::string &index,
                       const std::vector<std::string> &offsets,
                       const std::string &type, const std::string &ind) {
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
// The emitter
//===----------------------------------------------------------------------===//

/// A kernel parameter: a plan buffer (or the workspace) with its name.
struct Arg {
  int buffer;
  std::string name;
  bool output;
  std::string wsType; ///< For the workspace: the pointee type.
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
  void planReluFusion();
  void planCrossEntropyFusion();

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
  std::string ctype(int id) const {
    switch (plan.buffers[id].dtype) {
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
  void needWorkspace(int64_t bytes) {
    workspace = std::max(workspace, alignUp(bytes, 256));
  }

  /// Adds a kernel launch; `consts` are declarations at file scope and `body`
  /// the statements of the entry function (indented by two spaces).
  void launch(const std::string &suffix, const std::string &what,
              const std::vector<Arg> &args, unsigned helpers,
              const std::string &consts, const std::string &body,
              int64_t grid, int64_t block = kBlock);

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
  Operand operand(int buffer, const std::string &name,
                  const std::vector<int64_t> &ys) const;
  bool elementFn(const Kernel &kernel, ElementFn &fn);
  bool fused();
  bool multiTensor();
  bool epilogue();
  bool unary();
  bool binary();
  bool activationGrad();
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
  bool embedding();
  bool embeddingGrad();
  bool crossEntropy();
  bool crossEntropyGrad();
  bool accuracy();
  bool reduce(int inBuf, int outBuf, const std::vector<int64_t> &kept,
              double scale);
  bool sumOrMean(bool mean);
  bool sumTo();

  /// Launches the final pass of a two-stage reduction: one block sums the
  /// `n` values (of `valueType`) in the workspace into s, in a fixed order,
  /// and writes `result` (an expression of s) to y[0].
  void finalSum(const std::string &suffix, int outBuf, int64_t n,
                const std::string &valueType, const std::string &result);

  const Plan &plan;
  CudaProgram &program;
  std::string &error;
  int index = 0;
  /// ReLU epilogue fusion (planReluFusion): linear kernel -> relu output
  /// buffer, relu kernels that emit nothing, linear output -> relu output.
  std::map<int, int> fusedRelu, reluOutputOf;
  /// cross_entropy kernel -> its fused cross_entropy_grad kernel.
  std::map<int, int> fusedCrossEntropy;
  /// Plan kernels whose work an earlier launch does.
  std::set<int> elided;
  const Kernel *k = nullptr;
  std::vector<CudaLaunch> launches;
  int64_t workspace = 0;
  /// Emitting the op of an epilogue region: its output has the cast's float
  /// type, which may differ from its operands'.
  bool castOutput = false;
};

bool Emitter::fail(const std::string &message) {
  error = "CUDA code generation: kernel " + str(index) + " (" + opName(k->op) +
          "): " + message;
  return false;
}

bool Emitter::needF32() {
  for (const std::vector<int> *ids : {&k->inputs, &k->outputs})
    for (int id : *ids) {
      if (castOutput && ids == &k->outputs)
        continue; // a folded cast's type
      if (isFloat(id) && !isF32(id))
        return fail("its GPU kernel computes f32 only, got " + describe(id) +
                    "; gt-autocast keeps this op in f32 (cast the operand "
                    "to f32 in the model)");
    }
  return true;
}

std::string Emitter::describe(int id) const {
  const Buffer &b = plan.buffers[id];
  return "#" + str(id) + " \"" + b.name + "\" " +
         dtypeName(b.dtype) + shapeStr(b.shape);
}

void Emitter::launch(const std::string &suffix, const std::string &what,
                     const std::vector<Arg> &args, unsigned helpers,
                     const std::string &consts, const std::string &body,
                     int64_t grid, int64_t block) {
  CudaLaunch l;
  l.kind = CudaLaunch::Kind::Kernel;
  l.name = "k" + str(index) + "_" + opName(k->op) +
           (suffix.empty() ? "" : "_" + suffix);
  l.grid = std::max<int64_t>(1, grid);
  l.block = block;

  std::string attrs;
  for (const auto &[key, a] : k->attrs) {
    attrs += attrs.empty() ? " {" : ", ";
    attrs += key + " = ";
    switch (a.kind) {
    case Attr::Kind::Int:
      attrs += str(a.i);
      break;
    case Attr::Kind::Float:
      attrs += dbl(a.f);
      break;
    case Attr::Kind::Str:
      attrs += "\"" + a.s + "\"";
      break;
    case Attr::Kind::Ints:
      attrs += shapeStr(a.ints);
      break;
    }
  }
  if (!attrs.empty())
    attrs += "}";
  std::string src = "// gtc plan kernel " + str(index) + ": " + opName(k->op) + attrs +
                    "\n";
  for (int id : k->inputs)
    src += "//   in  " + describe(id) + "\n";
  for (int id : k->outputs)
    src += "//   out " + describe(id) + "\n";
  src += "// " + l.name + ": " + what + "\n";
  src += kPrelude;
  if (helpers & (kWarpHelpers | kRowHelpers | kArgmaxHelpers))
    src += kWarpSnippet;
  if (helpers & kRowHelpers)
    src += kRowSnippet;
  if (helpers & kArgmaxHelpers)
    src += kArgmaxSnippet;
  src += "\n" + consts;
  src += "\nextern \"C\" __global__ void __launch_bounds__(" + str(block) +
         ")\n" + l.name + "(";
  for (size_t i = 0; i < args.size(); ++i) {
    const Arg &a = args[i];
    std::string type = a.buffer == CudaLaunch::kWorkspace ? a.wsType
                                                          : ctype(a.buffer);
    src += i ? ",\n    " : "";
    src += (a.output ? type + " *" : "const " + type + " *") + "__restrict__ " +
           a.name;
    l.buffers.push_back(a.buffer);
  }
  src += ") {\n" + body + "}\n";
  l.source = std::move(src);
  launches.push_back(std::move(l));
}

/// Finds `linear` kernels whose output is read only by one `relu` and by
/// relu gradients: the GEMM then applies the ReLU in its epilogue and writes
/// the relu's output, and the gradients read that output instead (x > 0
/// exactly when relu(x) > 0). Skipped when the relu's output shares memory
/// with an operand of the GEMM in the memory plan.
void Emitter::planReluFusion() {
  std::map<int, std::vector<int>> readers;
  for (size_t i = 0; i < plan.kernels.size(); ++i)
    for (int id : plan.kernels[i].inputs)
      readers[id].push_back(static_cast<int>(i));
  auto overlap = [&](int a, int b) {
    return plan.buffers[a].overlaps(plan.buffers[b]);
  };
  for (size_t i = 0; i < plan.kernels.size(); ++i) {
    const Kernel &lin = plan.kernels[i];
    if (lin.op != OpKind::Linear || lin.outputs.size() != 1)
      continue;
    int y = lin.outputs[0];
    int relu = -1;
    bool ok = true;
    for (int r : readers[y]) {
      const Kernel &rk = plan.kernels[r];
      if (rk.op == OpKind::Relu && relu < 0 && r > static_cast<int>(i))
        relu = r;
      else if (!(rk.op == OpKind::ActivationGrad &&
                 rk.strAttr("kind", "") == "relu" && rk.inputs[1] == y &&
                 rk.inputs[0] != y))
        ok = false;
    }
    if (!ok || relu < 0)
      continue;
    int out = plan.kernels[relu].outputs[0];
    for (int in : lin.inputs)
      ok = ok && !overlap(in, out);
    // Nothing between the GEMM and the relu may use the relu's memory, and
    // nothing up to the last relu gradient (which reads it in place of y)
    // may overwrite it: the memory plan kept y alive that long, not it.
    for (int j = static_cast<int>(i) + 1; ok && j < relu; ++j)
      for (const std::vector<int> *ids :
           {&plan.kernels[j].inputs, &plan.kernels[j].outputs})
        for (int id : *ids)
          ok = ok && !overlap(id, out);
    int lastRead = readers[y].back();
    for (int j = relu + 1; ok && j <= lastRead; ++j)
      for (int id : plan.kernels[j].outputs)
        ok = ok && !overlap(id, out);
    if (!ok)
      continue;
    fusedRelu[static_cast<int>(i)] = out;
    elided.insert(relu);
    reluOutputOf[y] = out;
  }
}

/// Finds a cross_entropy and the cross_entropy_grad of the same logits and
/// labels (small batches): one kernel then computes the loss and the
/// gradient together, at the cross_entropy, when the gradient's memory is
/// free there and its scale (the loss's gradient) is already available.
void Emitter::planCrossEntropyFusion() {
  auto overlap = [&](int a, int b) {
    return plan.buffers[a].overlaps(plan.buffers[b]);
  };
  for (size_t i = 0; i < plan.kernels.size(); ++i) {
    const Kernel &ce = plan.kernels[i];
    if (ce.op != OpKind::CrossEntropy || ce.inputs.size() != 2)
      continue;
    int x = ce.inputs[0];
    int64_t c = shape(x).empty() ? 1 : shape(x).back();
    if (count(x) / c > kOneBlockRows || count(x) > kOneBlockLogits)
      continue;
    for (size_t j = i + 1; j < plan.kernels.size(); ++j) {
      const Kernel &g = plan.kernels[j];
      if (g.op != OpKind::CrossEntropyGrad || g.inputs.size() != 3 ||
          g.inputs[1] != x || g.inputs[2] != ce.inputs[1])
        continue;
      int scale = g.inputs[0], dx = g.outputs[0];
      bool ok = plan.buffers[scale].region == Region::Const;
      for (size_t q = i; ok && q < j; ++q)
        for (const std::vector<int> *ids :
             {&plan.kernels[q].inputs, &plan.kernels[q].outputs})
          for (int id : *ids)
            ok = ok && !overlap(id, dx);
      if (ok) {
        fusedCrossEntropy[static_cast<int>(i)] = static_cast<int>(j);
        elided.insert(static_cast<int>(j));
      }
      break;
    }
  }
}

bool Emitter::run() {
  program.kernels.clear();
  program.workspaceBytes = 0;
  planReluFusion();
  planCrossEntropyFusion();
  for (size_t i = 0; i < plan.kernels.size(); ++i) {
    index = static_cast<int>(i);
    k = &plan.kernels[i];
    launches.clear();
    workspace = 0;
    for (const std::vector<int> *ids : {&k->inputs, &k->outputs})
      for (int id : *ids)
        if (id < 0 || id >= static_cast<int>(plan.buffers.size()))
          return fail("names buffer " + str(id) + ", which does not exist");
    if (!elided.count(index) && !emitKernel())
      return false;
    program.kernels.push_back(std::move(launches));
    program.workspaceBytes = std::max(program.workspaceBytes, workspace);
  }
  return true;
}

bool Emitter::emitKernel() {
  auto arity = [&](size_t ins, size_t outs) {
    return k->inputs.size() == ins && k->outputs.size() == outs;
  };
  auto wrong = [&] {
    return fail("unexpected operands: " + str(k->inputs.size()) + " in, " +
                str(k->outputs.size()) + " out");
  };
  // A switch without default: the compiler names a kind of Ops.def left out.
  switch (k->op) {
  case OpKind::Fused:
    return fused();
  case OpKind::Relu:
  case OpKind::Neg:
  case OpKind::Tanh:
  case OpKind::Exp:
  case OpKind::Log:
  case OpKind::Sqrt:
  case OpKind::Sigmoid:
  case OpKind::Gelu:
    if (!arity(1, 1) || !isFloat(k->inputs[0]))
      return wrong();
    return unary();
  case OpKind::Add:
  case OpKind::Sub:
  case OpKind::Mul:
  case OpKind::Div:
    return arity(2, 1) ? binary() : wrong();
  case OpKind::ActivationGrad:
    return arity(2, 1) ? activationGrad() : wrong();
  case OpKind::Copy:
  case OpKind::Reshape:
    return arity(1, 1) ? copy() : wrong();
  case OpKind::Cast:
    return arity(1, 1) ? cast() : wrong();
  case OpKind::Broadcast:
    return arity(1, 1) ? broadcast() : wrong();
  case OpKind::Transpose:
    return arity(1, 1) ? transpose() : wrong();
  case OpKind::Pad:
  case OpKind::Slice:
    return arity(1, 1) ? padOrSlice() : wrong();
  case OpKind::Matmul:
    return arity(2, 1) ? matmul() : wrong();
  case OpKind::Linear:
    return (arity(2, 1) || arity(3, 1)) ? linear() : wrong();
  case OpKind::Sum:
  case OpKind::Mean:
    return arity(1, 1) ? sumOrMean(k->op == OpKind::Mean) : wrong();
  case OpKind::SumTo:
    return arity(1, 1) ? sumTo() : wrong();
  case OpKind::Attention:
    return arity(1, 1) ? attention() : wrong();
  case OpKind::AttentionGrad:
    return arity(2, 1) ? attentionGrad() : wrong();
  // gt-autocast keeps these in f32: their kernels compute f32 only.
  case OpKind::LayerNorm:
    return !needF32() ? false : arity(3, 1) ? layernorm() : wrong();
  case OpKind::LayerNormGrad:
    return !needF32() ? false : arity(3, 3) ? layernormGrad() : wrong();
  case OpKind::Softmax:
    return !needF32() ? false : arity(1, 1) ? softmax(false) : wrong();
  case OpKind::SoftmaxGrad:
    return !needF32() ? false : arity(2, 1) ? softmax(true) : wrong();
  case OpKind::Embedding:
    return !needF32() ? false : arity(2, 1) ? embedding() : wrong();
  case OpKind::EmbeddingGrad:
    return !needF32() ? false : arity(2, 1) ? embeddingGrad() : wrong();
  case OpKind::CrossEntropy:
    return !needF32() ? false : arity(2, 1) ? crossEntropy() : wrong();
  case OpKind::CrossEntropyGrad:
    return !needF32() ? false : arity(3, 1) ? crossEntropyGrad() : wrong();
  case OpKind::Accuracy:
    return !needF32() ? false : arity(2, 1) ? accuracy() : wrong();
  }
  return fail("the CUDA code generator has no kernel for this op");
}

//===----------------------------------------------------------------------===//
// Elementwise kernels
//===----------------------------------------------------------------------===//

/// One thread per output element (per 4 with vector accesses), grid-stride:
/// loads the inputs (broadcast by their access), computes the steps in
/// order in registers, stores the outputs. A step's value is rounded to
/// its 16-bit type when it has one, as the CPU executor stores it.
bool Emitter::elementwise(const std::vector<Operand> &ops,
                          const std::vector<Step> &steps,
                          const std::vector<std::pair<int, std::string>> &outs,
                          const std::string &what) {
  int64_t n = count(outs.front().first);
  bool vec = n % 4 == 0;
  bool strided = false;
  for (const Operand &o : ops) {
    if (o.access == Access::Strided)
      strided = true;
    if (o.access == Access::Strided ||
        (o.access == Access::Trailing && o.period % 4 != 0))
      vec = false;
  }
  int64_t items = vec ? n / 4 : n;
  bool wide = n > (int64_t(1) << 30);
  std::string it = wide ? "i64" : "int";
  int64_t grid = std::min(ceilDiv(items, kBlock), kMaxGrid);

  std::string consts = "constexpr " + it + " N = " + str(n) + ";\n";
  std::vector<Arg> args;
  std::map<std::string, std::string> typeOf; // value name -> compute type
  for (const Operand &o : ops) {
    args.push_back(in(o.buffer, "p_" + o.name));
    typeOf[o.name] = computeType(o.buffer);
    if (o.access == Access::Trailing)
      consts += "constexpr " + it + " P_" + o.name + " = " + str(o.period) +
                ";  // period of " + o.name + "\n";
  }
  for (const auto &[buffer, value] : outs)
    args.push_back(out(buffer, "p_" + value));

  // The function of one element, per step; rounding to 16-bit types.
  bool roundBf16 = false, roundF16 = false;
  for (size_t j = 0; j < steps.size(); ++j) {
    const Step &st = steps[j];
    std::string rt = rt::isFloat(st.dtype) ? "float" : "int";
    typeOf[st.result] = rt;
    consts += "\n__device__ __forceinline__ " + rt + " f" + str(j) + "(";
    for (size_t a = 0; a < st.fn.params.size(); ++a)
      consts += (a ? ", " : "") +
                ("const " + typeOf.at(st.args[a]) + " " + st.fn.params[a]);
    consts += ") {\n  " + rt + " r;\n  " + st.fn.expr + "\n  return r;\n}\n";
    roundBf16 = roundBf16 || st.dtype == DType::BF16;
    roundF16 = roundF16 || st.dtype == DType::F16;
  }
  if (roundBf16)
    consts += "__device__ __forceinline__ float round_bf16(float f) {\n"
              "  bf16_t t;\n  t = f;\n  return t;\n}\n";
  if (roundF16)
    consts += "__device__ __forceinline__ float round_f16(float f) {\n"
              "  f16_t t;\n  t = f;\n  return t;\n}\n";
  // The steps, given how each input is read: `load(name)`.
  auto compute = [&](const std::function<std::string(const Operand &)> &load,
                     const std::string &indent) {
    std::string c;
    for (const Operand &o : ops)
      c += indent + "const " + typeOf[o.name] + " " + o.name + " = " +
           load(o) + ";\n";
    for (size_t j = 0; j < steps.size(); ++j) {
      const Step &st = steps[j];
      std::string call = "f" + str(j) + "(";
      for (size_t a = 0; a < st.args.size(); ++a)
        call += (a ? ", " : "") + st.args[a];
      call += ")";
      if (st.dtype == DType::BF16)
        call = "round_bf16(" + call + ")";
      else if (st.dtype == DType::F16)
        call = "round_f16(" + call + ")";
      c += indent + "const " + typeOf[st.result] + " " + st.result + " = " +
           call + ";\n";
    }
    return c;
  };

  std::string body;
  std::string loopHead = "  for (" + it + " i = (" + it +
                         ")blockIdx.x * blockDim.x + threadIdx.x; i < " +
                         (vec ? "N / 4" : "N") + "; i += (" + it +
                         ")gridDim.x * blockDim.x) {\n";
  if (vec) {
    for (const Operand &o : ops) {
      std::string t = ctype(o.buffer);
      if (o.access == Access::Scalar)
        body += "  const " + t + " s_" + o.name + " = p_" + o.name + "[0];\n";
      else
        body += "  const " + t + "4 *v_" + o.name + " = reinterpret_cast<const " +
                t + "4 *>(p_" + o.name + ");\n";
    }
    for (const auto &[buffer, value] : outs) {
      const std::string st = ctype(buffer);
      body += "  " + st + "4 *w_" + value + " = reinterpret_cast<" + st +
              "4 *>(p_" + value + ");\n";
    }
    body += loopHead;
    for (const Operand &o : ops) {
      std::string t = ctype(o.buffer);
      if (o.access == Access::Full)
        body += "    const " + t + "4 q_" + o.name + " = v_" + o.name + "[i];\n";
      else if (o.access == Access::Trailing)
        body += "    const " + t + "4 q_" + o.name + " = v_" + o.name +
                "[i % (P_" + o.name + " / 4)];\n";
    }
    for (const auto &[buffer, value] : outs)
      body += "    " + ctype(buffer) + "4 o_" + value + ";\n";
    for (const char *c : {"x", "y", "z", "w"}) {
      body += "    {\n";
      body += compute(
          [&](const Operand &o) {
            return o.access == Access::Scalar ? "s_" + o.name
                                              : "q_" + o.name + "." + c;
          },
          "      ");
      for (const auto &[buffer, value] : outs)
        body += "      o_" + value + "." + c + " = " + value + ";\n";
      body += "    }\n";
    }
    for (const auto &[buffer, value] : outs)
      body += "    w_" + value + "[i] = o_" + value + ";\n";
    body += "  }\n";
  } else {
    Gather g;
    std::vector<std::string> offs;
    if (strided) {
      std::vector<std::vector<int64_t>> strides;
      for (const Operand &o : ops)
        if (o.access == Access::Strided) {
          strides.push_back(o.strides);
          offs.push_back("o_" + o.name);
        }
      g = makeGather(shape(outs.front().first), strides);
    }
    body += loopHead;
    if (strided)
      body += emitGather(g, "i", offs, it, "    ");
    body += compute(
        [&](const Operand &o) {
          std::string idx = o.access == Access::Full       ? "i"
                            : o.access == Access::Scalar   ? "0"
                            : o.access == Access::Trailing ? "i % P_" + o.name
                                                           : "o_" + o.name;
          return "p_" + o.name + "[" + idx + "]";
        },
        "    ");
    for (const auto &[buffer, value] : outs)
      body += "    p_" + value + "[i] = " + value + ";\n";
    body += "  }\n";
  }
  launch("", what + (vec ? ", 4 elements a thread (16-byte accesses)" : ""),
         args, 0, consts, body, grid);
  return true;
}

bool Emitter::elementwise(const std::vector<Operand> &ops, int outBuf,
                          const std::string &expr, const std::string &what) {
  Step step;
  for (const Operand &o : ops) {
    step.fn.params.push_back(o.name);
    step.args.push_back(o.name);
  }
  step.fn.expr = expr;
  step.result = "r";
  // The single op's result is stored as its buffer's type: no extra rounding.
  step.dtype = isFloat(outBuf) ? DType::F32 : DType::I32;
  return elementwise(ops, {step}, {{outBuf, "r"}}, what);
}

/// Classifies how an operand of an elementwise kernel is read against an
/// output of shape `ys`.
Operand Emitter::operand(int buffer, const std::string &name,
                         const std::vector<int64_t> &ys) const {
  Operand o{buffer, name};
  int64_t n = product(ys), no = count(buffer);
  if (no == n)
    o.access = Access::Full;
  else if (no == 1)
    o.access = Access::Scalar;
  else if (isTrailing(shape(buffer), ys)) {
    o.access = Access::Trailing;
    o.period = no;
  } else {
    o.access = Access::Strided;
    o.strides = broadcastStrides(shape(buffer), ys.size());
  }
  return o;
}

/// The function of one element of an elementwise op, as CpuExecutor's
/// lambdas: statements assigning `r` from the named operands.
bool Emitter::elementFn(const Kernel &kernel, ElementFn &fn) {
  const OpKind op = kernel.op;
  static const std::map<OpKind, std::string> unaries = {
      {OpKind::Relu, "r = x > 0.f ? x : 0.f;"},
      {OpKind::Neg, "r = -x;"},
      {OpKind::Tanh, "r = tanhf(x);"},
      {OpKind::Exp, "r = expf(x);"},
      {OpKind::Log, "r = logf(x);"},
      {OpKind::Sqrt, "r = sqrtf(x);"},
      {OpKind::Sigmoid, "r = 1.f / (1.f + expf(-x));"},
      {OpKind::Copy, "r = x;"},
      {OpKind::Reshape, "r = x;"},
      {OpKind::Broadcast, "r = x;"},
  };
  static const std::map<OpKind, std::string> binaries = {
      {OpKind::Add, "r = a + b;"},
      {OpKind::Sub, "r = a - b;"},
      {OpKind::Mul, "r = a * b;"},
      {OpKind::Div, "r = a / b;"},
  };
  if (auto it = unaries.find(op); it != unaries.end()) {
    fn = {{"x"}, it->second};
  } else if (auto it = binaries.find(op); it != binaries.end()) {
    fn = {{"a", "b"}, it->second};
  } else if (op == OpKind::Gelu) {
    fn.params = {"x"};
    fn.expr = kernel.intAttr("approximate", 0)
                  ? "r = 0.5f * x * (1.f + tanhf(" +
                        flt(0.7978845608028654f) + " * (x + " +
                        flt(0.044715f) + " * x * x * x)));"
                  : "r = 0.5f * x * (1.f + erff(x * " +
                        flt(0.7071067811865476f) + "));";
  } else if (op == OpKind::Cast) {
    if (kernel.outputs.size() != 1)
      return fail("a cast has one output");
    fn = {{"x"}, "r = static_cast<" + computeType(kernel.outputs[0]) + ">(x);"};
  } else if (op == OpKind::ActivationGrad) {
    std::string kind = kernel.strAttr("kind", ""), d;
    if (kind == "relu")
      d = "const float d = x > 0.f ? 1.f : 0.f;";
    else if (kind == "tanh")
      d = "const float t = tanhf(x);\n  const float d = 1.f - t * t;";
    else if (kind == "sigmoid")
      d = "const float s = 1.f / (1.f + expf(-x));\n"
          "  const float d = s * (1.f - s);";
    else if (kind == "exp")
      d = "const float d = expf(x);";
    else if (kind == "log")
      d = "const float d = 1.f / x;";
    else if (kind == "sqrt")
      d = "const float d = 0.5f / sqrtf(x);";
    else if (kind == "gelu")
      d = "const float cdf = 0.5f * (1.f + erff(x * " +
          flt(0.7071067811865476f) + "));\n  const float pdf = expf(-0.5f * x * x) * " +
          flt(0.3989422804014327f) + ";\n  const float d = cdf + x * pdf;";
    else if (kind == "gelu_tanh")
      d = "const float c = " + flt(0.7978845608028654f) +
          ";\n  const float u = c * (x + " + flt(0.044715f) +
          " * x * x * x);\n  const float t = tanhf(u);\n"
          "  const float du = c * (1.f + " +
          flt(static_cast<float>(3 * 0.044715)) +
          " * x * x);\n  const float d = 0.5f * (1.f + t) + 0.5f * x * "
          "(1.f - t * t) * du;";
    else
      return fail("unknown activation kind '" + kind + "'");
    fn = {{"dy", "x"}, d + "\n  r = dy * d;"};
  } else {
    return fail(std::string("'") + opName(op) + "' is not elementwise: it cannot be in a fused "
                "elementwise kernel");
  }
  return true;
}

/// A multi-tensor region: one grid-stride loop per op, each over its own
/// elements, in one launch.
bool Emitter::multiTensor() {
  std::map<int, std::string> name;
  std::vector<Arg> args;
  for (size_t i = 0; i < k->inputs.size(); ++i)
    if (name.emplace(k->inputs[i], "x" + str(i)).second)
      args.push_back(in(k->inputs[i], "x" + str(i)));
  std::set<int> outputs(k->outputs.begin(), k->outputs.end());
  std::string consts, body;
  int64_t total = 0;
  for (size_t j = 0; j < k->body.size(); ++j) {
    const Kernel &sub = k->body[j];
    if (sub.outputs.size() != 1 || !outputs.count(sub.outputs[0]))
      continue; // a value nothing reads
    int y = sub.outputs[0];
    ElementFn fn;
    if (!elementFn(sub, fn))
      return false;
    if (fn.params.size() != sub.inputs.size())
      return fail(std::string("fused op '") + opName(sub.op) + "' has " + str(sub.inputs.size()) +
                  " operands");
    std::string call = "f" + str(j) + "(";
    consts += "\n__device__ __forceinline__ " + computeType(y) + " f" +
              str(j) + "(";
    for (size_t a = 0; a < sub.inputs.size(); ++a) {
      auto it = name.find(sub.inputs[a]);
      if (it == name.end() || count(sub.inputs[a]) != count(y))
        return fail("a multi-tensor op must read region inputs of its size");
      consts += (a ? ", " : "") + ("const " + computeType(sub.inputs[a]) +
                                   " " + fn.params[a]);
      call += (a ? ", " : "") + it->second + "[i]";
    }
    consts += ") {\n  " + computeType(y) + " r;\n  " + fn.expr +
              "\n  return r;\n}\n";
    std::string out = "y" + str(j);
    args.push_back(this->out(y, out));
    body += "  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < " +
            str(count(y)) + "; i += (i64)gridDim.x * blockDim.x)\n    " +
            out + "[i] = " + call + ");\n";
    total += count(y);
  }
  launch("", "multi-tensor " + str(k->body.size()) + " ops over " +
                 str(total) + " elements",
         args, 0, consts, body, std::min(ceilDiv(total, kBlock), kMaxGrid));
  return true;
}

/// An epilogue region: the op's kernel (or GEMM) stores the cast's type.
/// GEMMs and reductions compute in f32, so the GPU stores their f32 value
/// rounded once to the cast's type; a widening cast (bf16 -> f32) then skips
/// the 16-bit rounding that the op's own result type implies and the CPU
/// executor applies (more accurate; gpu-check's 16-bit tolerances cover it).
bool Emitter::epilogue() {
  if (k->body.size() != 2 || k->body[1].op != OpKind::Cast ||
      k->body[0].outputs.size() != 1 || k->outputs.size() != 1 ||
      k->body[1].inputs != k->body[0].outputs ||
      k->body[1].outputs != k->outputs)
    return fail("an epilogue region is an op and the cast of its result");
  OpKind folded = k->body[0].op;
  if (folded != OpKind::Matmul && folded != OpKind::SumTo &&
      folded != OpKind::LayerNorm)
    return fail(std::string("'") + opName(folded) +
                "' cannot store another type");
  Kernel op = k->body[0];
  op.outputs = k->outputs;
  const Kernel *region = k;
  k = &op;
  castOutput = true;
  bool ok = emitKernel();
  castOutput = false;
  k = region;
  return ok;
}

/// A fusion region: one elementwise kernel over the shape of its outputs.
bool Emitter::fused() {
  if (k->strAttr("kind", "") == "multi_tensor")
    return multiTensor();
  if (k->strAttr("kind", "") == "epilogue")
    return epilogue();
  if (k->strAttr("kind", "") != "elementwise")
    return fail("unknown fusion kind '" + k->strAttr("kind", "") + "'");
  if (k->outputs.empty() || k->body.empty())
    return fail("a fusion region needs ops and outputs");
  const std::vector<int64_t> &ys = shape(k->outputs[0]);
  for (int o : k->outputs)
    if (shape(o) != ys)
      return fail("the outputs of a fused elementwise kernel differ in "
                  "shape");
  std::map<int, std::string> name; // buffer -> value name
  std::vector<Operand> ops;
  for (size_t i = 0; i < k->inputs.size(); ++i) {
    int id = k->inputs[i];
    if (name.count(id))
      continue;
    name[id] = "x" + str(i);
    ops.push_back(operand(id, name[id], ys));
  }
  std::vector<Step> steps;
  std::string what;
  for (size_t j = 0; j < k->body.size(); ++j) {
    const Kernel &sub = k->body[j];
    if (sub.outputs.size() != 1)
      return fail(std::string("fused op '") + opName(sub.op) + "' has " +
                  str(sub.outputs.size()) + " outputs");
    Step st;
    if (!elementFn(sub, st.fn))
      return false;
    if (st.fn.params.size() != sub.inputs.size())
      return fail(std::string("fused op '") + opName(sub.op) + "' has " + str(sub.inputs.size()) +
                  " operands");
    for (int id : sub.inputs) {
      auto it = name.find(id);
      if (it == name.end())
        return fail(std::string("fused op '") + opName(sub.op) + "' reads " + describe(id) +
                    ", which the region neither receives nor computes");
      st.args.push_back(it->second);
    }
    int y = sub.outputs[0];
    if (shape(y) != ys)
      return fail(std::string("fused op '") + opName(sub.op) + "' computes " + describe(y) +
                  ", not the region's shape");
    st.result = "v" + str(j);
    st.dtype = plan.buffers[y].dtype;
    name[y] = st.result;
    steps.push_back(std::move(st));
    what += (what.empty() ? "" : " -> ") + std::string(opName(sub.op));
  }
  std::vector<std::pair<int, std::string>> outs;
  for (int o : k->outputs) {
    auto it = name.find(o);
    if (it == name.end() || it->second[0] != 'v')
      return fail("no op of the region computes its output " + describe(o));
    outs.push_back({o, it->second});
  }
  return elementwise(ops, steps, outs,
                     "fused " + what + " over " + str(product(ys)) +
                         " elements");
}

bool Emitter::unary() {
  ElementFn fn;
  if (!elementFn(*k, fn))
    return false;
  return elementwise({{k->inputs[0], "x"}}, k->outputs[0], fn.expr,
                     "elementwise over " + str(count(k->outputs[0])) +
                         " elements");
}

/// CpuExecutor's binary(): same shapes, a scalar operand, a trailing
/// (bias-like) operand, or general NumPy broadcasting.
bool Emitter::binary() {
  int a = k->inputs[0], b = k->inputs[1], y = k->outputs[0];
  if (plan.buffers[a].dtype != plan.buffers[b].dtype ||
      plan.buffers[a].dtype != plan.buffers[y].dtype)
    return fail("operands of different element types");
  ElementFn fn;
  if (!elementFn(*k, fn))
    return false;
  return elementwise({operand(a, "a", shape(y)), operand(b, "b", shape(y))},
                     y, fn.expr,
                     std::string("elementwise ") + opName(k->op) + " over " + str(count(y)) +
                         " elements");
}

/// CpuExecutor's activationGrad(): dx = dy * f'(x).
bool Emitter::activationGrad() {
  ElementFn fn;
  if (!elementFn(*k, fn))
    return false;
  if (count(k->inputs[0]) != count(k->outputs[0]) ||
      count(k->inputs[1]) != count(k->outputs[0]))
    return fail("operands of different sizes");
  std::string kind = k->strAttr("kind", "");
  int x = k->inputs[1];
  if (auto it = reluOutputOf.find(x); kind == "relu" && it != reluOutputOf.end())
    x = it->second; // the fused GEMM wrote relu(x), not x
  return elementwise({{k->inputs[0], "dy"}, {x, "x"}}, k->outputs[0], fn.expr,
                     "dy * " + kind + "'(x) over " +
                         str(count(k->outputs[0])) + " elements");
}

/// copy and reshape: the output's elements, in order.
bool Emitter::copy() {
  int x = k->inputs[0], y = k->outputs[0];
  if (plan.buffers[x].dtype != plan.buffers[y].dtype)
    return fail("copy between element types");
  if (count(x) < count(y))
    return fail("the input has fewer elements than the output");
  return elementwise({{x, "x"}}, y, "r = x;",
                     "copy of " + str(count(y)) + " elements");
}

/// f32 <-> i32 (truncation toward zero), or a copy.
bool Emitter::cast() {
  int x = k->inputs[0], y = k->outputs[0];
  if (count(x) != count(y))
    return fail("cast between different sizes");
  if (plan.buffers[x].dtype == plan.buffers[y].dtype)
    return copy();
  ElementFn fn;
  if (!elementFn(*k, fn))
    return false;
  return elementwise({{x, "x"}}, y, fn.expr,
                     "cast " + ctype(x) + " -> " + ctype(y) + " of " +
                         str(count(y)) + " elements");
}

bool Emitter::broadcast() {
  int x = k->inputs[0], y = k->outputs[0];
  if (plan.buffers[x].dtype != plan.buffers[y].dtype)
    return fail("broadcast between element types");
  return elementwise({operand(x, "x", shape(y))}, y, "r = x;",
                     "broadcast " + shapeStr(shape(x)) + " -> " +
                         shapeStr(shape(y)));
}

/// Result dimension i is input dimension permutation[i].
bool Emitter::transpose() {
  int x = k->inputs[0], y = k->outputs[0];
  const auto &xs = shape(x), &ys = shape(y);
  std::vector<int64_t> perm = k->intsAttr("permutation");
  if (perm.size() != xs.size() || ys.size() != xs.size())
    return fail("the permutation does not match the ranks");
  std::vector<int64_t> xStrides(xs.size(), 1);
  for (size_t i = xs.size(); i-- > 1;)
    xStrides[i - 1] = xStrides[i] * xs[i];
  Operand o{x, "x", Access::Strided};
  for (size_t i = 0; i < ys.size(); ++i) {
    if (perm[i] < 0 || perm[i] >= static_cast<int64_t>(xs.size()))
      return fail("permutation entry out of range");
    o.strides.push_back(xStrides[perm[i]]);
  }
  return elementwise({o}, y, "r = x;",
                     "transpose " + shapeStr(xs) + " by " + shapeStr(perm));
}

/// CpuExecutor's padOrSlice(): y[c] = x[c] where every coordinate c is
/// inside x, else 0.
bool Emitter::padOrSlice() {
  int x = k->inputs[0], y = k->outputs[0];
  const auto &xs = shape(x), &ys = shape(y);
  if (xs.size() != ys.size() || xs.empty() ||
      plan.buffers[x].dtype != plan.buffers[y].dtype || !isFloat(y))
    return fail("pad/slice needs float tensors of one rank and type");
  int64_t n = count(y);
  std::string dims = "constexpr int R = " + str(ys.size()) +
                     ";\n__device__ constexpr i64 XS[R] = {";
  std::string ydims = "__device__ constexpr i64 YS[R] = {";
  for (size_t d = 0; d < ys.size(); ++d) {
    dims += (d ? ", " : "") + str(xs[d]);
    ydims += (d ? ", " : "") + str(ys[d]);
  }
  std::string consts = "constexpr i64 N = " + str(n) + ";\n" + dims +
                       "};\n" + ydims + "};\n";
  std::string body = R"CU(  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < N;
       i += (i64)gridDim.x * blockDim.x) {
    i64 rem = i, off = 0, stride = 1;
    bool inside = true;
#pragma unroll
    for (int d = R - 1; d >= 0; --d) {
      const i64 c = rem % YS[d];
      rem /= YS[d];
      inside = inside && c < XS[d];
      off += c * stride;
      stride *= XS[d];
    }
    y[i] = inside ? (float)x[off] : 0.f;
  }
)CU";
  launch("", std::string(opName(k->op)) + " " + shapeStr(xs) + " -> " + shapeStr(ys),
         {in(x, "x"), out(y, "y")}, 0, consts, body,
         std::min(ceilDiv(n, kBlock), kMaxGrid));
  return true;
}

//===----------------------------------------------------------------------===//
// GEMMs
//===----------------------------------------------------------------------===//

/// CpuExecutor's matmul(): a shared rank-2 b without transpose_a is one GEMM
/// over all rows of a; otherwise a (strided) batched GEMM where each operand
/// is either batched like the result or shared (stride 0).
bool Emitter::matmul() {
  int a = k->inputs[0], b = k->inputs[1], y = k->outputs[0];
  const auto &as = shape(a), &bs = shape(b), &ys = shape(y);
  bool wider = castOutput && plan.buffers[y].dtype == DType::F32;
  if (!isFloat(y) || plan.buffers[a].dtype != plan.buffers[b].dtype ||
      (plan.buffers[a].dtype != plan.buffers[y].dtype && !wider))
    return fail("matmul needs float operands of one type, got " +
                describe(a) + " x " + describe(b) + " -> " + describe(y));
  if (as.size() < 2 || bs.size() < 2 || ys.size() < 2)
    return fail("matmul operands need rank >= 2");
  bool ta = k->intAttr("transpose_a", 0), tb = k->intAttr("transpose_b", 0);
  int64_t m = ys[ys.size() - 2], n = ys.back();
  int64_t kk = ta ? as[as.size() - 2] : as.back();
  int64_t am = ta ? as.back() : as[as.size() - 2];
  int64_t bk = tb ? bs.back() : bs[bs.size() - 2];
  int64_t bn = tb ? bs[bs.size() - 2] : bs.back();
  if (am != m || bk != kk || bn != n)
    return fail("matmul shapes do not agree: " + shapeStr(as) + " x " +
                shapeStr(bs) + " -> " + shapeStr(ys));
  int64_t batch = count(y) / (m * n);
  CudaLaunch l;
  l.kind = CudaLaunch::Kind::Gemm;
  l.name = "k" + str(index) + "_matmul";
  l.a = a;
  l.b = b;
  l.c = y;
  l.transA = ta;
  l.transB = tb;
  l.n = n;
  l.k = kk;
  if (bs.size() == 2 && !ta) {
    l.m = batch * m;
    launches.push_back(l);
    return true;
  }
  int64_t aBatch = count(a) / (m * kk), bBatch = count(b) / (kk * n);
  auto batchStride = [&](int64_t opBatch, int64_t mat, int64_t &stride) {
    if (opBatch == batch)
      stride = mat;
    else if (opBatch == 1)
      stride = 0;
    else
      return false;
    return true;
  };
  if (!batchStride(aBatch, m * kk, l.strideA) ||
      !batchStride(bBatch, kk * n, l.strideB))
    return fail("matmul broadcasting " + shapeStr(as) + " x " + shapeStr(bs) +
                " -> " + shapeStr(ys) +
                " is not supported on the GPU: each operand's batch "
                "dimensions must equal the result's or be absent");
  if (batch == 1)
    l.strideA = l.strideB = 0;
  l.m = m;
  l.batch = batch;
  l.strideC = batch == 1 ? 0 : m * n;
  launches.push_back(l);
  return true;
}

/// y = x W^T + bias: one GEMM over all rows of x.
bool Emitter::linear() {
  int x = k->inputs[0], w = k->inputs[1], y = k->outputs[0];
  const auto &ws = shape(w);
  if (ws.size() != 2)
    return fail("linear weight must be rank 2");
  for (int id : k->inputs)
    if (!isFloat(y) || plan.buffers[id].dtype != plan.buffers[y].dtype)
      return fail("linear needs float operands of one type, got " +
                  describe(id) + " -> " + describe(y));
  CudaLaunch l;
  l.kind = CudaLaunch::Kind::Gemm;
  l.name = "k" + str(index) + "_linear";
  l.a = x;
  l.b = w;
  l.c = y;
  l.bias = k->inputs.size() > 2 ? k->inputs[2] : -1;
  l.transB = true;
  if (auto it = fusedRelu.find(index); it != fusedRelu.end()) {
    l.c = it->second; // the relu's output, through the ReLU epilogue
    l.relu = true;
    l.name += "_relu";
  }
  l.n = ws[0];
  l.k = ws[1];
  l.m = count(x) / ws[1];
  if (l.m * l.k != count(x) || l.m * l.n != count(y) ||
      (l.bias >= 0 && count(l.bias) != l.n))
    return fail("linear shapes do not agree");
  launches.push_back(l);
  return true;
}

//===----------------------------------------------------------------------===//
// Row-wise kernels
//===----------------------------------------------------------------------===//

/// Constants and the opening of a loop that gives each group of RT threads
/// one row (`row`, `active` false past the end; the loop is uniform over the
/// block, so row reductions may synchronize it).
std::string rowConsts(int64_t rows, int64_t n, int rt) {
  return "constexpr i64 ROWS = " + str(rows) + ";\nconstexpr int N = " +
         str(n) + ";\nconstexpr int RT = " + str(rt) +
         ";  // threads per row\nconstexpr int RPB = " + str(kBlock / rt) +
         ";  // rows per block\n";
}

const char *kRowLoop =
    "  const int lane = threadIdx.x % RT;\n"
    "  for (i64 first = (i64)blockIdx.x * RPB; first < ROWS;\n"
    "       first += (i64)gridDim.x * RPB) {\n"
    "    const i64 row = first + threadIdx.x / RT;\n"
    "    const bool active = row < ROWS;\n";

/// Inside kRowLoop: `xr` at the row and its maximum `m`, reduced through
/// the shared float array `red` (softmax and cross-entropy).
std::string rowMax(const std::string &red) {
  return "    const auto *xr = x + row * N;\n"
         "    float m = -GTC_INF;\n"
         "    if (active)\n"
         "      for (int j = lane; j < N; j += RT)\n"
         "        m = fmaxf(m, xr[j]);\n"
         "    m = row_max<RT>(m, " +
         red + ");\n";
}

int64_t rowGrid(int64_t rows, int rt) {
  return std::min(ceilDiv(rows, kBlock / rt), kMaxRowGrid);
}

std::string rowWhat(int64_t rows, int64_t n, int rt) {
  return (rt == 32 ? std::string("one warp") : str(rt) + " threads") +
         " per row (" + str(rows) + " rows of " + str(n) + ")";
}

/// A row's mean, variance and rstd in double, as CpuExecutor's layernorm
/// (inside kRowLoop, after `xr` points at the row).
static const char *kLayerNormStatistics = R"CU(    double s = 0.0;
    if (active)
      for (int j = lane; j < N; j += RT)
        s += (double)xr[j];
    const double mean = row_sum<RT>(s, red) / N;
    double q = 0.0;
    if (active)
      for (int j = lane; j < N; j += RT) {
        const double c = (double)xr[j] - mean;
        q += c * c;
      }
    const double var = row_sum<RT>(q, red) / N;
    const float rstd = (float)(1.0 / sqrt(var + EPS));
)CU";

/// CpuExecutor's layernorm(): statistics in double, y in float.
bool Emitter::layernorm() {
  int x = k->inputs[0], w = k->inputs[1], b = k->inputs[2], y = k->outputs[0];
  int64_t d = shape(x).empty() ? 1 : shape(x).back();
  int64_t rows = count(x) / d;
  if (count(w) != d || count(b) != d || count(y) != count(x))
    return fail("layernorm shapes do not agree");
  int rt = threadsPerRow(d);
  std::string consts = rowConsts(rows, d, rt) + "constexpr double EPS = " +
                       dbl(k->floatAttr("epsilon", 1e-5)) + ";\n";
  std::string body = "  __shared__ double red[8];\n";
  body += kRowLoop;
  body += "    const auto *xr = x + row * N;\n";
  body += kLayerNormStatistics;
  body += R"CU(    const float m = (float)mean;
    if (active)
      for (int j = lane; j < N; j += RT)
        y[row * N + j] = (xr[j] - m) * rstd * w[j] + b[j];
  }
)CU";
  launch("", rowWhat(rows, d, rt),
         {in(x, "x"), in(w, "w"), in(b, "b"), out(y, "y")},
         kWarpHelpers | kRowHelpers, consts, body, rowGrid(rows, rt));
  return true;
}

/// CpuExecutor's layernormGrad(): dx per row (launch 1, which also stores
/// each row's mean and rstd in the workspace), then dw and db as column sums
/// over row chunks (launch 2) and over the chunks (launch 3).
bool Emitter::layernormGrad() {
  int dy = k->inputs[0], x = k->inputs[1], w = k->inputs[2];
  int dx = k->outputs[0], dw = k->outputs[1], db = k->outputs[2];
  int64_t d = shape(x).empty() ? 1 : shape(x).back();
  int64_t rows = count(x) / d;
  if (count(dy) != count(x) || count(dx) != count(x) || count(w) != d ||
      count(dw) != d || count(db) != d)
    return fail("layernorm_grad shapes do not agree");
  int rt = threadsPerRow(d);
  std::string consts = rowConsts(rows, d, rt) + "constexpr double EPS = " +
                       dbl(k->floatAttr("epsilon", 1e-5)) + ";\n";
  std::string body = "  __shared__ double red[8];\n";
  body += kRowLoop;
  body += "    const auto *xr = x + row * N;\n"
          "    const auto *gr = dy + row * N;\n";
  body += kLayerNormStatistics;
  body += R"CU(    // s1 = mean(dxhat), s2 = mean(dxhat * xhat) with dxhat = dy * w.
    double s1 = 0.0, s2 = 0.0;
    if (active)
      for (int j = lane; j < N; j += RT) {
        const double xh = ((double)xr[j] - mean) * rstd;
        const double g = (double)gr[j] * w[j];
        s1 += g;
        s2 += g * xh;
      }
    s1 = row_sum<RT>(s1, red) / N;
    s2 = row_sum<RT>(s2, red) / N;
    if (active) {
      for (int j = lane; j < N; j += RT) {
        const double xh = ((double)xr[j] - mean) * rstd;
        const double g = (double)gr[j] * w[j];
        dx[row * N + j] = (float)(rstd * (g - s1 - xh * s2));
      }
      if (lane == 0) {
        stats[2 * row] = (float)mean;
        stats[2 * row + 1] = rstd;
      }
    }
  }
)CU";
  launch("dx", rowWhat(rows, d, rt) + "; row statistics to the workspace",
         {in(dy, "dy"), in(x, "x"), in(w, "w"), out(dx, "dx"),
          ws("float", "stats")},
         kWarpHelpers | kRowHelpers, consts, body, rowGrid(rows, rt));

  // Column sums over chunks of rows, like the CPU's sums over all rows:
  // dw[j] = sum dy * (x - mean) * rstd, db[j] = sum dy.
  int64_t chunks = rows < 64 ? 1
                             : std::max<int64_t>(
                                   1, std::min(ceilDiv(rows, 16),
                                               ceilDiv(65536, d)));
  int64_t chunk = ceilDiv(rows, chunks);
  chunks = ceilDiv(rows, chunk);
  int64_t partOffset = alignUp(2 * rows, 64); // in floats
  needWorkspace(4 * partOffset + 8 * 2 * chunks * d);
  std::string c2 = "constexpr i64 ROWS = " + str(rows) +
                   ";\nconstexpr i64 N = " + str(d) +
                   ";\nconstexpr i64 CHUNKS = " + str(chunks) +
                   ";\nconstexpr i64 CHUNK = " + str(chunk) +
                   ";  // rows per chunk\nconstexpr i64 PART = " +
                   str(partOffset) + ";  // partial sums, after the stats\n";
  std::string b2 = R"CU(  const float *stats = ws;
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < CHUNKS * N;
       i += (i64)gridDim.x * blockDim.x) {
    const i64 c = i / N, j = i % N;
    const i64 end = min(ROWS, (c + 1) * CHUNK);
    double sw = 0.0, sb = 0.0;
    for (i64 r = c * CHUNK; r < end; ++r) {
      const double g = dy[r * N + j];
      sw += g * (double)(x[r * N + j] - stats[2 * r]) * stats[2 * r + 1];
      sb += g;
    }
)CU";
  if (chunks == 1) {
    b2 += "    dw[j] = (float)sw;\n    db[j] = (float)sb;\n  }\n";
    launch("dwdb",
           "dw and db: one thread per column over all " + str(rows) + " rows",
           {in(dy, "dy"), in(x, "x"), out(dw, "dw"), out(db, "db"),
            wsIn("float", "ws")},
           0, c2, b2, std::min(ceilDiv(d, kBlock), kMaxGrid));
    return true;
  }
  b2 += "    double *part = reinterpret_cast<double *>(ws + PART);\n"
        "    part[c * N + j] = sw;\n"
        "    part[(CHUNKS + c) * N + j] = sb;\n  }\n";
  launch("partial",
         "dw and db partial sums: one thread per (chunk of " + str(chunk) +
             " rows, column)",
         {in(dy, "dy"), in(x, "x"), ws("float", "ws")}, 0, c2, b2,
         std::min(ceilDiv(chunks * d, kBlock), kMaxGrid));
  std::string b3 = R"CU(  const double *part = reinterpret_cast<const double *>(ws + PART);
  for (i64 j = (i64)blockIdx.x * blockDim.x + threadIdx.x; j < N;
       j += (i64)gridDim.x * blockDim.x) {
    double sw = 0.0, sb = 0.0;
    for (i64 c = 0; c < CHUNKS; ++c) {
      sw += part[c * N + j];
      sb += part[(CHUNKS + c) * N + j];
    }
    dw[j] = (float)sw;
    db[j] = (float)sb;
  }
)CU";
  launch("final", "dw and db: one thread per column sums the chunks in order",
         {out(dw, "dw"), out(db, "db"), wsIn("float", "ws")}, 0, c2, b3,
         std::min(ceilDiv(d, kBlock), kMaxGrid));
  return true;
}

/// CpuExecutor's softmax() and softmaxGrad() along `axis`.
bool Emitter::softmax(bool grad) {
  int x = k->inputs[0], y = k->outputs[0];
  const auto &xs = shape(x);
  int64_t axis = k->intAttr("axis", -1);
  if (axis < 0)
    axis += static_cast<int64_t>(xs.size());
  if (axis < 0 || axis >= static_cast<int64_t>(xs.size()))
    return fail("axis out of range");
  int64_t outer = 1, n = xs[axis], inner = 1;
  for (int64_t i = 0; i < axis; ++i)
    outer *= xs[i];
  for (size_t i = axis + 1; i < xs.size(); ++i)
    inner *= xs[i];
  if (grad && count(k->inputs[1]) != count(x))
    return fail("softmax_grad operands of different sizes");
  std::vector<Arg> args;
  if (grad)
    args = {in(k->inputs[0], "dy"), in(k->inputs[1], "y"), out(y, "dx")};
  else
    args = {in(x, "x"), out(y, "y")};

  if (inner > 1) {
    // One thread per (outer, inner) column, walking the axis with stride
    // INNER (consecutive threads read consecutive addresses).
    std::string consts = "constexpr i64 OUTER = " + str(outer) +
                         ";\nconstexpr i64 N = " + str(n) +
                         ";\nconstexpr i64 INNER = " + str(inner) + ";\n";
    std::string body =
        "  for (i64 c = (i64)blockIdx.x * blockDim.x + threadIdx.x; c < OUTER "
        "* INNER;\n       c += (i64)gridDim.x * blockDim.x) {\n"
        "    const i64 base = c / INNER * N * INNER + c % INNER;\n";
    if (!grad)
      body += R"CU(    float m = x[base];
    for (i64 j = 1; j < N; ++j)
      m = fmaxf(m, x[base + j * INNER]);
    float s = 0.f;
    for (i64 j = 0; j < N; ++j)
      s += expf(x[base + j * INNER] - m);
    for (i64 j = 0; j < N; ++j)
      y[base + j * INNER] = expf(x[base + j * INNER] - m) / s;
  }
)CU";
    else
      body += R"CU(    double dot = 0.0;
    for (i64 j = 0; j < N; ++j)
      dot += (double)dy[base + j * INNER] * y[base + j * INNER];
    for (i64 j = 0; j < N; ++j) {
      const i64 i = base + j * INNER;
      dx[i] = (float)(y[i] * ((double)dy[i] - dot));
    }
  }
)CU";
    launch("", "one thread per column of " + str(n) + " (stride " +
                   str(inner) + "), " + str(outer * inner) + " columns",
           args, 0, consts, body,
           std::min(ceilDiv(outer * inner, kBlock), kMaxGrid));
    return true;
  }

  int64_t rows = outer;
  int rt = threadsPerRow(n);
  std::string consts = rowConsts(rows, n, rt);
  std::string body = grad ? "  __shared__ double red[8];\n"
                          : "  __shared__ float red[8];\n";
  body += kRowLoop;
  if (!grad)
    body += rowMax("red") + R"CU(    float s = 0.f;
    if (active)
      for (int j = lane; j < N; j += RT)
        s += expf(xr[j] - m);
    s = row_sum<RT>(s, red);
    if (active)
      for (int j = lane; j < N; j += RT)
        y[row * N + j] = expf(xr[j] - m) / s;
  }
)CU";
  else
    body += R"CU(    double dot = 0.0;
    if (active)
      for (int j = lane; j < N; j += RT)
        dot += (double)dy[row * N + j] * y[row * N + j];
    dot = row_sum<RT>(dot, red);
    if (active)
      for (int j = lane; j < N; j += RT) {
        const i64 i = row * N + j;
        dx[i] = (float)(y[i] * ((double)dy[i] - dot));
      }
  }
)CU";
  launch("", rowWhat(rows, n, rt), args, kWarpHelpers | kRowHelpers, consts,
         body, rowGrid(rows, rt));
  return true;
}

void Emitter::finalSum(const std::string &suffix, int outBuf, int64_t n,
                       const std::string &valueType,
                       const std::string &result) {
  std::string consts = "constexpr i64 N = " + str(n) + ";\n";
  std::string body = "  __shared__ double red[8];\n"
                     "  double s = 0.0;\n"
                     "  for (i64 i = threadIdx.x; i < N; i += blockDim.x)\n"
                     "    s += (double)part[i];\n"
                     "  s = row_sum<256>(s, red);\n"
                     "  if (threadIdx.x == 0)\n"
                     "    y[0] = " +
                     result + ";\n";
  launch(suffix,
         "one block sums the " + str(n) + " partial results in a fixed order",
         {wsIn(valueType, "part"), out(outBuf, "y")},
         kWarpHelpers | kRowHelpers, consts, body, 1);
}

/// The row loop shared by the cross-entropy kernels: each row's max and
/// sum of exponentials (double), then optionally the gradient
/// (softmax - onehot) * grad / ROWS, as CpuExecutor's crossEntropyGrad()
/// (the label's entry, p - 1, in double: it cancels when p -> 1), and
/// optionally the row's loss, lse + max - x[label], stored with `lossStore`
/// (e.g. "loss[row] = "). An out-of-range label (an error on the CPU) gives
/// NaN.
static std::string crossEntropyRows(bool grad, const std::string &lossStore) {
  std::string body = kRowLoop + rowMax("redf");
  body += R"CU(    double s = 0.0;
    if (active)
      for (int j = lane; j < N; j += RT)
        s += (double)expf(xr[j] - m);
    s = row_sum<RT>(s, red);
    if (active) {
      const int t = labels[row];
      const bool ok = t >= 0 && t < N;
)CU";
  if (grad)
    body += R"CU(      const float sf = (float)s;
      const double lse = (double)m + log(s);
      for (int j = lane; j < N; j += RT)
        dx[row * N + j] = !ok ? GTC_NAN
                          : j == t ? (float)((exp((double)xr[j] - lse) - 1.0) * gs)
                                   : expf(xr[j] - m) / sf * gsf;
)CU";
  if (!lossStore.empty())
    body += "      if (lane == 0)\n        " + lossStore +
            "ok ? log(s) + (double)m - (double)xr[t] : (double)GTC_NAN;\n";
  body += "    }\n  }\n";
  return body;
}

/// Sums the ROWS row losses in shared `rl` in a fixed order into y[0].
static const char *kMeanOfRowLosses = "  __syncthreads();\n"
                                      "  double total = 0.0;\n"
                                      "  for (i64 i = threadIdx.x; i < ROWS; "
                                      "i += blockDim.x)\n"
                                      "    total += rl[i];\n"
                                      "  total = row_sum<256>(total, red);\n"
                                      "  if (threadIdx.x == 0)\n"
                                      "    y[0] = (float)(total / ROWS);\n";

static const char *kCrossEntropyShared = "  __shared__ double red[8];\n"
                                         "  __shared__ float redf[8];\n";
static const char *kGradScale = "  const double gs = (double)grad[0] / ROWS;\n"
                                "  const float gsf = (float)gs;\n";

/// CpuExecutor's crossEntropy(): per row lse + max - x[label], then their
/// mean. Few rows: one block, the row losses in shared memory (fused with
/// the gradient when planCrossEntropyFusion() found it); many rows: the row
/// losses to the workspace (launch 1), then their mean (launch 2).
bool Emitter::crossEntropy() {
  int x = k->inputs[0], lab = k->inputs[1], y = k->outputs[0];
  if (isF32(lab) || !isF32(x))
    return fail("cross_entropy takes f32 logits and i32 labels");
  int64_t c = shape(x).empty() ? 1 : shape(x).back();
  int64_t rows = count(x) / c;
  if (count(lab) != rows)
    return fail("labels do not match the logits' rows");
  int rt = threadsPerRow(c);
  std::string sharedLosses = "  __shared__ double rl[" + str(rows) + "];\n";
  if (auto it = fusedCrossEntropy.find(index); it != fusedCrossEntropy.end()) {
    const Kernel &gk = plan.kernels[it->second];
    int g = gk.inputs[0], dx = gk.outputs[0];
    std::string body = kCrossEntropyShared + sharedLosses + kGradScale +
                       crossEntropyRows(true, "rl[row] = ") +
                       kMeanOfRowLosses;
    launch("", rowWhat(rows, c, rt) +
                   " in one block: loss and gradient (fused with kernel " +
                   str(it->second) + ")",
           {in(g, "grad"), in(x, "x"), in(lab, "labels"), out(y, "y"),
            out(dx, "dx")},
           kWarpHelpers | kRowHelpers, rowConsts(rows, c, rt), body, 1);
    return true;
  }
  if (rows <= kOneBlockRows && count(x) <= kOneBlockLogits) {
    std::string body = kCrossEntropyShared + sharedLosses +
                       crossEntropyRows(false, "rl[row] = ") +
                       kMeanOfRowLosses;
    launch("", rowWhat(rows, c, rt) + " in one block, then their mean",
           {in(x, "x"), in(lab, "labels"), out(y, "y")},
           kWarpHelpers | kRowHelpers, rowConsts(rows, c, rt), body, 1);
    return true;
  }
  needWorkspace(8 * rows);
  launch("rows", rowWhat(rows, c, rt) + "; row losses to the workspace",
         {in(x, "x"), in(lab, "labels"), ws("double", "loss")},
         kWarpHelpers | kRowHelpers, rowConsts(rows, c, rt),
         kCrossEntropyShared + crossEntropyRows(false, "loss[row] = "),
         rowGrid(rows, rt));
  finalSum("mean", y, rows, "double", "(float)(s / " + str(rows) + ")");
  return true;
}

/// CpuExecutor's crossEntropyGrad(): (softmax - onehot) * g / rows.
bool Emitter::crossEntropyGrad() {
  int g = k->inputs[0], x = k->inputs[1], lab = k->inputs[2];
  int dx = k->outputs[0];
  if (isF32(lab) || !isF32(x) || count(g) != 1)
    return fail("cross_entropy_grad takes a scalar, f32 logits, i32 labels");
  int64_t c = shape(x).empty() ? 1 : shape(x).back();
  int64_t rows = count(x) / c;
  if (count(lab) != rows || count(dx) != count(x))
    return fail("labels do not match the logits' rows");
  int rt = threadsPerRow(c);
  launch("", rowWhat(rows, c, rt),
         {in(g, "grad"), in(x, "x"), in(lab, "labels"), out(dx, "dx")},
         kWarpHelpers | kRowHelpers, rowConsts(rows, c, rt),
         std::string(kCrossEntropyShared) + kGradScale +
             crossEntropyRows(true, ""),
         rowGrid(rows, rt));
  return true;
}

/// CpuExecutor's accuracy(): per row argmax == label (launch 1, to the
/// workspace), then the fraction (launch 2).
bool Emitter::accuracy() {
  int x = k->inputs[0], lab = k->inputs[1], y = k->outputs[0];
  if (isF32(lab) || !isF32(x))
    return fail("accuracy takes f32 logits and i32 labels");
  int64_t c = shape(x).empty() ? 1 : shape(x).back();
  int64_t rows = count(x) / c;
  if (count(lab) != rows)
    return fail("labels do not match the logits' rows");
  needWorkspace(4 * rows);
  int rt = threadsPerRow(c);
  std::string body = "  __shared__ float shv[8];\n"
                     "  __shared__ int shi[8];\n";
  body += kRowLoop;
  body += R"CU(    const auto *xr = x + row * N;
    float v = -GTC_INF;
    int best = 0x7fffffff;
    if (active)
      for (int j = lane; j < N; j += RT)
        argmax_combine(v, best, xr[j], j);
    row_argmax<RT>(v, best, shv, shi);
    if (active && lane == 0)
      right[row] = best == labels[row] ? 1 : 0;
  }
)CU";
  launch("rows", rowWhat(rows, c, rt) + "; hits to the workspace",
         {in(x, "x"), in(lab, "labels"), ws("int", "right")},
         kWarpHelpers | kArgmaxHelpers, rowConsts(rows, c, rt), body,
         rowGrid(rows, rt));
  finalSum("mean", y, rows, "int", "(float)(s / " + str(rows) + ")");
  return true;
}

//===----------------------------------------------------------------------===//
// Reductions: sum, mean, sum_to
//===----------------------------------------------------------------------===//

/// Sums x into y, where y's shape (`kept`, same rank as x or shorter)
/// broadcasts to x's; `scale` multiplies the result (CpuExecutor's
/// reduceInto). The dimensions are classified as reduced or kept and merged;
/// the common layouts get dedicated kernels:
///   [R]        one block, or P blocks and a final sum (two-stage);
///   [K, R]     a row reduction;
///   [A, R, K]  column sums: threads over (chunk of R, a, k) and a final
///              pass over the chunks when there is more than one;
///   otherwise  one warp per output element.
/// Accumulation is in double, as on the CPU.
bool Emitter::reduce(int inBuf, int outBuf, const std::vector<int64_t> &kept,
                     double scale) {
  const auto &xs = shape(inBuf);
  std::vector<int64_t> ys = kept;
  while (ys.size() > xs.size() && ys.front() == 1)
    ys.erase(ys.begin());
  if (ys.size() > xs.size())
    return fail("the result has a higher rank than the input");
  ys.insert(ys.begin(), xs.size() - ys.size(), 1);
  if (!isFloat(inBuf) || !isFloat(outBuf))
    return fail("reductions need float tensors");
  if (product(ys) != count(outBuf))
    return fail("the result shape does not match");
  // Segments of merged dimensions: (size, reduced).
  std::vector<std::pair<int64_t, bool>> seg;
  std::vector<int64_t> keptDims, keptStrides, redDims, redStrides;
  int64_t stride = 1;
  std::vector<int64_t> xStrides(xs.size());
  for (size_t d = xs.size(); d-- > 0;) {
    xStrides[d] = stride;
    stride *= xs[d];
  }
  for (size_t d = 0; d < xs.size(); ++d) {
    if (xs[d] == 1)
      continue;
    bool reduced = ys[d] == 1;
    if (!reduced && ys[d] != xs[d])
      return fail("shape " + shapeStr(kept) + " does not broadcast to " +
                  shapeStr(xs));
    (reduced ? redDims : keptDims).push_back(xs[d]);
    (reduced ? redStrides : keptStrides).push_back(xStrides[d]);
    if (!seg.empty() && seg.back().second == reduced)
      seg.back().first *= xs[d];
    else
      seg.push_back({xs[d], reduced});
  }
  int64_t nx = count(inBuf), ny = count(outBuf);
  std::string sc = "constexpr double SCALE = " + dbl(scale) + ";\n";
  std::string what = shapeStr(xs) + " -> " + shapeStr(kept);
  int x = inBuf, y = outBuf;

  bool anyReduced = false;
  for (auto &s : seg)
    anyReduced |= s.second;
  if (!anyReduced) {
    std::string expr = "r = (float)((double)x * " + dbl(scale) + ");";
    if (scale == 1.0)
      expr = "r = x;";
    return elementwise({{x, "x"}}, y, expr, "no reduced dimension: " + what);
  }

  if (seg.size() == 1) {
    // Everything into one value.
    int64_t r = seg[0].first;
    if (r <= 65536) {
      std::string body = "  __shared__ double red[8];\n"
                         "  double s = 0.0;\n"
                         "  for (i64 i = threadIdx.x; i < N; i += blockDim.x)\n"
                         "    s += (double)x[i];\n"
                         "  s = row_sum<256>(s, red);\n"
                         "  if (threadIdx.x == 0)\n"
                         "    y[0] = (float)(s * SCALE);\n";
      launch("", "one block sums " + str(r) + " elements (" + what + ")",
             {in(x, "x"), out(y, "y")}, kWarpHelpers | kRowHelpers,
             "constexpr i64 N = " + str(r) + ";\n" + sc, body, 1);
      return true;
    }
    int64_t parts = std::min<int64_t>(1024, ceilDiv(r, 8192));
    int64_t chunk = alignUp(ceilDiv(r, parts), 4);
    parts = ceilDiv(r, chunk);
    needWorkspace(8 * parts);
    std::string consts = "constexpr i64 N = " + str(r) +
                         ";\nconstexpr i64 CHUNK = " + str(chunk) +
                         ";\nconstexpr i64 PARTS = " + str(parts) + ";\n";
    std::string body = R"CU(  __shared__ double red[8];
  for (i64 p = blockIdx.x; p < PARTS; p += gridDim.x) {
    const i64 end = min(N, (p + 1) * CHUNK);
    double s = 0.0;
    for (i64 i = p * CHUNK + threadIdx.x; i < end; i += blockDim.x)
      s += (double)x[i];
    s = row_sum<256>(s, red);
    if (threadIdx.x == 0)
      part[p] = s;
  }
)CU";
    launch("partial",
           "one block per chunk of " + str(chunk) + " elements (" + what + ")",
           {in(x, "x"), ws("double", "part")}, kWarpHelpers | kRowHelpers,
           consts, body, std::min(parts, kMaxRowGrid));
    finalSum("final", y, parts, "double", "(float)(s * " + dbl(scale) + ")");
    return true;
  }

  if (seg.size() == 2 && !seg[0].second) {
    // Rows: [K, R].
    int64_t rows = seg[0].first, n = seg[1].first;
    int rt = threadsPerRow(n);
    std::string body = "  __shared__ double red[8];\n";
    body += kRowLoop;
    body += R"CU(    double s = 0.0;
    if (active)
      for (int j = lane; j < N; j += RT)
        s += (double)x[row * N + j];
    s = row_sum<RT>(s, red);
    if (active && lane == 0)
      y[row] = (float)(s * SCALE);
  }
)CU";
    launch("", rowWhat(rows, n, rt) + " (" + what + ")",
           {in(x, "x"), out(y, "y")}, kWarpHelpers | kRowHelpers,
           rowConsts(rows, n, rt) + sc, body, rowGrid(rows, rt));
    return true;
  }

  if ((seg.size() == 2 && seg[0].second) ||
      (seg.size() == 3 && !seg[0].second)) {
    // Columns: [A, R, K] (A = 1 for [R, K]).
    int64_t a = seg.size() == 3 ? seg[0].first : 1;
    int64_t r = seg[seg.size() - 2].first, kk = seg.back().first;
    // Short columns take one launch (latency matters more than parallelism
    // there); long ones are split so that no thread adds more than ~R/16.
    int64_t chunks = r <= 512
                         ? 1
                         : std::max<int64_t>(
                               1, std::min(ceilDiv(r, 16),
                                           ceilDiv(65536, a * kk)));
    int64_t chunk = ceilDiv(r, chunks);
    chunks = ceilDiv(r, chunk);
    std::string consts = "constexpr i64 A = " + str(a) +
                         ";\nconstexpr i64 R = " + str(r) +
                         ";\nconstexpr i64 K = " + str(kk) +
                         ";\nconstexpr i64 CHUNKS = " + str(chunks) +
                         ";\nconstexpr i64 CHUNK = " + str(chunk) + ";\n" + sc;
    std::string body = R"CU(  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < CHUNKS * A * K;
       i += (i64)gridDim.x * blockDim.x) {
    const i64 kk = i % K, a = i / K % A, c = i / (K * A);
    const auto *src = x + a * R * K + kk;
    const i64 end = min(R, (c + 1) * CHUNK);
    double s = 0.0;
    for (i64 r = c * CHUNK; r < end; ++r)
      s += (double)src[r * K];
)CU";
    if (chunks == 1) {
      body += "    y[a * K + kk] = (float)(s * SCALE);\n  }\n";
      launch("", "one thread per output, summing " + str(r) + " rows (" +
                     what + ")",
             {in(x, "x"), out(y, "y")}, 0, consts, body,
             std::min(ceilDiv(a * kk, kBlock), kMaxGrid));
      return true;
    }
    needWorkspace(8 * chunks * a * kk);
    body += "    part[i] = s;\n  }\n";
    launch("partial",
           "one thread per (chunk of " + str(chunk) + " rows, output) (" +
               what + ")",
           {in(x, "x"), ws("double", "part")}, 0, consts, body,
           std::min(ceilDiv(chunks * a * kk, kBlock), kMaxGrid));
    std::string b2 = R"CU(  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < A * K;
       i += (i64)gridDim.x * blockDim.x) {
    double s = 0.0;
    for (i64 c = 0; c < CHUNKS; ++c)
      s += part[c * A * K + i];
    y[i] = (float)(s * SCALE);
  }
)CU";
    launch("final", "one thread per output sums the chunks in order",
           {wsIn("double", "part"), out(y, "y")}, 0, consts, b2,
           std::min(ceilDiv(a * kk, kBlock), kMaxGrid));
    return true;
  }

  // General: one warp per output element.
  int64_t count = nx / ny;
  // Output o -> x offset of its first term (kept dimensions, in x's order,
  // which is y's element order); term r -> offset over the reduced ones.
  Gather gk = makeGather(keptDims, {keptStrides});
  Gather gr = makeGather(redDims, {redStrides});
  std::string consts = "constexpr i64 NY = " + str(ny) +
                       ";\nconstexpr i64 COUNT = " + str(count) + ";\n" + sc;
  std::string body =
      "  const int lane = threadIdx.x & 31;\n"
      "  for (i64 o = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5; o < "
      "NY;\n       o += ((i64)gridDim.x * blockDim.x) >> 5) {\n";
  body += emitGather(gk, "o", {"base"}, "i64", "    ");
  body += "    double s = 0.0;\n"
          "    for (i64 r = lane; r < COUNT; r += 32) {\n";
  body += emitGather(gr, "r", {"off"}, "i64", "      ");
  body += "      s += (double)x[base + off];\n    }\n"
          "    s = warp_sum(s);\n"
          "    if (lane == 0)\n"
          "      y[o] = (float)(s * SCALE);\n  }\n";
  launch("", "one warp per output element, " + str(count) + " terms each (" +
                 what + ")",
         {in(x, "x"), out(y, "y")}, kWarpHelpers, consts, body,
         std::min(ceilDiv(ny * 32, kBlock), kMaxRowGrid));
  return true;
}

bool Emitter::sumOrMean(bool mean) {
  const auto &xs = shape(k->inputs[0]);
  std::vector<int64_t> kept(xs);
  int64_t reduced = 1;
  std::vector<int64_t> axes = k->intsAttr("axes");
  for (size_t i = 0; i < xs.size(); ++i) {
    bool r = axes.empty();
    for (int64_t a : axes)
      r |= (a < 0 ? a + static_cast<int64_t>(xs.size()) : a) ==
           static_cast<int64_t>(i);
    if (r) {
      reduced *= kept[i];
      kept[i] = 1;
    }
  }
  return reduce(k->inputs[0], k->outputs[0], kept,
                mean ? 1.0 / double(reduced) : 1.0);
}

bool Emitter::sumTo() {
  return reduce(k->inputs[0], k->outputs[0], shape(k->outputs[0]), 1.0);
}

//===----------------------------------------------------------------------===//
// Embeddings
//===----------------------------------------------------------------------===//

/// y[i, :] = table[ids[i], :]; an index outside the table gives NaNs.
bool Emitter::embedding() {
  int ids = k->inputs[0], table = k->inputs[1], y = k->outputs[0];
  const auto &ts = shape(table);
  if (isF32(ids) || ts.size() != 2)
    return fail("embedding takes i32 indices and a [V, D] table");
  int64_t v = ts[0], d = ts[1], n = count(ids);
  if (count(y) != n * d)
    return fail("embedding result size does not match");
  int vec = d % 4 == 0 ? 4 : 1;
  std::string t = vec == 4 ? "float4" : "float";
  std::string consts = "constexpr i64 NTOK = " + str(n) +
                       ";\nconstexpr i64 V = " + str(v) +
                       ";\nconstexpr i64 DV = " + str(d / vec) + ";  // " +
                       t + "s per row\n";
  std::string body = "  const " + t + " *tv = reinterpret_cast<const " + t +
                     " *>(table);\n  " + t + " *yv = reinterpret_cast<" + t +
                     " *>(y);\n";
  std::string nan = vec == 4 ? "make_float4(GTC_NAN, GTC_NAN, GTC_NAN, GTC_NAN)"
                             : "GTC_NAN";
  body += "  for (i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x; e < NTOK "
          "* DV;\n       e += (i64)gridDim.x * blockDim.x) {\n"
          "    const i64 i = e / DV, c = e % DV;\n"
          "    const int id = ids[i];\n"
          "    yv[e] = id >= 0 && id < V ? tv[id * DV + c] : " +
          nan + ";\n  }\n";
  launch("", "one thread per " + t + " of " + str(n) + " rows of " + str(d),
         {in(ids, "ids"), in(table, "table"), out(y, "y")}, 0, consts, body,
         std::min(ceilDiv(n * d / vec, kBlock), kMaxGrid));
  return true;
}

/// CpuExecutor's embeddingGrad(): a zeroed table (memset), then a
/// scatter-add where each thread owns the rows id % P == p of one column
/// group and adds the gradient rows in token order, exactly the CPU's
/// summation order (and no atomics). Indices outside the table are skipped,
/// as on the CPU.
bool Emitter::embeddingGrad() {
  int dy = k->inputs[0], ids = k->inputs[1], dt = k->outputs[0];
  const auto &ts = shape(dt);
  if (isF32(ids) || ts.size() != 2)
    return fail("embedding_grad takes i32 indices and gives a [V, D] table");
  int64_t v = ts[0], d = ts[1], n = count(ids);
  if (count(dy) != n * d)
    return fail("embedding_grad gradient size does not match");
  CudaLaunch clear;
  clear.kind = CudaLaunch::Kind::Memset;
  clear.name = "k" + str(index) + "_embedding_grad_zero";
  clear.c = dt;
  launches.push_back(clear);

  int vec = d % 4 == 0 ? 4 : 1;
  int64_t dv = d / vec;
  int64_t parts = 1;
  while (parts * 2 <= v && parts * 2 * dv <= 32768)
    parts *= 2;
  std::string t = vec == 4 ? "float4" : "float";
  std::string consts = "constexpr i64 NTOK = " + str(n) +
                       ";\nconstexpr int V = " + str(v) +
                       ";\nconstexpr i64 DV = " + str(dv) + ";  // " + t +
                       "s per row\nconstexpr int P = " + str(parts) +
                       ";  // row partitions (a power of two)\n"
                       "constexpr int CHUNK = 2048;  // indices staged in "
                       "shared memory\n";
  std::string add = vec == 4 ? "      acc.x += g.x;\n      acc.y += g.y;\n"
                               "      acc.z += g.z;\n      acc.w += g.w;\n"
                             : "      acc += g;\n";
  std::string body =
      "  __shared__ int sid[CHUNK];\n"
      "  const " + t + " *gv = reinterpret_cast<const " + t + " *>(dy);\n"
      "  " + t + " *tv = reinterpret_cast<" + t + " *>(dt);\n"
      "  // Thread (p, c) owns column group c of the rows with id % P == p.\n"
      "  const i64 item = (i64)blockIdx.x * blockDim.x + threadIdx.x;\n"
      "  const bool owner = item < P * DV;\n"
      "  const int p = (int)(item / DV);\n"
      "  const i64 c = item % DV;\n"
      "  for (i64 t0 = 0; t0 < NTOK; t0 += CHUNK) {\n"
      "    const int len = (int)min((i64)CHUNK, NTOK - t0);\n"
      "    __syncthreads();\n"
      "    for (int i = threadIdx.x; i < len; i += blockDim.x)\n"
      "      sid[i] = ids[t0 + i];\n"
      "    __syncthreads();\n"
      "    if (!owner)\n"
      "      continue;\n"
      "    for (int i = 0; i < len; ++i) {\n"
      "      const int id = sid[i];\n"
      "      if (id < 0 || id >= V || (id & (P - 1)) != p)\n"
      "        continue;\n"
      "      const " + t + " g = gv[(t0 + i) * DV + c];\n"
      "      " + t + " acc = tv[(i64)id * DV + c];\n" +
      add +
      "      tv[(i64)id * DV + c] = acc;\n"
      "    }\n"
      "  }\n";
  launch("scatter",
         "scatter-add of " + str(n) + " rows into [" + str(v) + ", " +
             str(d) + "]: " + str(parts) + " row partitions x " + str(dv) +
             " column groups",
         {in(dy, "dy"), in(ids, "ids"), out(dt, "dt")}, 0, consts, body,
         ceilDiv(parts * dv, kBlock));
  return true;
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

struct AttnShape {
  int64_t b, t, d, h, hd;
};

/// Row stride (in floats) of a shared-memory tile read one row per lane:
/// conflict-free for float4 reads (stride / 4 odd) or scalar reads (odd).
int64_t laneRowStride(int64_t hd) {
  if (hd % 4 == 0)
    return (hd / 4) % 2 == 1 ? hd : hd + 4;
  return hd % 2 == 1 ? hd : hd + 1;
}

/// `dots<R>(s, rows, stride, b)`: s[i] = rows[i * stride] . b over a head
/// vector, for R rows read by the whole warp (broadcast) and one row b per
/// lane, so each element of b is loaded once for R products.
std::string dotsSnippet(int64_t hd) {
  if (hd % 4 == 0)
    return R"CU(
template <int R>
__device__ __forceinline__ void dots(float (&s)[R], const float *rows,
                                     int stride, const float *b) {
#pragma unroll
  for (int i = 0; i < R; ++i)
    s[i] = 0.f;
#pragma unroll 2
  for (int c = 0; c < HD / 4; ++c) {
    const float4 y = reinterpret_cast<const float4 *>(b)[c];
#pragma unroll
    for (int i = 0; i < R; ++i) {
      const float4 x = reinterpret_cast<const float4 *>(rows + i * stride)[c];
      s[i] += x.x * y.x + x.y * y.y + x.z * y.z + x.w * y.w;
    }
  }
}
)CU";
  return R"CU(
template <int R>
__device__ __forceinline__ void dots(float (&s)[R], const float *rows,
                                     int stride, const float *b) {
#pragma unroll
  for (int i = 0; i < R; ++i)
    s[i] = 0.f;
  for (int c = 0; c < HD; ++c) {
    const float y = b[c];
#pragma unroll
    for (int i = 0; i < R; ++i)
      s[i] += rows[i * stride + c] * y;
  }
}
)CU";
}

/// `weighted<R>(acc, w, tile)`: acc[i][j] += sum_v w[i][v] * tile[v][c] for
/// the lane's head dimensions c = lane + 32 j, 32 rows v of `tile` (row
/// stride HDP) and weights w (R rows of 32, in shared memory).
const char *kWeightedSnippet = R"CU(
template <int R>
__device__ __forceinline__ void weighted(float (&acc)[R][NC],
                                         const float (*w)[32],
                                         const float *tile, int lane) {
#pragma unroll 2
  for (int v = 0; v < 32; v += 4) {
    float4 p[R];
#pragma unroll
    for (int i = 0; i < R; ++i)
      p[i] = *reinterpret_cast<const float4 *>(&w[i][v]);
#pragma unroll
    for (int j = 0; j < NC; ++j) {
      const int c = lane + 32 * j;
      if (c < HD) {
        const float x0 = tile[v * HDP + c], x1 = tile[(v + 1) * HDP + c];
        const float x2 = tile[(v + 2) * HDP + c], x3 = tile[(v + 3) * HDP + c];
#pragma unroll
        for (int i = 0; i < R; ++i)
          acc[i][j] += p[i].x * x0 + p[i].y * x1 + p[i].z * x2 + p[i].w * x3;
      }
    }
  }
}
)CU";

std::string attnConsts(const AttnShape &s, bool causal, float scale) {
  return "constexpr int B = " + str(s.b) + ", T = " + str(s.t) +
         ", D = " + str(s.d) + ", H = " + str(s.h) + ", HD = " + str(s.hd) +
         ";\nconstexpr bool CAUSAL = " + (causal ? "true" : "false") +
         ";\nconstexpr float SCALE = " + flt(scale) +
         ";  // 1 / sqrt(HD)\nconstexpr i64 ROW = 3 * D;  // floats per "
         "position in qkv\nconstexpr int HDP = " +
         str(laneRowStride(s.hd)) +
         ";  // padded row stride of tiles read one row per lane\n"
         "constexpr int NC = (HD + 31) / 32;  // head dims per lane\n";
}

/// The query-tile loop shared by the forward pass, the statistics pass of
/// the backward pass and the dq pass: each block takes a tile of BQ queries
/// of one (batch, head) and each warp QPW of them (t = q0 + warp + 8 i);
/// lanes take the 32 keys of a key tile (u = k0 + lane) staged in ks and vs.
/// `perTile` runs per key tile, `finish` per query (i, t) at the end. With
/// `withG` the dy rows of the queries are staged in gs.
std::string attnQueryLoop(bool withG, const std::string &state,
                          const std::string &perTile,
                          const std::string &finish) {
  std::string s = "  __shared__ __align__(16) float qs[BQ * HD];\n";
  if (withG)
    s += "  __shared__ __align__(16) float gs[BQ * HD];\n";
  s += R"CU(  __shared__ __align__(16) float ks[32 * HDP];
  __shared__ __align__(16) float vs[32 * HDP];
  __shared__ __align__(16) float ws[8][QPW][32];  // per warp: weights of the keys
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int tile = blockIdx.x; tile < B * H * QT; tile += gridDim.x) {
    const int qt = QT - 1 - tile % QT;  // the longest causal tiles first
    const int h = tile / QT % H, b = tile / QT / H;
    const int q0 = qt * BQ;
    const auto *base = qkv + (i64)b * T * ROW + h * HD;
    __syncthreads();
    for (int e = threadIdx.x; e < BQ * HD; e += blockDim.x) {
      const int r = e / HD, c = e % HD;
      qs[e] = q0 + r < T ? base[(i64)(q0 + r) * ROW + c] : 0.f;
)CU";
  if (withG)
    s += "      gs[e] = q0 + r < T ? dy[((i64)b * T + q0 + r) * D + h * HD + c] "
         ": 0.f;\n";
  s += "    }\n";
  s += state;
  s += R"CU(    const int kend = CAUSAL ? min(T, q0 + BQ) : T;
    const int tlast = q0 + warp + 8 * (QPW - 1);  // the warp's last query
    for (int k0 = 0; k0 < kend; k0 += 32) {
      __syncthreads();
      for (int e = threadIdx.x; e < 32 * HD; e += blockDim.x) {
        const int r = e / HD, c = e % HD;
        const bool ok = k0 + r < T;
        const auto *src = base + (i64)(k0 + r) * ROW + c;
        ks[r * HDP + c] = ok ? src[D] : 0.f;
        vs[r * HDP + c] = ok ? src[2 * D] : 0.f;
      }
      __syncthreads();
      if (CAUSAL && k0 > tlast)
        continue;  // every key of the tile is masked for this warp
      const int u = k0 + lane;
)CU";
  s += perTile;
  s += R"CU(    }
#pragma unroll
    for (int i = 0; i < QPW; ++i) {
      const int t = q0 + warp + 8 * i;
      if (t >= T)
        continue;
)CU";
  s += finish;
  s += "    }\n  }\n";
  return s;
}

/// Queries per block for a query-tile kernel whose shared memory is
/// `fixed` + `perQuery` * BQ bytes; 0 if even 8 do not fit.
int64_t pickQueryTile(int64_t fixed, int64_t perQuery) {
  for (int64_t bq : {64, 32, 16, 8})
    if (fixed + perQuery * bq <= kSharedLimit)
      return bq;
  return 0;
}

/// Scores of the warp's queries against the lane's key, masked, folded into
/// the running max m and sum l (online softmax); the weights go to ws and
/// acc is rescaled.
const char *kOnlineSoftmax = R"CU(      float s[QPW];
      dots<QPW>(s, qs + warp * HD, 8 * HD, ks + lane * HDP);
#pragma unroll
      for (int i = 0; i < QPW; ++i) {
        const int t = q0 + warp + 8 * i;
        const bool valid = u < T && t < T && (!CAUSAL || u <= t);
        const float sc = valid ? s[i] * SCALE : -GTC_INF;
        const float mx = fmaxf(m[i], warp_max(sc));
        const float alpha = mx == -GTC_INF ? 1.f : expf(m[i] - mx);
        const float p = valid ? expf(sc - mx) : 0.f;
        l[i] = l[i] * alpha + warp_sum(p);
        m[i] = mx;
        ws[warp][i][lane] = p;
#pragma unroll
        for (int j = 0; j < NC; ++j)
          acc[i][j] *= alpha;
      }
      __syncwarp();
      weighted<QPW>(acc, ws[warp], vs, lane);
      __syncwarp();
)CU";

const char *kForwardState = R"CU(    float m[QPW], l[QPW], acc[QPW][NC];
#pragma unroll
    for (int i = 0; i < QPW; ++i) {
      m[i] = -GTC_INF;
      l[i] = 0.f;
#pragma unroll
      for (int j = 0; j < NC; ++j)
        acc[i][j] = 0.f;
    }
)CU";

/// CpuExecutor's attention(): softmax(q k^T / sqrt(hd)) v per head, with an
/// online softmax over key tiles (flash-attention style, fp32).
bool Emitter::attention() {
  int qkv = k->inputs[0], y = k->outputs[0];
  const auto &qs = shape(qkv);
  if (qs.size() != 3 || qs[2] % 3 != 0)
    return fail("attention takes qkv of shape [B, T, 3D]");
  AttnShape s{qs[0], qs[1], qs[2] / 3, k->intAttr("heads", 1), 0};
  if (s.h <= 0 || s.d % s.h != 0)
    return fail("the model width is not a multiple of the heads");
  s.hd = s.d / s.h;
  if (count(y) != s.b * s.t * s.d)
    return fail("attention result size does not match");
  bool causal = k->intAttr("causal", 1);
  float scale = 1.0f / std::sqrt(static_cast<float>(s.hd));
  int64_t hdp = laneRowStride(s.hd);
  int64_t bq = pickQueryTile(4 * 2 * 32 * hdp, 4 * s.hd + 4 * 32);
  if (!bq)
    return fail("head size " + str(s.hd) +
                " is too large for the GPU attention kernel");
  int64_t qt = ceilDiv(s.t, bq);
  std::string consts = attnConsts(s, causal, scale) +
                       "constexpr int BQ = " + str(bq) +
                       ", QPW = BQ / 8;  // queries per block and warp\n"
                       "constexpr int QT = " +
                       str(qt) + ";  // query tiles\n" + dotsSnippet(s.hd) +
                       kWeightedSnippet;
  std::string finish = R"CU(      auto *out = y + ((i64)b * T + t) * D + h * HD;
#pragma unroll
      for (int j = 0; j < NC; ++j)
        if (lane + 32 * j < HD)
          out[lane + 32 * j] = acc[i][j] / l[i];
)CU";
  std::string body = attnQueryLoop(false, kForwardState, kOnlineSoftmax, finish);
  launch("", "one block per " + str(bq) + " queries of one (batch, head): " +
                 str(s.b * s.h * qt) + " tiles, online softmax over " +
                 str(s.t) + " keys",
         {in(qkv, "qkv"), out(y, "y")}, kWarpHelpers, consts, body,
         std::min(s.b * s.h * qt, kMaxRowGrid));
  return true;
}

/// CpuExecutor's attentionGrad() in three deterministic passes:
///   stats: the forward pass again, keeping per query lse = m + log(l) and
///          delta = dy . y (= sum_u p_u dp_u) in the workspace;
///   dq:    per query, dq = sum_u ds_u k_u with ds = p (dy.v_u - delta) scale;
///   dkdv:  per key, dv = sum_t p_t dy_t and dk = sum_t ds_t q_t.
/// Every element of dqkv is written once, by the thread that owns it.
bool Emitter::attentionGrad() {
  int dy = k->inputs[0], qkv = k->inputs[1], dq = k->outputs[0];
  const auto &qs = shape(qkv);
  if (qs.size() != 3 || qs[2] % 3 != 0)
    return fail("attention_grad takes qkv of shape [B, T, 3D]");
  AttnShape s{qs[0], qs[1], qs[2] / 3, k->intAttr("heads", 1), 0};
  if (s.h <= 0 || s.d % s.h != 0)
    return fail("the model width is not a multiple of the heads");
  s.hd = s.d / s.h;
  if (count(dy) != s.b * s.t * s.d || count(dq) != count(qkv))
    return fail("attention_grad operand sizes do not match");
  bool causal = k->intAttr("causal", 1);
  float scale = static_cast<float>(1.0 / std::sqrt(double(s.hd)));
  int64_t hdp = laneRowStride(s.hd);
  needWorkspace(4 * 2 * s.b * s.h * s.t);
  std::string common = attnConsts(s, causal, scale);
  auto tooLarge = [&] {
    return fail("head size " + str(s.hd) +
                " is too large for the GPU attention kernels");
  };

  // Pass 1: statistics.
  int64_t bq = pickQueryTile(4 * 2 * 32 * hdp, 4 * s.hd + 4 * 32);
  if (!bq)
    return tooLarge();
  int64_t qt = ceilDiv(s.t, bq);
  std::string consts = common + "constexpr int BQ = " + str(bq) +
                       ", QPW = BQ / 8;\nconstexpr int QT = " + str(qt) +
                       ";\n" + dotsSnippet(s.hd) + kWeightedSnippet;
  std::string finish = R"CU(      const auto *g = dy + ((i64)b * T + t) * D + h * HD;
      float delta = 0.f;
#pragma unroll
      for (int j = 0; j < NC; ++j)
        if (lane + 32 * j < HD)
          delta += g[lane + 32 * j] * (acc[i][j] / l[i]);
      delta = warp_sum(delta);
      if (lane == 0) {
        float *st = stats + (((i64)b * H + h) * T + t) * 2;
        st[0] = m[i] + logf(l[i]);
        st[1] = delta;
      }
)CU";
  launch("stats",
         "forward recomputation, one block per " + str(bq) +
             " queries of one (batch, head); lse and dy.y per query to the "
             "workspace",
         {in(dy, "dy"), in(qkv, "qkv"), ws("float", "stats")}, kWarpHelpers,
         consts, attnQueryLoop(false, kForwardState, kOnlineSoftmax, finish),
         std::min(s.b * s.h * qt, kMaxRowGrid));

  // Pass 2: dq.
  bq = pickQueryTile(4 * 2 * 32 * hdp, 8 * s.hd + 4 * 32);
  if (!bq)
    return tooLarge();
  qt = ceilDiv(s.t, bq);
  consts = common + "constexpr int BQ = " + str(bq) +
           ", QPW = BQ / 8;\nconstexpr int QT = " + str(qt) + ";\n" +
           dotsSnippet(s.hd) + kWeightedSnippet;
  std::string state = R"CU(    float lse[QPW], delta[QPW], acc[QPW][NC];
#pragma unroll
    for (int i = 0; i < QPW; ++i) {
      const int t = min(q0 + warp + 8 * i, T - 1);
      const float *st = stats + (((i64)b * H + h) * T + t) * 2;
      lse[i] = st[0];
      delta[i] = st[1];
#pragma unroll
      for (int j = 0; j < NC; ++j)
        acc[i][j] = 0.f;
    }
)CU";
  std::string perTile = R"CU(      float s[QPW], dp[QPW];
      dots<QPW>(s, qs + warp * HD, 8 * HD, ks + lane * HDP);
      dots<QPW>(dp, gs + warp * HD, 8 * HD, vs + lane * HDP);
#pragma unroll
      for (int i = 0; i < QPW; ++i) {
        const int t = q0 + warp + 8 * i;
        const bool valid = u < T && t < T && (!CAUSAL || u <= t);
        const float p = valid ? expf(s[i] * SCALE - lse[i]) : 0.f;
        ws[warp][i][lane] = p * (dp[i] - delta[i]) * SCALE;
      }
      __syncwarp();
      weighted<QPW>(acc, ws[warp], ks, lane);
      __syncwarp();
)CU";
  finish = R"CU(      auto *out = dqkv + ((i64)b * T + t) * ROW + h * HD;
#pragma unroll
      for (int j = 0; j < NC; ++j)
        if (lane + 32 * j < HD)
          out[lane + 32 * j] = acc[i][j];
)CU";
  launch("dq",
         "one block per " + str(bq) +
             " queries of one (batch, head); dq = sum over keys of ds k",
         {in(dy, "dy"), in(qkv, "qkv"), wsIn("float", "stats"),
          out(dq, "dqkv")},
         kWarpHelpers, consts, attnQueryLoop(true, state, perTile, finish),
         std::min(s.b * s.h * qt, kMaxRowGrid));

  // Pass 3: dk and dv. A block takes BKY keys of one (batch, head), each
  // warp KPW of them (u = u0 + warp + 8 i); lanes take the 32 queries of a
  // query tile (t = t0 + lane) staged in qs and gs.
  int64_t kpw = 0;
  for (int64_t c : {4, 2, 1})
    if (4 * (2 * 8 * c * s.hd + 2 * 32 * hdp + 2 * 8 * c * 32 + 2 * 32) <=
        kSharedLimit) {
      kpw = c;
      break;
    }
  if (!kpw)
    return tooLarge();
  int64_t bk = 8 * kpw, kt = ceilDiv(s.t, bk);
  consts = common + "constexpr int KPW = " + str(kpw) +
           ", BKY = 8 * KPW;  // keys per warp and block\nconstexpr int KT = " +
           str(kt) + ";  // key tiles\n" + dotsSnippet(s.hd) +
           kWeightedSnippet;
  std::string body = R"CU(  __shared__ __align__(16) float kk[BKY * HD];
  __shared__ __align__(16) float vv[BKY * HD];
  __shared__ __align__(16) float qs[32 * HDP];
  __shared__ __align__(16) float gs[32 * HDP];
  __shared__ __align__(16) float ps[8][KPW][32];
  __shared__ __align__(16) float dss[8][KPW][32];
  __shared__ float lses[32], deltas[32];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int tile = blockIdx.x; tile < B * H * KT; tile += gridDim.x) {
    const int kt = tile % KT;  // the longest causal tiles first
    const int h = tile / KT % H, b = tile / KT / H;
    const int u0 = kt * BKY;
    const auto *base = qkv + (i64)b * T * ROW + h * HD;
    const float *st = stats + ((i64)b * H + h) * T * 2;
    __syncthreads();
    for (int e = threadIdx.x; e < BKY * HD; e += blockDim.x) {
      const int r = e / HD, c = e % HD;
      const bool ok = u0 + r < T;
      const auto *src = base + (i64)(u0 + r) * ROW + c;
      kk[e] = ok ? src[D] : 0.f;
      vv[e] = ok ? src[2 * D] : 0.f;
    }
    float dk[KPW][NC], dv[KPW][NC];
#pragma unroll
    for (int i = 0; i < KPW; ++i)
#pragma unroll
      for (int j = 0; j < NC; ++j)
        dk[i][j] = dv[i][j] = 0.f;
    for (int t0 = CAUSAL ? u0 / 32 * 32 : 0; t0 < T; t0 += 32) {
      __syncthreads();
      for (int e = threadIdx.x; e < 32 * HD; e += blockDim.x) {
        const int r = e / HD, c = e % HD;
        const bool ok = t0 + r < T;
        qs[r * HDP + c] = ok ? base[(i64)(t0 + r) * ROW + c] : 0.f;
        gs[r * HDP + c] = ok ? dy[((i64)b * T + t0 + r) * D + h * HD + c] : 0.f;
      }
      if (threadIdx.x < 32) {
        const bool ok = t0 + threadIdx.x < T;
        lses[threadIdx.x] = ok ? st[(t0 + threadIdx.x) * 2] : 0.f;
        deltas[threadIdx.x] = ok ? st[(t0 + threadIdx.x) * 2 + 1] : 0.f;
      }
      __syncthreads();
      if (CAUSAL && t0 + 31 < u0 + warp)
        continue;  // every query of the tile precedes the warp's keys
      const int t = t0 + lane;
      float s[KPW], dp[KPW];
      dots<KPW>(s, kk + warp * HD, 8 * HD, qs + lane * HDP);
      dots<KPW>(dp, vv + warp * HD, 8 * HD, gs + lane * HDP);
#pragma unroll
      for (int i = 0; i < KPW; ++i) {
        const int u = u0 + warp + 8 * i;
        const bool valid = u < T && t < T && (!CAUSAL || t >= u);
        const float p = valid ? expf(s[i] * SCALE - lses[lane]) : 0.f;
        ps[warp][i][lane] = p;
        dss[warp][i][lane] = p * (dp[i] - deltas[lane]) * SCALE;
      }
      __syncwarp();
      weighted<KPW>(dv, ps[warp], gs, lane);
      weighted<KPW>(dk, dss[warp], qs, lane);
      __syncwarp();
    }
#pragma unroll
    for (int i = 0; i < KPW; ++i) {
      const int u = u0 + warp + 8 * i;
      if (u >= T)
        continue;
      auto *out = dqkv + ((i64)b * T + u) * ROW + h * HD;
#pragma unroll
      for (int j = 0; j < NC; ++j)
        if (lane + 32 * j < HD) {
          out[D + lane + 32 * j] = dk[i][j];
          out[2 * D + lane + 32 * j] = dv[i][j];
        }
    }
  }
)CU";
  launch("dkdv",
         "one block per " + str(bk) +
             " keys of one (batch, head); dk, dv = sums over queries",
         {in(dy, "dy"), in(qkv, "qkv"), wsIn("float", "stats"),
          out(dq, "dqkv")},
         kWarpHelpers, consts, body, std::min(s.b * s.h * kt, kMaxRowGrid));
  return true;
}

} // namespace

bool gtc::codegen::emitCuda(const Plan &plan, CudaProgram &program,
                            std::string &error) {
  return Emitter(plan, program, error).run();
}

rt::CudaProgramFn gtc::codegen::programCache(const std::string &tool) {
  auto programs = std::make_shared<
      std::map<const Plan *, std::unique_ptr<CudaProgram>>>();
  return [programs, tool](const Plan &plan) -> const CudaProgram * {
    auto &slot = (*programs)[&plan];
    if (!slot) {
      auto program = std::make_unique<CudaProgram>();
      std::string error;
      if (!emitCuda(plan, *program, error)) {
        std::cerr << tool << ": error: " << error << "\n";
        return nullptr;
      }
      slot = std::move(program);
    }
    return slot.get();
  };
}
