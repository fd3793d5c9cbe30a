//===- cupti_kernels.cpp - Every kernel of a process, timed by CUPTI -----===//
//
// A CUDA injection library: the driver loads it into any CUDA process
// started with CUDA_INJECTION64_PATH set to it, and it records every kernel
// the process runs (graph replays included) through CUPTI's activity API,
// which timestamps kernels as they run, concurrently, without serializing
// them or changing the launches. So gtc's graph-replayed step and PyTorch's
// compiled one are measured on one basis (torch.profiler uses the same
// records), unlike gtc's `--profile` (CUDA events around each launch, no
// graph) or Nsight Compute (kernels one at a time, between idle gaps).
//
//   g++ -O2 -shared -fPIC -I/usr/local/cuda/include cupti_kernels.cpp
//       -o cupti_kernels.so -L/usr/local/cuda/lib64 -lcupti
//   CUPTI_KERNELS_OUT=k.tsv CUDA_INJECTION64_PATH=$PWD/cupti_kernels.so
//       gtc run examples/llama.gt --bench 20
//   python3 test/gpu/cupti_table.py k.tsv.PID MARKER STEPS
//
// Writes one line a kernel: start and end (ns), stream, grid, block,
// registers a thread, dynamic shared memory, name, to CUPTI_KERNELS_OUT
// with the process id appended (k.tsv.1234). The file is complete when the
// process exits (CUPTI's buffers are flushed then).
//===----------------------------------------------------------------------===//

#include <cupti.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include <unistd.h>

namespace {

FILE *out = nullptr;
std::mutex outLock;
constexpr size_t kBufferBytes = 16 << 20;

void check(CUptiResult r, const char *what) {
  if (r == CUPTI_SUCCESS)
    return;
  const char *s = "?";
  cuptiGetResultString(r, &s);
  std::fprintf(stderr, "cupti_kernels: %s: %s\n", what, s);
}

void CUPTIAPI requested(uint8_t **buffer, size_t *size, size_t *maxRecords) {
  *buffer = static_cast<uint8_t *>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *maxRecords = 0;
}

void CUPTIAPI completed(CUcontext, uint32_t, uint8_t *buffer, size_t,
                        size_t valid) {
  std::lock_guard<std::mutex> g(outLock);
  CUpti_Activity *rec = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || !out)
      continue;
    auto *k = reinterpret_cast<CUpti_ActivityKernel10 *>(rec);
    std::fprintf(out, "%llu\t%llu\t%u\t%d,%d,%d\t%d,%d,%d\t%u\t%d\t%s\n",
                 (unsigned long long)k->start, (unsigned long long)k->end,
                 k->streamId, k->gridX, k->gridY, k->gridZ, k->blockX,
                 k->blockY, k->blockZ, (unsigned)k->registersPerThread,
                 k->dynamicSharedMemory, k->name ? k->name : "?");
  }
  size_t dropped = 0;
  cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped);
  if (dropped)
    std::fprintf(stderr, "cupti_kernels: %zu records dropped\n", dropped);
  std::free(buffer);
}

// A context's records are flushed before it goes (gtc destroys its context
// before the process exits).
void CUPTIAPI onResource(void *, CUpti_CallbackDomain, CUpti_CallbackId id,
                         const void *) {
  if (id == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING)
    check(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "flush");
}

void finish() {
  check(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "flush");
  std::lock_guard<std::mutex> g(outLock);
  if (out)
    std::fclose(out);
  out = nullptr;
}

} // namespace

extern "C" int InitializeInjection(void) {
  // One file a process: children (compiler workers) inherit the variable.
  std::string path = std::getenv("CUPTI_KERNELS_OUT")
                         ? std::getenv("CUPTI_KERNELS_OUT")
                         : "cupti_kernels.tsv";
  path += "." + std::to_string(getpid());
  out = std::fopen(path.c_str(), "w");
  if (!out) {
    std::fprintf(stderr, "cupti_kernels: cannot write %s\n", path.c_str());
    return 0;
  }
  check(cuptiActivityRegisterCallbacks(requested, completed), "callbacks");
  check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "enable");
  CUpti_SubscriberHandle sub;
  check(cuptiSubscribe(&sub, (CUpti_CallbackFunc)onResource, nullptr), "subscribe");
  check(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE,
                            CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING),
        "context callback");
  std::atexit(finish);
  return 1;
}
