//===- CudaUnavailable.cpp - The CUDA runtime when built without CUDA -----===//
//
// Compiled instead of Cuda.cpp when the CUDA headers were not found at build
// time: every entry point reports that this build has no GPU support.

#include "gtc/Runtime/Cuda.h"

using namespace gtc::rt;

static const char *kMessage =
    "this gtc was built without CUDA (no cuda.h at build time); rebuild with "
    "the CUDA toolkit installed, or use --device cpu";

bool gtc::rt::cudaAvailable(CudaDeviceInfo &, std::string &error) {
  error = kMessage;
  return false;
}

bool gtc::rt::compileCuda(const std::string &, const std::string &,
                          std::vector<char> &, bool &, std::string &error) {
  error = kMessage;
  return false;
}

bool gtc::rt::compileCudaJobs(std::vector<CompileJob> &jobs,
                               unsigned &threads) {
  threads = 0;
  for (CompileJob &j : jobs)
    j.error = kMessage;
  return jobs.empty();
}

std::vector<std::string> gtc::rt::runtimeKernelSources() { return {}; }

CompileStats &gtc::rt::compileStats() {
  static CompileStats stats;
  return stats;
}

struct CudaExecutor::Impl {};

void gtc::rt::selectCudaDevice(int) {}

int gtc::rt::cudaDeviceCount() { return 0; }

size_t gtc::rt::cudaMemoryInUse() { return 0; }

size_t gtc::rt::cudaContextMemory() { return 0; }

CudaExecutor::CudaExecutor(const Plan &, const CudaProgram &, bool,
                           Communicator *, bool) {
  throw RuntimeError(kMessage);
}
CudaExecutor::~CudaExecutor() = default;
const Plan &CudaExecutor::plan() const { throw RuntimeError(kMessage); }
void CudaExecutor::upload(int, const void *) {}
void CudaExecutor::download(int, void *, int) {}
void CudaExecutor::download(int, int64_t, int64_t, void *) {}
void CudaExecutor::uploadRegion(Region, const void *) {}
void CudaExecutor::copyParamsFrom(const CudaExecutor &) {}
void CudaExecutor::copyRegionFrom(const CudaExecutor &, Region) {}
void CudaExecutor::initParams(uint64_t) {}
void CudaExecutor::downloadRegion(Region, void *) {}
void *CudaExecutor::stagedInput(int, int) { return nullptr; }
void CudaExecutor::step(int, bool, bool, int, int) {}
double CudaExecutor::loss() { return 0; }
void CudaExecutor::setSchedule(int64_t, int64_t, int64_t, uint64_t) {}
double CudaExecutor::accuracy() { return 0; }
bool CudaExecutor::lossScale(double &, int64_t &) { return false; }
bool CudaExecutor::downloadScaler(LossScaler &) { return false; }
void CudaExecutor::uploadScaler(const LossScaler &) {}
void CudaExecutor::waitSlot(int) {}
void CudaExecutor::downloadState(std::vector<float> &, std::vector<float> &) {}
void CudaExecutor::uploadState(const std::vector<float> &,
                               const std::vector<float> &) {}
std::vector<std::pair<std::string, size_t>>
CudaExecutor::memoryBreakdown() const {
  return {};
}
CudaExecutor::StepTimes CudaExecutor::timeStep(int, int) { return {}; }
void CudaExecutor::profile(int, int, Profile &) {}
double CudaDeviceInfo::peakTensorFlops() const { return 0; }
double CudaDeviceInfo::peakFp32Flops() const { return 0; }
double CudaDeviceInfo::peakBytesPerSecond() const { return 0; }
