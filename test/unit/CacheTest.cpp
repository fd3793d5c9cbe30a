//===- CacheTest.cpp - The GPU memory records of gtc's cache --------------===//

#include "gtc/Runtime/Cache.h"
#include "gtest/gtest.h"
#include <cstdlib>
#include <fstream>
#include <string>
#include <unistd.h>

using namespace gtc::rt;

namespace {

/// A fresh cache directory (below one that does not exist yet) for the
/// test's life.
class CacheTest : public ::testing::Test {
protected:
  void SetUp() override {
    char base[] = "/tmp/gtc-cache-test-XXXXXX";
    ASSERT_NE(mkdtemp(base), nullptr);
    root = base;
    setenv("GTC_CACHE_DIR", (root + "/a/b").c_str(), 1);
  }
  void TearDown() override {
    unsetenv("GTC_CACHE_DIR");
    std::string cmd = "rm -rf '" + root + "'";
    EXPECT_EQ(std::system(cmd.c_str()), 0);
  }
  std::string root;
};

} // namespace

/// A record is found by GPU and number of processes, replaced by the next of
/// the same two, and kept beside the others; lines that are not records are
/// ignored (and dropped when the file is rewritten).
TEST_F(CacheTest, OutsideMemoryRecords) {
  EXPECT_EQ(cacheDirectory(), root + "/a/b");
  EXPECT_FALSE(recordedOutsideMemory("NVIDIA H200", 2));
  recordOutsideMemory("NVIDIA H200", 2, {527 << 20, 866 << 20});
  recordOutsideMemory("NVIDIA H200", 1, {527 << 20, 6 << 20});
  recordOutsideMemory("NVIDIA H100 80GB HBM3", 2, {500 << 20, 700 << 20});
  auto two = recordedOutsideMemory("NVIDIA H200", 2);
  ASSERT_TRUE(two);
  EXPECT_EQ(two->context, 527 << 20);
  EXPECT_EQ(two->rest, 866 << 20);
  recordOutsideMemory("NVIDIA H200", 2, {526 << 20, 860 << 20});
  two = recordedOutsideMemory("NVIDIA H200", 2);
  ASSERT_TRUE(two);
  EXPECT_EQ(two->rest, 860 << 20);
  EXPECT_EQ(recordedOutsideMemory("NVIDIA H200", 1)->rest, 6 << 20);
  EXPECT_EQ(recordedOutsideMemory("NVIDIA H100 80GB HBM3", 2)->rest,
            700 << 20);
  EXPECT_FALSE(recordedOutsideMemory("NVIDIA H200", 4));

  std::ofstream(root + "/a/b/gpu-memory.tsv", std::ios::app)
      << "garbage\nNVIDIA H200\tx\t1\t2\nNVIDIA H200\t4\t-1\t2\n"
      << "NVIDIA H200\t4\t\t2\nNVIDIA H200\t4\t1\t-2\n";
  EXPECT_FALSE(recordedOutsideMemory("NVIDIA H200", 4));
  recordOutsideMemory("NVIDIA H200", 4, {1, 2});
  EXPECT_EQ(recordedOutsideMemory("NVIDIA H200", 4)->rest, 2);
  EXPECT_EQ(recordedOutsideMemory("NVIDIA H200", 2)->rest, 860 << 20);
  std::ifstream in(root + "/a/b/gpu-memory.tsv");
  int lines = 0;
  for (std::string l; std::getline(in, l);)
    ++lines;
  EXPECT_EQ(lines, 4);
  // A name that would break the file is not recorded.
  recordOutsideMemory("bad\tname", 1, {1, 2});
  EXPECT_FALSE(recordedOutsideMemory("bad\tname", 1));
}
