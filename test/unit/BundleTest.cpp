//===- BundleTest.cpp - The payload of compiled executables ---------------===//
//
// A payload written after some executable bytes reads back; a change to any
// byte of it, and every truncation, is detected with a message.
//===----------------------------------------------------------------------===//

#include "FileHelpers.h"
#include "gtc/Runtime/Bundle.h"
#include "gtest/gtest.h"

using namespace gtc;

namespace {

rt::Bundle sample() {
  rt::Bundle b;
  b.step = "gtc-plan 1\nmodel m\n";
  b.evals[32] = "eval plan 32";
  b.evals[16] = "eval plan 16";
  b.archs = {"sm_80", "sm_90"};
  b.kernels[rt::kernelKey("kernel source", "sm_90")] = std::string("\0cubin", 6);
  b.kernels[rt::kernelKey("kernel source", "ptx")] = "ptx text";
  b.cpu = true;
  return b;
}

TEST(BundleTest, RoundTrips) {
  test::ScratchDir dir;
  std::string exe = std::string("\x7f" "ELF runner bytes") + rt::packBundle(sample());
  std::string path = dir.path + "/exe";
  test::writeFile(path, test::Bytes(exe.begin(), exe.end()));
  rt::Bundle back;
  std::string error;
  ASSERT_TRUE(rt::readBundle(path, back, error)) << error;
  EXPECT_EQ(back.step, sample().step);
  EXPECT_EQ(back.evals, sample().evals);
  EXPECT_EQ(back.archs, sample().archs);
  EXPECT_EQ(back.kernels, sample().kernels);
  EXPECT_TRUE(back.cpu); // compiled with devices = cpu
  EXPECT_NE(rt::kernelKey("a", "sm_90"), rt::kernelKey("b", "sm_90"));
  EXPECT_NE(rt::kernelKey("a", "sm_90"), rt::kernelKey("a", "sm_80"));
}

TEST(BundleTest, DetectsEveryDamage) {
  test::ScratchDir dir;
  const std::string runner = "runner bytes";
  const std::string exe = runner + rt::packBundle(sample());
  std::string path = dir.path + "/exe";
  rt::Bundle back;
  std::string error;
  // Every byte of the payload changed: never read as valid.
  for (size_t i = runner.size(); i < exe.size(); ++i) {
    std::string bad = exe;
    bad[i] ^= 0x20;
    test::writeFile(path, test::Bytes(bad.begin(), bad.end()));
    EXPECT_FALSE(rt::readBundle(path, back, error)) << "byte " << i;
    EXPECT_NE(error.find("rebuild it with gtc compile"), std::string::npos)
        << error;
  }
  // Every truncation.
  for (size_t n = 0; n < exe.size(); ++n) {
    test::writeFile(path, test::Bytes(exe.begin(), exe.begin() + n));
    EXPECT_FALSE(rt::readBundle(path, back, error)) << "length " << n;
  }
  EXPECT_FALSE(rt::readBundle(dir.path + "/missing", back, error));
  EXPECT_NE(error.find("cannot read"), std::string::npos) << error;
}

} // namespace
