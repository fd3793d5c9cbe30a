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
#include <thread>
#include <vector>

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

int64_t gtc::rt::availableMemory() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key, unit;
  int64_t kib;
  while (meminfo >> key >> kib >> unit)
    if (key == "MemAvailable:")
      return kib * 1024;
  return 0;
}

void gtc::rt::setThreads(int n) {
  if (n <= 0)
    n = static_cast<int>(std::thread::hardware_concurrency());
  Pool::get().resize(n);
  openblas_set_num_threads(n);
}

int gtc::rt::threads() { return Pool::get().size(); }

