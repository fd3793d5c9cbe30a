//===- StepSequence.h - The order of a training step's phases ---*- C++ -*-===//
//
// The one definition of what a training step does after its kernels, and in
// which order, for every path that runs one: the CPU backend (Backends.h),
// the CUDA executor's captured step (Cuda.cpp) and its profile
// (CudaProfile.cpp). A device supplies the phases; each runs them on its own
// memory (the CPU on the host, the GPU as kernels and collectives on its
// streams).
//===----------------------------------------------------------------------===//

#ifndef GTC_RUNTIME_LIB_TRAIN_STEPSEQUENCE_H
#define GTC_RUNTIME_LIB_TRAIN_STEPSEQUENCE_H

namespace gtc::rt {

/// Where a call of a step stands: micro-batch `part` of `parts` (gradient
/// accumulation; 0 of 1 without it), whether the step updates the
/// parameters (an evaluation or a gradient check does not), and whether the
/// plan's gt-bucket buckets average the gradients over the processes during
/// the backward.
struct StepShape {
  int part = 0, parts = 1;
  bool update = true;
  bool bucketed = false;
};

/// One call of a training step:
///   kernels()     the forward and backward of this micro-batch (with the
///                 buckets' collectives, when the plan has them);
///   accumulate()  with several micro-batches: adds this one's gradients
///                 and loss to their sums, and after the last leaves their
///                 mean where the update reads them;
///   reduce(g)     after the last micro-batch: the loss's mean over the
///                 processes, and the gradients' when `g` (the plan's
///                 buckets did not reduce them);
///   update()      unscaling (fp16, skipping a step that overflowed),
///                 clipping to the global norm, the optimizer, and ZeRO's
///                 gather of the parameters.
template <typename Kernels, typename Accumulate, typename Reduce,
          typename Update>
void runStepSequence(const StepShape &shape, Kernels &&kernels,
                     Accumulate &&accumulate, Reduce &&reduce,
                     Update &&update) {
  kernels();
  if (shape.parts > 1)
    accumulate();
  if (shape.part + 1 < shape.parts)
    return;
  reduce(!shape.bucketed);
  if (shape.update)
    update();
}

} // namespace gtc::rt

#endif // GTC_RUNTIME_LIB_TRAIN_STEPSEQUENCE_H
