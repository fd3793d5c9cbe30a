//===- EmitterImpl.h - Shared pieces of the CUDA emitter --------*- C++ -*-===//
//
// Private to compiler/lib/CodeGen (not installed): the constants, helper
// functions, device-code snippets and the Emitter class that the emitter
// core (CudaEmitter.cpp) and the kernel-family files (*Kernels.cpp) share.
//===----------------------------------------------------------------------===//

#ifndef GTC_LIB_CODEGEN_EMITTERIMPL_H
#define GTC_LIB_CODEGEN_EMITTERIMPL_H

#include "gtc/CodeGen/CudaEmitter.h"
#include "gtc/CodeGen/SmallKernels.h"
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <initializer_list>
#include <map>
#include <iostream>
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


/// Grid cap of grid-stride elementwise kernels: 8 blocks per SM of an H100.
inline constexpr int64_t kMaxGrid = 132 * 8;
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

inline const char *const kPrelude = R"CU(typedef long long i64;
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

/// runtime/include/gtc/Runtime/ScalarOps.h as it is: the activations'
/// formulas, which the CPU executor compiles too. Added to a kernel that
/// calls them (gtc_scalar::).
inline const char *const kScalarOpsSnippet =
#include "gtc/Runtime/ScalarOpsText.inc"
    ;

inline const char *const kWarpSnippet = R"CU(
// Butterfly reductions: every lane gets the same, deterministic result. Over
// the W lanes of an aligned group (W a power of two up to 32): the lanes of
// a warp all take part, each group reducing its own values.
struct Add {
  template <typename T> __device__ T operator()(T a, T b) const { return a + b; }
};
struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
template <int W = 32, typename T, typename Op>
__device__ __forceinline__ T warp_reduce(T v, Op op) {
#pragma unroll
  for (int o = W / 2; o > 0; o >>= 1)
    v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) { return warp_reduce(v, Add()); }
__device__ __forceinline__ double warp_sum(double v) { return warp_reduce(v, Add()); }
__device__ __forceinline__ float warp_max(float v) { return warp_reduce(v, Max()); }
)CU";

inline const char *const kRowSnippet = R"CU(
// Reductions over the RT threads that share a row: part of a warp (RT a
// power of two below 32), one warp (RT = 32) or RT / 32 consecutive warps. Every thread of the block must call them (they
// synchronize the block when RT > 32); every thread of the row gets the
// result, combined in a fixed order. `sh` holds one value per warp.
//
// across_warps: the row's warps combine their reduced values (nothing when
// RT <= 32).
template <int RT, typename T, typename Op>
__device__ __forceinline__ T across_warps(T v, T *sh, Op op) {
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
template <int RT, typename T, typename Op>
__device__ __forceinline__ T row_reduce(T v, T *sh, Op op) {
  return across_warps<RT>(warp_reduce<(RT < 32 ? RT : 32)>(v, op), sh, op);
}
template <int RT, typename T>
__device__ __forceinline__ T row_sum(T v, T *sh) { return row_reduce<RT>(v, sh, Add()); }
// A row's sum of float terms, as a double: each warp adds its lanes' terms
// in float, the warps' sums are added in double. (Double shuffles cost the
// layer norm gradient 7% of its time.)
template <int RT>
__device__ __forceinline__ double row_sum_wide(float v, double *sh) {
  return across_warps<RT>((double)warp_reduce<(RT < 32 ? RT : 32)>(v, Add()),
                          sh, Add());
}
template <int RT>
__device__ __forceinline__ float row_max(float v, float *sh) {
  return row_reduce<RT>(v, sh, Max());
}
)CU";

inline const char *const kArgmaxSnippet = R"CU(
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

inline const char *const kPackSnippet = R"CU(
// V consecutive elements of type T in one aligned access of V * sizeof(T)
// bytes (callers index them at multiples of V from an aligned start).
template <typename T, int V> struct alignas(sizeof(T) * V) pack_t { T e[V]; };
template <int V, typename T>
__device__ __forceinline__ void loadv(const T *p, float *v) {
  const pack_t<T, V> q = *reinterpret_cast<const pack_t<T, V> *>(p);
#pragma unroll
  for (int e = 0; e < V; ++e)
    v[e] = (float)q.e[e];
}
template <int V, typename T>
__device__ __forceinline__ void storev(T *p, const float *v) {
  pack_t<T, V> q;
#pragma unroll
  for (int e = 0; e < V; ++e)
    q.e[e] = v[e];
  *reinterpret_cast<pack_t<T, V> *>(p) = q;
}
)CU";

inline const char *const kAsyncSnippet = R"CU(
typedef unsigned u32;
// The shared-memory address of p (the compiler folds it into the
// instruction's address: no per-use conversion).
__device__ __forceinline__ u32 smem_u32(const void *p) {
  return static_cast<u32>(__cvta_generic_to_shared(p));
}
// B (4, 8 or 16) bytes global -> shared, asynchronously; zeros when !ok.
template <int B>
__device__ __forceinline__ void cp_async(void *dst, const void *src, bool ok) {
  static_assert(B == 4 || B == 8 || B == 16, "cp.async copies 4, 8 or 16 bytes");
  if (B == 16) // bypassing L1
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(smem_u32(dst)), "l"(src), "r"(ok ? 16 : 0));
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n"
                 :: "r"(smem_u32(dst)), "l"(src), "n"(B), "r"(ok ? B : 0));
}
// V elements of T global -> shared, zeros when !ok: asynchronously where
// the copy is 4, 8 or 16 bytes, else (one 16-bit element) with a plain load.
template <int V, typename T>
__device__ __forceinline__ void copy_async(void *dst, const T *src, bool ok) {
  constexpr int B = V * (int)sizeof(T);
  if constexpr (B >= 4) {
    cp_async<B>(dst, src, ok);
  } else {
    static_assert(B == 2, "one 16-bit element");
    *reinterpret_cast<unsigned short *>(dst) =
        ok ? *reinterpret_cast<const unsigned short *>(src) : 0;
  }
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
// Waits until at most N of the committed groups are still in flight.
template <int N> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" :: "n"(N));
}
)CU";

inline const char *const kClusterSnippet = R"CU(
// Thread-block clusters (sm_90): CLUSTERS is 1 where the architecture has
// them, and GTC_CLUSTER, placed after __launch_bounds__, makes clusters of
// S CTAs (the kernel's constant). CTAs push data into each other's shared
// memory with st.async, each store completing on the receiving CTA's
// mbarrier, which expects the bytes that will arrive: the receiver waits
// for its data alone, and no cluster-wide release (a GPU-wide memory
// barrier on sm_90) is needed. Protocol, every thread of every CTA:
//   push_begin(bar, bytes)   first thing: thread 0 sets up this CTA's
//                            mbarrier for `bytes`, then the CTA arrives on
//                            the cluster barrier (it has started);
//   push_ready()             before the first push: waits for every CTA of
//                            the cluster to have started;
//   push(p, bar, rank, ...)  stores into CTA `rank`'s copy of p;
//   push_wait(bar)           waits until this CTA's bytes have arrived.
#if __CUDA_ARCH__ >= 900
#define CLUSTERS 1
__device__ __forceinline__ u32 cluster_rank() {
  u32 r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
// p's address in the shared memory of the cluster's CTA `rank`.
__device__ __forceinline__ u32 remote(const void *p, u32 rank) {
  u32 r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(smem_u32(p)), "r"(rank));
  return r;
}
__device__ __forceinline__ void push_begin(unsigned long long *bar, u32 bytes) {
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(smem_u32(bar)) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                 :: "r"(smem_u32(bar)), "r"(bytes) : "memory");
  }
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
}
__device__ __forceinline__ void push_ready() {
  asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
}
__device__ __forceinline__ void push(float *p, unsigned long long *bar, u32 rank,
                                     float x, float y) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [%0], {%1, %2}, [%3];"
               :: "r"(remote(p, rank)), "f"(x), "f"(y), "r"(remote(bar, rank)) : "memory");
}
__device__ __forceinline__ void push(float *p, unsigned long long *bar, u32 rank,
                                     float x, float y, float z, float w) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, [%5];"
               :: "r"(remote(p, rank)), "f"(x), "f"(y), "f"(z), "f"(w),
                  "r"(remote(bar, rank)) : "memory");
}
__device__ __forceinline__ void push_wait(unsigned long long *bar) {
  u32 done = 0;
  while (!done)
    asm volatile("{\n .reg .pred p;\n"
                 " mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\n"
                 " selp.u32 %0, 1, 0, p;\n}"
                 : "=r"(done) : "r"(smem_u32(bar)) : "memory");
}
#define GTC_CLUSTER __cluster_dims__(S, 1, 1)
#else
#define CLUSTERS 0
#define GTC_CLUSTER
#endif
)CU";

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
  bool columnSumTiles(const std::vector<Operand> &ops,
                      const std::vector<Step> &steps,
                      const std::vector<std::pair<int, std::string>> &outs,
                      const std::vector<std::pair<int, std::string>> &sums,
                      const std::vector<int64_t> &ys, const std::string &what);
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
  bool normRegion();
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
  /// Whether attention over the buffers `ids` (all bf16, or all f16) with
  /// head size `hd` takes the tensor-core kernels (FlashAttention.cpp).
  bool tensorCoreAttention(int64_t hd, std::initializer_list<int> ids);
  /// The constants and helpers of the tensor-core kernels over `qkv`.
  std::string flashConsts(int qkv, int64_t b, int64_t t, int64_t d, int64_t h,
                          bool causal);
  bool flashAttention(int64_t b, int64_t t, int64_t d, int64_t h, bool causal);
  bool flashAttentionGrad(int64_t b, int64_t t, int64_t d, int64_t h,
                          bool causal);
  bool embedding();
  bool embeddingGrad();
  bool scatterAddRegion();
  /// Adds row i of `dy` into row ids[i] of `dt` (zeroed first when `zero`).
  bool scatterRows(int dy, int ids, int dt, bool zero);
  bool crossEntropy();
  bool crossEntropyGrad();
  bool crossEntropyKernel(int x, int lab, int y, int g, int dx);
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
    int bias = -1, biasGrad = -1, colSum = -1;
    bool reluGrad = false;
    DType logitType = DType::F32, gradType = DType::F32, dhType = DType::F32,
          dwType = DType::F32, biasGradType = DType::F32,
          colSumType = DType::F32;
  };
  /// The classifier region as one kernel (LossKernels.cpp).
  bool smallHead(int h, int w, int labels, int g, int loss, int dh, int dw,
                 const SmallHead &head);
  bool accuracy();
  bool columnTiles(int x, int y, int64_t a, int64_t r, int64_t kk, int vec,
                   const std::string &sc, const std::string &what);
  void finalColumns(int y, int64_t outputs, const std::string &consts);
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
