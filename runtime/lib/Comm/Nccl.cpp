//===- Nccl.cpp - NCCL loaded at run time; GPU communicators --------------===//
//
// The few NCCL declarations gtc uses are written here (NCCL's ABI, stable
// since 2.x), so no nccl.h is needed to build. A GPU run's communicator
// meets the others through rank 0's rendezvous store (the unique id, the
// host-side sums) and keeps a watchdog thread: heartbeats to rank 0 and
// NCCL's asynchronous errors, polled every second.
//===----------------------------------------------------------------------===//

#include "Comm/Nccl.h"
#include "Comm/Store.h"
#include "gtc/Runtime/Comm.h"
#include "gtc/Runtime/CpuExecutor.h"
#include "gtc/Runtime/Env.h"
#include "gtc/Runtime/Messages.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <glob.h>
#include <iostream>
#include <memory>
#include <mutex>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace gtc::rt;

DeviceComm::~DeviceComm() = default;

namespace {

//===----------------------------------------------------------------------===//
// NCCL's declarations (nccl.h of NCCL 2.x)
//===----------------------------------------------------------------------===//

using ncclComm_t = struct ncclComm *;
using cudaStream_t = struct CUstream_st *;
struct ncclUniqueId {
  char internal[128];
};
enum ncclResult_t { ncclSuccess = 0, ncclInProgress = 7 };
enum ncclRedOp_t { ncclSum = 0, ncclAvg = 4 };
enum ncclDataType_t { ncclFloat16 = 6, ncclFloat32 = 7, ncclBfloat16 = 9 };

#define GTC_NCCL_FUNCTIONS(X)                                                  \
  X(ncclGetVersion, int *)                                                     \
  X(ncclGetUniqueId, ncclUniqueId *)                                           \
  X(ncclCommInitRank, ncclComm_t *, int, ncclUniqueId, int)                    \
  X(ncclCommDestroy, ncclComm_t)                                               \
  X(ncclCommAbort, ncclComm_t)                                                 \
  X(ncclCommGetAsyncError, ncclComm_t, ncclResult_t *)                         \
  X(ncclGroupStart)                                                            \
  X(ncclGroupEnd)                                                              \
  X(ncclAllReduce, const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,  \
    ncclComm_t, cudaStream_t)                                                  \
  X(ncclAllGather, const void *, void *, size_t, ncclDataType_t, ncclComm_t,   \
    cudaStream_t)                                                              \
  X(ncclReduce, const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,     \
    int, ncclComm_t, cudaStream_t)

struct NcclLib {
#define DECLARE(f, ...) ncclResult_t (*f)(__VA_ARGS__) = nullptr;
  GTC_NCCL_FUNCTIONS(DECLARE)
#undef DECLARE
  const char *(*ncclGetErrorString)(ncclResult_t) = nullptr;
  bool loaded = false;
  std::string version, error;
};

/// Where NCCL may be: the dynamic loader's search first, then CUDA's and
/// Debian's directories, then Python's nvidia-nccl wheels.
std::vector<std::string> ncclCandidates() {
  std::vector<std::string> paths = {
      "libnccl.so.2", "/usr/local/cuda/lib64/libnccl.so.2",
      "/usr/lib/x86_64-linux-gnu/libnccl.so.2",
      "/usr/lib/aarch64-linux-gnu/libnccl.so.2"};
  std::vector<std::string> prefixes;
  for (const char *v : {"VIRTUAL_ENV", "CONDA_PREFIX"})
    if (const char *p = std::getenv(v))
      prefixes.push_back(p);
  if (const char *home = std::getenv("HOME"))
    prefixes.push_back(std::string(home) + "/.local");
  for (const char *p : {"/usr/local", "/usr", "/opt/conda"})
    prefixes.push_back(p);
  for (const std::string &prefix : prefixes)
    for (const char *dir : {"site-packages", "dist-packages"}) {
      std::string pattern = prefix + "/lib/python3*/" + dir +
                            "/nvidia/nccl/lib/libnccl.so.2";
      glob_t g{};
      if (::glob(pattern.c_str(), 0, nullptr, &g) == 0)
        for (size_t i = 0; i < g.gl_pathc; ++i)
          paths.push_back(g.gl_pathv[i]);
      ::globfree(&g);
    }
  return paths;
}

/// NCCL's entry points. A library that loaded stays; a failed attempt is
/// made again at the next call (GTC_NCCL_LIBRARY may have changed).
NcclLib &nccl() {
  static NcclLib l;
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  if (l.loaded)
    return l;
  l.error.clear();
  [&] {
    std::vector<std::string> tried;
    if (const char *forced = std::getenv("GTC_NCCL_LIBRARY"); forced && *forced)
      tried.push_back(forced);
    else
      tried = ncclCandidates();
    void *h = nullptr;
    std::string why;
    for (const std::string &path : tried) {
      if ((h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)))
        break;
      if (const char *e = dlerror(); e && why.empty())
        why = e;
    }
    if (!h) {
      std::string places;
      for (const std::string &p : tried)
        places += (places.empty() ? "" : ", ") + p;
      l.error = "NCCL (libnccl.so.2), which data parallelism on GPUs needs, "
                "was not found; looked at " + places +
                (std::getenv("GTC_NCCL_LIBRARY")
                     ? " (GTC_NCCL_LIBRARY): " + why
                     : ". Install it (pip install nvidia-nccl-cu13, or "
                       "NVIDIA's libnccl2 package) or set GTC_NCCL_LIBRARY "
                       "to its path");
      return;
    }
    bool ok = true;
#define RESOLVE(f, ...)                                                        \
  ok = ok && (l.f = reinterpret_cast<decltype(l.f)>(dlsym(h, #f)));
    GTC_NCCL_FUNCTIONS(RESOLVE)
    RESOLVE(ncclGetErrorString)
#undef RESOLVE
    int code = 0;
    if (!ok || l.ncclGetVersion(&code) != ncclSuccess) {
      l.error = "the NCCL library found lacks an entry point gtc uses; "
                "install NCCL 2.10 or newer";
      return;
    }
    // NCCL_VERSION(X, Y, Z): X * 10000 + Y * 100 + Z since 2.9.
    l.version = std::to_string(code / 10000) + "." +
                std::to_string(code / 100 % 100) + "." +
                std::to_string(code % 100);
    if (code < 21000) {
      l.error = "NCCL " + l.version + " is too old (ncclAvg, graph capture "
                "and asynchronous errors need 2.10 or newer)";
      return;
    }
    l.loaded = true;
  }();
  return l;
}

/// GTC_TRACE_COMM=1: each step of joining and each host-side collective on
/// standard error, to find where a rank waits.
void trace(int rank, const std::string &what) {
  static const bool on = envFlag("GTC_TRACE_COMM");
  if (!on)
    return;
  std::string line = "[comm rank " + std::to_string(rank) + "] " + what + "\n";
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

ncclDataType_t ncclType(DeviceComm::Type t) {
  switch (t) {
  case DeviceComm::Type::F32:
    return ncclFloat32;
  case DeviceComm::Type::BF16:
    return ncclBfloat16;
  case DeviceComm::Type::F16:
    return ncclFloat16;
  }
  return ncclFloat32;
}

//===----------------------------------------------------------------------===//
// The communicator of a GPU run
//===----------------------------------------------------------------------===//

class NcclCommunicator : public Communicator, public DeviceComm {
public:
  NcclCommunicator(const World &world) : world(world) {}
  void abort() override {
    trace(world.rank, "aborting");
    failed = true;
    watched = nullptr;
    if (comm)
      nccl().ncclCommAbort(comm);
    comm = nullptr;
  }
  ~NcclCommunicator() override {
    trace(world.rank, "finishing");
    watched = nullptr;
    if (comm)
      nccl().ncclCommDestroy(comm);
    stopWatchdog();
    client.reset();
    trace(world.rank, "finished");
    // Rank 0 serves the store until the others have read their last
    // answers (its watchdog's and main connections are closed by now).
    if (server)
      server->waitForClients(0, commTimeout());
  }

  bool connect(std::string &error);

  // Communicator: host-side collectives, through rank 0's store.
  std::string describe() const override {
    return "NCCL " + nccl().version;
  }
  int rank() const override { return world.rank; }
  int size() const override { return world.size; }
  void allReduceSum(double *data, size_t n) override { hostSum(data, n); }
  void allReduceMean(float *data, size_t n) override {
    std::vector<double> d(data, data + n);
    hostSum(d.data(), n);
    for (size_t i = 0; i < n; ++i)
      data[i] = static_cast<float>(d[i] / world.size);
  }
  void allReduceMean(
      const std::vector<std::pair<float *, size_t>> &bucket) override {
    std::vector<double> d;
    for (auto [p, n] : bucket)
      d.insert(d.end(), p, p + n);
    hostSum(d.data(), d.size());
    size_t at = 0;
    for (auto [p, n] : bucket)
      for (size_t i = 0; i < n; ++i)
        p[i] = static_cast<float>(d[at++] / world.size);
  }
  void allGather(float *data, const std::vector<size_t> &counts) override {
    const std::string key = "gather/" + std::to_string(sequence++) + "/";
    size_t offset = 0;
    std::vector<size_t> at;
    for (size_t c : counts) {
      at.push_back(offset);
      offset += c;
    }
    ++calls;
    std::string mine(reinterpret_cast<const char *>(data + at[world.rank]),
                     counts[world.rank] * sizeof(float));
    if (!client->set(key + std::to_string(world.rank), mine))
      fail("an all-gather");
    for (int r = 0; r < world.size; ++r) {
      std::string theirs;
      if (r == world.rank)
        continue;
      if (!client->get(key + std::to_string(r), theirs) ||
          theirs.size() != counts[r] * sizeof(float))
        fail("an all-gather");
      std::memcpy(data + at[r], theirs.data(), theirs.size());
    }
    barrier(); // every rank has read every segment
  }
  void barrier() override {
    double zero = 0;
    hostSum(&zero, 1);
  }
  DeviceComm *device() override { return this; }

  // DeviceComm: NCCL on the streams of the CUDA executor.
  int deviceRank() const override { return world.rank; }
  int deviceRanks() const override { return world.size; }
  void groupStart() override { check(nccl().ncclGroupStart(), "group start"); }
  void groupEnd() override { check(nccl().ncclGroupEnd(), "group end"); }
  void allReduceMean(const void *in, void *out, size_t n, Type type,
                     void *stream) override {
    ++calls;
    check(nccl().ncclAllReduce(in, out, n, ncclType(type), ncclAvg, comm,
                               static_cast<cudaStream_t>(stream)),
          "ncclAllReduce");
  }
  void allReduceSum(const void *in, void *out, size_t n, Type type,
                    void *stream) override {
    ++calls;
    check(nccl().ncclAllReduce(in, out, n, ncclType(type), ncclSum, comm,
                               static_cast<cudaStream_t>(stream)),
          "ncclAllReduce");
  }
  void reduceMean(const void *in, void *out, size_t n, Type type, int root,
                  void *stream) override {
    ++calls;
    check(nccl().ncclReduce(in, out, n, ncclType(type), ncclAvg, root, comm,
                            static_cast<cudaStream_t>(stream)),
          "ncclReduce");
  }
  void allGather(const void *in, void *out, size_t perRank, Type type,
                 void *stream) override {
    ++calls;
    check(nccl().ncclAllGather(in, out, perRank, ncclType(type), comm,
                               static_cast<cudaStream_t>(stream)),
          "ncclAllGather");
  }

private:
  void check(ncclResult_t r, const char *what) {
    if (r != ncclSuccess && r != ncclInProgress)
      throw RuntimeError("rank " + std::to_string(world.rank) + ": NCCL " +
                         what + " failed: " + nccl().ncclGetErrorString(r));
  }
  [[noreturn]] void fail(const char *what) {
    throw RuntimeError("rank " + std::to_string(world.rank) + ": " + what +
                       " through rank 0's store failed (" + client->lastError +
                       "): another rank stopped or hung?");
  }
  void hostSum(double *data, size_t n) {
    ++calls;
    trace(world.rank, "host sum " + std::to_string(sequence) + " of " +
                          std::to_string(n));
    if (!client->sum("sum/" + std::to_string(sequence++), world.size, data,
                     n))
      fail("a host-side sum");
  }
  void startWatchdog(std::chrono::seconds stale);
  void stopWatchdog();

  World world;
  /// Rank 0's store; it lives as long as the process (its connection
  /// threads wait on it).
  StoreServer *server = nullptr;
  std::unique_ptr<StoreClient> client;
  ncclComm_t comm = nullptr;
  std::atomic<ncclComm_t> watched{nullptr};
  uint64_t sequence = 0;
  std::thread watchdog;
  std::atomic<bool> stopping{false};
  /// Set by abort(): the heartbeat connection closes without a goodbye,
  /// which rank 0 reports to the others as a rank that ended.
  std::atomic<bool> failed{false};
};

bool NcclCommunicator::connect(std::string &error) {
  if (!world.rendezvous.empty()) {
    error = "data parallelism on GPUs meets over TCP (MASTER_ADDR and "
            "MASTER_PORT, which gtc run --devices N, torchrun, srun and "
            "mpirun give); --rendezvous " + world.rendezvous +
            " is for CPU processes";
    return false;
  }
  const std::chrono::seconds timeout = commTimeout();
  if (world.rank == 0) {
    server = new StoreServer();
    if (!server->listenOn(world.masterPort, error))
      return false;
  }
  client = std::make_unique<StoreClient>();
  if (!client->connect(world.masterAddr, world.masterPort, timeout, error))
    return false;
  // From here on a rank that dies or stops ends every rank.
  startWatchdog(std::min(timeout, std::chrono::seconds(30)));
  ncclUniqueId id{};
  std::string blob;
  if (world.rank == 0) {
    if (ncclResult_t r = nccl().ncclGetUniqueId(&id); r != ncclSuccess) {
      error = std::string("ncclGetUniqueId failed: ") +
              nccl().ncclGetErrorString(r);
      return false;
    }
    blob.assign(id.internal, sizeof id.internal);
    if (!client->set("nccl/id", blob)) {
      error = "cannot publish NCCL's unique id: " + client->lastError;
      return false;
    }
  } else {
    if (!client->get("nccl/id", blob) || blob.size() != sizeof id.internal) {
      error = "rank 0 did not publish NCCL's unique id within " +
              std::to_string(timeout.count()) +
              " s (GTC_TIMEOUT): " + client->lastError;
      return false;
    }
    std::memcpy(id.internal, blob.data(), sizeof id.internal);
  }
  trace(world.rank, "NCCL " + nccl().version + ": ncclCommInitRank");
  if (ncclResult_t r = nccl().ncclCommInitRank(&comm, world.size, id,
                                               world.rank);
      r != ncclSuccess) {
    error = std::string("ncclCommInitRank failed: ") +
            nccl().ncclGetErrorString(r) +
            " (NCCL_DEBUG=INFO says more)";
    comm = nullptr;
    return false;
  }
  watched = comm;
  trace(world.rank, "joined");
  return true;
}

/// Every second: a heartbeat to rank 0, whose answer names a rank that
/// died or stopped answering, and NCCL's asynchronous error. On a failure
/// the communicator is aborted (its kernels return), and the process ends
/// with a message that names the rank: a step waiting on a dead peer would
/// otherwise wait forever.
void NcclCommunicator::startWatchdog(std::chrono::seconds stale) {
  auto beat = std::make_shared<StoreClient>();
  std::string error;
  if (!beat->connect(world.masterAddr, world.masterPort, stale, error))
    return; // the main connection works; a rendezvous error comes from it
  watchdog = std::thread([this, beat] {
    const int rank = world.rank;
    while (!stopping) {
      std::string failure;
      if (!beat->heartbeat(rank, failure))
        failure = "rank 0 does not answer (" + beat->lastError +
                  "): it ended, was killed, or is stopped";
      ncclComm_t c = watched;
      ncclResult_t async = ncclSuccess;
      if (failure.empty() && c &&
          nccl().ncclCommGetAsyncError(c, &async) == ncclSuccess &&
          async != ncclSuccess && async != ncclInProgress)
        failure = std::string("NCCL reported an error on rank ") +
                  std::to_string(rank) + ": " +
                  nccl().ncclGetErrorString(async);
      if (!failure.empty() && !stopping) {
        std::string text = errorPrefix() + "rank " + std::to_string(rank) +
                           " stops: " + failure +
                           "; aborting the NCCL communicator\n";
        ssize_t ignored = ::write(STDERR_FILENO, text.data(), text.size());
        (void)ignored;
        if (c)
          nccl().ncclCommAbort(c);
        ::_exit(1);
      }
      for (int i = 0; i < 10 && !stopping; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (!failed)
      beat->goodbye(rank);
  });
}

void NcclCommunicator::stopWatchdog() {
  stopping = true;
  if (watchdog.joinable())
    watchdog.join();
}

} // namespace

bool gtc::rt::loadNccl(std::string &version, std::string &error) {
  NcclLib &l = nccl();
  version = l.version;
  error = l.error;
  return l.loaded;
}

std::unique_ptr<Communicator> gtc::rt::connectGpu(const World &world,
                                                  std::string &error) {
  std::string version;
  if (!loadNccl(version, error))
    return nullptr;
  // NVLink multicast (NVLS) stays off unless the user turns it on.
  ::setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0);
  auto comm = std::make_unique<NcclCommunicator>(world);
  if (!comm->connect(error)) {
    error = "rank " + std::to_string(world.rank) + " of " +
            std::to_string(world.size) +
            " could not join the others: " + error;
    return nullptr;
  }
  return comm;
}
