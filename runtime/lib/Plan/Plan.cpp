//===- Plan.cpp - The executable description of a training step -----------===//
//
// Text form, one record per line, tokens separated by single spaces; strings
// are percent-encoded so that they never contain spaces or newlines:
//
//   gtc-plan 1
//   model mlp
//   kind step
//   batch 128
//   micro_batches 4                 (gradient accumulation; absent: 1)
//   shard_gradients 2               (ZeRO-2 over 2 processes; absent: 1)
//   grads_in_temp 0                 (the gradients inside region temp)
//   region param 1863690
//   buffer f32 param 0 2 1024 784 fc1.weight
//   view 9 8                        (buffer 9 is a view of buffer 8)
//   kernel linear 3 0 1 2 1 7 0
//   kernel fused 2 4 5 1 9 1 kind s elementwise
//   subkernel cast 1 4 1 30 0       (the ops of the fusion region above)
//   param 1 8 uniform 2 -0.0357 0.0357 fc1.weight
//   constant 12 1 1
//   feed 0 0 x
//   loss 20
//   accuracy -1
//   lossscale 19
//   config lr 0.001
//   end
//===----------------------------------------------------------------------===//

#include "gtc/Runtime/Plan.h"
#include "gtc/Runtime/Capabilities.h"
#include "gtc/Runtime/Rng.h"
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <type_traits>

using namespace gtc::rt;

ParamDraw gtc::rt::paramDraw(const Param &p, uint64_t runSeed) {
  ParamDraw d;
  d.kind = p.init == "ones" || p.init == "constant" ? 1
           : p.init == "normal"                     ? 2
           : p.init == "uniform"                    ? 3
                                                    : 0;
  d.a = p.init == "ones" ? 1 : p.args.empty() ? 0 : p.args[0];
  d.c = p.args.size() > 1 ? p.args[1] : 0;
  d.seed = mixSeed(runSeed, p.name);
  return d;
}

const char *gtc::rt::dtypeName(DType d) {
  switch (d) {
  case DType::F32:
    return "f32";
  case DType::I32:
    return "i32";
  case DType::BF16:
    return "bf16";
  case DType::F16:
    return "f16";
  }
  return "?";
}

std::string gtc::rt::typeText(DType d, const std::vector<int64_t> &shape) {
  std::string s = std::string(dtypeName(d)) + "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

uint16_t gtc::rt::toHalfBits(float v, DType d) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  if (d == DType::BF16) {
    if ((u & 0x7fffffffu) > 0x7f800000u) // NaN stays a (quiet) NaN
      return static_cast<uint16_t>((u >> 16) | 0x40);
    return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
  uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  u &= 0x7fffffffu;
  if (u > 0x7f800000u) // NaN
    return sign | 0x7e00;
  if (u >= 0x477ff000u) // from 65520 on: rounds to infinity
    return sign | 0x7c00;
  if (u < 0x38800000u) { // below 2^-14: subnormal (or zero), units of 2^-24
    float a;
    std::memcpy(&a, &u, 4);
    return sign | static_cast<uint16_t>(std::nearbyint(a * 16777216.f));
  }
  // Normal: round the 23-bit mantissa to 10 bits (ties to even; a carry
  // moves into the exponent), then rebias the exponent from 127 to 15.
  u += 0xfffu + ((u >> 13) & 1u);
  return sign | static_cast<uint16_t>((u - 0x38000000u) >> 13);
}

float gtc::rt::fromHalfBits(uint16_t bits, DType d) {
  uint32_t u;
  if (d == DType::BF16) {
    u = static_cast<uint32_t>(bits) << 16;
  } else {
    uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
    uint32_t exp = (bits >> 10) & 0x1f, man = bits & 0x3ffu;
    if (exp == 0) { // zero or subnormal: man * 2^-24
      float v = std::ldexp(static_cast<float>(man), -24);
      return sign ? -v : v;
    }
    if (exp == 31)
      u = sign | 0x7f800000u | (man << 13);
    else
      u = sign | ((exp + 112) << 23) | (man << 13);
  }
  float v;
  std::memcpy(&v, &u, 4);
  return v;
}

namespace {
template <typename E, size_t N>
bool parseNamed(const std::string &text, E &out, const char *const (&names)[N]) {
  for (size_t i = 0; i < N; ++i)
    if (text == names[i]) {
      out = static_cast<E>(i);
      return true;
    }
  return false;
}
const char *const kOptimizerNames[] = {"sgd", "adam", "adamw"};
const char *const kScheduleNames[] = {"constant", "linear", "cosine"};
const char *const kPrecisionNames[] = {"fp32", "tf32", "bf16", "fp16"};
} // namespace

const char *gtc::rt::name(OptimizerKind k) {
  return kOptimizerNames[static_cast<int>(k)];
}
const char *gtc::rt::name(ScheduleKind k) {
  return kScheduleNames[static_cast<int>(k)];
}
const char *gtc::rt::name(Precision p) {
  return kPrecisionNames[static_cast<int>(p)];
}
bool gtc::rt::parse(const std::string &text, OptimizerKind &out) {
  return parseNamed(text, out, kOptimizerNames);
}
bool gtc::rt::parse(const std::string &text, ScheduleKind &out) {
  return parseNamed(text, out, kScheduleNames);
}
bool gtc::rt::parse(const std::string &text, Precision &out) {
  return parseNamed(text, out, kPrecisionNames);
}

const char *gtc::rt::opName(OpKind kind) {
  switch (kind) {
#define GTC_OP(Kind, Name)                                                     \
  case OpKind::Kind:                                                           \
    return Name;
#include "gtc/Runtime/Ops.def"
  }
  return "?";
}

bool gtc::rt::parseOpKind(const std::string &name, OpKind &kind) {
#define GTC_OP(Kind, Name)                                                     \
  if (name == Name) {                                                          \
    kind = OpKind::Kind;                                                       \
    return true;                                                               \
  }
#include "gtc/Runtime/Ops.def"
  return false;
}

const char *gtc::rt::regionName(Region r) {
  switch (r) {
  case Region::Param:
    return "param";
  case Region::Grad:
    return "grad";
  case Region::Input:
    return "input";
  case Region::Const:
    return "const";
  case Region::Temp:
    return "temp";
  case Region::Local:
    return "local";
  case Region::Copy:
    return "copy";
  case Region::State:
    return "state";
  }
  return "?";
}

int64_t Buffer::elements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

bool Plan::scalesLoss() const {
  return config.precision == Precision::Fp16 && lossScale >= 0 &&
         kind == "step";
}

bool Plan::paramCopiesValid() const {
  if (paramCopies < 0 || static_cast<size_t>(paramCopies) >= kernels.size() ||
      kind != "step")
    return false;
  const Kernel &k = kernels[paramCopies];
  if (k.op != OpKind::Fused || k.strAttr("kind", "") != "multi_tensor" ||
      k.body.empty())
    return false;
  auto size = [&](Region r) {
    auto it = regionSize.find(r);
    return it == regionSize.end() ? int64_t(0) : it->second;
  };
  if (2 * size(Region::Copy) < size(Region::Param))
    return false;
  auto valid = [&](int id) {
    return id >= 0 && static_cast<size_t>(id) < buffers.size();
  };
  const DType type = paramCopyType();
  for (const Kernel &sub : k.body) {
    if (sub.op != OpKind::Cast || sub.inputs.size() != 1 ||
        sub.outputs.size() != 1 || !valid(sub.inputs[0]) ||
        !valid(sub.outputs[0]))
      return false;
    const Buffer &from = buffers[sub.inputs[0]], &to = buffers[sub.outputs[0]];
    if (from.region != Region::Param || from.dtype != DType::F32 ||
        to.dtype != type || dtypeBytes(type) != 2 ||
        to.elements() != from.elements())
      return false;
    // A cast nothing outside the region reads stays Local.
    if (to.region == Region::Copy ? 2 * to.offset != from.offset
                                  : to.region != Region::Local)
      return false;
  }
  return true;
}

DType Plan::paramCopyType() const {
  if (paramCopies < 0 || static_cast<size_t>(paramCopies) >= kernels.size())
    return DType::F32;
  for (const Kernel &sub : kernels[paramCopies].body)
    if (!sub.outputs.empty() && sub.outputs[0] >= 0 &&
        static_cast<size_t>(sub.outputs[0]) < buffers.size())
      return buffers[sub.outputs[0]].dtype;
  return DType::F32;
}

int64_t Buffer::slots() const {
  return dtypeBytes(dtype) == 2 ? (elements() + 1) / 2 : elements();
}

bool Buffer::overlaps(const Buffer &other) const {
  return region == other.region && offset < other.offset + other.slots() &&
         other.offset < offset + slots();
}

int64_t Kernel::intAttr(const std::string &key, int64_t fallback) const {
  auto it = attrs.find(key);
  return it == attrs.end() ? fallback : it->second.i;
}

double Kernel::floatAttr(const std::string &key, double fallback) const {
  auto it = attrs.find(key);
  return it == attrs.end() ? fallback : it->second.f;
}

std::string Kernel::strAttr(const std::string &key,
                            const std::string &fallback) const {
  auto it = attrs.find(key);
  return it == attrs.end() ? fallback : it->second.s;
}

std::vector<int64_t> Kernel::intsAttr(const std::string &key) const {
  auto it = attrs.find(key);
  return it == attrs.end() ? std::vector<int64_t>{} : it->second.ints;
}

std::vector<int64_t> Kernel::padShift(size_t rank) const {
  std::vector<int64_t> shift = intsAttr("offsets");
  shift.resize(rank, 0);
  if (op == OpKind::Pad)
    for (int64_t &s : shift)
      s = -s;
  return shift;
}

AttentionLayout gtc::rt::attentionLayout(const Plan &plan, const Kernel &k) {
  AttentionLayout a;
  const bool grad = k.op == OpKind::AttentionGrad;
  // attention: the operands; attention_grad: dy, the operands, y, lse.
  const size_t first = grad ? 1 : 0;
  const size_t n = k.inputs.size() - std::min(k.inputs.size(), 3 * first);
  if ((n != 1 && n != 3) || k.outputs.size() != (grad ? n : 2)) {
    a.error = "attention takes packed qkv or q, k, v";
    return a;
  }
  auto shapeOf = [&](int id) -> const std::vector<int64_t> & {
    return plan.buffers[id].shape;
  };
  a.packed = n == 1;
  a.q = k.inputs[first];
  a.k = k.inputs[first + (a.packed ? 0 : 1)];
  a.v = k.inputs[first + (a.packed ? 0 : 2)];
  a.y = grad ? k.inputs[n + 1] : k.outputs[0];
  a.lse = grad ? k.inputs[n + 2] : k.outputs[1];
  if (grad) {
    a.dy = k.inputs[0];
    a.dq = k.outputs[0];
    a.dk = k.outputs[a.packed ? 0 : 1];
    a.dv = k.outputs[a.packed ? 0 : 2];
  }
  a.h = k.intAttr("heads", 1);
  a.causal = k.intAttr("causal", 1);
  const std::vector<int64_t> &qs = shapeOf(a.q), &ks = shapeOf(a.k);
  if (a.packed && qs.size() == 4) {
    // Packed heads [B, T, H + 2 Hkv, d]: q's heads, k's, then v's.
    const int64_t kv = (qs[2] - a.h) / 2;
    if (a.h <= 0 || kv <= 0 || a.h + 2 * kv != qs[2] || a.h % kv) {
      a.error = "attention takes packed heads [B, T, H + 2 Hkv, d] with Hkv "
                "dividing H";
      return a;
    }
    a.b = qs[0], a.t = qs[1], a.hkv = kv, a.hd = qs[3];
    a.qRow = a.kvRow = qs[2] * qs[3];
    a.kCol = a.width(), a.vCol = (a.h + kv) * a.hd;
  } else if (a.packed) {
    if (qs.size() != 3 || qs[2] % 3 != 0 || a.h <= 0 || qs[2] / 3 % a.h) {
      a.error = "attention takes qkv of shape [B, T, 3D] with the heads "
                "dividing D";
      return a;
    }
    a.b = qs[0], a.t = qs[1], a.hkv = a.h, a.hd = qs[2] / 3 / a.h;
    a.qRow = a.kvRow = qs[2];
    a.kCol = a.width(), a.vCol = 2 * a.width();
  } else {
    if (qs.size() != 4 || ks.size() != 4 || shapeOf(a.v) != ks ||
        qs[2] != a.h || ks[2] <= 0 || a.h % ks[2] || ks[0] != qs[0] ||
        ks[1] != qs[1] || ks[3] != qs[3]) {
      a.error = "attention takes q [B, T, H, d] and k, v [B, T, Hkv, d] "
                "with Hkv dividing H";
      return a;
    }
    a.b = qs[0], a.t = qs[1], a.hkv = ks[2], a.hd = qs[3];
    a.qRow = a.width(), a.kvRow = a.hkv * a.hd;
  }
  auto count = [&](int id) { return plan.buffers[id].elements(); };
  const int64_t rows = a.b * a.t;
  bool sizes = count(a.y) == rows * a.width() &&
               count(a.lse) == a.b * a.h * a.t &&
               (!grad || count(a.dy) == rows * a.width());
  for (size_t i = 0; grad && i < n; ++i)
    sizes = sizes && count(k.outputs[i]) == count(k.inputs[first + i]);
  if (!sizes)
    a.error = "attention's operand sizes do not match";
  return a;
}

int64_t Plan::parameterCount() const {
  int64_t n = 0;
  for (const Param &p : params)
    n += buffers[p.buffer].elements();
  return n;
}

int64_t Plan::shareOf(int64_t ranks) const {
  auto it = regionSize.find(Region::Param);
  const int64_t n = it == regionSize.end() ? 0 : it->second;
  return ((n + ranks - 1) / ranks + 127) / 128 * 128;
}

Plan::Memory Plan::memory() const {
  auto bytes = [&](Region r) {
    auto it = regionSize.find(r);
    return it == regionSize.end() ? int64_t(0) : it->second * 4;
  };
  Memory m;
  m.weights = bytes(Region::Param);
  m.gradients = bytes(Region::Grad);
  m.optimizerState = kind != "step" ? 0 : stateFloats() * m.weights;
  m.temporaries = bytes(Region::Temp);
  m.inputs = 2 * bytes(Region::Input); // two slots on a GPU
  m.constants = bytes(Region::Const);
  m.gemmWorkspace = kGemmWorkspaceBytes;
  m.weightCopies = bytes(Region::Copy);
  m.state = bytes(Region::State);
  if (shardRanks > 1 && kind == "step") {
    // ZeRO-2: one process's share of the gradients and of the state.
    const int64_t share = shareOf(shardRanks) * 4;
    m.gradients = share;
    m.optimizerState = stateFloats() * share;
  }
  // The sum of the micro-batches' gradients (of the share, under ZeRO-2).
  m.accumulator = microBatches > 1 ? m.gradients : 0;
  if (gradsInTemp >= 0 && shardRanks <= 1)
    m.gradients = 0; // inside the temporaries
  return m;
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

namespace {

std::string encode(const std::string &s) {
  if (s.empty())
    return "%";
  std::string out;
  for (unsigned char c : s) {
    bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                 (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-' ||
                 c == '/';
    if (plain) {
      out.push_back(static_cast<char>(c));
    } else {
      char hex[4];
      std::snprintf(hex, sizeof hex, "%%%02X", c);
      out += hex;
    }
  }
  return out;
}

std::string num(double v) {
  char s[32];
  std::snprintf(s, sizeof s, "%.17g", v);
  return s;
}


void writeSource(std::ostringstream &os, const char *key,
                 const TrainConfig::Source &s) {
  os << "source " << key << ' ' << encode(s.kind) << ' ' << encode(s.images)
     << ' ' << encode(s.labels) << ' ' << encode(s.path) << ' '
     << num(s.scale) << ' ' << s.seq << '\n';
}

} // namespace

std::string gtc::rt::describeBatch(const Plan &plan, int processes) {
  const int64_t perProcess = plan.batch * plan.microBatches;
  std::string s = "batch " + std::to_string(perProcess * processes);
  std::string parts;
  if (processes > 1)
    parts = std::to_string(processes) + " processes of " +
            std::to_string(perProcess) + " rows";
  if (plan.microBatches > 1)
    parts += (parts.empty() ? "" : ", each in ") +
             std::string("micro-batches of ") + std::to_string(plan.batch);
  return parts.empty() ? s : s + " (" + parts + ")";
}

int64_t gtc::rt::indexRange(const Plan &plan, int buffer) {
  int64_t range = 0;
  auto use = [&](int64_t n) { range = range ? std::min(range, n) : n; };
  auto visit = [&](const Kernel &k, auto &self) -> void {
    for (const Kernel &sub : k.body)
      self(sub, self);
    const auto &in = k.inputs;
    auto lastDim = [&](int id) { return plan.buffers[id].shape.empty()
                                            ? int64_t(1)
                                            : plan.buffers[id].shape.back(); };
    if (k.op == OpKind::Embedding && in.size() == 2 && in[0] == buffer &&
        !plan.buffers[in[1]].shape.empty())
      use(plan.buffers[in[1]].shape[0]);
    if ((k.op == OpKind::CrossEntropy || k.op == OpKind::Accuracy) &&
        in.size() == 2 && in[1] == buffer)
      use(lastDim(in[0]));
  };
  for (const Kernel &k : plan.kernels)
    visit(k, visit);
  return range;
}

std::string gtc::rt::serialize(const Plan &plan) {
  std::ostringstream os;
  os << "gtc-plan " << kPlanVersion << '\n';
  os << "model " << encode(plan.model) << '\n';
  os << "kind " << encode(plan.kind) << '\n';
  os << "batch " << plan.batch << '\n';
  if (plan.microBatches != 1)
    os << "micro_batches " << plan.microBatches << '\n';
  if (plan.shardRanks != 1)
    os << "shard_gradients " << plan.shardRanks << '\n';
  for (auto [region, size] : plan.regionSize)
    os << "region " << regionName(region) << ' ' << size << '\n';
  for (const Buffer &b : plan.buffers) {
    os << "buffer " << dtypeName(b.dtype) << ' ' << regionName(b.region) << ' '
       << b.offset << ' ' << b.shape.size();
    for (int64_t d : b.shape)
      os << ' ' << d;
    os << ' ' << encode(b.name) << '\n';
  }
  for (size_t i = 0; i < plan.buffers.size(); ++i)
    if (plan.buffers[i].viewOf >= 0)
      os << "view " << i << ' ' << plan.buffers[i].viewOf << '\n';
  auto writeKernel = [&](const char *tag, const Kernel &k) {
    os << tag << ' ' << opName(k.op) << ' ' << k.inputs.size();
    for (int i : k.inputs)
      os << ' ' << i;
    os << ' ' << k.outputs.size();
    for (int o : k.outputs)
      os << ' ' << o;
    os << ' ' << k.attrs.size();
    for (const auto &[key, a] : k.attrs) {
      os << ' ' << encode(key) << ' ';
      switch (a.kind) {
      case Attr::Kind::Int:
        os << "i " << a.i;
        break;
      case Attr::Kind::Float:
        os << "f " << num(a.f);
        break;
      case Attr::Kind::Str:
        os << "s " << encode(a.s);
        break;
      case Attr::Kind::Ints:
        os << "l " << a.ints.size();
        for (int64_t v : a.ints)
          os << ' ' << v;
        break;
      }
    }
    os << '\n';
  };
  for (const Kernel &k : plan.kernels) {
    writeKernel("kernel", k);
    for (const Kernel &sub : k.body)
      writeKernel("subkernel", sub);
  }
  // Source locations: kernel index, body index (-1: the kernel itself).
  for (size_t i = 0; i < plan.kernels.size(); ++i) {
    const Kernel &k = plan.kernels[i];
    if (!k.loc.empty())
      os << "loc " << i << " -1 " << encode(k.loc) << '\n';
    for (size_t j = 0; j < k.body.size(); ++j)
      if (!k.body[j].loc.empty())
        os << "loc " << i << ' ' << j << ' ' << encode(k.body[j].loc) << '\n';
  }
  for (const Param &p : plan.params) {
    os << "param " << p.buffer << ' ' << p.grad << ' ' << encode(p.init) << ' '
       << p.args.size();
    for (double a : p.args)
      os << ' ' << num(a);
    os << ' ' << encode(p.name) << '\n';
  }
  for (const Constant &c : plan.constants) {
    os << "constant " << c.buffer << ' ' << c.values.size();
    for (double v : c.values)
      os << ' ' << num(v);
    os << '\n';
  }
  for (const Feed &f : plan.feeds)
    os << "feed " << f.buffer << ' ' << (f.label ? 1 : 0) << ' '
       << encode(f.name) << '\n';
  os << "loss " << plan.loss << '\n';
  os << "accuracy " << plan.accuracy << '\n';
  os << "lossscale " << plan.lossScale << '\n';
  if (plan.paramCopies >= 0)
    os << "param_copies " << plan.paramCopies << '\n';
  if (plan.gradsInTemp >= 0)
    os << "grads_in_temp " << plan.gradsInTemp << '\n';
  const TrainConfig &c = plan.config;
  writeSource(os, "data", c.data);
  writeSource(os, "eval", c.eval);
  auto field = [&](const char *key) -> std::ostream & {
    return os << "config " << key << ' ';
  };
#define GTC_WRITE_Int(key, v) field(key) << (v) << '\n';
#define GTC_WRITE_Float(key, v) field(key) << num(v) << '\n';
#define GTC_WRITE_Bool(key, v) field(key) << ((v) ? 1 : 0) << '\n';
#define GTC_WRITE_Name(key, v) field(key) << name(v) << '\n';
#define GTC_TRAIN_CONFIG_FIELD(SETTING, KEY, MEMBER, KIND, TYPE, DEFAULT)      \
  GTC_WRITE_##KIND(KEY, c.MEMBER)
#include "gtc/Runtime/TrainSettings.def"
#undef GTC_WRITE_Int
#undef GTC_WRITE_Float
#undef GTC_WRITE_Bool
#undef GTC_WRITE_Name
  os << "end\n";
  return os.str();
}

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

namespace {

/// Reads whitespace-separated tokens of one line, remembering failures.
class LineReader {
public:
  LineReader(const std::string &line) : in(line) {}

  bool word(std::string &out) { return static_cast<bool>(in >> out); }

  bool str(std::string &out) {
    std::string raw;
    if (!(in >> raw))
      return false;
    out.clear();
    if (raw == "%")
      return true;
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] != '%') {
        out.push_back(raw[i]);
        continue;
      }
      if (i + 2 >= raw.size())
        return false;
      char *end = nullptr;
      std::string hex = raw.substr(i + 1, 2);
      long v = std::strtol(hex.c_str(), &end, 16);
      if (*end != '\0')
        return false;
      out.push_back(static_cast<char>(v));
      i += 2;
    }
    return true;
  }

  template <typename T> bool number(T &out) {
    std::string raw;
    if (!(in >> raw))
      return false;
    char *end = nullptr;
    if constexpr (std::is_floating_point_v<T>) {
      out = std::strtod(raw.c_str(), &end);
    } else {
      errno = 0;
      long long v = std::strtoll(raw.c_str(), &end, 10);
      if (errno)
        return false;
      out = static_cast<T>(v);
    }
    return end && *end == '\0';
  }

  /// A count that must be small enough to be real.
  bool count(size_t &out, size_t max) {
    int64_t v;
    if (!number(v) || v < 0 || static_cast<uint64_t>(v) > max)
      return false;
    out = static_cast<size_t>(v);
    return true;
  }

  bool done() {
    std::string rest;
    return !(in >> rest);
  }

private:
  std::istringstream in;
};

bool parseRegion(const std::string &s, Region &r) {
  for (Region c : {Region::Param, Region::Grad, Region::Input, Region::Const,
                   Region::Temp, Region::Local, Region::Copy, Region::State})
    if (s == regionName(c)) {
      r = c;
      return true;
    }
  return false;
}

bool parseDType(const std::string &s, DType &d) {
  for (DType c : {DType::F32, DType::I32, DType::BF16, DType::F16})
    if (s == dtypeName(c)) {
      d = c;
      return true;
    }
  return false;
}

bool readSource(LineReader &in, TrainConfig::Source &s) {
  return in.str(s.kind) && in.str(s.images) && in.str(s.labels) &&
         in.str(s.path) && in.number(s.scale) && in.number(s.seq);
}

template <typename T> bool readInt(LineReader &in, T &v) {
  return in.number(v);
}
bool readFloat(LineReader &in, double &v) { return in.number(v); }
bool readBool(LineReader &in, bool &v) {
  int64_t flag = 0;
  bool ok = in.number(flag);
  v = flag != 0;
  return ok;
}
template <typename E> bool readName(LineReader &in, E &v) {
  std::string text;
  return in.str(text) && parse(text, v);
}

/// A `config KEY VALUE` record after its tag (TrainSettings.def's
/// GTC_TRAIN_CONFIG_FIELD rows).
bool readConfig(LineReader &in, TrainConfig &c) {
  std::string key;
  if (!in.word(key))
    return false;
#define GTC_TRAIN_CONFIG_FIELD(SETTING, KEY, MEMBER, KIND, TYPE, DEFAULT)      \
  if (key == KEY)                                                              \
    return read##KIND(in, c.MEMBER);
#include "gtc/Runtime/TrainSettings.def"
  return false;
}

/// The most items a record may list.
constexpr size_t kMaxRecords = size_t(1) << 32;

/// A buffer record after its tag: type, region, offset, shape and name.
bool readBuffer(LineReader &in, Buffer &b) {
  std::string dtype, region;
  size_t rank;
  bool ok = in.word(dtype) && parseDType(dtype, b.dtype) && in.word(region) &&
            parseRegion(region, b.region) && in.number(b.offset) &&
            b.offset >= 0 && in.count(rank, 16);
  for (size_t i = 0; ok && i < rank; ++i) {
    int64_t d;
    ok = in.number(d) && d > 0 && d < (int64_t(1) << 40);
    b.shape.push_back(d);
  }
  ok = ok && in.str(b.name);
  return ok;
}

/// A kernel or subkernel record after its tag: the op, inputs, outputs and
/// attributes. An op this runtime does not know is left in `unknownOp`.
bool readKernel(LineReader &in, Kernel &k, std::string &unknownOp) {
  size_t n;
  std::string op;
  bool ok = in.str(op) && in.count(n, kMaxRecords);
  if (ok && !parseOpKind(op, k.op)) {
    unknownOp = op;
    return false;
  }
  for (size_t i = 0; ok && i < n; ++i) {
    int v;
    ok = in.number(v);
    k.inputs.push_back(v);
  }
  ok = ok && in.count(n, kMaxRecords);
  for (size_t i = 0; ok && i < n; ++i) {
    int v;
    ok = in.number(v);
    k.outputs.push_back(v);
  }
  ok = ok && in.count(n, 64);
  for (size_t i = 0; ok && i < n; ++i) {
    std::string key, kind;
    Attr a;
    ok = in.str(key) && in.word(kind);
    if (!ok)
      break;
    if (kind == "i") {
      a.kind = Attr::Kind::Int;
      ok = in.number(a.i);
    } else if (kind == "f") {
      a.kind = Attr::Kind::Float;
      ok = in.number(a.f);
    } else if (kind == "s") {
      a.kind = Attr::Kind::Str;
      ok = in.str(a.s);
    } else if (kind == "l") {
      a.kind = Attr::Kind::Ints;
      size_t m;
      ok = in.count(m, 64);
      for (size_t j = 0; ok && j < m; ++j) {
        int64_t v;
        ok = in.number(v);
        a.ints.push_back(v);
      }
    } else {
      ok = false;
    }
    k.attrs[key] = a;
  }
  return ok;
}

/// The plan's records against each other: every buffer id in range, every
/// buffer inside its region, the loss and its scale where they must be.
/// Empty when they agree, else what is wrong.
std::string crossCheck(const Plan &plan) {
  auto validId = [&](int id) {
    return id >= 0 && static_cast<size_t>(id) < plan.buffers.size();
  };
  for (const Buffer &b : plan.buffers) {
    auto it = plan.regionSize.find(b.region);
    if (it == plan.regionSize.end() || b.offset + b.slots() > it->second)
      return "buffer '" + b.name + "' lies outside its region";
  }
  for (const Kernel &kernel : plan.kernels) {
    std::vector<const Kernel *> all{&kernel};
    for (const Kernel &sub : kernel.body)
      all.push_back(&sub);
    for (const Kernel *k : all)
      for (const std::vector<int> *ids : {&k->inputs, &k->outputs})
        for (int id : *ids)
          if (!validId(id))
            return std::string("kernel '") + opName(k->op) + "' names buffer " +
                   std::to_string(id) + ", which does not exist";
  }
  // Evaluation plans have no gradients (grad -1).
  for (const Param &p : plan.params)
    if (!validId(p.buffer) ||
        !(validId(p.grad) || (plan.kind == "eval" && p.grad == -1)))
      return "parameter '" + p.name + "' names a missing buffer";
  for (const Constant &c : plan.constants)
    if (!validId(c.buffer) ||
        (c.values.size() != 1 && static_cast<int64_t>(c.values.size()) !=
                                     plan.buffers[c.buffer].elements()))
      return "a constant does not match its buffer";
  for (const Feed &f : plan.feeds)
    if (!validId(f.buffer))
      return "feed '" + f.name + "' names a missing buffer";
  if (!validId(plan.loss))
    return "the plan has no loss buffer";
  if (plan.accuracy != -1 && !validId(plan.accuracy))
    return "the accuracy buffer does not exist";
  if (plan.lossScale != -1 &&
      (!validId(plan.lossScale) ||
       plan.buffers[plan.lossScale].region != Region::Const ||
       plan.buffers[plan.lossScale].dtype != DType::F32 ||
       plan.buffers[plan.lossScale].elements() != 1))
    return "the loss-scale buffer is not a scalar f32 constant";
  if (plan.gradsInTemp != -1) {
    auto size = [&](Region r) {
      auto it = plan.regionSize.find(r);
      return it == plan.regionSize.end() ? int64_t(0) : it->second;
    };
    if (plan.kind != "step" || plan.shardRanks > 1 ||
        plan.gradsInTemp % 64 != 0 ||
        plan.gradsInTemp + size(Region::Grad) > size(Region::Temp))
      return "the gradients' place in the temporaries (grads_in_temp) is "
             "not an aligned range of a step's temp region";
  }
  if (plan.paramCopies != -1 && !plan.paramCopiesValid())
    return "the parameter copies' kernel does not cast parameters to "
           "their place in the copy region";
  return "";
}

} // namespace

bool gtc::rt::deserialize(const std::string &text, Plan &plan,
                          std::string &error) {
  plan = Plan();
  std::istringstream lines(text);
  std::string line;
  int lineNo = 0;
  bool ended = false;
  auto fail = [&](const std::string &what) {
    error = "plan line " + std::to_string(lineNo) + ": " + what;
    return false;
  };
  while (std::getline(lines, line)) {
    ++lineNo;
    LineReader in(line);
    std::string tag;
    if (!in.word(tag))
      continue;
    if (lineNo == 1) {
      int version = 0;
      if (tag != "gtc-plan" || !in.number(version))
        return fail("not a gtc plan (expected 'gtc-plan VERSION')");
      if (version != kPlanVersion)
        return fail("plan version " + std::to_string(version) +
                    ", this runtime reads version " +
                    std::to_string(kPlanVersion) + "; recompile the model");
      continue;
    }
    bool ok = true;
    if (tag == "model") {
      ok = in.str(plan.model);
    } else if (tag == "kind") {
      ok = in.str(plan.kind);
    } else if (tag == "batch") {
      ok = in.number(plan.batch);
    } else if (tag == "micro_batches") {
      ok = in.number(plan.microBatches) && plan.microBatches >= 1;
    } else if (tag == "shard_gradients") {
      ok = in.number(plan.shardRanks) && plan.shardRanks >= 1 &&
           plan.shardRanks <= kMaxDevices;
    } else if (tag == "region") {
      std::string name;
      Region r;
      int64_t size;
      ok =
          in.word(name) && parseRegion(name, r) && in.number(size) && size >= 0;
      if (ok)
        plan.regionSize[r] = size;
    } else if (tag == "buffer") {
      Buffer b;
      ok = readBuffer(in, b);
      plan.buffers.push_back(std::move(b));
    } else if (tag == "view") {
      int id, of;
      ok = in.number(id) && in.number(of) && id >= 0 && of >= 0 &&
           static_cast<size_t>(id) < plan.buffers.size() &&
           static_cast<size_t>(of) < plan.buffers.size() && id != of &&
           plan.buffers[of].viewOf < 0 &&
           plan.buffers[id].region == plan.buffers[of].region &&
           plan.buffers[id].offset >= plan.buffers[of].offset &&
           plan.buffers[id].offset + plan.buffers[id].slots() <=
               plan.buffers[of].offset + plan.buffers[of].slots();
      if (ok)
        plan.buffers[id].viewOf = of;
    } else if (tag == "kernel" || tag == "subkernel") {
      Kernel k;
      std::string unknownOp;
      ok = readKernel(in, k, unknownOp);
      if (!unknownOp.empty())
        return fail("unknown kernel op '" + unknownOp +
                    "'; this runtime is older than the plan's compiler");
      if (tag == "kernel")
        plan.kernels.push_back(std::move(k));
      else if (plan.kernels.empty())
        return fail("a 'subkernel' record before any 'kernel'");
      else
        plan.kernels.back().body.push_back(std::move(k));
    } else if (tag == "loc") {
      int64_t i, j;
      std::string text;
      ok = in.number(i) && in.number(j) && in.str(text) && i >= 0 &&
           static_cast<size_t>(i) < plan.kernels.size() && j >= -1 &&
           (j < 0 || static_cast<size_t>(j) <
                         plan.kernels[static_cast<size_t>(i)].body.size());
      if (ok) {
        Kernel &k = plan.kernels[static_cast<size_t>(i)];
        (j < 0 ? k : k.body[static_cast<size_t>(j)]).loc = text;
      }
    } else if (tag == "param") {
      Param p;
      size_t n;
      ok = in.number(p.buffer) && in.number(p.grad) && in.str(p.init) &&
           in.count(n, 8);
      for (size_t i = 0; ok && i < n; ++i) {
        double v;
        ok = in.number(v);
        p.args.push_back(v);
      }
      ok = ok && in.str(p.name);
      plan.params.push_back(std::move(p));
    } else if (tag == "constant") {
      Constant c;
      size_t n;
      ok = in.number(c.buffer) && in.count(n, kMaxRecords);
      for (size_t i = 0; ok && i < n; ++i) {
        double v;
        ok = in.number(v);
        c.values.push_back(v);
      }
      plan.constants.push_back(std::move(c));
    } else if (tag == "feed") {
      Feed f;
      int label = 0;
      ok = in.number(f.buffer) && in.number(label) && in.str(f.name);
      f.label = label != 0;
      plan.feeds.push_back(std::move(f));
    } else if (tag == "loss") {
      ok = in.number(plan.loss);
    } else if (tag == "accuracy") {
      ok = in.number(plan.accuracy);
    } else if (tag == "lossscale") {
      ok = in.number(plan.lossScale);
    } else if (tag == "param_copies") {
      ok = in.number(plan.paramCopies);
    } else if (tag == "grads_in_temp") {
      ok = in.number(plan.gradsInTemp) && plan.gradsInTemp >= 0;
    } else if (tag == "source") {
      std::string which;
      ok =
          in.word(which) && (which == "data" || which == "eval") &&
          readSource(in, which == "data" ? plan.config.data : plan.config.eval);
    } else if (tag == "config") {
      ok = readConfig(in, plan.config);
    } else if (tag == "end") {
      ended = true;
      break;
    } else {
      return fail("unknown record '" + tag + "'");
    }
    if (!ok || !in.done())
      return fail("malformed '" + tag + "' record");
  }
  if (lineNo == 0)
    return fail("empty plan");
  if (!ended)
    return fail("the plan is truncated (no 'end' record)");

  if (std::string wrong = crossCheck(plan); !wrong.empty())
    return fail(wrong);
  return true;
}
