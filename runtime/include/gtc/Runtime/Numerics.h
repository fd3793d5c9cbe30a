//===- Numerics.h - --check-numerics ----------------------------*- C++ -*-===//
//
// Plain C++: finds the first op of a step whose output is not finite, as
// torch.autograd.detect_anomaly does, from the values an executor hands it
// after each op (the CPU executor: every op of a fusion region; the CUDA
// executor: every plan kernel, run without a graph).
//===----------------------------------------------------------------------===//

#ifndef GTC_RUNTIME_NUMERICS_H
#define GTC_RUNTIME_NUMERICS_H

#include "gtc/Runtime/Plan.h"
#include "gtc/Runtime/Profile.h"
#include <functional>
#include <string>
#include <vector>

namespace gtc::rt {

/// Stops a step (RuntimeError) at the first op whose output is not finite,
/// naming the op, its output, source location, phase and layer, and which
/// of its inputs already were not finite.
class NumericsCheck {
public:
  /// The values of buffer `id` as floats (`scratch` may hold them).
  using Reader = std::function<const float *(int id, std::vector<float> &)>;

  explicit NumericsCheck(const Plan &plan);

  /// fp16 loss scaling: the backward pass may overflow by design (the step
  /// is then skipped), so only the forward pass is checked.
  bool checksForwardOnly() const { return forwardOnly; }

  /// After op `op` of plan kernel `kernel` (the kernel itself, or an op of
  /// its fusion region) has run: throws RuntimeError if an output is not
  /// finite.
  void after(size_t kernel, const Kernel &op, const Reader &read) const;

  /// "3 NaN and 0 inf among 4096 values", or "" when all are finite.
  static std::string count(const float *v, int64_t n);

private:
  std::string nonFinite(int id, const Reader &read,
                        std::vector<float> &scratch) const;

  const Plan &plan;
  std::vector<KernelContext> contexts;
  bool forwardOnly;
};

} // namespace gtc::rt

#endif // GTC_RUNTIME_NUMERICS_H
