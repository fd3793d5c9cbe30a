//===- Streams.cpp - Plan kernels that may run side by side ---------------===//

#include "gtc/Runtime/Streams.h"
#include <algorithm>
#include <cstdint>

namespace gtc::rt {
namespace {

/// Bytes [lo, hi) of one memory space (a region of the memory plan, or the
/// program's scratch), read or written.
struct Access {
  int space;
  int64_t lo, hi;
  bool write;
};

constexpr int kScratchSpace = 1000;

std::vector<Access> accesses(const Plan &plan, const Kernel &k,
                             const std::vector<const CudaLaunch *> &launches) {
  std::vector<Access> out;
  auto has = [](const std::vector<int> &v, int id) {
    return std::find(v.begin(), v.end(), id) != v.end();
  };
  auto add = [&](int id, bool write) {
    if (id == CudaLaunch::kWorkspace) {
      out.push_back({kScratchSpace, 0, 1, true});
      return;
    }
    if (id < 0 || plan.buffers[id].region == Region::Local)
      return; // none, the step counters (written after the step), registers
    const Buffer &b = plan.buffers[id];
    write = write || has(k.outputs, id) || !has(k.inputs, id);
    // Gradients inside the temporaries are in their space.
    const bool inTemp = b.region == Region::Grad && plan.gradsInTemp >= 0;
    const int64_t at = b.offset + (inTemp ? plan.gradsInTemp : 0);
    out.push_back({static_cast<int>(inTemp ? Region::Temp : b.region), at * 4,
                   (at + b.slots()) * 4, write});
  };
  for (const CudaLaunch *s : launches) {
    if (s->kind == CudaLaunch::Kind::Memset) {
      add(s->c, true);
    } else if (s->kind == CudaLaunch::Kind::Gemm) {
      for (int id : {s->a, s->b, s->bias, s->aux, s->addend})
        add(id, false);
      add(s->c, true);
      add(s->biasGrad, true);
    } else {
      for (int id : s->buffers)
        add(id, false);
    }
  }
  // What the plan kernel reads and outputs, whichever buffers its launches
  // pass (the in-place loss writes the gradient through the logits).
  for (int id : k.inputs)
    add(id, false);
  for (int id : k.outputs)
    add(id, true);
  return out;
}

bool conflict(const std::vector<Access> &a, const std::vector<Access> &b) {
  for (const Access &x : a)
    for (const Access &y : b)
      if ((x.write || y.write) && x.space == y.space && x.lo < y.hi &&
          y.lo < x.hi)
        return true;
  return false;
}

} // namespace

std::vector<StreamGroup> scheduleStreams(const Plan &plan,
                                         const CudaProgram &program,
                                         int multiprocessors) {
  std::vector<StreamGroup> groups;
  std::vector<std::vector<Access>> acc;
  std::vector<bool> small;
  size_t at = 0;
  for (size_t k = 0; k < program.kernels.size(); ++k) {
    if (program.kernels[k].empty())
      continue;
    if (static_cast<int>(k) == plan.paramCopies) {
      at += program.kernels[k].size(); // not in a step (Plan::paramCopies)
      continue;
    }
    StreamGroup g;
    g.planKernel = static_cast<int>(k);
    g.begin = at;
    at += program.kernels[k].size();
    g.end = at;
    std::vector<const CudaLaunch *> launches;
    bool fits = true;
    for (const CudaLaunch &l : program.kernels[k]) {
      launches.push_back(&l);
      fits = fits && l.kind == CudaLaunch::Kind::Kernel &&
             l.grid <= 2 * static_cast<int64_t>(multiprocessors);
    }
    small.push_back(fits);
    acc.push_back(accesses(plan, plan.kernels[k], launches));
    groups.push_back(g);
  }
  int tail[2] = {-1, -1};   // the last group on each stream
  int waited[2] = {-1, -1}; // the latest group of the other stream waited for
  for (size_t g = 0; g < groups.size(); ++g) {
    std::vector<int> deps;
    for (size_t h = 0; h < g; ++h)
      if (conflict(acc[g], acc[h]))
        deps.push_back(static_cast<int>(h));
    auto dependsOn = [&](int h) {
      return h >= 0 && std::find(deps.begin(), deps.end(), h) != deps.end();
    };
    int s = !small[g] || dependsOn(tail[0]) ? 0
            : dependsOn(tail[1])            ? 1
            : tail[0] <= tail[1]            ? 0
                                            : 1;
    int latest = -1; // the latest dependency on the other stream
    for (int h : deps)
      if (groups[h].stream != s)
        latest = std::max(latest, h);
    if (latest > waited[s]) {
      groups[g].waits.push_back(latest);
      groups[latest].signals = true;
      waited[s] = latest;
    }
    groups[g].stream = s;
    tail[s] = static_cast<int>(g);
  }
  return groups;
}

} // namespace gtc::rt
