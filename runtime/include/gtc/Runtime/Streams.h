//===- Streams.h - Plan kernels that may run side by side -------*- C++ -*-===//
//
// Which plan kernels of a CudaProgram may run at the same time on the GPU:
// two whose launches neither write memory the other reads or writes. The
// CUDA executor puts them on two streams (a captured graph's branches); the
// schedule depends only on the plan and the program, so `--explain` shows it
// on a machine without a GPU. No CUDA here.
//===----------------------------------------------------------------------===//

#ifndef GTC_RUNTIME_STREAMS_H
#define GTC_RUNTIME_STREAMS_H

#include "gtc/Runtime/CudaProgram.h"
#include "gtc/Runtime/Plan.h"
#include <cstddef>
#include <vector>

namespace gtc::rt {

/// The launches of one plan kernel (they run in order on one stream: they
/// pass data through the program's scratch memory).
struct StreamGroup {
  int planKernel = -1;
  /// Its launches, [begin, end) in the order of the program's launches.
  size_t begin = 0, end = 0;
  int stream = 0; ///< 0 the main (compute) stream, 1 the second
  /// Groups on the other stream to wait for before its first launch.
  std::vector<int> waits;
  /// Whether a group on the other stream waits for it.
  bool signals = false;
};

/// The multiprocessors `--explain` plans for without a GPU (an H100 or
/// H200 has 132).
inline constexpr int kPlanningMultiprocessors = 132;

/// Groups the program's launches by plan kernel (plan kernels without
/// launches have no group) and places each group on a stream. Group g
/// depends on an earlier group h when one writes memory the other reads or
/// writes: buffers by their place in the memory plan (reuse and views
/// overlap), the program's scratch as memory every user writes. A group
/// reads its plan kernel's inputs and writes its outputs (a launch may write
/// one through an input it overlaps: the in-place loss gradient) and every
/// buffer its launches pass that is not an input of the plan kernel (what a
/// later plan kernel without launches outputs).
///
/// Only a small group may go on the second stream: generated kernels of at
/// most two blocks per multiprocessor, which leave room beside them. GEMMs
/// stay on the main stream, which also orders their use of cuBLASLt's one
/// workspace. (On an H200: the MLP's dW GEMM beside its dX GEMM made the
/// step 8% faster; in GPT-2, a layer norm's gradient beside a cuBLASLt GEMM
/// made it 1% slower, and the weight-gradient GEMMs beside the
/// input-gradient chain, each stream with its own cuBLASLt workspace, 1.7%
/// slower.) A small group goes after the last group of the main stream if it
/// depends on that, else of the second stream if it depends on that, else on
/// the stream used least recently; every group waits for its dependencies on
/// the other stream. The kernel of the parameters' copies (Plan::paramCopies)
/// is in no group: a step does not run it.
std::vector<StreamGroup> scheduleStreams(const Plan &plan,
                                         const CudaProgram &program,
                                         int multiprocessors);

} // namespace gtc::rt

#endif // GTC_RUNTIME_STREAMS_H
