//===- NvrtcTest.cpp - The runtime's NVRTC compile path and kernel cache --===//
//
// Runs without a GPU: NVRTC is a compiler library. Checks that a kernel
// compiles for sm_90, that the second compile of the same source is a cache
// hit, that a cache file holding another kernel (two keys of one hash) or
// damaged is compiled again and replaced, and that a compile error shows
// the offending source line.
//===----------------------------------------------------------------------===//

#include "gtc/Runtime/Cuda.h"
#include "gtest/gtest.h"
#include <cstdlib>
#include <dirent.h>
#include <fstream>
#include <iterator>
#include <set>
#include <string>

using namespace gtc::rt;

namespace {

class NvrtcTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir = ::testing::TempDir() + "gtc-nvrtc-cache-" +
          std::to_string(::testing::UnitTest::GetInstance()->random_seed());
    setenv("GTC_CACHE_DIR", dir.c_str(), 1);
  }
  void TearDown() override { unsetenv("GTC_CACHE_DIR"); }
  std::string dir;
};

TEST_F(NvrtcTest, CompilesThenHitsTheCache) {
  const std::string src = "extern \"C\" __global__ void k(float *p) { p[0] = "
                          "1.f; } // " + dir;
  std::vector<char> cubin;
  bool cached = true;
  std::string error;
  ASSERT_TRUE(compileCuda(src, "sm_90", cubin, cached, error)) << error;
  EXPECT_FALSE(cached);
  EXPECT_GT(cubin.size(), 0u);
  std::vector<char> again;
  ASSERT_TRUE(compileCuda(src, "sm_90", again, cached, error)) << error;
  EXPECT_TRUE(cached);
  EXPECT_EQ(again, cubin);
}

/// The cache's files (names), read from its directory.
std::set<std::string> cacheFiles(const std::string &dir) {
  std::set<std::string> names;
  if (DIR *d = opendir(dir.c_str())) {
    while (dirent *e = readdir(d))
      if (std::string n = e->d_name; n != "." && n != "..")
        names.insert(n);
    closedir(d);
  }
  return names;
}

std::string readAll(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void writeAll(const std::string &path, const std::string &content) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
}

TEST_F(NvrtcTest, ChecksEachCacheEntry) {
  const std::string a = "extern \"C\" __global__ void k(float *p) { p[0] = "
                        "1.f; } // " +
                        dir;
  const std::string b = "extern \"C\" __global__ void k(float *p) { p[0] = "
                        "2.f; } // " +
                        dir;
  std::vector<char> binA, binB, got;
  bool cached = true;
  std::string error;
  ASSERT_TRUE(compileCuda(a, "sm_90", binA, cached, error)) << error;
  std::set<std::string> afterA = cacheFiles(dir);
  ASSERT_EQ(afterA.size(), 1u);
  const std::string fileA = dir + "/" + *afterA.begin();
  ASSERT_TRUE(compileCuda(b, "sm_90", binB, cached, error)) << error;
  ASSERT_NE(binA, binB);
  std::string fileB;
  for (const std::string &n : cacheFiles(dir))
    if (!afterA.count(n))
      fileB = dir + "/" + n;
  ASSERT_FALSE(fileB.empty());
  const std::string entryA = readAll(fileA);

  // Two keys of one hash: A's file holds B's kernel. A is compiled again
  // (not B's binary), and its file repaired.
  writeAll(fileA, readAll(fileB));
  int rejected = compileStats().rejected;
  ASSERT_TRUE(compileCuda(a, "sm_90", got, cached, error)) << error;
  EXPECT_FALSE(cached);
  EXPECT_EQ(got, binA);
  EXPECT_EQ(compileStats().rejected, rejected + 1);
  EXPECT_EQ(readAll(fileA), entryA);
  ASSERT_TRUE(compileCuda(a, "sm_90", got, cached, error)) << error;
  EXPECT_TRUE(cached);
  EXPECT_EQ(got, binA);

  // Damaged: a byte of the binary flipped, the file cut short, an empty
  // file, a file of the old format (the binary alone).
  std::string flipped = entryA;
  flipped[flipped.size() / 2 + entryA.size() / 4] ^= 0x5a;
  for (const std::string &bad :
       {flipped, entryA.substr(0, entryA.size() - 7), std::string(),
        std::string(binA.begin(), binA.end())}) {
    writeAll(fileA, bad);
    ASSERT_TRUE(compileCuda(a, "sm_90", got, cached, error)) << error;
    EXPECT_FALSE(cached);
    EXPECT_EQ(got, binA);
    EXPECT_EQ(readAll(fileA), entryA);
  }
}

TEST_F(NvrtcTest, ErrorsShowTheSourceLine) {
  const std::string src = "// line 1\n"
                          "extern \"C\" __global__ void k(float *p) {\n"
                          "  p[0] = undefined_name;\n"
                          "}\n";
  std::vector<char> cubin;
  bool cached = false;
  std::string error;
  EXPECT_FALSE(compileCuda(src, "sm_80", cubin, cached, error));
  EXPECT_NE(error.find("NVRTC failed to compile a generated kernel for sm_80"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("undefined_name"), std::string::npos) << error;
  EXPECT_NE(error.find("    3 |   p[0] = undefined_name;"), std::string::npos)
      << error;
}

TEST(CudaDeviceTest, NoDriverIsAClearError) {
  CudaDeviceInfo info;
  std::string error;
  if (cudaAvailable(info, error))
    GTEST_SKIP() << "a GPU is present: " << info.name;
  EXPECT_NE(error.find("use --device cpu"), std::string::npos) << error;
}

} // namespace
