//===- CommTest.cpp - Rendezvous store, bucket collectives, NCCL loading ---===//

#include "CompileHelpers.h"
#include "Comm/Nccl.h"
#include "Comm/Store.h"
#include "gtc/Runtime/Comm.h"
#include "gtc/Runtime/CpuExecutor.h"
#include "gtest/gtest.h"
#include "llvm/Support/MemoryBuffer.h"
#include <cstdlib>
#include <thread>
#include <unistd.h>

using namespace gtc;

namespace {

/// A port for this process's store (ctest runs each test in a process of
/// its own, several at once: the port follows the process ID).
std::string testPort(int which) {
  return std::to_string(20000 + (::getpid() * 7 + which) % 20000);
}

/// The store's sum answers every rank once all have given theirs; a rank
/// whose heartbeat connection closes without a goodbye is named to the
/// others, one that said goodbye is not.
TEST(StoreTest, SumsAndHeartbeats) {
  const std::string port = testPort(1);
  auto *server = new rt::StoreServer(); // lives as long as the process
  std::string error;
  ASSERT_TRUE(server->listenOn(port, error)) << error;
  constexpr int kRanks = 3;
  std::vector<std::unique_ptr<rt::StoreClient>> clients;
  for (int r = 0; r < kRanks; ++r) {
    clients.push_back(std::make_unique<rt::StoreClient>());
    ASSERT_TRUE(clients.back()->connect("127.0.0.1", port,
                                        std::chrono::seconds(10), error))
        << error;
  }
  std::vector<std::vector<double>> values(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r)
    threads.emplace_back([&, r] {
      values[r] = {double(r), 1.0};
      EXPECT_TRUE(clients[r]->sum("sum/0", kRanks, values[r].data(), 2));
    });
  for (std::thread &t : threads)
    t.join();
  for (int r = 0; r < kRanks; ++r)
    EXPECT_EQ(values[r], (std::vector<double>{0 + 1 + 2, 3}));

  std::string failure;
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_TRUE(clients[r]->heartbeat(r, failure));
    EXPECT_EQ(failure, "");
  }
  ASSERT_TRUE(clients[2]->goodbye(2));
  clients[2].reset(); // finished: not a failure
  ASSERT_TRUE(clients[0]->heartbeat(0, failure));
  EXPECT_EQ(failure, "");
  clients[1].reset(); // gone without a goodbye
  for (int i = 0; i < 50 && failure.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_TRUE(clients[0]->heartbeat(0, failure));
  }
  EXPECT_EQ(failure, "rank 1 ended without finishing (an error, a crash, or killed)");
}

/// gtc's launcher opens rank 0's socket before starting the workers (a
/// port merely found free may be taken before rank 0 binds it); rank 0
/// serves that socket, whose port is taken meanwhile, rather than binding
/// again.
TEST(StoreTest, ServesTheLaunchersSocket) {
  std::string error;
  int fd = rt::listeningSocket(0, error);
  ASSERT_GE(fd, 0) << error;
  const std::string port = std::to_string(rt::boundPort(fd));
  ASSERT_NE(port, "0");
  EXPECT_LT(rt::listeningSocket(std::atoi(port.c_str()), error), 0);
  ::setenv("GTC_STORE_FD", std::to_string(fd).c_str(), 1);
  auto *server = new rt::StoreServer(); // lives as long as the process
  ASSERT_TRUE(server->listenOn(port, error)) << error;
  EXPECT_EQ(std::getenv("GTC_STORE_FD"), nullptr);
  rt::StoreClient a;
  ASSERT_TRUE(a.connect("127.0.0.1", port, std::chrono::seconds(10), error))
      << error;
  double one = 1;
  EXPECT_TRUE(a.sum("sum/launcher", 1, &one, 1));
  EXPECT_EQ(one, 1);
}

/// A rank that stops beating (SIGSTOP, a hang) is named once it has been
/// silent for GTC_TIMEOUT seconds.
TEST(StoreTest, SilentRankIsNamed) {
  ::setenv("GTC_TIMEOUT", "1", 1);
  const std::string port = testPort(2);
  auto *server = new rt::StoreServer(); // lives as long as the process
  std::string error, failure;
  ASSERT_TRUE(server->listenOn(port, error)) << error;
  ::unsetenv("GTC_TIMEOUT");
  rt::StoreClient a, b;
  ASSERT_TRUE(a.connect("127.0.0.1", port, std::chrono::seconds(10), error));
  ASSERT_TRUE(b.connect("127.0.0.1", port, std::chrono::seconds(10), error));
  ASSERT_TRUE(b.heartbeat(1, failure));
  ASSERT_TRUE(a.heartbeat(0, failure));
  EXPECT_EQ(failure, "");
  for (int i = 0; i < 40 && failure.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ASSERT_TRUE(a.heartbeat(0, failure));
  }
  EXPECT_NE(failure.find("rank 1 has not answered for"), std::string::npos)
      << failure;
  EXPECT_NE(failure.find("(stopped or hung)"), std::string::npos) << failure;
}

/// gt-bucket's all_reduce hands the collective a whole bucket: one call per
/// all_reduce kernel, never one per tensor.
TEST(CommTest, OneCollectiveCallPerBucket) {
  auto buffer = llvm::MemoryBuffer::getFile(std::string(GTC_SOURCE_DIR) +
                                            "/examples/mlp.gt");
  ASSERT_TRUE(bool(buffer));
  std::string errors;
  std::optional<rt::Plan> plan =
      test::compilePlan((*buffer)->getBuffer().str(), 4, errors, false, "t.gt",
                        "", true, /*bucketBytes=*/1 << 20);
  ASSERT_TRUE(plan) << errors;
  int buckets = 0;
  size_t tensors = 0;
  for (const rt::Kernel &k : plan->kernels)
    if (k.op == rt::OpKind::AllReduce) {
      ++buckets;
      tensors += k.inputs.size();
    }
  ASSERT_EQ(buckets, 3);
  ASSERT_EQ(tensors, 6u);
  rt::CpuExecutor<float> exec(*plan);
  exec.initParams(1);
  int calls = 0;
  size_t reduced = 0;
  exec.allReduceMean =
      [&](const std::vector<std::pair<float *, size_t>> &bucket) {
        ++calls;
        reduced += bucket.size();
      };
  exec.run();
  EXPECT_EQ(calls, buckets);
  EXPECT_EQ(reduced, tensors);
}

/// Two Gloo processes (threads here) reduce a bucket of three tensors with
/// one Gloo call.
TEST(CommTest, GlooReducesABucketInOneCall) {
  char dir[] = "/tmp/gtc-gloo-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  std::unique_ptr<rt::Communicator> comms[2];
  std::string errors[2];
  std::thread threads[2];
  for (int r = 0; r < 2; ++r)
    threads[r] = std::thread([&, r] {
      rt::World w;
      w.rank = r;
      w.size = 2;
      w.rendezvous = std::string("file:") + dir;
      comms[r] = rt::connectCpu(w, errors[r]);
    });
  for (std::thread &t : threads)
    t.join();
  if (!comms[0] && errors[0].find("without Gloo") != std::string::npos)
    GTEST_SKIP() << errors[0];
  ASSERT_TRUE(comms[0] && comms[1]) << errors[0] << errors[1];
  std::vector<float> data[2][3];
  for (int r = 0; r < 2; ++r)
    threads[r] = std::thread([&, r] {
      std::vector<std::pair<float *, size_t>> bucket;
      for (int t = 0; t < 3; ++t) {
        data[r][t].assign(5 + t, float(r * 10 + t));
        bucket.push_back({data[r][t].data(), data[r][t].size()});
      }
      size_t before = comms[r]->collectiveCalls();
      comms[r]->allReduceMean(bucket);
      EXPECT_EQ(comms[r]->collectiveCalls() - before, 1u);
    });
  for (std::thread &t : threads)
    t.join();
  for (int r = 0; r < 2; ++r)
    for (int t = 0; t < 3; ++t)
      EXPECT_EQ(data[r][t], std::vector<float>(5 + t, float(5 + t)));
}

/// Without NCCL where GTC_NCCL_LIBRARY points, the error names the place
/// and the variable; the search without it finds CUDA's copy where the
/// toolkit has one.
TEST(NcclTest, LoadingSaysWhereItLooked) {
  ::setenv("GTC_NCCL_LIBRARY", "/nonexistent/libnccl.so.2", 1);
  std::string version, error;
  EXPECT_FALSE(rt::loadNccl(version, error));
  EXPECT_NE(error.find("/nonexistent/libnccl.so.2 (GTC_NCCL_LIBRARY)"),
            std::string::npos)
      << error;
  ::unsetenv("GTC_NCCL_LIBRARY");
  if (::access("/usr/local/cuda/lib64/libnccl.so.2", F_OK) != 0)
    GTEST_SKIP() << "no NCCL in /usr/local/cuda here";
  EXPECT_TRUE(rt::loadNccl(version, error)) << error;
  EXPECT_EQ(version.substr(0, 2), "2.");
}

} // namespace

/// gtc run's and compiled executables' one rule for the number of
/// processes: what is asked, every GPU, a launch's size, or an error that
/// says what to change.
TEST(CommTest, DataParallelProcesses) {
  rt::World one, launch;
  launch.size = 4;
  launch.launcher = "torchrun";
  struct Row {
    std::string devices;
    const rt::World &world;
    int gpus, compiled, expected;
    std::string error;
  };
  const Row rows[] = {
      {"", one, 8, 0, 1, ""},
      {"cpu", one, 8, 0, 1, ""},
      {"3", one, 8, 0, 3, ""},
      {"all", one, 8, 0, 8, ""},
      {"all", one, 0, 0, 1, ""},
      {"", launch, 8, 0, 4, ""},
      {"all", launch, 8, 0, 4, ""},
      {"4", launch, 8, 0, 4, ""},
      {"2", launch, 8, 0, 0,
       "devices = 2, but the torchrun launch has 4 processes; give --devices "
       "4 or launch 2"},
      {"", one, 0, 2, 2, ""},
      {"2", one, 0, 2, 2, ""},
      {"3", one, 0, 2, 0,
       "this executable was compiled for 2 processes; for --devices 3 compile "
       "with --devices 3"},
      {"all", one, 0, 2, 0,
       "this executable was compiled for 2 processes; --devices all is gtc "
       "run's (every GPU); compile with devices = N"},
      {"", launch, 0, 2, 0,
       "this executable was compiled for 2 processes, but the torchrun launch "
       "has 4; launch 2"},
      {"", launch, 0, 4, 4, ""},
  };
  for (const Row &r : rows) {
    std::string error;
    EXPECT_EQ(rt::dataParallelProcesses(r.devices, r.world, r.gpus, r.compiled,
                                        error),
              r.expected)
        << r.devices << " " << r.world.size << " " << r.compiled;
    EXPECT_EQ(error, r.error);
  }
}
