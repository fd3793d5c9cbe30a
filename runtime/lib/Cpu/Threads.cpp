//===- Threads.cpp - The CPU executor's worker threads --------------------===//
//
// A fixed pool of workers behind parallelFor (CpuExecutor.h), the thread
// count (--threads) and the memory the host has available.
//===----------------------------------------------------------------------===//

#include "gtc/Runtime/CpuExecutor.h"
#include <algorithm>
#include <cblas.h>
#include <condition_variable>
#include <fstream>
#include <functional>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>
#include <sys/resource.h>
#include <unistd.h>

using namespace gtc::rt;

namespace {

/// A fixed pool of workers; parallelFor hands each a contiguous chunk.
class Pool {
public:
  static Pool &get() {
    static Pool pool;
    return pool;
  }

  void resize(int n) {
    stop();
    count = std::max(1, n);
    // New workers wait for the next job, not one that ran before a resize.
    for (int i = 1; i < count; ++i)
      workers.emplace_back([this, i, seen = generation] { loop(i, seen); });
  }

  int size() const { return count; }

  void run(int64_t n, const std::function<void(int64_t, int64_t)> &fn,
           int64_t grain) {
    int64_t chunks = std::min<int64_t>(count, (n + grain - 1) / grain);
    if (chunks <= 1 || inside) {
      fn(0, n);
      return;
    }
    {
      std::unique_lock<std::mutex> lock(mu);
      job = &fn;
      total = n;
      parts = chunks;
      pending = chunks - 1;
      ++generation;
    }
    cv.notify_all();
    inside = true;
    fn(0, n / chunks);
    inside = false;
    std::unique_lock<std::mutex> lock(mu);
    done.wait(lock, [&] { return pending == 0; });
    job = nullptr;
  }

  ~Pool() { stop(); }

private:
  Pool() { resize(static_cast<int>(std::thread::hardware_concurrency())); }

  void loop(int index, uint64_t seen) {
    while (true) {
      const std::function<void(int64_t, int64_t)> *fn;
      int64_t n, chunks;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return quit || generation != seen; });
        if (quit)
          return;
        seen = generation;
        fn = job;
        n = total;
        chunks = parts;
      }
      if (index < chunks) {
        inside = true;
        (*fn)(n * index / chunks, n * (index + 1) / chunks);
        inside = false;
        std::lock_guard<std::mutex> lock(mu);
        if (--pending == 0)
          done.notify_one();
      }
    }
  }

  void stop() {
    {
      std::lock_guard<std::mutex> lock(mu);
      quit = true;
    }
    cv.notify_all();
    for (std::thread &t : workers)
      t.join();
    workers.clear();
    quit = false;
  }

  int count = 1;
  std::vector<std::thread> workers;
  std::mutex mu;
  std::condition_variable cv, done;
  const std::function<void(int64_t, int64_t)> *job = nullptr;
  int64_t total = 0, parts = 0, pending = 0;
  uint64_t generation = 0;
  bool quit = false;
  static thread_local bool inside;
};

thread_local bool Pool::inside = false;

} // namespace

void gtc::rt::parallelFor(int64_t n,
                          const std::function<void(int64_t, int64_t)> &fn,
                          int64_t grain) {
  if (n <= 0)
    return;
  Pool::get().run(n, fn, std::max<int64_t>(1, grain));
}

namespace {
/// The first number in `path` ("max" and a missing file: -1).
int64_t readNumber(const std::string &path) {
  std::ifstream in(path);
  int64_t v = -1;
  return in >> v ? v : -1;
}
} // namespace

int64_t gtc::rt::availableMemory(std::string *where) {
  int64_t available = 0;
  std::ifstream meminfo("/proc/meminfo");
  std::string key, unit;
  int64_t kib;
  while (meminfo >> key >> kib >> unit)
    if (key == "MemAvailable:") {
      available = kib * 1024;
      break;
    }
  const char *by = "this machine has";
  auto bound = [&](int64_t left, const char *what) {
    if (left >= 0 && (available <= 0 || left < available)) {
      available = std::max<int64_t>(left, 1);
      by = what;
    }
  };
  // The cgroup's limit: v2 ("0::/PATH" in /proc/self/cgroup; memory.max,
  // unless "max") or v1 ("N:memory:/PATH"; an unlimited one is huge), at
  // PATH under the mount, or at the mount's root inside a container.
  std::ifstream cgroups("/proc/self/cgroup");
  for (std::string line; std::getline(cgroups, line);) {
    const bool v2 = line.rfind("0::", 0) == 0;
    const size_t v1 = line.find(":memory:");
    if (!v2 && v1 == std::string::npos)
      continue;
    const std::string mount = v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/memory";
    const std::string path = v2 ? line.substr(3) : line.substr(v1 + 8);
    const char *maxFile = v2 ? "/memory.max" : "/memory.limit_in_bytes";
    const char *usedFile = v2 ? "/memory.current" : "/memory.usage_in_bytes";
    for (const std::string &dir : {mount + path, mount}) {
      const int64_t max = readNumber(dir + maxFile);
      const int64_t used = readNumber(dir + usedFile);
      if (max < 0 || used < 0)
        continue;
      bound(max - used, "the memory limit of this process's cgroup (a "
                        "container's) leaves");
      break;
    }
  }
  // ulimit -v: the address space left, less what OpenBLAS maps at its
  // first GEMM, a 128 MiB buffer a thread (it retries a failed map without
  // end: a run over the limit hangs there), and the threads' stacks.
  struct rlimit limit;
  if (::getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    const int64_t pages = readNumber("/proc/self/statm");
    const int64_t perThread = (128 + 8) << 20;
    if (pages >= 0)
      bound(static_cast<int64_t>(limit.rlim_cur) -
                pages * ::sysconf(_SC_PAGESIZE) -
                (threads() + 1) * perThread,
            "the address-space limit (ulimit -v) leaves");
  }
  if (where)
    *where = by;
  return available;
}

std::string gtc::rt::hostMemoryShortfall(const Plan &plan,
                                         int optimizerShards, bool sampling,
                                         int64_t beside) {
  const Plan::Memory m = plan.memory();
  int64_t need = m.peak() + beside;
  if (optimizerShards > 1 && plan.shardRanks <= 1)
    need += (m.optimizerState + optimizerShards - 1) / optimizerShards -
            m.optimizerState;
  std::string where;
  const int64_t available = availableMemory(&where);
  if (available <= 0 || need <= available)
    return "";
  auto mib = [](int64_t b) { return std::to_string((b + (1 << 19)) >> 20); };
  if (sampling)
    return "generating " + std::to_string(plan.batch) +
           " sequences at once needs " + mib(need) +
           " MiB of memory and " + where + " " + mib(available) +
           " MiB available; lower the batch (--batch), or generate on a GPU "
           "(--device cuda)";
  const int64_t model = need - m.temporaries - m.inputs - m.gemmWorkspace -
                        m.accumulator - m.state;
  if (model > available)
    return "the model's parameters, gradients and optimizer state alone "
           "take " +
           mib(model) + " MiB of memory and " + where + " " +
           mib(available) + " MiB available; make the model smaller";
  return "the step needs " + mib(need) +
         " MiB of memory (its predicted peak at batch " +
         std::to_string(plan.batch) +
         "; --dry-run itemizes it) and " +
         where + " " + mib(available) +
         " MiB available; lower the batch (--batch), recompute activations "
         "(--checkpoint auto), or train on a GPU (--device cuda)";
}

void gtc::rt::setThreads(int n) {
  if (n <= 0)
    n = static_cast<int>(std::thread::hardware_concurrency());
  const int before = Pool::get().size();
  try {
    Pool::get().resize(n);
  } catch (const std::system_error &e) {
    Pool::get().resize(before);
    throw RuntimeError("cannot start " + std::to_string(n) +
                       " CPU threads (--threads " + std::to_string(n) +
                       "): " + e.what() + "; this machine has " +
                       std::to_string(std::thread::hardware_concurrency()) +
                       " cores: give --threads at most that, or leave it out");
  }
  openblas_set_num_threads(n);
}

int gtc::rt::threads() { return Pool::get().size(); }

