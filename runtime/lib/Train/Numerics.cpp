//===- Numerics.cpp - --check-numerics ------------------------------------===//

#include "gtc/Runtime/Numerics.h"
#include "gtc/Runtime/CpuExecutor.h"
#include <algorithm>
#include <cmath>

using namespace gtc::rt;

namespace {

/// The op in words: "log", or "fused(sub, log)" for a fusion region.
std::string describe(const Kernel &op) {
  std::string s = opName(op.op);
  if (op.body.empty())
    return s;
  s += "(";
  for (size_t i = 0; i < op.body.size(); ++i)
    s += (i ? ", " : "") + std::string(opName(op.body[i].op));
  return s + ")";
}

} // namespace

NumericsCheck::NumericsCheck(const Plan &plan)
    : plan(plan), contexts(kernelContexts(plan)),
      forwardOnly(plan.scalesLoss()) {}

std::string NumericsCheck::count(const float *v, int64_t n) {
  int64_t nan = 0, inf = 0;
  for (int64_t i = 0; i < n; ++i) {
    nan += std::isnan(v[i]);
    inf += std::isinf(v[i]);
  }
  if (nan == 0 && inf == 0)
    return "";
  return std::to_string(nan) + " NaN and " + std::to_string(inf) +
         " inf among " + std::to_string(n) + " values";
}

std::string NumericsCheck::nonFinite(int id, const Reader &read,
                                     std::vector<float> &scratch) const {
  if (id < 0 || !isFloat(plan.buffers[id].dtype))
    return "";
  return count(read(id, scratch), plan.buffers[id].elements());
}

void NumericsCheck::after(size_t kernel, const Kernel &op,
                          const Reader &read) const {
  if (forwardOnly && contexts[kernel].phase == "backward")
    return;
  std::vector<float> scratch;
  for (int id : op.outputs) {
    std::string bad = nonFinite(id, read, scratch);
    if (bad.empty())
      continue;
    std::string inputs;
    bool param = false; // a parameter the last update made not finite
    for (int in : op.inputs) {
      std::string was = nonFinite(in, read, scratch);
      if (was.empty())
        continue;
      inputs += (inputs.empty() ? "" : ", ") +
                ("'" + plan.buffers[in].name + "' (" + was + ")");
      param = param || plan.buffers[in].region == Region::Param;
    }
    const KernelContext &c = contexts[kernel];
    std::string loc = op.loc;
    for (const Kernel &sub : op.body)
      if (loc.empty())
        loc = sub.loc;
    throw RuntimeError(
        "--check-numerics: " + describe(op) +
        (loc.empty() ? "" : " at " + loc) + " (" + c.phase +
        (c.layer.empty() ? "" : ", layer " + c.layer) +
        ") is the step's first op whose output is not finite: '" +
        plan.buffers[id].name + "' " +
        typeText(plan.buffers[id].dtype, plan.buffers[id].shape) + " has " +
        bad +
        (inputs.empty()
             ? "; its inputs are finite, so it made them (an overflow, a log "
               "or a division of 0?)"
             : "; inputs already not finite: " + inputs +
                   (param ? " (the last update made a parameter so: lower "
                            "the learning rate or add grad_clip)"
                          : "")));
  }
}
