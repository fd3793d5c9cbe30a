//===- NvrtcTest.cpp - The runtime's NVRTC compile path and kernel cache --===//
//
// Runs without a GPU: NVRTC is a compiler library. Checks that a kernel
// compiles for sm_90, that the second compile of the same source is a cache
// hit, and that a compile error shows the offending source line.
//===----------------------------------------------------------------------===//

#include "gtc/Runtime/Cuda.h"
#include "gtest/gtest.h"
#include <cstdlib>
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
