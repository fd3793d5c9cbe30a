//===- Comm.cpp - Launch, rendezvous and CPU collectives ------------------===//
//
// The rendezvous store is a key-value map that rank 0 serves over TCP (set,
// and get that waits until the key exists), the role PyTorch's TCPStore
// plays; Gloo's full mesh of TCP pairs is built through it. The launcher of
// `gtc run --devices N` forks and re-executes this program once per rank.
//===----------------------------------------------------------------------===//

#include "gtc/Runtime/Comm.h"
#include "gtc/Runtime/Files.h"
#include "gtc/Runtime/Messages.h"
#include "Comm/Store.h"

#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <iostream>
#include <map>
#include <mutex>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#ifdef GTC_HAVE_GLOO
#include <gloo/allgatherv.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#endif

using namespace gtc::rt;

Communicator::~Communicator() = default;

//===----------------------------------------------------------------------===//
// The world from the environment
//===----------------------------------------------------------------------===//

namespace {

const char *env(const char *name) {
  const char *v = std::getenv(name);
  return v && *v ? v : nullptr;
}

bool toInt(const char *text, int &out) {
  char *end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (!*text || *end || v < 0 || v > INT_MAX)
    return false;
  out = static_cast<int>(v);
  return true;
}

/// The first host of a Slurm node list: "node[01-04,07],gpu2" -> "node01".
std::string firstSlurmHost(const std::string &list) {
  size_t bracket = list.find('['), comma = list.find(',');
  if (bracket == std::string::npos || (comma != std::string::npos &&
                                       comma < bracket))
    return list.substr(0, comma);
  size_t end = list.find_first_of(",-]", bracket + 1);
  return list.substr(0, bracket) +
         list.substr(bracket + 1, end - bracket - 1);
}

} // namespace

int gtc::rt::dataParallelProcesses(const std::string &devices,
                                   const World &world, int gpus, int compiled,
                                   std::string &error) {
  const bool counted = !devices.empty() && devices != "all" && devices != "cpu";
  const int asked = counted ? std::stoi(devices) : 0;
  if (compiled > 0) {
    // An executable's plan is for `compiled` processes, whatever is asked.
    const std::string was = "this executable was compiled for " +
                            std::to_string(compiled) +
                            (compiled == 1 ? " process" : " processes");
    if (devices == "all")
      error = was + "; --devices all is gtc run's (every GPU); compile with "
                    "devices = N";
    else if (devices == "cpu" && compiled > 1)
      error = was + "; --devices cpu is one CPU process: compile with "
                    "devices = cpu";
    else if (counted && asked != compiled)
      error = was + "; for --devices " + devices + " compile with --devices " +
              devices;
    else if (world.size > 1 && world.size != compiled)
      error = was + ", but the " + world.launcher + " launch has " +
              std::to_string(world.size) +
              (compiled == 1 ? "; for data parallelism compile with devices = "
                               "N (or use gtc run under the launcher)"
                             : "; launch " + std::to_string(compiled));
    return error.empty() ? compiled : 0;
  }
  if (world.size > 1) {
    if (asked > 1 && asked != world.size) {
      error = "devices = " + devices + ", but the " + world.launcher +
              " launch has " + std::to_string(world.size) +
              " processes; give --devices " + std::to_string(world.size) +
              " or launch " + devices;
      return 0;
    }
    return world.size;
  }
  if (devices == "all")
    return std::max(1, gpus);
  return counted ? asked : 1;
}

bool gtc::rt::worldFromEnvironment(World &world,
                                   const std::string &rendezvous,
                                   std::string &error) {
  world = World();
  struct Scheme {
    const char *launcher, *rank, *size, *local;
  } schemes[] = {
      {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
      {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
      {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
       "OMPI_COMM_WORLD_LOCAL_RANK"},
  };
  for (const Scheme &s : schemes) {
    if (!env(s.rank) && !env(s.size))
      continue;
    if (!env(s.rank) || !env(s.size)) {
      error = std::string("the environment sets ") +
              (env(s.rank) ? s.rank : s.size) + " but not " +
              (env(s.rank) ? s.size : s.rank) + "; a " + s.launcher +
              " launch sets both";
      return false;
    }
    if (!toInt(env(s.rank), world.rank) || !toInt(env(s.size), world.size) ||
        world.size < 1 || world.rank >= world.size) {
      error = std::string(s.rank) + "=" + env(s.rank) + " and " + s.size +
              "=" + env(s.size) + " do not name a rank of the world";
      return false;
    }
    if (env(s.local) && !toInt(env(s.local), world.localRank)) {
      error = std::string(s.local) + "=" + env(s.local) + " is not a rank";
      return false;
    }
    world.launcher = env("GTC_LAUNCHED") ? "gtc" : s.launcher;
    break;
  }
  if (world.size == 1)
    return true;
  if (!rendezvous.empty()) {
    world.rendezvous = rendezvous;
    return true;
  }
  if (env("MASTER_ADDR"))
    world.masterAddr = env("MASTER_ADDR");
  else if (world.launcher == "slurm" && env("SLURM_JOB_NODELIST"))
    world.masterAddr = firstSlurmHost(env("SLURM_JOB_NODELIST"));
  world.masterPort = env("MASTER_PORT") ? env("MASTER_PORT") : "";
  // torchrun's agent serves its own store at MASTER_PORT; gtc's rank 0
  // serves at the next port.
  int port = 0;
  if (env("TORCHELASTIC_USE_AGENT_STORE") &&
      std::string(env("TORCHELASTIC_USE_AGENT_STORE")) == "True" &&
      toInt(world.masterPort.c_str(), port) && port < 65535)
    world.masterPort = std::to_string(port + 1);
  if (world.masterAddr.empty() || world.masterPort.empty()) {
    error = "rank " + std::to_string(world.rank) + " of " +
            std::to_string(world.size) +
            " needs MASTER_ADDR and MASTER_PORT (where rank 0 serves the "
            "rendezvous), or --rendezvous file:DIR on a shared file system";
    return false;
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Gloo
//===----------------------------------------------------------------------===//

#ifdef GTC_HAVE_GLOO
namespace {

/// Gloo's view of the TCP store.
class GlooTcpStore : public gloo::rendezvous::Store {
public:
  explicit GlooTcpStore(StoreClient &client) : client(client) {}
  void set(const std::string &key, const std::vector<char> &data) override {
    if (!client.set(key, std::string(data.begin(), data.end())))
      throw std::runtime_error("the rendezvous connection broke");
  }
  std::vector<char> get(const std::string &key) override {
    std::string v;
    if (!client.get(key, v))
      throw std::runtime_error(
          "the other ranks did not all arrive at the rendezvous within the "
          "timeout (GTC_TIMEOUT seconds; 300 by default), or rank 0 stopped");
    return std::vector<char>(v.begin(), v.end());
  }
  void wait(const std::vector<std::string> &keys) override {
    for (const std::string &k : keys)
      get(k);
  }
  void wait(const std::vector<std::string> &keys,
            const std::chrono::milliseconds &) override {
    wait(keys);
  }

private:
  StoreClient &client;
};

class GlooCommunicator : public Communicator {
public:
  std::string describe() const override { return "Gloo"; }
  int rank() const override { return context->rank; }
  int size() const override { return context->size; }
  void allReduceMean(float *data, size_t n) override {
    sum(data, n);
    const float scale = 1.0f / static_cast<float>(context->size);
    for (size_t i = 0; i < n; ++i)
      data[i] *= scale;
  }
  void allReduceSum(double *data, size_t n) override {
    sum(data, n);
  }
  /// One Gloo call for the bucket: its tensors side by side in one buffer
  /// (Gloo's many-buffer all-reduce wants buffers of one length).
  void allReduceMean(
      const std::vector<std::pair<float *, size_t>> &bucket) override {
    if (bucket.size() == 1)
      return allReduceMean(bucket[0].first, bucket[0].second);
    size_t total = 0;
    for (auto [p, n] : bucket)
      total += n;
    staging.resize(total);
    size_t at = 0;
    for (auto [p, n] : bucket) {
      std::copy(p, p + n, staging.begin() + at);
      at += n;
    }
    allReduceMean(staging.data(), total);
    at = 0;
    for (auto [p, n] : bucket) {
      std::copy(staging.begin() + at, staging.begin() + at + n, p);
      at += n;
    }
  }
  void allGather(float *data, const std::vector<size_t> &counts) override {
    size_t offset = 0;
    for (int r = 0; r < context->rank; ++r)
      offset += counts[r];
    // Gloo reads the input while it writes the output: a copy of ours.
    std::vector<float> mine(data + offset, data + offset + counts[context->rank]);
    run("an all-gather", [&] {
      gloo::AllgathervOptions o(context);
      o.setInput(mine.data(), mine.size());
      o.setOutput(data, counts);
      gloo::allgatherv(o);
    });
  }
  void barrier() override {
    run("a barrier", [&] {
      gloo::BarrierOptions o(context);
      gloo::barrier(o);
    });
  }

  /// In place, the sum over ranks.
  template <typename T> void sum(T *data, size_t n) {
    if (n == 0)
      return;
    run("an all-reduce", [&] {
      gloo::AllreduceOptions o(context);
      o.setOutput(data, n);
      o.setReduceFunction(
          static_cast<void (*)(void *, const void *, const void *, size_t)>(
              &gloo::sum<T>));
      gloo::allreduce(o);
    });
  }

  template <typename F> void run(const char *what, F f) {
    ++calls;
    try {
      f();
    } catch (const std::exception &e) {
      throw std::runtime_error(std::string("rank ") +
                               std::to_string(context->rank) + ": " + what +
                               " failed (another rank stopped or hung?): " +
                               e.what());
    }
  }

  std::vector<float> staging; ///< a bucket's tensors side by side
  std::shared_ptr<gloo::rendezvous::Context> context;
  /// Rank 0's store; it lives as long as the process (its connection
  /// threads wait on it, and a condition variable waited on cannot be
  /// destroyed).
  StoreServer *server = nullptr;
  std::unique_ptr<StoreClient> client;
};

} // namespace
#endif

std::unique_ptr<Communicator> gtc::rt::connectCpu(const World &world,
                                                  std::string &error) {
#ifndef GTC_HAVE_GLOO
  (void)world;
  error = "this gtc was built without Gloo (libgloo-dev), which CPU data "
          "parallelism needs; rebuild with it installed, or run one process";
  return nullptr;
#else
  auto comm = std::make_unique<GlooCommunicator>();
  const std::chrono::seconds timeout = commTimeout();
  const std::string file = "file:";
  const bool inFiles = world.rendezvous.rfind(file, 0) == 0;
  const std::string dir = inFiles ? world.rendezvous.substr(file.size()) : "";
  try {
    std::unique_ptr<gloo::rendezvous::Store> store;
    if (inFiles) {
      // Gloo's file store: a file per key in a directory.
      struct stat st;
      if (::mkdir(dir.c_str(), 0777) != 0 &&
          (errno != EEXIST || ::stat(dir.c_str(), &st) != 0 ||
           !S_ISDIR(st.st_mode))) {
        error = "cannot create the rendezvous directory '" + dir + "': " +
                (errno == EEXIST ? std::string("a file of that name exists")
                                 : std::strerror(errno)) +
                "; give --rendezvous file:DIR a new or empty directory";
        return nullptr;
      }
      store = std::make_unique<gloo::rendezvous::FileStore>(dir);
    } else {
      if (world.rank == 0) {
        comm->server = new StoreServer();
        if (!comm->server->listenOn(world.masterPort, error))
          return nullptr;
      }
      comm->client = std::make_unique<StoreClient>();
      if (!comm->client->connect(world.masterAddr, world.masterPort, timeout,
                                 error))
        return nullptr;
      store = std::make_unique<GlooTcpStore>(*comm->client);
    }
    gloo::transport::tcp::attr attr;
    if (const char *iface = env("GLOO_SOCKET_IFNAME"))
      attr.iface = iface;
    else if (world.masterAddr == "127.0.0.1" ||
             world.masterAddr == "localhost" || world.launcher == "gtc")
      attr.hostname = "127.0.0.1";
    auto device = gloo::transport::tcp::CreateDevice(attr);
    comm->context =
        std::make_shared<gloo::rendezvous::Context>(world.rank, world.size);
    comm->context->setTimeout(timeout);
    gloo::rendezvous::PrefixStore prefixed("gtc", *store);
    comm->context->connectFullMesh(prefixed, device);
    // Every rank connected: none reads the store any more. In a directory
    // each removes the files it wrote, which the next run there would
    // take for its own keys (Gloo's file store never replaces one).
    comm->barrier();
    if (auto *files = dynamic_cast<gloo::rendezvous::FileStore *>(store.get()))
      for (const std::string &path : files->getAllKeyFilePaths())
        std::remove(path.c_str());
  } catch (const std::exception &e) {
    error = "rank " + std::to_string(world.rank) + " of " +
            std::to_string(world.size) + " could not join the others: ";
    // Gloo's file store never replaces a key's file.
    if (inFiles && std::string(e.what()).find("File already exists") !=
                       std::string::npos)
      error += "the rendezvous directory '" + dir +
               "' holds the files of an earlier run; give --rendezvous "
               "file:DIR a new or empty directory";
    else
      error += e.what();
    return nullptr;
  }
  return comm;
#endif
}

std::unique_ptr<Communicator> gtc::rt::connect(const World &world,
                                               const std::string &device,
                                               std::string &error) {
  return device == "cuda" ? connectGpu(world, error)
                          : connectCpu(world, error);
}

//===----------------------------------------------------------------------===//
// gtc run --devices N
//===----------------------------------------------------------------------===//

namespace {

std::vector<pid_t> *workers = nullptr;
/// The launcher was asked to stop (SIGTERM): its workers get the grace
/// period of a failure, then are killed.
volatile sig_atomic_t terminated = 0;

extern "C" void forwardSignal(int sig) {
  terminated = 1;
  if (workers)
    for (pid_t p : *workers)
      if (p > 0)
        ::kill(p, sig);
}

/// In the child of fork(): worker r of n, rank 0's store at `port` (rank
/// 0 inherits its listening socket), standard error to the launcher's pipe
/// (rank 0 alone keeps standard output), then gtc again. A worker gets
/// SIGTERM (it saves and stops, as on Ctrl-C) when the launcher dies, even
/// by SIGKILL, so that no worker trains on alone.
[[noreturn]] void execWorker(int r, int n, const std::string &port, int store,
                             const int errPipe[2], char **argv,
                             pid_t launcher) {
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (::getppid() != launcher) // it died before the line above
    ::_exit(1);
  ::setenv("RANK", std::to_string(r).c_str(), 1);
  ::setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
  ::setenv("WORLD_SIZE", std::to_string(n).c_str(), 1);
  ::setenv("LOCAL_WORLD_SIZE", std::to_string(n).c_str(), 1);
  ::setenv("MASTER_ADDR", "127.0.0.1", 1);
  ::setenv("MASTER_PORT", port.c_str(), 1);
  ::setenv("GTC_LAUNCHED", "1", 1);
  if (r == 0)
    ::setenv("GTC_STORE_FD", std::to_string(store).c_str(), 1);
  else
    ::close(store);
  ::dup2(errPipe[1], STDERR_FILENO);
  ::close(errPipe[0]);
  ::close(errPipe[1]);
  if (r != 0) {
    int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, STDOUT_FILENO);
    ::close(null);
  }
  ::execv(runningProgram().c_str(), argv);
  int error = errno;
  std::fprintf(stderr, "%scannot start a worker: %s\n",
               errorPrefix().c_str(), std::strerror(error));
  ::_exit(127);
}

/// Relays what worker r wrote to its pipe `fd`, a line at a time prefixed
/// with its rank (`partial`: a line not yet ended). False once the pipe is
/// closed (then closed here too).
bool relayWorker(int r, int &fd, std::string &partial) {
  char buf[4096];
  ssize_t k = ::read(fd, buf, sizeof buf);
  if (k <= 0) {
    if (!partial.empty())
      std::cerr << "[rank " << r << "] " << partial << "\n";
    partial.clear();
    ::close(fd);
    fd = -1;
    return false;
  }
  partial.append(buf, static_cast<size_t>(k));
  size_t nl;
  while ((nl = partial.find('\n')) != std::string::npos) {
    std::cerr << "[rank " << r << "] " << partial.substr(0, nl) << "\n";
    partial.erase(0, nl + 1);
  }
  return true;
}

} // namespace

int gtc::rt::spawnWorkers(int n, char **argv) {
  terminated = 0;
  // Rank 0's store socket, listening before any worker starts (a port
  // merely found free could be taken before rank 0 binds it): rank 0
  // inherits it.
  std::string error;
  int store = listeningSocket(0, error);
  if (store < 0) {
    std::cerr << errorPrefix() << "cannot open the workers' rendezvous socket: "
              << error << "\n";
    return 1;
  }
  const std::string port = std::to_string(boundPort(store));
  std::vector<pid_t> pids(n, -1);
  std::vector<int> errFds(n, -1);
  const pid_t launcher = ::getpid();
  std::cout.flush();
  std::cerr.flush();
  for (int r = 0; r < n; ++r) {
    int p[2];
    if (::pipe(p) != 0) {
      std::cerr << errorPrefix() << "cannot start worker " << r << ": "
                << std::strerror(errno) << "\n";
      forwardSignal(SIGTERM);
      return 1;
    }
    pid_t pid = ::fork();
    if (pid == 0)
      execWorker(r, n, port, store, p, argv, launcher);
    ::close(p[1]);
    if (pid < 0) {
      ::close(p[0]);
      std::cerr << errorPrefix() << "cannot start worker " << r << ": "
                << std::strerror(errno) << "\n";
      break;
    }
    pids[r] = pid;
    errFds[r] = p[0];
  }
  ::close(store);
  workers = &pids;
  struct sigaction sa {}, oldInt{}, oldTerm{};
  sa.sa_handler = forwardSignal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGTERM, &sa, &oldTerm);
  // Ctrl-C reaches the workers from the terminal; the launcher waits.
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGINT, &ignore, &oldInt);

  // Each worker's standard error, line by line, prefixed with its rank.
  std::vector<std::string> partial(n);
  int status = 0, open = 0;
  for (int fd : errFds)
    open += fd >= 0;
  bool stopping = false;
  // Workers asked to stop (SIGTERM, and SIGCONT for a stopped one, which
  // cannot act on it otherwise) get kGrace to finish their step; then they
  // are killed, so a hung worker cannot keep the run from ending.
  constexpr auto kGrace = std::chrono::seconds(10);
  std::chrono::steady_clock::time_point stoppedAt;
  bool killed = false;
  auto stopOthers = [&](int failed) {
    if (stopping)
      return;
    stopping = true;
    stoppedAt = std::chrono::steady_clock::now();
    for (int r = 0; r < n; ++r)
      if (r != failed && pids[r] > 0) {
        ::kill(pids[r], SIGTERM);
        ::kill(pids[r], SIGCONT);
      }
  };
  int running = 0;
  for (pid_t p : pids)
    running += p > 0;
  if (running < n) {
    status = 1;
    stopOthers(-1);
  }
  while (running > 0 || open > 0) {
    std::vector<pollfd> fds;
    std::vector<int> ranks;
    for (int r = 0; r < n; ++r)
      if (errFds[r] >= 0) {
        fds.push_back({errFds[r], POLLIN, 0});
        ranks.push_back(r);
      }
    if (!fds.empty() && ::poll(fds.data(), fds.size(), 200) > 0) {
      for (size_t i = 0; i < fds.size(); ++i) {
        if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
          continue;
        int r = ranks[i];
        if (!relayWorker(r, errFds[r], partial[r]))
          --open;
        std::cerr.flush();
      }
    } else if (fds.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (terminated && !stopping) {
      stopping = true; // forwardSignal sent SIGTERM already
      stoppedAt = std::chrono::steady_clock::now();
      for (int r = 0; r < n; ++r)
        if (pids[r] > 0)
          ::kill(pids[r], SIGCONT);
    }
    if (stopping && !killed &&
        std::chrono::steady_clock::now() - stoppedAt > kGrace) {
      killed = true;
      for (int r = 0; r < n; ++r)
        if (pids[r] > 0) {
          std::cerr << errorPrefix() << "rank " << r << " did not stop within "
                    << kGrace.count() << " s; killing it\n";
          ::kill(pids[r], SIGKILL);
        }
    }
    int ws;
    pid_t done;
    while (running > 0 && (done = ::waitpid(-1, &ws, WNOHANG)) > 0) {
      int r = 0;
      while (r < n && pids[r] != done)
        ++r;
      if (r == n)
        continue;
      pids[r] = -1;
      --running;
      int code = WIFEXITED(ws) ? WEXITSTATUS(ws) : 1;
      if (code != 0 && status == 0 && terminated)
        status = code; // stopped as asked: 130 after a checkpoint
      if (code != 0 && !stopping) {
        if (WIFSIGNALED(ws))
          std::cerr << errorPrefix() << "rank " << r << " was killed by signal "
                    << WTERMSIG(ws) << "; stopping the other workers\n";
        else if (code != 130)
          std::cerr << errorPrefix() << "rank " << r << " failed (exit status "
                    << code << "); stopping the other workers\n";
        status = code;
        stopOthers(r);
      }
    }
  }
  workers = nullptr;
  ::sigaction(SIGTERM, &oldTerm, nullptr);
  ::sigaction(SIGINT, &oldInt, nullptr);
  return status;
}
