//===- CudaEmitter.cpp - CUDA code generation for plans -------------------===//
//
// Every plan kernel becomes GEMMs (matmul, linear) or NVRTC translation units
// whose shapes and attributes are compile-time constants. The functions are
// those of runtime/lib/Cpu/CpuExecutor.cpp; the comments of each emitter name
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
//
// This file holds the emitter core (launches, fusion planning, dispatch);
// each family of kernels has its own file (ElementwiseKernels.cpp, ...),
// and EmitterImpl.h the pieces they share.
//===----------------------------------------------------------------------===//

#include "EmitterImpl.h"
#include "gtc/Runtime/Startup.h"

using namespace gtc;
using namespace gtc::rt;
using namespace gtc::codegen::detail;

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
                     int64_t grid, int64_t block, int minBlocks,
                     const std::string &attributes) {
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
  std::string note =
      "// gtc plan kernel " + str(index) + ": " + opName(k->op) + attrs + "\n";
  for (int id : k->inputs)
    note += "//   in  " + describe(id) + "\n";
  for (int id : k->outputs)
    note += "//   out " +
            (id < 0 ? std::string("(not stored)") : describe(id)) + "\n";
  l.comment = note + "// " + l.name + ": " + what + "\n";
  std::string src = cuh::prelude;
  if (body.find("gtc_scalar::") != std::string::npos ||
      consts.find("gtc_scalar::") != std::string::npos)
    src += kScalarOpsSnippet;
  if (helpers & (kWarpHelpers | kRowHelpers | kArgmaxHelpers))
    src += cuh::warp;
  if (helpers & kRowHelpers)
    src += cuh::row;
  if (helpers & kArgmaxHelpers)
    src += cuh::argmax;
  if (helpers & kPackHelpers)
    src += cuh::pack;
  if (helpers & (kAsyncHelpers | kClusterHelpers))
    src += cuh::async;
  if (helpers & kClusterHelpers)
    src += cuh::cluster;
  src += "\n" + consts;
  src += "\nextern \"C\" __global__ void __launch_bounds__(" + str(block) +
         (minBlocks > 0 ? ", " + str(minBlocks) : "") + ")" +
         (attributes.empty() ? "" : " " + attributes) + "\n" +
         CudaLaunch::kKernelEntry + "(";
  for (size_t i = 0; i < args.size(); ++i) {
    const Arg &a = args[i];
    std::string type = a.buffer < 0 ? a.wsType : ctype(a.buffer);
    src += i ? ",\n    " : "";
    if (a.map.rows > 0) {
      src += "const __grid_constant__ gtc_tensor_map " + a.name;
      l.maps.resize(args.size());
      l.maps[i] = a.map;
    } else {
      src += (a.output ? type + " *" : "const " + type + " *") +
             "__restrict__ " + a.name;
    }
    l.buffers.push_back(a.buffer);
  }
  src += std::string(") {\n") + CudaLaunch::kDependentWait + body + "}\n";
  l.source = std::move(src);
  launches.push_back(std::move(l));
}

bool Emitter::run() {
  program.kernels.clear();
  program.workspaceBytes = 0;
  for (size_t i = 0; i < plan.kernels.size(); ++i) {
    index = static_cast<int>(i);
    k = &plan.kernels[i];
    launches.clear();
    workspace = 0;
    for (const std::vector<int> *ids : {&k->inputs, &k->outputs})
      for (int id : *ids)
        if (id < 0 || id >= static_cast<int>(plan.buffers.size()))
          return fail("names buffer " + str(id) + ", which does not exist");
    if (!emitKernel())
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
  case OpKind::AllReduce: {
    // A bucket's NCCL group, which the executor issues on its
    // communication stream (CudaLaunch::Kind::AllReduce).
    if (k->inputs.size() != k->outputs.size() || k->inputs.empty())
      return wrong();
    CudaLaunch l;
    l.kind = CudaLaunch::Kind::AllReduce;
    l.name = "all_reduce bucket";
    l.buffers = k->inputs;
    l.buffers.insert(l.buffers.end(), k->outputs.begin(), k->outputs.end());
    l.comment = "// all-reduce (mean over the processes) of " +
                str(k->inputs.size()) + " gradients\n";
    launches.push_back(std::move(l));
    return true;
  }
#define GTC_ACTIVATION_CASE(Op, name) case OpKind::Op:
    GTC_ACTIVATION_OPS(GTC_ACTIVATION_CASE)
#undef GTC_ACTIVATION_CASE
  case OpKind::Neg:
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
  case OpKind::Glu:
    return arity(1, 1) ? glu(false) : wrong();
  case OpKind::GluGrad:
    return arity(2, 1) ? glu(true) : wrong();
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
    return arity(2, 1) ? matmul() && preferSmallGemm() : wrong();
  case OpKind::Linear:
    return (arity(2, 1) || arity(3, 1)) ? linear() && preferSmallGemm()
                                        : wrong();
  case OpKind::Sum:
  case OpKind::Mean:
    return arity(1, 1) ? sumOrMean(k->op == OpKind::Mean) : wrong();
  case OpKind::SumTo:
    return arity(1, 1) ? sumTo() : wrong();
  case OpKind::Attention:
    return arity(1, 2) || arity(3, 2) ? attention() : wrong();
  case OpKind::AttentionGrad:
    return arity(4, 1) || arity(6, 3) ? attentionGrad() : wrong();
  // gt-autocast keeps these in f32: their kernels compute f32 only.
  case OpKind::LayerNorm:
    return !needF32() ? false : arity(3, 1) ? layernorm() : wrong();
  case OpKind::LayerNormGrad:
    return !needF32() ? false : arity(3, 3) ? layernormGrad() : wrong();
  case OpKind::RmsNorm:
    return !needF32() ? false : arity(2, 1) ? layernorm() : wrong();
  case OpKind::RmsNormGrad:
    return !needF32() ? false : arity(3, 2) ? layernormGrad() : wrong();
  case OpKind::Softmax:
    return !needF32() ? false : arity(1, 1) ? softmax(false) : wrong();
  case OpKind::SoftmaxGrad:
    return !needF32() ? false : arity(2, 1) ? softmax(true) : wrong();
  case OpKind::Rope:
    return arity(1, 1) ? rope() : arity(2, 1) ? ropeAt() : wrong();
  case OpKind::CacheUpdate:
    return arity(3, 1) ? cacheUpdate() : wrong();
  case OpKind::CachedAttention:
    return arity(4, 1) ? cachedAttention() : wrong();
  case OpKind::Dropout:
    return arity(1, 1) ? dropout() : wrong();
  case OpKind::Embedding:
    return !needF32() ? false : arity(2, 1) ? embedding() : wrong();
  case OpKind::EmbeddingGrad:
    return !needF32() ? false : arity(2, 1) ? embeddingGrad() : wrong();
  case OpKind::CrossEntropy:
    return !needF32() ? false : arity(2, 1) ? crossEntropy() : wrong();
  case OpKind::CrossEntropyGrad:
    return !needF32() ? false : arity(3, 1) ? crossEntropyGrad() : wrong();
  case OpKind::Accuracy: // of logits of any float type (argmax is exact)
    return arity(2, 1) ? accuracy() : wrong();
  }
  return fail("the CUDA code generator has no kernel for this op");
}

void Emitter::finalSum(const std::string &suffix, int outBuf, int64_t n,
                       const std::string &valueType, const std::string &result,
                       int64_t first) {
  // Each thread loads 8 values before it adds them (one load at a time,
  // 256 threads took 30 us for GPT-2's 16384). The values are the
  // workspace's from its element `first` on.
  std::string consts = "constexpr i64 N = " + str(n) +
                       ";\nconstexpr i64 FIRST = " + str(first) + ";\n";
  std::string body = R"CU(  __shared__ double red[32];
  double s = 0.0;
  for (i64 i0 = threadIdx.x; i0 < N; i0 += 8 * 1024) {
    double v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u)
      v[u] = i0 + u * 1024 < N ? (double)part[FIRST + i0 + u * 1024] : 0.0;
#pragma unroll
    for (int u = 0; u < 8; ++u)
      s += v[u];
  }
  s = row_sum<1024>(s, red);
  if (threadIdx.x == 0)
    y[0] = )CU" + result + ";\n";
  launch(suffix,
         "one block sums the " + str(n) + " partial results in a fixed order",
         {wsIn(valueType, "part"), out(outBuf, "y")},
         kWarpHelpers | kRowHelpers, consts, body, 1, 1024);
}

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
      rt::StartupPhase phase("kernel generation");
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
