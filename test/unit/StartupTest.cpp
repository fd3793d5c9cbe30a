//===- StartupTest.cpp - The first-step report ----------------------------===//
//
// Startup adds each phase's time under its first-seen name, keeps the
// latest detail, reports the time no phase accounts for as "other", and
// stops recording once closed (evaluation's plan is not the first step's).
//===----------------------------------------------------------------------===//

#include "gtc/Runtime/Startup.h"
#include "gtest/gtest.h"
#include <regex>
#include <thread>

using namespace gtc::rt;

namespace {

TEST(StartupTest, PhasesInOrderWithDetailsAndTheRest) {
  Startup s;
  s.add("parse", 0.25);
  s.add("NVRTC", 1.5, "20 kernels on 16 threads");
  s.add("parse", 0.5);
  s.add("NVRTC", 0.25, "21 kernels on 16 threads");
  s.add("the step", 0.1);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const std::string r = s.report();
  // The phases are the first-seen order, summed, the later detail kept.
  EXPECT_NE(r.find(" from start: parse 0.75 s, NVRTC 1.75 s (21 kernels on "
                   "16 threads), the step 0.10 s"),
            std::string::npos)
      << r;
  // The phases add to 2.6 s, more than the 20 ms that passed: no "other".
  EXPECT_EQ(r.find("other"), std::string::npos) << r;
  EXPECT_TRUE(std::regex_search(r, std::regex("^[0-9]+\\.[0-9]{2} s from")))
      << r;
}

TEST(StartupTest, TheRestIsOtherAndClosedStopsRecording) {
  Startup s;
  s.add("parse", 0.0);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  std::string r = s.report();
  // At least the 30 ms that no phase accounts for.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r, m, std::regex(", other ([0-9.]+) s$"))) << r;
  EXPECT_GE(std::stod(m[1]), 0.03) << r;
  s.close();
  EXPECT_TRUE(s.isClosed());
  s.add("evaluation plan", 5.0);
  s.add("parse", 5.0);
  r = s.report();
  EXPECT_EQ(r.find("evaluation plan"), std::string::npos) << r;
  EXPECT_NE(r.find("parse 0.00 s"), std::string::npos) << r;
}

} // namespace
