//===- ElementwiseKernels.cpp - Elementwise and data-movement kernels -----===//
//
// Grid-stride elementwise kernels (single ops, fusion regions, multi-tensor
// regions, epilogue regions), dropout and the layout ops: copy, cast,
// broadcast, transpose, pad/slice.
//===----------------------------------------------------------------------===//

#include "EmitterImpl.h"
#include "gtc/Runtime/ScalarOps.h"
#include <set>

using namespace gtc;
using namespace gtc::rt;
using namespace gtc::codegen::detail;

//===----------------------------------------------------------------------===//
// Elementwise kernels
//===----------------------------------------------------------------------===//

/// The device function of each step (f0, f1, ...: CpuExecutor's lambdas)
/// and the rounding helpers they need; fills `typeOf` (value name ->
/// compute type) for the operands and steps.
std::string
Emitter::stepFunctions(const std::vector<Operand> &ops,
                       const std::vector<Step> &steps,
                       std::map<std::string, std::string> &typeOf) {
  std::string consts;
  for (const Operand &o : ops)
    typeOf[o.name] = computeType(o.buffer);
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
  return consts;
}

/// Statements that load each operand (`load(operand)`) and compute the
/// steps in order for one element, each value rounded to its 16-bit type
/// when it has one, as the CPU executor stores it.
std::string Emitter::computeSteps(
    const std::vector<Operand> &ops, const std::vector<Step> &steps,
    const std::map<std::string, std::string> &typeOf,
    const std::function<std::string(const Operand &)> &load,
    const std::string &indent) {
  std::string c;
  for (const Operand &o : ops)
    c += indent + "const " + typeOf.at(o.name) + " " + o.name + " = " +
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
    c += indent + "const " + typeOf.at(st.result) + " " + st.result + " = " +
         call + ";\n";
  }
  return c;
}

/// How an operand is read at element `i` in the element-at-a-time loops
/// (strided operands at their gathered offset `o_NAME`).
static std::string loadAt(const Operand &o) {
  std::string idx = o.access == Access::Full       ? "i"
                    : o.access == Access::Scalar   ? "0"
                    : o.access == Access::Trailing ? "i % P_" + o.name
                                                   : "o_" + o.name;
  return "p_" + o.name + "[" + idx + "]";
}

/// The kernel parameters of the operands (p_NAME) and outputs, and the
/// periods of trailing operands (P_NAME).
std::string
Emitter::operandArgs(const std::vector<Operand> &ops,
                     const std::vector<std::pair<int, std::string>> &outs,
                     const std::string &it, std::vector<Arg> &args) {
  std::string consts;
  for (const Operand &o : ops) {
    args.push_back(in(o.buffer, "p_" + o.name));
    if (o.access == Access::Trailing)
      consts += "constexpr " + it + " P_" + o.name + " = " + str(o.period) +
                ";  // period of " + o.name + "\n";
  }
  for (const auto &[buffer, value] : outs)
    args.push_back(out(buffer, "p_" + value));
  return consts;
}

/// The gather of the strided operands' offsets at element `i`, or "".
std::string Emitter::gatherStrided(const std::vector<Operand> &ops,
                                   const std::vector<int64_t> &ys,
                                   const std::string &it,
                                   const std::string &indent) {
  std::vector<std::vector<int64_t>> strides;
  std::vector<std::string> offs;
  for (const Operand &o : ops)
    if (o.access == Access::Strided) {
      strides.push_back(o.strides);
      offs.push_back("o_" + o.name);
    }
  if (offs.empty())
    return "";
  return emitGather(makeGather(ys, strides), "i", offs, it, indent);
}

/// One thread per output element (per V with vector accesses), grid-stride:
/// loads the inputs (broadcast by their access), computes the steps in
/// order in registers, stores the outputs. A step's value is rounded to
/// its 16-bit type when it has one, as the CPU executor stores it. V
/// consecutive elements make one 16-byte access of the narrowest type
/// (8 when every array is 16-bit, else 4); an f32 one then takes two.
bool Emitter::elementwise(const std::vector<Operand> &ops,
                          const std::vector<Step> &steps,
                          const std::vector<std::pair<int, std::string>> &outs,
                          const std::string &what) {
  int64_t n = count(outs.front().first);
  int64_t narrow = 4; // the narrowest element of the arrays, in bytes
  for (const Operand &o : ops)
    if (o.access != Access::Scalar)
      narrow =
          std::min<int64_t>(narrow, dtypeBytes(plan.buffers[o.buffer].dtype));
  for (const auto &[buffer, value] : outs)
    narrow = std::min<int64_t>(narrow, dtypeBytes(plan.buffers[buffer].dtype));
  int64_t v = narrow == 2 ? 8 : 4;
  auto fits = [&](int64_t v) {
    if (n % v != 0)
      return false;
    for (const Operand &o : ops)
      if (o.access == Access::Strided ||
          (o.access == Access::Trailing && o.period % v != 0))
        return false;
    return true;
  };
  if (v == 8 && !fits(8))
    v = 4;
  bool vec = fits(v);
  int64_t items = vec ? n / v : n;
  bool wide = n > (int64_t(1) << 30);
  std::string it = wide ? "i64" : "int";
  // A thread an item: in a standalone harness of SwiGLU's two kernels
  // (33.5M bf16 elements, H200) this took 53 and 86 us where a grid of
  // kMaxGrid blocks striding over the items took 58 and 94, and a copy
  // kernel gained as much (in llama124m's step: within noise). The stride
  // stays for arrays of more than 2^22 blocks' items.
  int64_t grid = std::min(ceilDiv(items, kBlock), int64_t(1) << 22);

  std::vector<Arg> args;
  std::map<std::string, std::string> typeOf; // value name -> compute type
  std::string consts = "constexpr " + it + " N = " + str(n) + ";\n" +
                       (vec ? "constexpr int V = " + str(v) + ";\n" : "") +
                       operandArgs(ops, outs, it, args) +
                       stepFunctions(ops, steps, typeOf);
  auto compute = [&](const std::function<std::string(const Operand &)> &load,
                     const std::string &indent) {
    return computeSteps(ops, steps, typeOf, load, indent);
  };

  std::string body;
  std::string loopHead = "  for (" + it + " i = (" + it +
                         ")blockIdx.x * blockDim.x + threadIdx.x; i < " +
                         (vec ? "N / V" : "N") + "; i += (" + it +
                         ")gridDim.x * blockDim.x) {\n";
  if (vec) {
    auto pack = [&](int buffer) { return "pack_t<" + ctype(buffer) + ", V>"; };
    for (const Operand &o : ops) {
      if (o.access == Access::Scalar)
        body += "  const " + ctype(o.buffer) + " s_" + o.name + " = p_" +
                o.name + "[0];\n";
      else
        body += "  const " + pack(o.buffer) + " *v_" + o.name +
                " = reinterpret_cast<const " + pack(o.buffer) + " *>(p_" +
                o.name + ");\n";
    }
    for (const auto &[buffer, value] : outs)
      body += "  " + pack(buffer) + " *w_" + value + " = reinterpret_cast<" +
              pack(buffer) + " *>(p_" + value + ");\n";
    body += loopHead;
    for (const Operand &o : ops) {
      if (o.access == Access::Full)
        body += "    const " + pack(o.buffer) + " q_" + o.name + " = v_" +
                o.name + "[i];\n";
      else if (o.access == Access::Trailing)
        body += "    const " + pack(o.buffer) + " q_" + o.name + " = v_" +
                o.name + "[i % (P_" + o.name + " / V)];\n";
    }
    for (const auto &[buffer, value] : outs)
      body += "    " + pack(buffer) + " o_" + value + ";\n";
    body += "#pragma unroll\n    for (int c = 0; c < V; ++c) {\n";
    body += compute(
        [&](const Operand &o) {
          return o.access == Access::Scalar ? "s_" + o.name
                                            : "q_" + o.name + ".e[c]";
        },
        "      ");
    for (const auto &[buffer, value] : outs)
      body += "      o_" + value + ".e[c] = " + value + ";\n";
    body += "    }\n";
    for (const auto &[buffer, value] : outs)
      body += "    w_" + value + "[i] = o_" + value + ";\n";
    body += "  }\n";
  } else {
    body += loopHead;
    body += gatherStrided(ops, shape(outs.front().first), it, "    ");
    body += compute(loadAt, "    ");
    for (const auto &[buffer, value] : outs)
      body += "    p_" + value + "[i] = " + value + ";\n";
    body += "  }\n";
  }
  launch("",
         what + (vec ? ", " + str(v) + " elements a thread (16-byte accesses)"
                     : ""),
         args, vec ? unsigned(kPackHelpers) : 0u, consts, body, grid);
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

/// Whether ScalarOps.h has the activation `kind`'s function and derivative
/// (the kinds of gt.activation_grad and gt.glu).
static bool isActivationKind(const std::string &kind) {
  static const std::set<std::string> kinds = {
#define GTC_KIND(Op, name) #name,
      GTC_ACTIVATIONS(GTC_KIND)
#undef GTC_KIND
  };
  return kinds.count(kind) != 0;
}

/// The function of one element of an elementwise op: statements assigning
/// `r` from the named operands. The activations and their derivatives call
/// runtime/include/gtc/Runtime/ScalarOps.h's functions, which the CPU
/// executor calls too (launch() puts the header in the kernel's prelude).
bool Emitter::elementFn(const Kernel &kernel, ElementFn &fn) {
  const OpKind op = kernel.op;
  static const std::map<OpKind, std::string> unaries = {
#define GTC_ACTIVATION_FN(Op, name)                                            \
  {OpKind::Op, "r = gtc_scalar::" #name "_fwd(x);"},
      GTC_ACTIVATION_OPS(GTC_ACTIVATION_FN)
#undef GTC_ACTIVATION_FN
      {OpKind::Neg, "r = -x;"},
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
    fn = {{"x"}, kernel.intAttr("approximate", 0)
                     ? "r = gtc_scalar::gelu_tanh_fwd(x);"
                     : "r = gtc_scalar::gelu_fwd(x);"};
  } else if (op == OpKind::Cast) {
    if (kernel.outputs.size() != 1)
      return fail("a cast has one output");
    fn = {{"x"}, "r = static_cast<" + computeType(kernel.outputs[0]) + ">(x);"};
  } else if (op == OpKind::ActivationGrad) {
    const std::string kind = kernel.strAttr("kind", "");
    if (!isActivationKind(kind))
      return fail("unknown activation kind '" + kind + "'");
    fn = {{"dy", "x"}, "r = dy * gtc_scalar::" + kind + "_grad(x);"};
  } else {
    return fail(std::string("'") + opName(op) + "' is not elementwise: it cannot be in a fused "
                "elementwise kernel");
  }
  return true;
}

/// A multi-tensor region in one launch, as PyTorch's multi_tensor_apply:
/// the ops' items (groups of 4 elements, 16-byte accesses of f32, where the
/// count allows; else elements) are cut into tiles of TILE, the ops' tiles
/// numbered one after another; each block takes one, finds the tile's op by
/// a binary search of START, and each thread loads its
/// PER items of the tile before it computes and stores them. (One
/// grid-stride loop per op made thread 0 wait on GPT-2's 97 ops one after
/// another: 328 us, 52% of an H200's bandwidth.)
bool Emitter::multiTensor() {
  constexpr int per = 4;
  const int64_t tile = int64_t(kBlock) * per;
  std::map<int, std::string> name;
  std::vector<Arg> args;
  for (size_t i = 0; i < k->inputs.size(); ++i)
    if (name.emplace(k->inputs[i], "x" + str(i)).second)
      args.push_back(in(k->inputs[i], "x" + str(i)));
  std::set<int> outputs(k->outputs.begin(), k->outputs.end());
  std::string consts, cases, starts;
  int64_t tiles = 0, total = 0;
  int ops = 0;
  for (size_t j = 0; j < k->body.size(); ++j) {
    const Kernel &sub = k->body[j];
    if (sub.outputs.size() != 1 || !outputs.count(sub.outputs[0]))
      continue; // a value nothing reads
    int y = sub.outputs[0];
    ElementFn fn;
    if (!elementFn(sub, fn))
      return false;
    if (fn.params.size() != sub.inputs.size())
      return fail(std::string("fused op '") + opName(sub.op) + "' has " +
                  str(sub.inputs.size()) + " operands");
    // Regions start at multiples of 16 elements.
    const bool vec = count(y) % 4 == 0;
    const std::string v = vec ? "4" : "";
    const int64_t items = vec ? count(y) / 4 : count(y);
    // Written out PER times (arrays indexed in unrolled loops went to the
    // stack in a switch of 97 cases).
    std::vector<std::string> loads(per), calls(per, "(");
    std::string fnName = "f" + str(j);
    consts += "\n__device__ __forceinline__ " + computeType(y) + " " + fnName +
              "(";
    for (size_t a = 0; a < sub.inputs.size(); ++a) {
      auto it = name.find(sub.inputs[a]);
      if (it == name.end() || count(sub.inputs[a]) != count(y))
        return fail("a multi-tensor op must read region inputs of its size");
      consts += (a ? ", " : "") + ("const " + computeType(sub.inputs[a]) +
                                   " " + fn.params[a]);
      std::string t = ctype(sub.inputs[a]) + v;
      for (int u = 0; u < per; ++u) {
        std::string an = "a" + str(a) + "_" + str(u);
        loads[u] += "      " + t + " " + an + ";\n      if (in" + str(u) +
                    ")\n        " + an + " = reinterpret_cast<const " + t +
                    " *>(" + it->second + ")[i" + str(u) + "];\n";
        calls[u] += (a ? ", " : "") + an + (vec ? ".%" : "");
      }
    }
    consts += ") {\n  " + computeType(y) + " r;\n  " + fn.expr +
              "\n  return r;\n}\n";
    std::string out = "y" + str(j), yt = ctype(y) + v;
    args.push_back(this->out(y, out));
    cases += "    case " + str(ops) + ": {\n";
    for (int u = 0; u < per; ++u)
      cases += "      const i64 i" + str(u) + " = first + " + str(u * kBlock) +
               ";\n      const bool in" + str(u) + " = i" + str(u) + " < " +
               str(items) + ";\n";
    for (int u = 0; u < per; ++u)
      cases += loads[u];
    for (int u = 0; u < per; ++u) {
      std::string call = calls[u] + ")";
      cases += "      if (in" + str(u) + ") {\n        " + yt + " o;\n";
      if (vec) {
        for (const char *c : {"x", "y", "z", "w"}) {
          std::string lane = call;
          for (size_t p; (p = lane.find('%')) != std::string::npos;)
            lane.replace(p, 1, c);
          cases += std::string("        o.") + c + " = " + fnName + lane + ";\n";
        }
      } else {
        cases += "        o = " + fnName + call + ";\n";
      }
      cases += "        reinterpret_cast<" + yt + " *>(" + out + ")[i" +
               str(u) + "] = o;\n      }\n";
    }
    cases += "      break;\n    }\n";
    starts += (ops ? ", " : "") + str(tiles);
    tiles += ceilDiv(items, tile);
    total += items;
    ++ops;
  }
  if (ops == 0)
    return fail("a multi-tensor region stores nothing");
  consts = "constexpr int BLOCK = " + str(kBlock) + ", PER = " + str(per) +
           ";  // items a thread\nconstexpr i64 TILE = BLOCK * PER;\n"
           "constexpr int OPS = " + str(ops) +
           ";\n// The first tile of each op.\n__constant__ i64 START[OPS] = {" +
           starts + "};\n" + consts;
  // One block a tile, no loop: in a loop over tiles the compiler kept every
  // op's pointers in registers (255, and spills).
  std::string body = R"CU(  const i64 t = blockIdx.x;
  int lo = 0, hi = OPS - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (START[mid] <= t)
      lo = mid;
    else
      hi = mid - 1;
  }
  const i64 first = (t - START[lo]) * TILE + threadIdx.x;
  switch (lo) {
)CU" + cases + "  }\n";
  launch("", "multi-tensor " + str(ops) + " ops over " + str(total) +
                 " items (4 elements, or 1) in " + str(tiles) +
                 " tiles of " + str(tile),
         args, 0, consts, body, tiles);
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
      folded != OpKind::LayerNorm && folded != OpKind::RmsNorm)
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
  static const std::pair<const char *, bool (Emitter::*)()> kinds[] = {
      {"multi_tensor", &Emitter::multiTensor},
      {"epilogue", &Emitter::epilogue},
      {"gemm", &Emitter::gemmRegion},
      {"norm", &Emitter::normRegion},
      {"loss", &Emitter::lossRegion},
      {"classifier", &Emitter::classifierRegion},
      {"scatter_add", &Emitter::scatterAddRegion},
      {"attention_grad", &Emitter::attentionGradRegion}};
  const std::string kind = k->strAttr("kind", "");
  for (const auto &[name, emit] : kinds)
    if (kind == name)
      return (this->*emit)();
  if (kind != "elementwise")
    return fail("unknown fusion kind '" + kind + "'");
  if (k->outputs.empty() || k->body.empty() || k->body[0].outputs.empty())
    return fail("a fusion region needs ops and outputs");
  // The iteration shape is the first op's (gt.fused's verifier); the
  // region may end with column sums of its values and their casts.
  const std::vector<int64_t> ys = shape(k->body[0].outputs[0]);
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
  std::vector<std::pair<int, std::string>> sums; // stored buffer, summed value
  std::string what;
  for (size_t j = 0; j < k->body.size(); ++j) {
    const Kernel &sub = k->body[j];
    if (sub.op == OpKind::SumTo && sub.inputs.size() == 1 &&
        sub.outputs.size() == 1) {
      auto it = name.find(sub.inputs[0]);
      if (it == name.end() || it->second[0] != 'v' || ys.size() < 2 ||
          shape(sub.outputs[0]) != std::vector<int64_t>{ys.back()})
        return fail("a fused column sum reads " + describe(sub.inputs[0]) +
                    ", not a value of the region over its rows");
      sums.push_back({sub.outputs[0], it->second});
      what += " -> sum_to";
      continue;
    }
    if (sub.op == OpKind::Cast && !sums.empty() && sub.inputs.size() == 1 &&
        sub.outputs.size() == 1 && sub.inputs[0] == sums.back().first) {
      sums.back().first = sub.outputs[0]; // stored as the cast's type
      continue;
    }
    if (!sums.empty())
      return fail(std::string("fused op '") + opName(sub.op) +
                  "' follows the region's column sums");
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
    if (std::any_of(sums.begin(), sums.end(),
                    [&](const auto &s) { return s.first == o; }))
      continue;
    auto it = name.find(o);
    if (it == name.end() || it->second[0] != 'v')
      return fail("no op of the region computes its output " + describe(o));
    if (shape(o) != ys)
      return fail("the outputs of a fused elementwise kernel differ in "
                  "shape");
    outs.push_back({o, it->second});
  }
  if (sums.size() + outs.size() != k->outputs.size())
    return fail("a fused column sum is not an output of its region");
  if (!sums.empty())
    return columnSums(ops, steps, outs, sums, ys,
                      "fused " + what + " over " + str(product(ys)) +
                          " elements");
  return elementwise(ops, steps, outs,
                     "fused " + what + " over " + str(product(ys)) +
                         " elements");
}

/// An elementwise region that also sums values it computes over their rows
/// (gt-fuse's addColumnSums: a linear's bias gradient with the activation
/// gradient it sums). Each thread computes and stores its elements and adds
/// the summed values in float; each block adds its warps' sums in order in
/// double. One kernel computes what the elementwise kernel and cuBLASLt's
/// BGRADB epilogue (a split-K GEMM, its reduction and a kernel that reads
/// the gradient again) did.
///  - Few rows (at most kFewRows): one launch. A block takes 32 columns and
///    its eight warps every eighth row, a lane a column (a warp's loads and
///    stores are 32 consecutive elements of a row), and stores the sums:
///    latency matters more than parallelism there.
///  - More rows: columnSumTiles.
bool Emitter::columnSums(const std::vector<Operand> &ops,
                         const std::vector<Step> &steps,
                         const std::vector<std::pair<int, std::string>> &outs,
                         const std::vector<std::pair<int, std::string>> &sums,
                         const std::vector<int64_t> &ys,
                         const std::string &what) {
  constexpr int kWarps = kBlock / 32;
  const int64_t cols = ys.back(), n = product(ys), rows = n / cols;
  if (rows > kFewRows)
    return columnSumTiles(ops, steps, outs, sums, ys, what);
  const std::string it = n > (int64_t(1) << 30) ? "i64" : "int";
  std::vector<Arg> args;
  std::map<std::string, std::string> typeOf;
  std::string consts = "constexpr " + it + " ROWS = " + str(rows) +
                       ";\nconstexpr " + it + " COLS = " + str(cols) +
                       ";\nconstexpr int WARPS = " + str(kWarps) + ";\n" +
                       operandArgs(ops, outs, it, args) +
                       stepFunctions(ops, steps, typeOf);
  for (size_t s = 0; s < sums.size(); ++s)
    args.push_back(out(sums[s].first, "p_sum" + str(s)));
  std::string body = "  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;\n"
                     "  const " + it + " c = (" + it + ")blockIdx.x * 32 + lane;\n";
  for (size_t s = 0; s < sums.size(); ++s)
    body += "  __shared__ float part" + str(s) + "[WARPS][32];\n"
            "  float acc" + str(s) + " = 0.0f;\n";
  body += "  if (c < COLS) {\n#pragma unroll 4\n"
          "    for (" + it + " r = w; r < ROWS; r += WARPS) {\n"
          "      const " + it + " i = r * COLS + c;\n";
  body += gatherStrided(ops, ys, it, "      ");
  body += computeSteps(ops, steps, typeOf, loadAt, "      ");
  for (const auto &[buffer, value] : outs)
    body += "      p_" + value + "[i] = " + value + ";\n";
  for (size_t s = 0; s < sums.size(); ++s)
    body += "      acc" + str(s) + " += (float)" + sums[s].second + ";\n";
  body += "    }\n  }\n";
  for (size_t s = 0; s < sums.size(); ++s)
    body += "  part" + str(s) + "[w][lane] = acc" + str(s) + ";\n";
  body += "  __syncthreads();\n  if (w == 0 && c < COLS) {\n";
  for (size_t s = 0; s < sums.size(); ++s)
    body += "    double t" + str(s) + " = 0.0;\n"
            "    for (int j = 0; j < WARPS; ++j)\n"
            "      t" + str(s) + " += part" + str(s) + "[j][lane];\n"
            "    p_sum" + str(s) + "[c] = (float)t" + str(s) + ";\n";
  body += "  }\n";
  launch("", what + ", a thread a column of each warp's rows", args, 0, consts,
         body, ceilDiv(cols, int64_t(32)));
  return true;
}

namespace {

/// columnSumTiles' end of launch 1: each of the `nsums` sums' column sums of
/// the block's chunk to the workspace (part[s][chunk][column]).
std::string chunkSumsOut(bool wholeRows, int64_t nsums) {
  std::string body;
  for (int64_t s = 0; s < nsums; ++s) {
    const std::string slot = "part[(" + str(s) + " * CHUNKS + ch) * COLS + ";
    if (wholeRows)
      // The thread's own columns, added over the block's rows in order.
      body += "  if (RPB > 1) {\n"
              "#pragma unroll\n"
              "    for (int e = 0; e < VEC; ++e)\n"
              "      red[g * COLS + c + e] = acc" +
              str(s) +
              "[e];\n"
              "    __syncthreads();\n"
              "    if (g == 0)\n"
              "      for (int h = 1; h < RPB; ++h)\n"
              "#pragma unroll\n"
              "        for (int e = 0; e < VEC; ++e)\n"
              "          acc" +
              str(s) +
              "[e] += red[h * COLS + c + e];\n"
              "    __syncthreads();\n"
              "  }\n"
              "  if (g == 0)\n#pragma unroll\n"
              "    for (int e = 0; e < VEC; ++e)\n"
              "      " +
              slot + "c + e] = acc" + str(s) + "[e];\n";
    else
      // The block's: its warps' in order, in double.
      body += "#pragma unroll\n  for (int e = 0; e < VEC; ++e)\n"
              "    red[w][lane * VEC + e] = acc" +
              str(s) +
              "[e];\n"
              "  __syncthreads();\n"
              "  for (int j = threadIdx.x; j < 32 * VEC; j += blockDim.x) {\n"
              "    const i64 k = t * 32 * VEC + j;\n"
              "    if (k < COLS) {\n"
              "      double total = 0.0;\n"
              "      for (int v = 0; v < WARPS; ++v)\n"
              "        total += (double)red[v][j];\n"
              "      " +
              slot +
              "k] = total;\n"
              "    }\n  }\n  __syncthreads();\n";
  }
  return body;
}

} // namespace

/// columnSumTiles' launch 2 (and flashAttentionGrad's 3): a block per 32
/// columns, a lane a column, its eight warps every eighth chunk (coalesced
/// reads), then the warps' sums in order.
void Emitter::columnSumsFinal(
    const std::vector<std::pair<int, std::string>> &sums,
    const std::string &dims, int64_t chunks, int64_t cols, int64_t partAt) {
  const int64_t nsums = static_cast<int64_t>(sums.size());
  std::vector<Arg> fargs = {wsIn("double", "part")};
  std::string fbody =
      (partAt ? "  part += " + str(partAt) +
                    ";  // after the workspace's other values\n"
              : std::string()) +
      "  __shared__ double red[WARPS][32];\n"
      "  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;\n"
      "  const i64 k = (i64)blockIdx.x * 32 + lane;\n";
  for (int64_t s = 0; s < nsums; ++s) {
    fargs.push_back(out(sums[s].first, "p_sum" + str(s)));
    fbody += "  {\n    double t = 0.0;\n"
             "    if (k < COLS)\n#pragma unroll 4\n"
             "      for (i64 ch = w; ch < CHUNKS; ch += WARPS)\n"
             "        t += part[(" +
             str(s) +
             " * CHUNKS + ch) * COLS + k];\n"
             "    red[w][lane] = t;\n    __syncthreads();\n"
             "    if (w == 0 && k < COLS) {\n"
             "      for (int v = 1; v < WARPS; ++v)\n"
             "        t += red[v][lane];\n"
             "      p_sum" +
             str(s) +
             "[k] = (float)t;\n    }\n"
             "    __syncthreads();\n  }\n";
  }
  launch("final",
         "column sums: each column's " + str(chunks) + " chunks in order",
         fargs, 0, dims + "constexpr int WARPS = " + str(kBlock / 32) + ";\n",
         fbody, ceilDiv(cols, int64_t(32)));
}

/// columnSums over many rows: each block takes a chunk of rows, and its
/// threads VEC consecutive columns each, in 16-byte accesses where every
/// operand allows it (VEC = 8 when every array is 16-bit, 4 with f32; 1
/// with a broadcast other than a trailing one). Two layouts:
///  - whole rows, where a row is at most 1024 threads of VEC columns, a
///    multiple of 32: each thread walks the chunk's rows for its columns
///    and keeps their sums, so a block streams consecutive rows (on an
///    H200, GPT-2's GELU gradient with c_fc's bias gradient, 16384 rows of
///    3072 bf16, 384 threads a row, took 97 us, against 108 in tiles of 256
///    columns as below; gt-fuse leaves that one to cuBLASLt's DGELU);
///  - else tiles of 32 * VEC columns, eight warps every eighth row of the
///    chunk, a lane VEC columns, their sums added over the warps in shared
///    memory (as ReduceKernels' columnTiles).
/// Each block writes its column sums to the workspace (launch 1); launch 2
/// adds the chunks' in order (deterministic).
bool Emitter::columnSumTiles(
    const std::vector<Operand> &ops, const std::vector<Step> &steps,
    const std::vector<std::pair<int, std::string>> &outs,
    const std::vector<std::pair<int, std::string>> &sums,
    const std::vector<int64_t> &ys, const std::string &what,
    int64_t chunkRows) {
  constexpr int kWarps = kBlock / 32;
  const int64_t cols = ys.back(), n = product(ys), rows = n / cols;
  int64_t widest = 2;
  for (const Operand &o : ops)
    if (o.access != Access::Scalar)
      widest = std::max<int64_t>(widest, dtypeBytes(plan.buffers[o.buffer].dtype));
  for (const auto &o : outs)
    widest = std::max<int64_t>(widest, dtypeBytes(plan.buffers[o.first].dtype));
  int vec = static_cast<int>(16 / widest);
  for (const Operand &o : ops)
    if (o.access == Access::Strided ||
        (o.access == Access::Trailing && o.period % vec != 0))
      vec = 1;
  if (cols % vec != 0)
    vec = 1;
  const bool wholeRows =
      vec > 1 && (cols / vec) % 32 == 0 && cols / vec <= 1024;
  // Whole rows: RPB rows at a time in up to 1024 threads; two such blocks
  // an SM (kMaxGrid / 4 in all), every thread at least 4 rows. Tiles:
  // kMaxGrid blocks, every thread at least 16 rows.
  const int64_t rpb = wholeRows ? 1024 / (cols / vec) : 1;
  const int64_t block = wholeRows ? rpb * (cols / vec) : kBlock;
  const int64_t tiles = wholeRows ? 1 : ceilDiv(cols, int64_t(32) * vec);
  int64_t chunks =
      chunkRows > 0 ? ceilDiv(rows, chunkRows)
      : wholeRows   ? std::clamp<int64_t>(kMaxGrid / 4, 1,
                                          ceilDiv(rows, int64_t(4) * rpb))
                    : std::clamp<int64_t>(kMaxGrid / tiles, 1,
                                          ceilDiv(rows, int64_t(16) * kWarps));
  const int64_t chunk = ceilDiv(rows, chunks);
  chunks = ceilDiv(rows, chunk);
  const int64_t nsums = static_cast<int64_t>(sums.size());
  needWorkspace(8 * nsums * chunks * cols);
  const std::string it = "i64";
  std::vector<Arg> args;
  std::map<std::string, std::string> typeOf;
  std::string dims = "constexpr i64 ROWS = " + str(rows) +
                     ";\nconstexpr i64 COLS = " + str(cols) +
                     ";\nconstexpr i64 CHUNKS = " + str(chunks) + ";\n";
  std::string consts = dims + "constexpr i64 CHUNK = " + str(chunk) +
                       ";\nconstexpr int WARPS = " + str(kWarps) +
                       ";\nconstexpr int VEC = " + str(vec) +
                       ";\nconstexpr int RPB = " + str(rpb) +
                       ";  // rows at a time (whole rows)\n" +
                       operandArgs(ops, outs, it, args) +
                       stepFunctions(ops, steps, typeOf);
  args.push_back(ws("double", "part"));
  std::string body = wholeRows
                         ? "  __shared__ float red[RPB > 1 ? RPB * COLS : 1];\n"
                           "  const i64 ch = blockIdx.x;\n"
                           "  const int g = threadIdx.x / (COLS / VEC);\n"
                           "  const i64 c = (i64)(threadIdx.x % (COLS / VEC)) * VEC;\n"
                         : "  __shared__ float red[WARPS][32 * VEC + 1];\n"
                           "  const int lane = threadIdx.x & 31, w = "
                           "threadIdx.x >> 5;\n"
                           "  const i64 ch = blockIdx.x % CHUNKS, t = "
                           "blockIdx.x / CHUNKS;\n"
                           "  const i64 c = (t * 32 + lane) * VEC;\n";
  for (const Operand &o : ops)
    if (o.access == Access::Scalar)
      body += "  const " + typeOf.at(o.name) + " s_" + o.name + " = p_" +
              o.name + "[0];\n";
  for (int64_t s = 0; s < nsums; ++s)
    body += "  float acc" + str(s) + "[VEC] = {};\n";
  body += std::string("  if (c < COLS) {\n"
                      "    const i64 end = min(ROWS, (ch + 1) * CHUNK);\n"
                      "#pragma unroll 4\n") +
          (wholeRows ? "    for (i64 r = ch * CHUNK + g; r < end; r += RPB) {\n"
                     : "    for (i64 r = ch * CHUNK + w; r < end; r += WARPS) {\n") +
          "      const i64 i0 = r * COLS + c;\n";
  if (vec > 1) {
    // Each operand's VEC elements in one load, each output's in one store.
    for (const Operand &o : ops) {
      if (o.access == Access::Scalar)
        continue;
      std::string pack = "pack_t<" + ctype(o.buffer) + ", VEC>";
      std::string at = o.access == Access::Full ? "i0" : "i0 % P_" + o.name;
      body += "      const " + pack + " q_" + o.name + " = *reinterpret_cast<const " +
              pack + " *>(p_" + o.name + " + " + at + ");\n";
    }
    for (const auto &[buffer, value] : outs)
      body += "      pack_t<" + ctype(buffer) + ", VEC> o_" + value + ";\n";
    body += "#pragma unroll\n      for (int e = 0; e < VEC; ++e) {\n";
    body += computeSteps(
        ops, steps, typeOf,
        [](const Operand &o) {
          return o.access == Access::Scalar ? "s_" + o.name
                                            : "q_" + o.name + ".e[e]";
        },
        "        ");
    for (const auto &[buffer, value] : outs)
      body += "        o_" + value + ".e[e] = " + value + ";\n";
    for (int64_t s = 0; s < nsums; ++s)
      body += "        acc" + str(s) + "[e] += (float)" + sums[s].second + ";\n";
    body += "      }\n";
    for (const auto &[buffer, value] : outs)
      body += "      *reinterpret_cast<pack_t<" + ctype(buffer) + ", VEC> *>(p_" +
              value + " + i0) = o_" + value + ";\n";
  } else {
    body += "      const i64 i = i0;\n";
    body += gatherStrided(ops, ys, it, "      ");
    body += computeSteps(ops, steps, typeOf, loadAt, "      ");
    for (const auto &[buffer, value] : outs)
      body += "      p_" + value + "[i] = " + value + ";\n";
    for (int64_t s = 0; s < nsums; ++s)
      body += "      acc" + str(s) + "[0] += (float)" + sums[s].second + ";\n";
  }
  body += "    }\n  }\n";
  body += chunkSumsOut(wholeRows, nsums);
  launch("partial",
         what + (wholeRows ? ", a block per chunk of " + str(chunk) +
                                 " rows, " + str(rpb) + " at a time, " +
                                 str(vec) + " columns a thread"
                           : ", a block per (tile of " + str(32 * vec) +
                                 " columns, chunk of " + str(chunk) + " rows)") +
             (vec > 1 ? ", 16-byte accesses" : "") + "; column sums to the "
             "workspace",
         args, kPackHelpers, consts, body, tiles * chunks, block);
  columnSumsFinal(sums, dims, chunks, cols);
  return true;
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
  return elementwise({{k->inputs[0], "dy"}, {k->inputs[1], "x"}},
                     k->outputs[0], fn.expr,
                     "dy * " + kind + "'(x) over " +
                         str(count(k->outputs[0])) + " elements");
}

/// CpuExecutor's glu() and gluGrad(): a thread takes V consecutive columns
/// of one row's halves a and b (16-byte accesses where F allows), computes
/// in f32 and rounds f(a) and, in the gradient, dy b to the element type
/// as the CPU does.
bool Emitter::glu(bool grad) {
  const int x = k->inputs[grad ? 1 : 0], y = k->outputs[0];
  const int dy = grad ? k->inputs[0] : -1;
  const int half = grad ? dy : y; // the [..., F] array
  const std::string kind = k->strAttr("kind", "");
  if (!isActivationKind(kind))
    return fail("unknown activation kind '" + kind + "'");
  if (!isFloat(x) || plan.buffers[x].dtype != plan.buffers[y].dtype ||
      (grad && plan.buffers[dy].dtype != plan.buffers[x].dtype) ||
      shape(half).empty() || count(x) != 2 * count(half))
    return fail("glu needs float arrays of one type, [..., 2F] and [..., F]");
  const int64_t f = shape(half).back(), n = count(half);
  const int64_t v = dtypeBytes(plan.buffers[x].dtype) == 2 ? 8 : 4;
  const int64_t vec = f % v == 0 ? v : 1;
  const std::string e = ctype(x);
  std::string consts = "constexpr i64 N = " + str(n) + ", F = " + str(f) +
                       ";\nconstexpr int V = " + str(vec) + ";\n" +
                       "__device__ __forceinline__ float rnd(float f) {\n  " +
                       e + " t;\n  t = f;\n  return (float)t;\n}\n";
  std::string body =
      "  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < N / V;\n"
      "       i += (i64)gridDim.x * blockDim.x) {\n"
      "    const i64 at = i * V / F * 2 * F + i * V % F;\n"
      "    float a[V], b[V], r0[V];\n"
      "    loadv<V>(x + at, a);\n"
      "    loadv<V>(x + at + F, b);\n";
  if (grad)
    body += "    float g[V], r1[V];\n"
            "    loadv<V>(dy + i * V, g);\n"
            "#pragma unroll\n"
            "    for (int c = 0; c < V; ++c) {\n"
            "      r0[c] = rnd(g[c] * b[c]) * gtc_scalar::" + kind + "_grad(a[c]);\n"
            "      r1[c] = g[c] * rnd(gtc_scalar::" + kind + "_fwd(a[c]));\n"
            "    }\n"
            "    storev<V>(dx + at, r0);\n"
            "    storev<V>(dx + at + F, r1);\n  }\n";
  else
    body += "#pragma unroll\n"
            "    for (int c = 0; c < V; ++c)\n"
            "      r0[c] = rnd(gtc_scalar::" + kind + "_fwd(a[c])) * b[c];\n"
            "    storev<V>(y + i * V, r0);\n  }\n";
  std::vector<Arg> args = {in(x, "x")};
  if (grad)
    args.push_back(in(dy, "dy"));
  args.push_back(out(y, grad ? "dx" : "y"));
  const int64_t items = n / vec;
  launch("",
         std::string(grad ? "glu_grad" : "glu") + " (" + kind + ") of " +
             str(count(half) / f) + " rows of 2 x " + str(f) + ", " +
             str(vec) + " elements a thread",
         args, kPackHelpers, consts, body,
         std::min(ceilDiv(items, kBlock), int64_t(1) << 22));
  return true;
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

/// CpuExecutor's padOrSlice(): y[c] = x[c + shift] where that is inside x,
/// else 0 (Kernel::padShift).
bool Emitter::padOrSlice() {
  int x = k->inputs[0], y = k->outputs[0];
  const auto &xs = shape(x), &ys = shape(y);
  if (xs.size() != ys.size() || xs.empty() ||
      plan.buffers[x].dtype != plan.buffers[y].dtype || !isFloat(y))
    return fail("pad/slice needs float tensors of one rank and type");
  const std::vector<int64_t> shift = k->padShift(ys.size());
  int64_t n = count(y);
  auto array = [&](const char *name, const std::vector<int64_t> &v) {
    std::string a = "__device__ constexpr i64 " + std::string(name) + "[R] = {";
    for (size_t d = 0; d < v.size(); ++d)
      a += (d ? ", " : "") + str(v[d]);
    return a + "};\n";
  };
  std::string consts =
      "constexpr i64 N = " + str(n) + ";\nconstexpr int R = " + str(ys.size()) +
      ";\n" + array("XS", xs) + array("YS", ys) + array("SHIFT", shift);
  std::string body =
      R"CU(  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < N;
       i += (i64)gridDim.x * blockDim.x) {
    i64 rem = i, off = 0, stride = 1;
    bool inside = true;
#pragma unroll
    for (int d = R - 1; d >= 0; --d) {
      const i64 c = rem % YS[d] + SHIFT[d];
      rem /= YS[d];
      inside = inside && c >= 0 && c < XS[d];
      off += c * stride;
      stride *= XS[d];
    }
    y[i] = inside ? (float)x[off] : 0.f;
  }
)CU";
  launch("",
         std::string(opName(k->op)) + " " + shapeStr(xs) + " -> " +
             shapeStr(ys) + " at " + shapeStr(k->intsAttr("offsets")),
         {in(x, "x"), out(y, "y")}, 0, consts, body,
         std::min(ceilDiv(n, kBlock), kMaxGrid));
  return true;
}

//===----------------------------------------------------------------------===//
// Dropout
//===----------------------------------------------------------------------===//

/// CpuExecutor's dropout(): the same draw (ScalarOps.h), from the seed and
/// the steps done that the step's device counters hold.
bool Emitter::dropout() {
  int x = k->inputs[0], y = k->outputs[0];
  if (count(y) != count(x))
    return fail("dropout's result must have its input's size");
  const double p = k->floatAttr("p", 0);
  const int64_t n = count(x);
  std::string consts =
      "constexpr i64 N = " + str(n) +
      ";\nconstexpr unsigned long long SALT = " + str(k->intAttr("salt", 0)) +
      "ull;\nconstexpr unsigned long long THRESHOLD = " +
      str(static_cast<int64_t>(p * 16777216.0)) +
      "ull;  // p 2^24\nconstexpr float SCALE = " +
      flt(static_cast<float>(1.0 / (1.0 - p))) + ";  // 1 / (1 - p)\n";
  std::string body =
      "  const unsigned long long key = gtc_scalar::dropout_key(\n"
      "      (unsigned long long)counters[" +
      str(CudaLaunch::kSeedSlot) + "], (unsigned long long)counters[" +
      str(CudaLaunch::kStepsSlot) + "], SALT);\n" +
      R"CU(  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < N;
       i += (i64)gridDim.x * blockDim.x)
    y[i] = gtc_scalar::dropout_keep(key, (unsigned long long)i, THRESHOLD)
               ? (float)x[i] * SCALE
               : 0.f;
)CU";
  launch("", "one thread per element of " + str(n) + ", p = " + dbl(p),
         {in(x, "x"), out(y, "y"), stepCounter("counters")}, 0, consts, body,
         std::min(ceilDiv(n, kBlock), kMaxGrid));
  return true;
}
