//===- CudaLibs.cpp - Loading libcuda, NVRTC and cuBLASLt; the kernel cache ===//

#include "Cuda/CudaLibs.h"
#include "gtc/Runtime/Bundle.h"
#include "gtc/Runtime/Cache.h"
#include "gtc/Runtime/Files.h"
#include "gtc/Runtime/Rng.h"
#include "gtc/Runtime/Startup.h"
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <fstream>
#include <mutex>
#include <sstream>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

using namespace gtc::rt;
using namespace gtc::rt::cu;

namespace {

//===----------------------------------------------------------------------===//
// Libraries loaded at run time
//===----------------------------------------------------------------------===//

void *openFirst(std::initializer_list<const char *> names, std::string &error) {
  for (const char *n : names)
    if (void *h = dlopen(n, RTLD_NOW | RTLD_LOCAL))
      return h;
  const char *e = dlerror();
  error = e ? e : "not found";
  return nullptr;
}

/// The GPU selectCudaDevice chose.
int selectedOrdinal = 0;

} // namespace

Libs &gtc::rt::cu::libs() {
  static Libs l;
  static std::once_flag once;
  std::call_once(once, [] {
    // The driver: resolve every entry point through cuGetProcAddress, which
    // returns the version of each function matching the headers we use.
    if (void *h = openFirst({"libcuda.so.1", "libcuda.so"}, l.driverError)) {
      using GetProc = CUresult (*)(const char *, void **, int, cuuint64_t,
                                   CUdriverProcAddressQueryResult *);
      auto getProc = reinterpret_cast<GetProc>(dlsym(h, "cuGetProcAddress_v2"));
      bool ok = getProc != nullptr;
#define RESOLVE(f)                                                             \
  if (ok) {                                                                    \
    CUdriverProcAddressQueryResult status;                                     \
    ok = getProc(#f, reinterpret_cast<void **>(&l.f), CUDA_VERSION,           \
                 CU_GET_PROC_ADDRESS_DEFAULT, &status) == CUDA_SUCCESS &&      \
         l.f;                                                                  \
    if (!ok)                                                                   \
      l.driverError = "the NVIDIA driver lacks " #f "; update the driver";    \
  }
      GTC_CU_FUNCTIONS(RESOLVE)
#undef RESOLVE
      l.driver = ok;
    }
// Resolves f from the library handle h into l.f (ok: all found so far).
#define GTC_DLSYM(f)                                                           \
  ok = ok && (l.f = reinterpret_cast<decltype(l.f)>(dlsym(h, #f)));
    if (void *h = openFirst({"libnvrtc.so.13", "libnvrtc.so",
                             "/usr/local/cuda/lib64/libnvrtc.so.13"},
                            l.nvrtcError)) {
      bool ok = true;
      GTC_NVRTC_FUNCTIONS(GTC_DLSYM)
      l.nvrtc = ok;
      if (!ok)
        l.nvrtcError = "libnvrtc lacks an entry point; install CUDA 13's NVRTC";
    }
    if (void *h = openFirst({"libcublasLt.so.13", "libcublasLt.so",
                             "/usr/local/cuda/lib64/libcublasLt.so.13"},
                            l.cublasError)) {
      bool ok = true;
      GTC_LT_FUNCTIONS(GTC_DLSYM)
#undef GTC_DLSYM
      l.cublas = ok;
      if (!ok)
        l.cublasError = "libcublasLt lacks an entry point; install CUDA 13";
    }
  });
  return l;
}

std::string gtc::rt::cu::cuError(CUresult r) {
  const char *s = nullptr;
  if (libs().cuGetErrorString)
    libs().cuGetErrorString(r, &s);
  return s ? s : "CUDA error " + std::to_string(int(r));
}

bool gtc::rt::cu::initDevice(std::string &error) {
  Libs &l = libs();
  if (!l.driver) {
    error = "no NVIDIA driver/GPU found (" + l.driverError +
            "); use --device cpu";
    return false;
  }
  if (l.context)
    return true;
  int count = 0;
  if (l.cuInit(0) != CUDA_SUCCESS || l.cuDeviceGetCount(&count) != CUDA_SUCCESS ||
      count == 0) {
    error = "no NVIDIA GPU found (the driver loads but sees no device); use "
            "--device cpu";
    return false;
  }
  if (selectedOrdinal >= count) {
    error = "GPU " + std::to_string(selectedOrdinal) +
            " was asked for (the local rank of a data-parallel process), "
            "and this process sees " + std::to_string(count) +
            " GPU" + (count == 1 ? "" : "s") +
            "; start at most as many processes per host as it has GPUs "
            "(CUDA_VISIBLE_DEVICES limits what each sees)";
    return false;
  }
  CUresult r = l.cuDeviceGet(&l.device, selectedOrdinal);
  if (r == CUDA_SUCCESS)
    r = l.cuDevicePrimaryCtxRetain(&l.context, l.device);
  if (r == CUDA_SUCCESS)
    r = l.cuCtxSetCurrent(l.context);
  if (r != CUDA_SUCCESS) {
    error = "cannot open the GPU: " + cuError(r);
    return false;
  }
  size_t free = 0, total = 0;
  if (l.cuMemGetInfo(&free, &total) == CUDA_SUCCESS)
    l.contextBytes = total - free;
  char name[256] = {0};
  l.cuDeviceGetName(name, sizeof name, l.device);
  l.info.name = name;
  l.info.count = count;
  l.cuDeviceGetAttribute(&l.info.major,
                         CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, l.device);
  l.cuDeviceGetAttribute(&l.info.minor,
                         CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, l.device);
  l.cuDeviceGetAttribute(&l.info.multiprocessors,
                         CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, l.device);
  l.cuDeviceGetAttribute(&l.info.clockKHz, CU_DEVICE_ATTRIBUTE_CLOCK_RATE,
                         l.device);
  l.cuDeviceGetAttribute(&l.info.memoryClockKHz,
                         CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, l.device);
  l.cuDeviceGetAttribute(&l.info.busWidthBits,
                         CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, l.device);
  l.cuDeviceTotalMem(&l.info.memory, l.device);
  return true;
}

//===----------------------------------------------------------------------===//
// NVRTC and the kernel cache
//===----------------------------------------------------------------------===//

namespace {

/// Guards compileStats(): compileCuda may run on several threads.
std::mutex &statsMutex() {
  static std::mutex m;
  return m;
}

/// A kernel cache file: a header line, the key (source, NVRTC options,
/// architecture and NVRTC version) and the binary, each after its length,
/// and the binary's FNV-1a hash. The file name is a 64-bit hash of the key,
/// which two keys may share: an entry is this kernel's only when its key is
/// this key and the binary hashes to what the file says.
constexpr const char *kCacheMagic = "gtc kernel cache 1\n";

std::string cacheEntry(const std::string &key,
                       const std::vector<char> &binary) {
  std::string body(binary.begin(), binary.end());
  return std::string(kCacheMagic) + std::to_string(key.size()) + "\n" + key +
         "\n" + std::to_string(body.size()) + "\n" + body + "\n" +
         std::to_string(gtc::rt::fnv1a(body)) + "\n";
}

/// The binary of a cache file's content for `key`; false when the content
/// is another key's, corrupt, truncated or of another format.
bool readCacheEntry(const std::string &content, const std::string &key,
                    std::vector<char> &binary) {
  size_t at = 0;
  auto take = [&](size_t n, std::string &out) {
    if (content.size() - at < n)
      return false;
    out = content.substr(at, n);
    at += n;
    return true;
  };
  auto number = [&](uint64_t &n) {
    size_t end = content.find('\n', at);
    if (end == std::string::npos || end == at || end - at > 20)
      return false;
    std::string digits = content.substr(at, end - at);
    if (digits.find_first_not_of("0123456789") != std::string::npos)
      return false;
    n = std::stoull(digits);
    at = end + 1;
    return true;
  };
  std::string magic, stored, body, newline;
  uint64_t keySize = 0, bodySize = 0, hash = 0;
  if (!take(std::strlen(kCacheMagic), magic) || magic != kCacheMagic ||
      !number(keySize) || keySize != key.size() || !take(keySize, stored) ||
      stored != key || !take(1, newline) || newline != "\n" ||
      !number(bodySize) || !take(bodySize, body) || !take(1, newline) ||
      newline != "\n" || !number(hash) || at != content.size() ||
      hash != gtc::rt::fnv1a(body) || body.empty())
    return false;
  binary.assign(body.begin(), body.end());
  return true;
}

/// Adds the source lines NVRTC's log points at ("kernel.cu(12): error ...").
std::string annotateLog(const std::string &log, const std::string &source) {
  std::vector<std::string> lines;
  std::istringstream in(source);
  for (std::string l; std::getline(in, l);)
    lines.push_back(l);
  std::ostringstream out;
  std::istringstream logIn(log);
  for (std::string l; std::getline(logIn, l);) {
    out << l << "\n";
    size_t open = l.find('('), close = l.find(')');
    if (open != std::string::npos && close != std::string::npos &&
        close > open + 1 && l.find("error") != std::string::npos) {
      int n = std::atoi(l.substr(open + 1, close - open - 1).c_str());
      if (n >= 1 && n <= static_cast<int>(lines.size()))
        out << "    " << n << " | " << lines[n - 1] << "\n";
    }
  }
  return out.str();
}

} // namespace

CompileStats &gtc::rt::compileStats() {
  static CompileStats stats;
  return stats;
}

void gtc::rt::selectCudaDevice(int ordinal) { selectedOrdinal = ordinal; }

size_t gtc::rt::cudaMemoryInUse() {
  Libs &l = libs();
  size_t free = 0, total = 0;
  if (!l.context || l.cuMemGetInfo(&free, &total) != CUDA_SUCCESS)
    return 0;
  return total - free;
}

size_t gtc::rt::cudaContextMemory() { return libs().contextBytes; }

int gtc::rt::cudaDeviceCount() {
  Libs &l = libs();
  int count = 0;
  if (!l.driver || l.cuInit(0) != CUDA_SUCCESS ||
      l.cuDeviceGetCount(&count) != CUDA_SUCCESS)
    return 0;
  return count;
}

bool gtc::rt::cudaAvailable(CudaDeviceInfo &info, std::string &error) {
  if (!initDevice(error))
    return false;
  info = libs().info;
  size_t total = 0;
  if (libs().cuMemGetInfo(&info.freeMemory, &total) != CUDA_SUCCESS)
    info.freeMemory = 0;
  return true;
}

bool gtc::rt::compileCudaJobs(std::vector<CompileJob> &jobs,
                               unsigned &threads) {
  std::atomic<size_t> next{0};
  std::vector<std::thread> workers;
  threads = static_cast<unsigned>(std::min<size_t>(
      std::max(1u, std::thread::hardware_concurrency()), jobs.size()));
  auto work = [&] {
    for (size_t j; (j = next++) < jobs.size();)
      compileCuda(*jobs[j].source, jobs[j].arch, jobs[j].binary,
                  jobs[j].cached, jobs[j].error);
  };
  for (unsigned t = 1; t < threads; ++t)
    workers.emplace_back(work);
  work();
  for (std::thread &w : workers)
    w.join();
  for (const CompileJob &j : jobs)
    if (!j.error.empty())
      return false;
  return true;
}

bool gtc::rt::compileCuda(const std::string &source, const std::string &arch,
                          std::vector<char> &cubin, bool &cached,
                          std::string &error) {
  // A compiled executable ships its kernels: the cubin for this GPU, else
  // PTX for the driver to compile.
  if (const auto *shipped = prebuiltKernels())
    for (const std::string &a : {arch, std::string("ptx")})
      if (auto it = shipped->find(kernelKey(source, a)); it != shipped->end()) {
        cubin.assign(it->second.begin(), it->second.end());
        cached = true;
        std::lock_guard<std::mutex> lock(statsMutex());
        ++compileStats().cacheHits;
        return true;
      }
  Libs &l = libs();
  if (!l.nvrtc) {
    error = "NVRTC is not available (" + l.nvrtcError +
            "); install the CUDA 13 libraries";
    return false;
  }
  int major = 0, minor = 0;
  l.nvrtcVersion(&major, &minor);
  std::string archFlag = "--gpu-architecture=" + arch;
  const char *opts[] = {archFlag.c_str(), "--std=c++17", "-default-device"};
  std::string key = source + "\n// nvrtc " + std::to_string(major) + "." +
                    std::to_string(minor);
  for (const char *o : opts)
    key += std::string(" ") + o;
  char name[32];
  const bool ptx = arch.rfind("compute_", 0) == 0; // a virtual arch
  std::snprintf(name, sizeof name, ptx ? "%016llx.ptx" : "%016llx.cubin",
                static_cast<unsigned long long>(fnv1a(key)));
  std::string dir = cacheDirectory(), path = dir + "/" + name;
  if (std::ifstream f{path, std::ios::binary}) {
    std::string content(std::istreambuf_iterator<char>(f), {});
    if (readCacheEntry(content, key, cubin)) {
      cached = true;
      std::lock_guard<std::mutex> lock(statsMutex());
      ++compileStats().cacheHits;
      return true;
    }
    std::lock_guard<std::mutex> lock(statsMutex());
    ++compileStats().rejected; // compiled again below, and replaced
  }
  auto t0 = std::chrono::steady_clock::now();
  nvrtcProgram prog;
  if (l.nvrtcCreateProgram(&prog, source.c_str(), "kernel.cu", 0, nullptr,
                           nullptr) != NVRTC_SUCCESS) {
    error = "NVRTC could not create a program";
    return false;
  }
  nvrtcResult r = l.nvrtcCompileProgram(prog, 3, opts);
  if (r != NVRTC_SUCCESS) {
    size_t n = 0;
    l.nvrtcGetProgramLogSize(prog, &n);
    std::string log(n, '\0');
    l.nvrtcGetProgramLog(prog, log.data());
    error = "NVRTC failed to compile a generated kernel for " + arch + ":\n" +
            annotateLog(log, source);
    l.nvrtcDestroyProgram(&prog);
    return false;
  }
  size_t size = 0;
  if (ptx) { // NUL-terminated text, as cuModuleLoadData takes it
    l.nvrtcGetPTXSize(prog, &size);
    cubin.resize(size);
    l.nvrtcGetPTX(prog, cubin.data());
  } else {
    l.nvrtcGetCUBINSize(prog, &size);
    cubin.resize(size);
    l.nvrtcGetCUBIN(prog, cubin.data());
  }
  l.nvrtcDestroyProgram(&prog);
  cached = false;
  std::lock_guard<std::mutex> lock(statsMutex());
  ++compileStats().compiled;
  compileStats().seconds += std::chrono::duration<double>(
                                std::chrono::steady_clock::now() - t0)
                                .count();
  // Write through a temporary name, so a concurrent reader never sees half.
  makeDirectories(dir);
  std::string tmp = tempPathBeside(path);
  {
    std::ofstream f(tmp, std::ios::binary);
    const std::string entry = cacheEntry(key, cubin);
    f.write(entry.data(), static_cast<std::streamsize>(entry.size()));
  }
  std::rename(tmp.c_str(), path.c_str());
  return true;
}

