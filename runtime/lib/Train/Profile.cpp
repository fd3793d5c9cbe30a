//===- Profile.cpp - Kernel profiles of training steps --------------------===//

#include "gtc/Runtime/Profile.h"
#include <algorithm>
#include <cstdio>
#include <map>
#include <ostream>

using namespace gtc::rt;

namespace {

/// "blocks.3.attn.c_attn.weight" -> "blocks.3.attn.c_attn"; "wte" -> "wte".
std::string scopeOf(const std::string &param) {
  size_t dot = param.rfind('.');
  return dot == std::string::npos ? param : param.substr(0, dot);
}

/// The scope two scopes share, whole components: "a.b.q", "a.b.k" -> "a.b".
std::string sharedScope(const std::string &a, const std::string &b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n])
    ++n;
  if ((n == a.size() || a[n] == '.') && (n == b.size() || b[n] == '.'))
    return a.substr(0, n);
  size_t dot = a.rfind('.', n);
  return dot == std::string::npos ? "" : a.substr(0, dot);
}

std::string jsonString(const std::string &s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (static_cast<unsigned char>(c) < 0x20)
      continue;
    out += c;
  }
  return out + "\"";
}

std::string fixed(double v, int digits) {
  char s[48];
  std::snprintf(s, sizeof s, "%.*f", digits, v);
  return s;
}

} // namespace

std::vector<KernelContext> gtc::rt::kernelContexts(const Plan &plan) {
  std::map<int, std::string> scope; // buffer -> parameter scope
  for (const Param &p : plan.params)
    for (int id : {p.buffer, p.grad}) {
      if (id < 0)
        continue;
      scope[id] = scopeOf(p.name);
      // A packed parameter's buffer (its parts are views of it): the scope
      // its parts share.
      int root = plan.buffers[id].viewOf;
      if (root < 0)
        continue;
      auto [it, fresh] = scope.try_emplace(root, scopeOf(p.name));
      if (!fresh)
        it->second = sharedScope(it->second, scopeOf(p.name));
    }
  int lossKernel = -1;
  for (size_t i = 0; i < plan.kernels.size(); ++i)
    for (int out : plan.kernels[i].outputs)
      if (out == plan.loss)
        lossKernel = static_cast<int>(i);
  std::vector<KernelContext> out(plan.kernels.size());
  std::string layer;
  for (size_t i = 0; i < plan.kernels.size(); ++i) {
    const Kernel &k = plan.kernels[i];
    out[i].phase = static_cast<int>(i) <= lossKernel || lossKernel < 0
                       ? "forward"
                       : "backward";
    for (const std::vector<int> *ids : {&k.inputs, &k.outputs}) {
      auto it = std::find_if(ids->begin(), ids->end(),
                             [&](int id) { return scope.count(id); });
      if (it != ids->end()) {
        layer = scope[*it];
        break;
      }
    }
    out[i].layer = layer;
  }
  return out;
}

std::string gtc::rt::layerGroup(const std::string &layer) {
  size_t dot = layer.find('.');
  if (dot == std::string::npos)
    return layer;
  size_t next = layer.find('.', dot + 1);
  std::string second = layer.substr(dot + 1, next - dot - 1);
  bool index = !second.empty() &&
               std::all_of(second.begin(), second.end(),
                           [](char c) { return c >= '0' && c <= '9'; });
  return index ? layer.substr(0, next) : layer.substr(0, dot);
}

double gtc::rt::bufferBytes(const Plan &plan, int id) {
  if (id < 0 || id >= static_cast<int>(plan.buffers.size()))
    return 0; // the workspace, or no buffer
  return static_cast<double>(plan.buffers[id].elements()) *
         dtypeBytes(plan.buffers[id].dtype);
}

double gtc::rt::kernelBytes(const Plan &plan, const Kernel &kernel) {
  double bytes = 0;
  for (const std::vector<int> *ids : {&kernel.inputs, &kernel.outputs})
    for (int id : *ids)
      bytes += bufferBytes(plan, id);
  // A classifier's logits pass through its chunk five times: the GEMM
  // writes them, the loss kernel reads them and writes their gradient, and
  // the two GEMMs of the gradient read it.
  if (int chunk = static_cast<int>(kernel.intAttr("chunk_buffer", -1));
      chunk >= 0 && !kernel.body.empty() && !kernel.body[0].outputs.empty())
    bytes += 5.0 * bufferBytes(plan, kernel.body[0].outputs[0]);
  return bytes;
}

double gtc::rt::kernelFlops(const Plan &plan, const Kernel &k) {
  auto shape = [&](int id) -> const std::vector<int64_t> & {
    return plan.buffers[id].shape;
  };
  auto elements = [&](int id) {
    return static_cast<double>(plan.buffers[id].elements());
  };
  if (!k.body.empty()) { // a fusion region: its ops' (a folded GEMM's)
    double flops = 0;
    for (const Kernel &op : k.body)
      flops += kernelFlops(plan, op);
    return flops;
  }
  if (k.outputs.empty() || k.inputs.empty())
    return 0;
  if (k.op == OpKind::Linear && k.inputs.size() >= 2 && !shape(k.inputs[1]).empty())
    return 2 * elements(k.outputs[0]) * shape(k.inputs[1]).back();
  if (k.op == OpKind::Matmul && !shape(k.inputs[0]).empty()) {
    const auto &a = shape(k.inputs[0]);
    int64_t kDim = k.intAttr("transpose_a", 0) && a.size() >= 2
                       ? a[a.size() - 2]
                       : a.back();
    return 2 * elements(k.outputs[0]) * kDim;
  }
  if (k.op == OpKind::Attention || k.op == OpKind::AttentionGrad) {
    AttentionLayout a = attentionLayout(plan, k);
    if (!a.error.empty())
      return 0;
    // QK^T and AV are 2 B T^2 H d each; the backward recomputes QK^T and
    // adds three more products.
    double forward = 4.0 * a.b * a.t * a.t * a.width();
    if (a.causal)
      forward /= 2;
    return k.op == OpKind::Attention ? forward : 2.5 * forward;
  }
  return 0;
}

void gtc::rt::writeChromeTrace(const Profile &p, std::ostream &os) {
  os << "{\"displayTimeUnit\": \"ms\", \"otherData\": {\"device\": "
     << jsonString(p.device) << ", \"steps\": " << p.steps
     << ", \"step_ms\": " << p.stepMs << "},\n\"traceEvents\": [\n";
  os << "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 0, "
        "\"args\": {\"name\": "
     << jsonString("gtc on " + p.device) << "}}";
  std::map<std::string, int> tids;
  auto tid = [&](const std::string &stream) {
    auto [it, inserted] = tids.try_emplace(stream, tids.size());
    if (inserted)
      os << ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 0, "
            "\"tid\": "
         << it->second << ", \"args\": {\"name\": " << jsonString(stream)
         << "}}";
    return it->second;
  };
  int phases = tid("phases"), layers = tid("layers"), compute = tid("kernels"),
      copy = tid("copies");
  // Collectives run on their own stream, beside the kernels they overlap.
  int collectives = -1;
  for (const ProfileRecord &r : p.records)
    if (r.kind == "nccl" && collectives < 0)
      collectives = tid("collectives (NCCL)");
  auto event = [&](const std::string &name, const std::string &cat, int t,
                   double ts, double dur, const std::string &args) {
    os << ",\n{\"name\": " << jsonString(name) << ", \"cat\": "
       << jsonString(cat) << ", \"ph\": \"X\", \"pid\": 0, \"tid\": " << t
       << ", \"ts\": " << fixed(ts, 3) << ", \"dur\": " << fixed(dur, 3)
       << (args.empty() ? "" : ", \"args\": {" + args + "}") << "}";
  };
  // Spans: consecutive records of one step with the same phase (or layer).
  auto spans = [&](int t, auto key, const char *cat) {
    size_t i = 0;
    while (i < p.records.size()) {
      const ProfileRecord &r = p.records[i];
      if (r.kind == "copy" || r.kind == "nccl" || key(r).empty()) {
        ++i;
        continue;
      }
      size_t j = i;
      double end = r.startUs + r.durationUs;
      while (j + 1 < p.records.size() && p.records[j + 1].kind != "copy" &&
             p.records[j + 1].kind != "nccl" &&
             p.records[j + 1].step == r.step && key(p.records[j + 1]) == key(r)) {
        ++j;
        end = std::max(end, p.records[j].startUs + p.records[j].durationUs);
      }
      event(key(r), cat, t, r.startUs, end - r.startUs,
            "\"step\": " + std::to_string(r.step));
      i = j + 1;
    }
  };
  spans(phases, [](const ProfileRecord &r) { return r.phase; }, "phase");
  spans(layers,
        [](const ProfileRecord &r) {
          return r.phase == "optimizer" ? std::string() : layerGroup(r.layer);
        },
        "layer");
  for (const ProfileRecord &r : p.records) {
    std::string args = "\"op\": " + jsonString(r.op) +
                       ", \"phase\": " + jsonString(r.phase) +
                       ", \"layer\": " + jsonString(r.layer) +
                       ", \"step\": " + std::to_string(r.step) +
                       ", \"plan_kernel\": " + std::to_string(r.planKernel) +
                       ", \"bytes\": " + fixed(r.bytes, 0) +
                       ", \"flops\": " + fixed(r.flops, 0);
    event(r.name, r.kind,
          r.kind == "copy"   ? copy
          : r.kind == "nccl" ? collectives
                             : compute,
          r.startUs, r.durationUs, args);
  }
  os << "\n]}\n";
}

void gtc::rt::printProfileTable(const Profile &p, std::ostream &os,
                                size_t top) {
  struct Row {
    std::string name, kind, op;
    int calls = 0;
    double us = 0, flops = 0, bytes = 0;
    bool tensorCore = false;
  };
  std::map<std::string, Row> rows;
  std::map<std::string, double> phaseUs;
  double totalUs = 0;
  int launches = 0;
  for (const ProfileRecord &r : p.records) {
    if (r.kind == "copy")
      continue;
    // Plan kernel names carry the kernel's index ("k12_add"): group by
    // what follows so that the same kernel of every layer is one row.
    std::string key = r.name;
    if (key.size() > 1 && key[0] == 'k' && key[1] >= '0' && key[1] <= '9') {
      size_t u = key.find('_');
      if (u != std::string::npos)
        key = key.substr(u + 1);
    }
    Row &row = rows[key];
    row.name = key;
    row.kind = r.kind;
    row.op = r.op;
    row.calls += 1;
    row.us += r.durationUs;
    row.flops += r.flops;
    row.bytes += r.bytes;
    row.tensorCore = row.tensorCore || r.tensorCore;
    phaseUs[r.phase] += r.durationUs;
    if (r.kind == "nccl")
      continue; // on its own stream, beside the kernels
    totalUs += r.durationUs;
    ++launches;
  }
  std::vector<Row> sorted;
  for (auto &[name, row] : rows)
    sorted.push_back(row);
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const Row &a, const Row &b) { return a.us > b.us; });
  int steps = std::max(1, p.steps);
  double stepUs = p.stepMs > 0 ? p.stepMs * 1000 : totalUs / steps;
  os << "profile of " << p.steps << " step" << (p.steps == 1 ? "" : "s")
     << " on " << p.device << ": " << launches / steps
     << " launches a step, " << fixed(totalUs / steps / 1000, 3)
     << " ms of kernel time a step";
  if (p.stepMs > 0)
    os << ", " << fixed(p.stepMs, 3) << " ms a step unprofiled";
  os << "\n";
  char line[512];
  std::snprintf(line, sizeof line, "%-44s %7s %10s %9s %6s %10s %8s\n",
                "kernel", "calls", "total ms", "mean us", "step%",
                "achieved", "of peak");
  os << line;
  size_t shown = 0;
  for (const Row &r : sorted) {
    if (top && shown++ == top) {
      os << "... " << sorted.size() - top << " more kinds of kernel\n";
      break;
    }
    std::string rate = "-", share = "-";
    double seconds = r.us * 1e-6;
    if (seconds > 0 && r.flops > 0) {
      double rateV = r.flops / seconds;
      rate = rateV >= 1e12 ? fixed(rateV / 1e12, 1) + " TF/s"
                           : fixed(rateV / 1e9, 1) + " GF/s";
      double peak = r.tensorCore ? p.peakTensorFlops : p.peakFp32Flops;
      if (peak > 0)
        share = fixed(100 * rateV / peak, 0) + "%";
    } else if (seconds > 0 && r.bytes > 0) {
      double rateV = r.bytes / seconds;
      rate = fixed(rateV / 1e9, 0) + " GB/s";
      if (p.peakBytesPerSecond > 0)
        share = fixed(100 * rateV / p.peakBytesPerSecond, 0) + "%";
    }
    std::string name = r.name.size() > 44 ? r.name.substr(0, 41) + "..." : r.name;
    std::snprintf(line, sizeof line, "%-44s %7d %10.3f %9.1f %6.1f %10s %8s\n",
                  name.c_str(), r.calls / steps, r.us / steps / 1000,
                  r.us / r.calls, 100 * r.us / steps / stepUs, rate.c_str(),
                  share.c_str());
    os << line;
  }
  os << "per step:";
  for (const char *phase : {"forward", "backward", "optimizer"})
    if (phaseUs.count(phase))
      os << " " << phase << " " << fixed(phaseUs[phase] / steps / 1000, 3)
         << " ms";
  os << "\n";
  if (!phaseUs.count("communication"))
    return;
  // How much of the collectives' time other kernels ran beside: the part
  // of each collective's span covered by a kernel, GEMM or memset span.
  std::vector<std::pair<double, double>> busy;
  for (const ProfileRecord &r : p.records)
    if (r.kind != "copy" && r.kind != "nccl")
      busy.push_back({r.startUs, r.startUs + r.durationUs});
  std::sort(busy.begin(), busy.end());
  std::vector<std::pair<double, double>> merged;
  for (auto [lo, hi] : busy)
    if (!merged.empty() && lo <= merged.back().second)
      merged.back().second = std::max(merged.back().second, hi);
    else
      merged.push_back({lo, hi});
  double covered = 0;
  for (const ProfileRecord &r : p.records) {
    if (r.kind != "nccl")
      continue;
    double lo = r.startUs, hi = r.startUs + r.durationUs;
    for (auto [a, b] : merged)
      covered += std::max(0.0, std::min(b, hi) - std::max(a, lo));
  }
  double comm = phaseUs["communication"];
  os << "collectives (NCCL, their own stream): "
     << fixed(comm / steps / 1000, 3) << " ms a step, "
     << fixed(covered / steps / 1000, 3) << " ms of it ("
     << fixed(comm > 0 ? 100 * covered / comm : 0, 0)
     << "%) beside other kernels\n";
}

// nvmlClocksEventReasons (nvml.h): SwPowerCap 0x4; HwSlowdown 0x8,
// SwThermalSlowdown 0x20, HwThermalSlowdown 0x40, HwPowerBrakeSlowdown 0x80.
bool gtc::rt::clockPowerCapped(unsigned long long reasons) {
  return (reasons & 0x4ull) != 0;
}

bool gtc::rt::clockThermalLimited(unsigned long long reasons) {
  return (reasons & (0x8ull | 0x20ull | 0x40ull | 0x80ull)) != 0;
}

void gtc::rt::EnergyWindow::read(double began, double ended,
                                 unsigned long long milliJoules) {
  bool fresh = polls++ > 0 && ended - previousBegan <= kMaxGapSeconds;
  if (fresh && milliJoules != previous) {
    double when = (previousBegan + ended) / 2;
    if (changes++ == 0) {
      firstSeconds = when;
      firstMilliJoules = milliJoules;
    }
    lastSeconds = when;
    lastMilliJoules = milliJoules;
  }
  previous = milliJoules;
  previousBegan = began;
}

double gtc::rt::EnergyWindow::watts() const {
  return valid() ? (lastMilliJoules - firstMilliJoules) / 1000.0 / seconds()
                 : 0;
}

std::string gtc::rt::describePower(const PowerReading &r) {
  if (!r.valid)
    return "";
  std::string s = fixed(r.joulesPerStep, 2) + " J/step at " +
                  fixed(r.watts, 0) + " W over " + fixed(r.windowSeconds, 2) +
                  " s";
  if (r.powerLimitW > 0)
    s += " (limit " + fixed(r.powerLimitW, 0) + " W)";
  if (r.samples > 0) {
    s += ", SM clock " + fixed(r.smMHz, 0) + " MHz, power-limited in " +
         std::to_string(r.powerCapped) + " of " + std::to_string(r.samples) +
         " samples";
    if (r.thermal > 0)
      s += ", slowed by a thermal or hardware limit in " +
           std::to_string(r.thermal);
  }
  return s;
}
