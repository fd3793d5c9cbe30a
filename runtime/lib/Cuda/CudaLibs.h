//===- CudaLibs.h - libcuda, NVRTC and cuBLASLt, loaded at run time -*- C++ -*-===//
//
// The runtime's handle on the CUDA libraries, private to it: the entry points
// gtc calls (resolved with dlopen/cuGetProcAddress, so gtc builds and runs
// on a machine without them), the device it opened, and CU()/LT(), which
// turn a failed call into a RuntimeError naming it. CudaLibs.cpp loads them
// and holds NVRTC's kernel cache; Cuda.cpp runs plans with them.
//===----------------------------------------------------------------------===//

#ifndef GTC_RUNTIME_LIB_CUDALIBS_H
#define GTC_RUNTIME_LIB_CUDALIBS_H

#include "gtc/Runtime/Cuda.h"
#include "gtc/Runtime/Plan.h"
#include <cublasLt.h>
#include <cuda.h>
#include <nvrtc.h>
#include <string>

namespace gtc::rt::cu {

#define GTC_CU_FUNCTIONS(X)                                                    \
  X(cuInit)                                                                    \
  X(cuDeviceGet)                                                               \
  X(cuDeviceGetCount)                                                          \
  X(cuDeviceGetName)                                                           \
  X(cuDeviceGetAttribute)                                                      \
  X(cuDeviceGetPCIBusId)                                                       \
  X(cuDeviceTotalMem)                                                          \
  X(cuDevicePrimaryCtxRetain)                                                  \
  X(cuCtxSetCurrent)                                                           \
  X(cuGetErrorString)                                                          \
  X(cuMemAlloc)                                                                \
  X(cuMemFree)                                                                 \
  X(cuMemHostAlloc)                                                            \
  X(cuMemFreeHost)                                                             \
  X(cuMemcpyHtoD)                                                              \
  X(cuMemcpyDtoH)                                                              \
  X(cuMemcpyHtoDAsync)                                                         \
  X(cuMemcpyDtoHAsync)                                                         \
  X(cuMemcpyDtoDAsync)                                                         \
  X(cuMemsetD8Async)                                                           \
  X(cuMemGetInfo)                                                              \
  X(cuModuleLoadData)                                                          \
  X(cuModuleGetFunction)                                                       \
  X(cuFuncSetAttribute)                                                        \
  X(cuLaunchKernel)                                                            \
  X(cuLaunchKernelEx)                                                          \
  X(cuStreamCreate)                                                            \
  X(cuStreamSynchronize)                                                       \
  X(cuStreamWaitEvent)                                                         \
  X(cuStreamBeginCapture)                                                      \
  X(cuStreamEndCapture)                                                        \
  X(cuGraphInstantiateWithFlags)                                               \
  X(cuGraphLaunch)                                                             \
  X(cuGraphDestroy)                                                            \
  X(cuGraphExecDestroy)                                                        \
  X(cuEventCreate)                                                             \
  X(cuEventRecord)                                                             \
  X(cuEventSynchronize)                                                        \
  X(cuEventQuery)                                                              \
  X(cuEventElapsedTime)                                                        \
  X(cuTensorMapEncodeTiled)

#define GTC_NVRTC_FUNCTIONS(X)                                                 \
  X(nvrtcCreateProgram)                                                        \
  X(nvrtcCompileProgram)                                                       \
  X(nvrtcGetProgramLogSize)                                                    \
  X(nvrtcGetProgramLog)                                                        \
  X(nvrtcGetCUBINSize)                                                         \
  X(nvrtcGetCUBIN)                                                             \
  X(nvrtcGetPTXSize)                                                           \
  X(nvrtcGetPTX)                                                               \
  X(nvrtcDestroyProgram)                                                       \
  X(nvrtcGetErrorString)                                                       \
  X(nvrtcVersion)

#define GTC_LT_FUNCTIONS(X)                                                    \
  X(cublasLtCreate)                                                            \
  X(cublasLtMatmulDescCreate)                                                  \
  X(cublasLtMatmulDescSetAttribute)                                            \
  X(cublasLtMatrixLayoutCreate)                                                \
  X(cublasLtMatrixLayoutSetAttribute)                                          \
  X(cublasLtMatmulPreferenceCreate)                                            \
  X(cublasLtMatmulPreferenceSetAttribute)                                      \
  X(cublasLtMatmulAlgoGetHeuristic)                                            \
  X(cublasLtMatmul)

struct Libs {
#define DECLARE(f) decltype(&::f) f = nullptr;
  GTC_CU_FUNCTIONS(DECLARE)
  GTC_NVRTC_FUNCTIONS(DECLARE)
  GTC_LT_FUNCTIONS(DECLARE)
#undef DECLARE
  bool driver = false, nvrtc = false, cublas = false;
  std::string driverError, nvrtcError, cublasError;
  CUdevice device = 0;
  CUcontext context = nullptr;
  /// Device memory in use once the context was open, before gtc allocated
  /// anything (cuMemGetInfo's total - free).
  size_t contextBytes = 0;
  CudaDeviceInfo info;
};

/// The libraries, loaded on first use (never unloaded).
Libs &libs();

/// The driver's name for a CUDA error.
std::string cuError(CUresult r);

/// Opens the GPU that selectCudaDevice chose (once); false with a message
/// that says what is missing and what to do.
bool initDevice(std::string &error);

} // namespace gtc::rt::cu

#define CU(call)                                                               \
  do {                                                                         \
    CUresult r_ = libs().call;                                                 \
    if (r_ != CUDA_SUCCESS)                                                    \
      throw RuntimeError(std::string("CUDA: ") + #call + ": " + cuError(r_));  \
  } while (0)

#define LT(call)                                                               \
  do {                                                                         \
    cublasStatus_t s_ = libs().call;                                           \
    if (s_ != CUBLAS_STATUS_SUCCESS)                                           \
      throw RuntimeError(std::string("cuBLASLt: ") + #call + " failed (" +     \
                         std::to_string(int(s_)) + ")");                       \
  } while (0)

#endif // GTC_RUNTIME_LIB_CUDALIBS_H
