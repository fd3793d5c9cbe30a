//===- FileHelpers.h - Scratch directories and files for tests -*- C++ -*-===//

#ifndef GTC_TEST_FILEHELPERS_H
#define GTC_TEST_FILEHELPERS_H

#include "gtest/gtest.h"
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <ftw.h>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace gtc::test {

using Bytes = std::vector<uint8_t>;

/// A fresh directory under gtest's temporary directory, removed with
/// everything in it when the test ends.
class ScratchDir {
public:
  ScratchDir() {
    std::string pattern = ::testing::TempDir() + "gtc-test-XXXXXX";
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    const char *dir = ::mkdtemp(buf.data());
    EXPECT_NE(dir, nullptr) << "mkdtemp failed for " << pattern;
    path = dir ? dir : "";
  }
  ~ScratchDir() {
    if (!path.empty())
      ::nftw(
          path.c_str(),
          [](const char *file, const struct stat *, int, struct FTW *) {
            std::remove(file); // best effort
            return 0;
          },
          16, FTW_DEPTH | FTW_PHYS);
  }
  ScratchDir(const ScratchDir &) = delete;
  ScratchDir &operator=(const ScratchDir &) = delete;
  std::string path;
};

inline void writeFile(const std::string &path, const Bytes &bytes) {
  FILE *f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  if (!bytes.empty()) {
    ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
  }
  std::fclose(f);
}

inline Bytes readFile(const std::string &path) {
  Bytes bytes;
  FILE *f = std::fopen(path.c_str(), "rb");
  if (!f)
    return bytes;
  int c;
  while ((c = std::fgetc(f)) != EOF)
    bytes.push_back(uint8_t(c));
  std::fclose(f);
  return bytes;
}

} // namespace gtc::test

#endif // GTC_TEST_FILEHELPERS_H
