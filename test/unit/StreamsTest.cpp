//===- StreamsTest.cpp - Plan kernels that may run side by side -----------===//
//
// scheduleStreams on hand-made plans: what may run beside what, what must
// wait (data flow, memory-plan reuse, in-place writes, the shared scratch,
// small kernels only). CudaEmitterTest checks the schedule of every emitted
// example program (streamsAreSound).
//===----------------------------------------------------------------------===//

#include "gtc/Runtime/Streams.h"
#include "gtest/gtest.h"

using namespace gtc;

namespace {

/// A plan of f32 temporaries of 64 elements each at the given offsets (in
/// elements), and an empty program for its kernels, scheduled for a GPU of
/// 4 multiprocessors (kernels have one block unless a test says).
struct Builder {
  rt::Plan plan;
  rt::CudaProgram program;

  int buffer(int64_t offset, rt::Region region = rt::Region::Temp) {
    rt::Buffer b;
    b.name = "b" + std::to_string(plan.buffers.size());
    b.shape = {64};
    b.region = region;
    b.offset = offset;
    plan.buffers.push_back(b);
    return static_cast<int>(plan.buffers.size()) - 1;
  }

  /// A plan kernel with one generated kernel launch over its buffers.
  int kernel(std::vector<int> inputs, std::vector<int> outputs,
             std::vector<int> extra = {}) {
    rt::Kernel k;
    k.op = rt::OpKind::Add;
    k.inputs = inputs;
    k.outputs = outputs;
    plan.kernels.push_back(k);
    rt::CudaLaunch l;
    l.name = "k" + std::to_string(program.kernels.size());
    l.buffers = inputs;
    l.buffers.insert(l.buffers.end(), outputs.begin(), outputs.end());
    l.buffers.insert(l.buffers.end(), extra.begin(), extra.end());
    program.kernels.push_back({l});
    return static_cast<int>(plan.kernels.size()) - 1;
  }

  /// A plan kernel that is one cuBLASLt GEMM c = a @ b.
  int gemm(int a, int b, int c) {
    rt::Kernel k;
    k.op = rt::OpKind::Matmul;
    k.inputs = {a, b};
    k.outputs = {c};
    plan.kernels.push_back(k);
    rt::CudaLaunch l;
    l.kind = rt::CudaLaunch::Kind::Gemm;
    l.a = a;
    l.b = b;
    l.c = c;
    program.kernels.push_back({l});
    return static_cast<int>(plan.kernels.size()) - 1;
  }

  std::vector<rt::StreamGroup> schedule() {
    return rt::scheduleStreams(plan, program, 4);
  }
};

using Waits = std::vector<int>;

TEST(StreamsTest, IndependentBranchesRunSideBySide) {
  // The MLP's backward: after the head (0), dX (1) and dW (2) both read the
  // head's gradient; dW of the layer below (3) reads dX's result.
  Builder b;
  int x = b.buffer(0), g = b.buffer(64), dx = b.buffer(128), w = b.buffer(192);
  int dw = b.buffer(0, rt::Region::Grad), dw1 = b.buffer(64, rt::Region::Grad);
  b.kernel({x}, {g});
  b.kernel({g, w}, {dx});
  b.kernel({g, x}, {dw});
  b.kernel({dx, x}, {dw1});
  std::vector<rt::StreamGroup> s = b.schedule();
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0].stream, 0);
  EXPECT_EQ(s[1].stream, 0);
  EXPECT_EQ(s[2].stream, 1); // beside dX, after the head
  EXPECT_EQ(s[2].waits, Waits{0});
  EXPECT_TRUE(s[0].signals);
  EXPECT_EQ(s[3].stream, 0); // after dX, on its stream: no wait
  EXPECT_TRUE(s[3].waits.empty());
  EXPECT_FALSE(s[2].signals); // nothing waits for it; the step joins it
}

TEST(StreamsTest, ChainsStayOnOneStream) {
  Builder b;
  int a = b.buffer(0), c = b.buffer(64), d = b.buffer(128);
  b.kernel({a}, {c});
  b.kernel({c}, {d});
  b.kernel({d}, {a});
  for (const rt::StreamGroup &g : b.schedule()) {
    EXPECT_EQ(g.stream, 0);
    EXPECT_TRUE(g.waits.empty());
  }
}

TEST(StreamsTest, ReusedMemoryOrdersItsUsers) {
  // Kernel 2 writes b3, which the memory plan put where b1 was: it waits
  // for kernel 1, the last reader of b1, though no value flows.
  Builder b;
  int a = b.buffer(0), b1 = b.buffer(64), out = b.buffer(0, rt::Region::Grad);
  int b3 = b.buffer(64 + 32); // overlaps b1's second half
  int c = b.buffer(256);
  b.kernel({a}, {b1});
  b.kernel({b1}, {out});
  b.kernel({a}, {b3});
  b.kernel({a}, {c});
  std::vector<rt::StreamGroup> s = b.schedule();
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[2].stream, 0); // after kernel 1 on its stream
  EXPECT_EQ(s[3].stream, 1); // reads a, which no kernel writes: beside
  EXPECT_TRUE(s[3].waits.empty());
}

TEST(StreamsTest, GradientsInTheTemporariesOrderTheirUsers) {
  // The gradient region lies at slot 256 of the temporaries'
  // (Plan::gradsInTemp): dw (gradient slot 0) is where t was, so the
  // kernel that writes it follows t's last reader (2) on its stream, where
  // otherwise it would go beside it, after kernel 1 only.
  Builder b;
  b.plan.gradsInTemp = 256;
  int t = b.buffer(256), c = b.buffer(512), d = b.buffer(768);
  int dw = b.buffer(0, rt::Region::Grad);
  b.kernel({}, {t});   // 0
  b.kernel({}, {c});   // 1: beside 0
  b.kernel({t}, {d});  // 2: t's last reader, after 0
  b.kernel({c}, {dw}); // 3
  std::vector<rt::StreamGroup> s = b.schedule();
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[1].stream, 1);
  EXPECT_EQ(s[3].stream, s[2].stream);
  EXPECT_EQ(s[3].waits, Waits{1});
  b.plan.gradsInTemp = -1; // apart
  s = b.schedule();
  EXPECT_EQ(s[3].stream, 1);
  EXPECT_TRUE(s[3].waits.empty());
}

TEST(StreamsTest, ReadersOfOneBufferDoNotWaitForEachOther) {
  Builder b;
  int a = b.buffer(0), c = b.buffer(64), d = b.buffer(128);
  b.kernel({}, {a});
  b.kernel({a}, {c});
  b.kernel({a}, {d});
  std::vector<rt::StreamGroup> s = b.schedule();
  EXPECT_EQ(s[1].stream, 0);
  EXPECT_EQ(s[2].stream, 1);
  EXPECT_EQ(s[2].waits, Waits{0});
}

TEST(StreamsTest, WritesToInputsThatAreOutputsCount) {
  // A kernel that accumulates into its input (listed as input and output)
  // writes it: a later reader waits.
  Builder b;
  int a = b.buffer(0), acc = b.buffer(64), c = b.buffer(128);
  b.kernel({}, {a});
  b.kernel({a, acc}, {acc});
  b.kernel({acc}, {c});
  std::vector<rt::StreamGroup> s = b.schedule();
  EXPECT_EQ(s[2].stream, 0);
  // A buffer a launch passes that its plan kernel does not list as an input
  // (what a later kernel without launches outputs) is written too.
  Builder e;
  int x = e.buffer(0), y = e.buffer(64), z = e.buffer(128), w = e.buffer(192);
  e.kernel({x}, {y}, {z});
  e.kernel({z}, {w});
  EXPECT_EQ(e.schedule()[1].stream, 0);
}

TEST(StreamsTest, KernelsSharingTheScratchAreOrdered) {
  // Two kernels that use the program's scratch never run side by side,
  // though their buffers are apart.
  Builder b;
  int a = b.buffer(0), c = b.buffer(64), d = b.buffer(128);
  b.kernel({a}, {c}, {rt::CudaLaunch::kWorkspace});
  b.kernel({a}, {d}, {rt::CudaLaunch::kWorkspace});
  EXPECT_EQ(b.schedule()[1].stream, 0);
  // Without the scratch, the second goes beside the first.
  Builder g;
  int x = g.buffer(0), y = g.buffer(64), z = g.buffer(128);
  g.kernel({x}, {y});
  g.kernel({x}, {z});
  EXPECT_EQ(g.schedule()[1].stream, 1);
}

TEST(StreamsTest, SmallKernelsGoBesideGemms) {
  // cuBLASLt GEMMs stay on the main stream (where they share one workspace); a
  // small kernel independent of one goes beside it.
  Builder b;
  int x = b.buffer(0), y = b.buffer(64), z = b.buffer(128), w = b.buffer(192);
  b.gemm(x, x, y);
  b.kernel({x}, {z});
  b.gemm(x, x, w);
  std::vector<rt::StreamGroup> s = b.schedule();
  EXPECT_EQ(s[0].stream, 0);
  EXPECT_EQ(s[1].stream, 1);
  EXPECT_EQ(s[2].stream, 0);
}

TEST(StreamsTest, OnlySmallKernelsGoBeside) {
  // With 4 multiprocessors: a kernel of 9 blocks (more than two per
  // multiprocessor) and a cuBLASLt GEMM stay on the main stream; one of 8
  // blocks goes beside.
  Builder b;
  int a = b.buffer(0), c = b.buffer(64), d = b.buffer(128), e = b.buffer(192);
  int f = b.buffer(256);
  b.kernel({}, {a});
  b.kernel({}, {c});
  b.program.kernels.back()[0].grid = 9;
  b.gemm(a, a, d);
  b.kernel({a}, {e});
  b.program.kernels.back()[0].grid = 8;
  b.kernel({a}, {f});
  std::vector<rt::StreamGroup> s = b.schedule();
  EXPECT_EQ(s[1].stream, 0);
  EXPECT_EQ(s[2].stream, 0);
  EXPECT_EQ(s[3].stream, 1);
  EXPECT_EQ(s[3].waits, Waits{0});
  EXPECT_EQ(s[4].stream, 0); // independent: the stream used least recently
}

TEST(StreamsTest, LocalBuffersTakeNoMemory) {
  Builder b;
  int a = b.buffer(0), l = b.buffer(0, rt::Region::Local), c = b.buffer(64);
  int d = b.buffer(128);
  b.kernel({}, {a});
  b.kernel({a}, {c}, {l});
  b.kernel({a}, {d}, {l});
  EXPECT_EQ(b.schedule()[2].stream, 1);
}

} // namespace
