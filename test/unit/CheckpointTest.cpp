//===- CheckpointTest.cpp - Unit tests for safetensors reading/writing ----===//

#include "FileHelpers.h"
#include "gtc/Runtime/Checkpoint.h"
#include "gtc/Runtime/Rng.h"
#include "gtest/gtest.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <random>
#include <sys/resource.h>
#include <sys/wait.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <map>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

using namespace gtc::rt;

namespace {

using namespace gtc::test;

std::vector<std::string> listDir(const std::string &dir) {
  std::vector<std::string> names;
  if (DIR *d = ::opendir(dir.c_str())) {
    while (dirent *e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name != "." && name != "..")
        names.push_back(name);
    }
    ::closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

bool contains(const std::string &haystack, const std::string &needle) {
  return haystack.find(needle) != std::string::npos;
}

StoredTensor tensor(std::string name, std::string dtype,
                    std::vector<int64_t> shape, size_t elementSize,
                    uint8_t fill) {
  StoredTensor t{std::move(name), std::move(dtype), std::move(shape), {}};
  size_t n = elementSize;
  for (int64_t d : t.shape)
    n *= size_t(d);
  for (size_t i = 0; i < n; ++i)
    t.bytes.push_back(uint8_t(fill + i * 13));
  return t;
}

std::vector<StoredTensor> sampleTensors() {
  std::vector<StoredTensor> t;
  t.push_back(tensor("layer1.weight", "F32", {2, 3}, 4, 1));
  t.push_back(tensor("layer1.bias", "F32", {3}, 4, 2));
  t.push_back(tensor("adam.m", "F64", {2}, 8, 3));
  t.push_back(tensor("step", "I64", {}, 8, 4));
  t.push_back(tensor("labels", "I32", {4}, 4, 5));
  t.push_back(tensor("mask", "U8", {3}, 1, 6));
  t.push_back(tensor("half", "F16", {1, 3}, 2, 7));
  t.push_back(tensor("brain", "BF16", {5}, 2, 8));
  t.push_back(tensor("empty", "F32", {0, 4}, 4, 9));
  t.push_back(tensor("name with \"quotes\" \\ and é", "F32", {1}, 4, 10));
  return t;
}

std::map<std::string, std::string> sampleMetadata() {
  return {{"format", "gtc"},
          {"step", "100"},
          {"tricky", "quote \" backslash \\ newline \n tab \t ctrl \x01 "
                     "del \x7f unicode \xc3\xa9 \xf0\x9f\x98\x80"},
          {"", "empty key"}};
}

uint64_t headerLength(const Bytes &file) {
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i)
    n |= uint64_t(file[size_t(i)]) << (8 * i);
  return n;
}

/// A file with the given header text (unpadded) followed by `data`.
Bytes rawFile(const std::string &header, const Bytes &data) {
  Bytes out;
  for (int i = 0; i < 8; ++i)
    out.push_back(uint8_t(uint64_t(header.size()) >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

/// Reads `bytes` as a checkpoint file; returns "" on success, else the error
/// (which must name the file).
std::string readError(const std::string &path, const Bytes &bytes) {
  writeFile(path, bytes);
  std::vector<StoredTensor> tensors;
  std::map<std::string, std::string> metadata;
  std::string error;
  if (readSafetensors(path, tensors, metadata, error))
    return "";
  EXPECT_TRUE(contains(error, path)) << error;
  EXPECT_TRUE(tensors.empty());
  return error;
}

TEST(CheckpointTest, RoundTrip) {
  ScratchDir scratch;
  const std::string &dir = scratch.path;
  std::string path = dir + "/model.safetensors";
  auto tensors = sampleTensors();
  auto metadata = sampleMetadata();
  std::string error;
  ASSERT_TRUE(writeSafetensors(path, tensors, metadata, error)) << error;

  std::vector<StoredTensor> read;
  std::map<std::string, std::string> readMetadata;
  ASSERT_TRUE(readSafetensors(path, read, readMetadata, error)) << error;
  EXPECT_EQ(readMetadata, metadata);
  ASSERT_EQ(read.size(), tensors.size());
  std::sort(tensors.begin(), tensors.end(),
            [](const StoredTensor &a, const StoredTensor &b) {
              return a.name < b.name;
            });
  for (size_t i = 0; i < read.size(); ++i) {
    SCOPED_TRACE(tensors[i].name);
    EXPECT_EQ(read[i].name, tensors[i].name); // returned in name order
    EXPECT_EQ(read[i].dtype, tensors[i].dtype);
    EXPECT_EQ(read[i].shape, tensors[i].shape);
    EXPECT_EQ(read[i].bytes, tensors[i].bytes);
  }
  // No temporary is left behind.
  EXPECT_EQ(listDir(dir), std::vector<std::string>{"model.safetensors"});

  // Nothing at all: an empty object, padded.
  ASSERT_TRUE(writeSafetensors(dir + "/empty", {}, {}, error)) << error;
  Bytes empty = readFile(dir + "/empty");
  EXPECT_EQ(std::string(empty.begin() + 8, empty.end()), "{}      ");
  ASSERT_TRUE(readSafetensors(dir + "/empty", read, readMetadata, error))
      << error;
  EXPECT_TRUE(read.empty());
  EXPECT_TRUE(readMetadata.empty());
}

TEST(CheckpointTest, HeaderLayout) {
  ScratchDir scratch;
  const std::string &dir = scratch.path;
  std::string path = dir + "/small.safetensors";
  std::vector<StoredTensor> tensors = {tensor("w", "F32", {2}, 4, 0),
                                       tensor("a", "U8", {3}, 1, 0),
                                       tensor("h", "F16", {1}, 2, 0)};
  std::string error;
  ASSERT_TRUE(writeSafetensors(path, tensors, {{"k", "v"}}, error)) << error;
  Bytes file = readFile(path);
  uint64_t n = headerLength(file);
  ASSERT_LE(8 + n, file.size());
  EXPECT_EQ((8 + n) % 8, 0u); // the data starts 8-byte aligned
  std::string header(file.begin() + 8, file.begin() + 8 + long(n));
  // Sorted keys; the data holds larger elements first (w, h, a).
  std::string json =
      "{\"__metadata__\":{\"k\":\"v\"},"
      "\"a\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[10,13]},"
      "\"h\":{\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[8,10]},"
      "\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
  EXPECT_EQ(header.substr(0, json.size()), json);
  EXPECT_EQ(header.substr(json.size()), std::string(n - json.size(), ' '));
  EXPECT_EQ(file.size(), 8 + n + 13);

  // Every tensor of the sample is aligned to its element size.
  ASSERT_TRUE(writeSafetensors(path, sampleTensors(), {}, error)) << error;
  file = readFile(path);
  header.assign(file.begin() + 8, file.begin() + 8 + long(headerLength(file)));
  for (const StoredTensor &t : sampleTensors()) {
    size_t at = header.find("\"data_offsets\":[",
                            header.find("\"dtype\":\"" + t.dtype + "\""));
    ASSERT_NE(at, std::string::npos);
    uint64_t begin = std::strtoull(header.c_str() + at + 16, nullptr, 10);
    size_t size = t.dtype == "F64" || t.dtype == "I64"   ? 8
                  : t.dtype == "F32" || t.dtype == "I32" ? 4
                  : t.dtype == "U8"                      ? 1
                                                         : 2;
    EXPECT_EQ(begin % size, 0u) << t.name;
  }
}

TEST(CheckpointTest, WriteRejectsBadTensors) {
  ScratchDir scratch;
  const std::string &dir = scratch.path;
  std::string path = dir + "/bad.safetensors";
  std::string error;
  auto fails = [&](std::vector<StoredTensor> tensors,
                   std::map<std::string, std::string> metadata = {}) {
    error.clear();
    EXPECT_FALSE(writeSafetensors(path, tensors, metadata, error));
    EXPECT_TRUE(contains(error, path)) << error;
    return error;
  };
  EXPECT_TRUE(contains(fails({tensor("x", "F32", {2}, 3, 0)}),
                       "6 bytes of data, but F32 [2] needs 8"));
  EXPECT_TRUE(contains(fails({tensor("x", "Q4", {2}, 1, 0)}), "unknown dtype"));
  EXPECT_TRUE(contains(
      fails({tensor("x", "F32", {1}, 4, 0), tensor("x", "F32", {1}, 4, 0)}),
      "two tensors are named 'x'"));
  EXPECT_TRUE(
      contains(fails({tensor("__metadata__", "F32", {1}, 4, 0)}), "reserved"));
  StoredTensor negative{"n", "F32", {-1}, {}};
  EXPECT_TRUE(contains(fails({negative}), "invalid shape [-1]"));
  EXPECT_TRUE(contains(fails({tensor("\xff", "U8", {1}, 1, 0)}), "UTF-8"));
  EXPECT_TRUE(contains(fails({}, {{"k", "\xc3"}}), "UTF-8"));
  EXPECT_TRUE(listDir(dir).empty()); // nothing was created
}

TEST(CheckpointTest, AtomicWriteFailureLeavesOldFile) {
  ScratchDir scratch;
  const std::string &dir = scratch.path;
  std::string path = dir + "/ckpt.safetensors";
  std::string error;
  ASSERT_TRUE(writeSafetensors(path, sampleTensors(), {{"v", "1"}}, error))
      << error;
  const Bytes old = readFile(path);

  // A directory that does not exist.
  std::string missing = dir + "/no/such/dir/ckpt.safetensors";
  EXPECT_FALSE(writeSafetensors(missing, sampleTensors(), {}, error));
  EXPECT_TRUE(contains(error, missing)) << error;
  EXPECT_TRUE(contains(error, "No such file or directory")) << error;

  // The temporary cannot be created (a directory is in its way): the old
  // file is untouched.
  std::string blocker = path + ".tmp." + std::to_string(::getpid());
  ASSERT_EQ(::mkdir(blocker.c_str(), 0755), 0);
  EXPECT_FALSE(writeSafetensors(path, {tensor("new", "F32", {1}, 4, 0)},
                                {{"v", "2"}}, error));
  EXPECT_TRUE(contains(error, path)) << error;
  EXPECT_EQ(readFile(path), old);
  ::rmdir(blocker.c_str());

  // The rename fails (the target is a non-empty directory): the temporary
  // is removed.
  std::string target = dir + "/target";
  ASSERT_EQ(::mkdir(target.c_str(), 0755), 0);
  writeFile(target + "/keep", {1, 2, 3});
  EXPECT_FALSE(writeSafetensors(target, sampleTensors(), {}, error));
  EXPECT_TRUE(contains(error, "renaming")) << error;
  EXPECT_EQ(listDir(dir),
            (std::vector<std::string>{"ckpt.safetensors", "target"}));
  EXPECT_EQ(listDir(target), std::vector<std::string>{"keep"});

  // A directory we may not write to (root may write anywhere).
  if (::geteuid() != 0) {
    std::string locked = dir + "/locked";
    ASSERT_EQ(::mkdir(locked.c_str(), 0755), 0);
    std::string inside = locked + "/ckpt.safetensors";
    ASSERT_TRUE(writeSafetensors(inside, sampleTensors(), {}, error)) << error;
    Bytes before = readFile(inside);
    ASSERT_EQ(::chmod(locked.c_str(), 0555), 0);
    EXPECT_FALSE(writeSafetensors(inside, {}, {}, error));
    EXPECT_TRUE(contains(error, "Permission denied")) << error;
    ::chmod(locked.c_str(), 0755);
    EXPECT_EQ(readFile(inside), before);
    EXPECT_EQ(listDir(locked), std::vector<std::string>{"ckpt.safetensors"});
  }

  // A successful write replaces the file.
  ASSERT_TRUE(writeSafetensors(path, {tensor("new", "F32", {1}, 4, 0)},
                               {{"v", "2"}}, error))
      << error;
  std::vector<StoredTensor> read;
  std::map<std::string, std::string> metadata;
  ASSERT_TRUE(readSafetensors(path, read, metadata, error)) << error;
  ASSERT_EQ(read.size(), 1u);
  EXPECT_EQ(read[0].name, "new");
  EXPECT_EQ(metadata.at("v"), "2");
}

TEST(CheckpointTest, CorruptFilesGiveErrors) {
  ScratchDir scratch;
  const std::string &dir = scratch.path;
  std::string path = dir + "/valid.safetensors";
  std::string error;
  ASSERT_TRUE(writeSafetensors(path,
                               {tensor("a", "F32", {2, 2}, 4, 1),
                                tensor("b", "I64", {1}, 8, 2),
                                tensor("c", "U8", {3}, 1, 3)},
                               {{"epoch", "3"}}, error))
      << error;
  const Bytes valid = readFile(path);
  const std::string corrupt = dir + "/corrupt.safetensors";

  // Truncated at every length.
  for (size_t n = 0; n < valid.size(); ++n) {
    std::string e = readError(corrupt, Bytes(valid.begin(), valid.begin() + n));
    EXPECT_FALSE(e.empty()) << "truncated to " << n << " bytes was accepted";
  }
  EXPECT_TRUE(contains(
      readError(corrupt, Bytes(valid.begin(), valid.begin() + 5)), "too few"));
  EXPECT_TRUE(
      contains(readError(corrupt, Bytes(valid.begin(), valid.begin() + 40)),
               "truncated: header says"));
  EXPECT_TRUE(
      contains(readError(corrupt, Bytes(valid.begin(), valid.end() - 1)),
               "past the end"));
  // One byte too many.
  Bytes longer = valid;
  longer.push_back(0);
  EXPECT_TRUE(contains(readError(corrupt, longer), "after the last tensor"));

  // Every byte flipped in several ways: errors or (in the data) success, but
  // never a crash.
  const uint64_t dataStart = 8 + headerLength(valid);
  for (size_t i = 0; i < valid.size(); ++i) {
    for (uint8_t mask : {0x01, 0x80, 0xFF}) {
      Bytes flipped = valid;
      flipped[i] ^= mask;
      std::string e = readError(corrupt, flipped);
      if (i < 8) {
        EXPECT_FALSE(e.empty()) << "flipped length byte " << i;
      }
      if (i >= dataStart) {
        EXPECT_TRUE(e.empty()) << e;
      }
    }
  }

  // Header lengths that are too large.
  Bytes huge = valid;
  for (int i = 0; i < 8; ++i)
    huge[size_t(i)] = 0xFF;
  EXPECT_TRUE(contains(readError(corrupt, huge), "100 MB"));
  huge[7] = 0;
  huge[6] = 0;
  EXPECT_TRUE(contains(readError(corrupt, huge), "100 MB"));
  Bytes over = valid;
  uint64_t tooLong = valid.size() - 7;
  for (int i = 0; i < 8; ++i)
    over[size_t(i)] = uint8_t(tooLong >> (8 * i));
  EXPECT_TRUE(contains(readError(corrupt, over), "truncated"));

  // Random bytes, with and without a plausible length.
  Rng rng(11);
  for (int round = 0; round < 1000; ++round) {
    Bytes bytes(size_t(rng.below(200)));
    for (uint8_t &b : bytes)
      b = uint8_t(rng.next());
    if (round % 2 && bytes.size() >= 8) {
      uint64_t n = rng.below(bytes.size() - 7);
      for (int i = 0; i < 8; ++i)
        bytes[size_t(i)] = uint8_t(n >> (8 * i));
      if (bytes.size() > 8)
        bytes[8] = '{';
    }
    readError(corrupt, bytes); // must not crash
  }

  // Missing file, directory.
  std::vector<StoredTensor> tensors;
  std::map<std::string, std::string> metadata;
  EXPECT_FALSE(readSafetensors(dir + "/nope", tensors, metadata, error));
  EXPECT_EQ(error, "cannot open '" + dir + "/nope': No such file or directory");
  EXPECT_FALSE(readSafetensors(dir, tensors, metadata, error));
  EXPECT_TRUE(contains(error, "Is a directory")) << error;
}

TEST(CheckpointTest, StrictHeaderParsing) {
  ScratchDir scratch;
  const std::string &dir = scratch.path;
  std::string path = dir + "/h.safetensors";
  const Bytes data8(8, 0x11);
  auto check = [&](const std::string &header, const std::string &expected,
                   const Bytes &data) {
    SCOPED_TRACE(header);
    std::string e = readError(path, rawFile(header, data));
    if (expected.empty())
      EXPECT_EQ(e, "");
    else
      EXPECT_TRUE(contains(e, expected)) << e;
  };
  const std::string t =
      R"("t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";

  // Accepted: whitespace, any key order, escapes, metadata anywhere.
  check("{" + t + "}", "", data8);
  check(" \n\t{ \"t\" : { \"data_offsets\" : [ 0 , 8 ] , \"shape\" : [2], "
        "\"dtype\" : \"F32\" } }\r\n  ",
        "", data8);
  check(R"({"__metadata__":{"a\u00e9\ud83d\ude00\/\n":"x"},)" + t + "}", "",
        data8);
  check(R"({"__metadata__":{}})", "", {});

  // Rejected.
  check("", "empty", {});
  check("[]", "must be a JSON object", {});
  check("{" + t + ",}", "expected a string", data8);
  check("{" + t + "} x", "unexpected text after", data8);
  check("{" + t, "the header ends here", data8);
  check("{" + t + "," + t + "}", "duplicate key \"t\"", data8);
  check(R"({"t":{"dtype":"F32","shape":[02],"data_offsets":[0,8]}})",
        "leading zeros", data8);
  check(R"({"t":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})",
        "negative", data8);
  check(R"({"t":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})",
        "integers", data8);
  check(R"({"t":{"dtype":"F32","shape":[2e0],"data_offsets":[0,8]}})",
        "integers", data8);
  check(R"({"t":{"dtype":"F32","shape":[99999999999999999999],)"
        R"("data_offsets":[0,8]}})",
        "too large", data8);
  check(R"({"t":{"dtype":"F32","shape":[4294967296,4294967296],)"
        R"("data_offsets":[0,8]}})",
        "too large", data8);
  check(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8,9]}})",
        "more than 2", data8);
  check(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0]}})",
        "[begin, end]", data8);
  check(R"({"t":{"dtype":"F32","shape":[2]}})", "missing data_offsets", data8);
  check(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})",
        "unexpected key \"x\"", data8);
  check(
      R"({"t":{"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
      "duplicate key \"dtype\"", data8);
  check(R"({"t":{"dtype":"Q8","shape":[8],"data_offsets":[0,8]}})",
        "unknown dtype 'Q8'", data8);
  check(R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", "needs 12",
        data8);
  check(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})",
        "end before they begin", data8);
  check(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
        "past the end", data8);
  check(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
        R"("u":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
        "overlap", data8);
  check(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
        "belong to no tensor", data8);
  check(R"({"t":{"dtype":F32,"shape":[2],"data_offsets":[0,8]}})",
        "expected a string", data8);
  check(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})", "ends here",
        data8);
  check(R"({"t":{"dtype":"F\x32","shape":[2],"data_offsets":[0,8]}})",
        "invalid escape", data8);
  check(R"({"__metadata__":{"a":"\ud83d"}})", "unpaired surrogate", {});
  check(R"({"__metadata__":{"a":"\ude00"}})", "unpaired surrogate", {});
  check(R"({"__metadata__":{"a":"\u12g4"}})", "invalid \\u escape", {});
  check(R"({"__metadata__":{"a":1}})", "must be strings", {});
  check(R"({"__metadata__":{"a":"b","a":"c"}})", "duplicate key", {});
  check(R"({"__metadata__":[]})", "object of strings", {});
  check("{\"__metadata__\":{\"a\":\"line\nbreak\"}}", "control character", {});
  check("{\"__metadata__\":{\"a\":\"\xc3\x28\"}}", "UTF-8", {});
  check("{\"__metadata__\":{\"a\":\"\xed\xa0\x80\"}}", "UTF-8", {});
  check(R"({"__metadata__":{"a":"unterminated)", "unterminated string", {});
}

TEST(CheckpointTest, DeepAndLongHeaders) {
  ScratchDir scratch;
  const std::string &dir = scratch.path;
  std::string path = dir + "/h.safetensors";
  // Deep nesting is not JSON a safetensors header may hold.
  EXPECT_TRUE(contains(readError(path, rawFile(std::string(100000, '['), {})),
                       "must be a JSON object"));
  EXPECT_TRUE(contains(
      readError(path, rawFile("{\"t\":" + std::string(100000, '{'), {})),
      "expected a string"));
  // More dimensions than any framework allows.
  std::string shape = "[1";
  for (int i = 0; i < 64; ++i)
    shape += ",1";
  shape += "]";
  EXPECT_TRUE(
      contains(readError(path, rawFile(R"({"t":{"dtype":"U8","shape":)" +
                                           shape + R"(,"data_offsets":[0,1]}})",
                                       {0})),
               "more than 64"));
}

} // namespace

/// A writer killed (SIGKILL) at 100 random points of a save: the checkpoint
/// at the path is always the previous one or the complete new one, never a
/// torn file (write a temporary, fsync, rename).
TEST(CheckpointTest, KilledWriterLeavesOldOrNew) {
  ScratchDir scratch;
  const std::string path = scratch.path + "/ckpt.safetensors";
  // 8 MiB of tensor data: a save long enough to be killed inside.
  auto tensors = [](int generation) {
    return std::vector<StoredTensor>{
        tensor("w", "F32", {1 << 21}, 4, uint8_t(generation))};
  };
  std::string error;
  ASSERT_TRUE(writeSafetensors(path, tensors(0), {{"generation", "0"}}, error))
      << error;
  // How long a save takes here, to kill within twice that.
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(writeSafetensors(path, tensors(0), {{"generation", "0"}}, error))
      << error;
  auto save = std::chrono::duration_cast<std::chrono::microseconds>(
                  std::chrono::steady_clock::now() - t0)
                  .count();
  std::mt19937 random(7);
  int last = 0, torn = 0, completed = 0;
  for (int g = 1; g <= 100; ++g) {
    pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      std::string e;
      ::_exit(writeSafetensors(path, tensors(g),
                               {{"generation", std::to_string(g)}}, e)
                  ? 0
                  : 1);
    }
    ::usleep(static_cast<useconds_t>(random() % (save * 2 + 1)));
    ::kill(child, SIGKILL);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    std::vector<StoredTensor> read;
    std::map<std::string, std::string> meta;
    ASSERT_TRUE(readSafetensors(path, read, meta, error))
        << "after kill " << g << ": " << error;
    int found = std::atoi(meta["generation"].c_str());
    ASSERT_TRUE(found == last || found == g) << "after kill " << g;
    ASSERT_EQ(read.size(), 1u);
    EXPECT_EQ(read[0].bytes, tensors(found)[0].bytes) << "after kill " << g;
    (found == g ? completed : torn) += 1;
    last = found;
  }
  std::printf("[ killed   ] 100 saves: %d complete, %d killed before the "
              "rename\n",
              completed, torn);
  // Kills landed inside saves, and some saves completed.
  EXPECT_GT(torn, 0);
  EXPECT_GT(completed, 0);
}

/// A save that the file system refuses part way (a file-size limit, as a
/// full disk would) fails with the OS's reason, leaves the previous
/// checkpoint intact and its temporary removed.
TEST(CheckpointTest, FullDiskLeavesOldFile) {
  ScratchDir scratch;
  const std::string path = scratch.path + "/ckpt.safetensors";
  std::string error;
  ASSERT_TRUE(writeSafetensors(path, sampleTensors(), {{"v", "1"}}, error))
      << error;
  const Bytes old = readFile(path);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // 64 KiB at most; SIGXFSZ ignored, so the write fails with EFBIG (gtc
    // and the executables ignore it too).
    rlimit limit{64 * 1024, 64 * 1024};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    ::signal(SIGXFSZ, SIG_IGN);
    std::string e;
    bool wrote = writeSafetensors(
        path, {tensor("w", "F32", {1 << 20}, 4, 9)}, {{"v", "2"}}, e);
    ::_exit(!wrote && contains(e, "File too large") && contains(e, path)
                ? 0
                : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(readFile(path), old);
  EXPECT_EQ(listDir(scratch.path),
            std::vector<std::string>{"ckpt.safetensors"});
}
