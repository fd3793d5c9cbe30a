//===- DataTest.cpp - Unit tests for the runtime's datasets, loader, RNG --===//

#include "gtc/Runtime/Data.h"
#include "FileHelpers.h"
#include "gtc/Runtime/Rng.h"
#include "gtc/Runtime/ScalarOps.h"
#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>
#include <zlib.h>

using namespace gtc::rt;

namespace {

using namespace gtc::test;

void writeGzip(const std::string &path, const Bytes &bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  if (!bytes.empty()) {
    ASSERT_EQ(gzwrite(f, bytes.data(), unsigned(bytes.size())),
              int(bytes.size()));
  }
  ASSERT_EQ(gzclose(f), Z_OK);
}

void putBigEndian32(Bytes &out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8)
    out.push_back(uint8_t(v >> shift));
}

void putLittleEndian32(Bytes &out, uint32_t v) {
  for (int shift = 0; shift < 32; shift += 8)
    out.push_back(uint8_t(v >> shift));
}

uint8_t pixelValue(uint32_t image, uint32_t k) {
  return uint8_t((image * 31 + k * 7) % 256);
}

Bytes idxImages(uint32_t count, uint32_t rows, uint32_t cols) {
  Bytes out;
  putBigEndian32(out, 0x00000803);
  putBigEndian32(out, count);
  putBigEndian32(out, rows);
  putBigEndian32(out, cols);
  for (uint32_t i = 0; i < count; ++i)
    for (uint32_t k = 0; k < rows * cols; ++k)
      out.push_back(pixelValue(i, k));
  return out;
}

Bytes idxLabels(uint32_t count) {
  Bytes out;
  putBigEndian32(out, 0x00000801);
  putBigEndian32(out, count);
  for (uint32_t i = 0; i < count; ++i)
    out.push_back(uint8_t(i % 10 + (i == 3 ? 240 : 0))); // one label >= 128
  return out;
}

Bytes tokenFile(const std::vector<uint16_t> &tokens, int32_t magic = 20240520,
                int32_t version = 1, int64_t claimed = -1) {
  Bytes out;
  putLittleEndian32(out, uint32_t(magic));
  putLittleEndian32(out, uint32_t(version));
  putLittleEndian32(out,
                    uint32_t(claimed >= 0 ? claimed : int64_t(tokens.size())));
  out.resize(256 * 4, 0);
  for (uint16_t t : tokens) {
    out.push_back(uint8_t(t));
    out.push_back(uint8_t(t >> 8));
  }
  return out;
}

std::vector<uint16_t> countingTokens(size_t n) {
  std::vector<uint16_t> t(n);
  for (size_t i = 0; i < n; ++i)
    t[i] = uint16_t(1000 + i); // position + 1000: values above 255
  return t;
}

bool contains(const std::string &haystack, const std::string &needle) {
  return haystack.find(needle) != std::string::npos;
}

/// Opens an IDX pair expecting failure; returns the error.
std::string idxError(const std::string &images, const std::string &labels) {
  std::string error;
  auto data = openIdx(images, labels, 1.0f, error);
  EXPECT_EQ(data, nullptr);
  EXPECT_FALSE(error.empty());
  return error;
}

//===----------------------------------------------------------------------===//
// Rng
//===----------------------------------------------------------------------===//

TEST(RngTest, SplitMix64ReferenceValues) {
  // The published SplitMix64 stream for seed 0.
  Rng rng(0);
  EXPECT_EQ(rng.next(), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(rng.next(), 0x6E789E6AA1B965F4ull);
  EXPECT_EQ(rng.next(), 0x06C45D188009454Full);
  EXPECT_EQ(rng.state, 3 * 0x9E3779B97F4A7C15ull);
}

TEST(RngTest, DeterministicAndRestorable) {
  Rng a(42), b(42), c(43);
  for (int i = 0; i < 100; ++i) {
    uint64_t x = a.next();
    EXPECT_EQ(x, b.next());
    EXPECT_NE(x, c.next());
  }
  Rng saved = a;
  double u = a.uniform(), n = a.normal();
  uint64_t k = a.below(17);
  Rng restored(saved.state);
  EXPECT_EQ(restored.uniform(), u);
  EXPECT_EQ(restored.normal(), n);
  EXPECT_EQ(restored.below(17), k);
}

TEST(RngTest, MixSeed) {
  EXPECT_EQ(mixSeed(7, "shuffle"), mixSeed(7, "shuffle"));
  EXPECT_NE(mixSeed(7, "shuffle"), mixSeed(7, "example"));
  EXPECT_NE(mixSeed(7, "shuffle"), mixSeed(8, "shuffle"));
  EXPECT_NE(mixSeed(7, ""), uint64_t(7));
  EXPECT_NE(mixSeed(0, uint64_t(0)), uint64_t(0));
  std::set<uint64_t> seen;
  for (uint64_t v = 0; v < 1000; ++v)
    seen.insert(mixSeed(123, v));
  EXPECT_EQ(seen.size(), 1000u);
}

TEST(RngTest, UniformAndBelow) {
  Rng rng(1);
  double sum = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    double u = rng.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / n, 0.5, 0.01);

  std::vector<int> counts(10, 0);
  for (int i = 0; i < n; ++i) {
    uint64_t k = rng.below(10);
    ASSERT_LT(k, 10u);
    ++counts[k];
  }
  for (int c : counts)
    EXPECT_NEAR(c, n / 10, n / 10 * 0.05);
  EXPECT_EQ(rng.below(1), 0u);
  // A bound just over half of 2^64 rejects nearly half the draws: still fine.
  uint64_t big = (uint64_t(1) << 63) + 1;
  for (int i = 0; i < 100; ++i)
    ASSERT_LT(rng.below(big), big);
}

TEST(RngTest, NormalMoments) {
  Rng rng(2024);
  const int n = 100000;
  double sum = 0, sumSq = 0, sumFourth = 0;
  for (int i = 0; i < n; ++i) {
    double x = rng.normal();
    ASSERT_TRUE(std::isfinite(x));
    sum += x;
    sumSq += x * x;
    sumFourth += x * x * x * x;
  }
  double mean = sum / n;
  double variance = sumSq / n - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.02);
  EXPECT_NEAR(variance, 1.0, 0.03);
  EXPECT_NEAR(sumFourth / n, 3.0, 0.15); // kurtosis of a normal
}

/// The normal transform's own logarithm and cosine (ScalarOps.h, single
/// IEEE operations, so that the GPU's gtc_init draws the same bits) agree
/// with the C library's to a few units in the last place, over the whole
/// range the draws take: log on (0, 1] from 2^-53 up, cos(2 pi u) on [0, 1).
TEST(RngTest, OwnLogAndCosine) {
  double worstLog = 0, worstCos = 0;
  Rng rng(5);
  for (int i = 0; i < 200000; ++i) {
    // Uniform draws, and values spread over every binade down to 2^-53.
    double u = i % 2 ? rng.uniform()
                     : std::ldexp(1.0 + rng.uniform(), -1 - (i / 2) % 53);
    double x = 1.0 - u > 0 ? 1.0 - u : 1.0;
    double l = std::log(x);
    if (l != 0)
      worstLog = std::max(worstLog,
                          std::fabs(gtc_scalar::rng_log(x) - l) / std::fabs(l));
    else
      EXPECT_EQ(gtc_scalar::rng_log(x), 0.0);
    worstCos =
        std::max(worstCos, std::fabs(gtc_scalar::rng_cos_turns(u) -
                                     std::cos(6.283185307179586477 * u)));
  }
  EXPECT_LT(worstLog, 1e-15);
  // cos(2 pi u) near its zeros: the C library's argument 2 pi u is itself
  // rounded (an error of up to 2^-51 in the angle).
  EXPECT_LT(worstCos, 1e-15);
  EXPECT_EQ(gtc_scalar::rng_cos_turns(0.0), 1.0);
  EXPECT_EQ(gtc_scalar::rng_cos_turns(0.5), -1.0);
  EXPECT_EQ(gtc_scalar::rng_cos_turns(0.25), 0.0);
}

/// The draws' bits are pinned: every compiler (g++, and clang for the
/// sanitizer build) and the GPU (gtc-gpu-check, bit for bit against
/// initParameters) must compute these values, which any change of the
/// transform would move (the initial parameters of every model with it).
TEST(RngTest, InitDrawsArePinned) {
  auto bits = [](double v) {
    uint64_t b;
    std::memcpy(&b, &v, 8);
    return b;
  };
  const uint64_t seed = mixSeed(1337, "transformer.wte.weight");
  EXPECT_EQ(bits(gtc_scalar::init_value(2, 0.0, 0.02, seed, 0)),
            0x3F9CCEF1167674B0ull);
  EXPECT_EQ(bits(gtc_scalar::init_value(2, 0.0, 0.02, seed, 123456789)),
            0x3F6B632F0EA410D3ull);
  EXPECT_EQ(bits(gtc_scalar::init_value(3, -0.1, 0.1, seed, 7)),
            0xBFB39C228FB50EEAull);
  EXPECT_EQ(gtc_scalar::init_value(1, 0.5, 0.0, seed, 9), 0.5);
  EXPECT_EQ(gtc_scalar::init_value(0, 0.5, 0.0, seed, 9), 0.0);
  // Element i takes draws 2 i and 2 i + 1 of its parameter's generator,
  // as Rng::normal does.
  Rng rng(seed);
  rng.skip(2 * 41);
  EXPECT_EQ(bits(0.02 * rng.normal()),
            bits(gtc_scalar::init_value(2, 0.0, 0.02, seed, 41)));
}

//===----------------------------------------------------------------------===//
// IDX
//===----------------------------------------------------------------------===//

TEST(DataTest, IdxRawAndGzip) {
  ScratchDir scratch;
  const std::string &dir = scratch.path;
  Bytes images = idxImages(5, 3, 2), labels = idxLabels(5);
  writeFile(dir + "/img", images);
  writeFile(dir + "/lbl", labels);
  // Compression is detected by content: these names say nothing.
  writeGzip(dir + "/img-compressed", images);
  writeGzip(dir + "/lbl.raw", labels);
  writeFile(dir + "/img-raw.gz", images);

  const std::pair<std::string, std::string> pairs[] = {
      {"/img", "/lbl"},
      {"/img-compressed", "/lbl.raw"},
      {"/img-raw.gz", "/lbl.raw"}};
  for (const auto &[img, lbl] : pairs) {
    SCOPED_TRACE(img + " " + lbl);
    std::string error;
    auto data = openIdx(dir + img, dir + lbl, 0.5f, error);
    ASSERT_NE(data, nullptr) << error;
    EXPECT_EQ(data->size(), 5);
    ExampleSpec in = data->inputSpec(), out = data->labelSpec();
    EXPECT_EQ(in.dtype, DType::F32);
    EXPECT_EQ(in.shape, std::vector<int64_t>{6});
    EXPECT_EQ(in.elements(), 6);
    EXPECT_EQ(out.dtype, DType::I32);
    EXPECT_TRUE(out.shape.empty());
    EXPECT_EQ(out.elements(), 1);
    EXPECT_TRUE(contains(data->describe(), "5 images 3x2")) << data->describe();
    for (uint32_t i = 0; i < 5; ++i) {
      float pixels[6];
      int32_t label = -1;
      data->read(i, nullptr, pixels, &label);
      for (uint32_t k = 0; k < 6; ++k)
        EXPECT_EQ(pixels[k], 0.5f * float(pixelValue(i, k)));
      EXPECT_EQ(label, int32_t(i % 10 + (i == 3 ? 240 : 0)));
    }
    // The largest label, found when opened (the images hold no ids).
    EXPECT_EQ(data->largestLabelId(), 243);
    EXPECT_EQ(data->largestInputId(), -1);
  }
}

TEST(DataTest, IdxErrors) {
  ScratchDir scratch;
  const std::string &dir = scratch.path;
  Bytes images = idxImages(4, 2, 2), labels = idxLabels(4);
  writeFile(dir + "/img", images);
  writeFile(dir + "/lbl", labels);

  std::string error = idxError(dir + "/missing", dir + "/lbl");
  EXPECT_EQ(error,
            "cannot open '" + dir + "/missing': No such file or directory");
  error = idxError(dir + "/img", dir + "/missing-labels");
  EXPECT_TRUE(contains(error, "missing-labels")) << error;

  Bytes bad = images;
  bad[0] = 0x12, bad[1] = 0x34, bad[2] = 0x56, bad[3] = 0x78;
  writeFile(dir + "/bad-magic", bad);
  error = idxError(dir + "/bad-magic", dir + "/lbl");
  EXPECT_EQ(error, dir + "/bad-magic: not an IDX image file (magic "
                         "0x12345678, expected 0x00000803)");

  // A gzip file compressed twice is still gzip after one decompression.
  writeGzip(dir + "/once.gz", images);
  writeGzip(dir + "/twice.gz", readFile(dir + "/once.gz"));
  error = idxError(dir + "/twice.gz", dir + "/lbl");
  EXPECT_TRUE(contains(error, "twice.gz: not an IDX image file (magic 0x1f8b"))
      << error;

  error = idxError(dir + "/lbl", dir + "/img");
  EXPECT_TRUE(contains(error, "swapped")) << error;

  bad = images;
  bad[2] = 0x0D; // float elements
  writeFile(dir + "/float", bad);
  error = idxError(dir + "/float", dir + "/lbl");
  EXPECT_TRUE(contains(error, "float")) << error;
  EXPECT_TRUE(contains(error, "not supported")) << error;

  bad = images;
  bad[3] = 2; // two dimensions
  writeFile(dir + "/rank2", bad);
  error = idxError(dir + "/rank2", dir + "/lbl");
  EXPECT_TRUE(contains(error, "2 dimensions")) << error;

  bad = images;
  bad.pop_back();
  writeFile(dir + "/short", bad);
  error = idxError(dir + "/short", dir + "/lbl");
  EXPECT_TRUE(contains(error, dir + "/short: truncated")) << error;
  EXPECT_TRUE(contains(error, "4 images of 2x2 (32 bytes), file has 31"))
      << error;

  bad = images;
  bad.push_back(0);
  bad.push_back(0);
  writeFile(dir + "/long", bad);
  error = idxError(dir + "/long", dir + "/lbl");
  EXPECT_TRUE(contains(error, "2 bytes of unexpected data")) << error;

  writeFile(dir + "/lbl3", idxLabels(3));
  error = idxError(dir + "/img", dir + "/lbl3");
  EXPECT_TRUE(contains(error, "4 images")) << error;
  EXPECT_TRUE(contains(error, dir + "/lbl3 has 3 labels")) << error;

  writeFile(dir + "/empty", {});
  error = idxError(dir + "/empty", dir + "/lbl");
  EXPECT_TRUE(contains(error, "empty: not an IDX image file")) << error;

  writeFile(dir + "/none", idxImages(0, 2, 2));
  error = idxError(dir + "/none", dir + "/lbl");
  EXPECT_TRUE(contains(error, "contains no images")) << error;

  // A header that claims an enormous file must not make us allocate it.
  bad = idxImages(1, 1, 1);
  bad[4] = bad[5] = bad[6] = bad[7] = 0xFF; // 4294967295 images
  writeFile(dir + "/huge", bad);
  error = idxError(dir + "/huge", dir + "/lbl");
  EXPECT_TRUE(contains(error, "huge: truncated")) << error;
  bad[8] = bad[9] = bad[10] = bad[11] = 0xFF; // of 4294967295x1 pixels
  writeFile(dir + "/huge", bad);
  error = idxError(dir + "/huge", dir + "/lbl");
  EXPECT_TRUE(contains(error, "too large")) << error;

  error = idxError(dir, dir + "/lbl");
  EXPECT_TRUE(contains(error, "Is a directory")) << error;
}

TEST(DataTest, IdxTruncatedAtEveryLength) {
  ScratchDir scratch;
  const std::string &dir = scratch.path;
  Bytes images = idxImages(3, 2, 3);
  writeFile(dir + "/lbl", idxLabels(3));
  writeGzip(dir + "/full.gz", images);
  Bytes compressed = readFile(dir + "/full.gz");
  for (size_t n = 0; n < images.size(); ++n) {
    writeFile(dir + "/cut", Bytes(images.begin(), images.begin() + n));
    std::string error = idxError(dir + "/cut", dir + "/lbl");
    EXPECT_TRUE(contains(error, dir + "/cut: ")) << error;
  }
  for (size_t n = 0; n < compressed.size(); ++n) {
    writeFile(dir + "/cut.gz",
              Bytes(compressed.begin(), compressed.begin() + n));
    std::string error = idxError(dir + "/cut.gz", dir + "/lbl");
    EXPECT_TRUE(contains(error, "cut.gz")) << n << ": " << error;
  }
  // Corrupt compressed data (the CRC no longer matches).
  Bytes flipped = compressed;
  flipped[flipped.size() - 6] ^= 0xFF;
  writeFile(dir + "/crc.gz", flipped);
  std::string error = idxError(dir + "/crc.gz", dir + "/lbl");
  EXPECT_TRUE(contains(error, "gzip")) << error;
}

TEST(DataTest, FashionMnist) {
  const std::string dir = "/usr/share/datasets/fashion-mnist/";
  struct stat st;
  if (::stat((dir + "train-images-idx3-ubyte.gz").c_str(), &st) != 0)
    GTEST_SKIP() << "Fashion-MNIST is not installed in " << dir;
  std::string error;
  auto train = openIdx(dir + "train-images-idx3-ubyte.gz",
                       dir + "train-labels-idx1-ubyte.gz", 1.0f / 255, error);
  ASSERT_NE(train, nullptr) << error;
  EXPECT_EQ(train->size(), 60000);
  EXPECT_EQ(train->inputSpec().shape, std::vector<int64_t>{784});
  EXPECT_TRUE(contains(train->describe(), "60000 images 28x28"));
  std::vector<float> image(784);
  int32_t label = -1;
  train->read(0, nullptr, image.data(), &label);
  EXPECT_EQ(label, 9); // an ankle boot
  float hi = *std::max_element(image.begin(), image.end());
  float lo = *std::min_element(image.begin(), image.end());
  EXPECT_GE(lo, 0.0f);
  EXPECT_LE(hi, 1.0f);
  EXPECT_GT(hi, 0.5f);

  auto test = openIdx(dir + "t10k-images-idx3-ubyte.gz",
                      dir + "t10k-labels-idx1-ubyte.gz", 1.0f / 255, error);
  ASSERT_NE(test, nullptr) << error;
  EXPECT_EQ(test->size(), 10000);
  // Images and labels of different sets do not match.
  EXPECT_EQ(openIdx(dir + "train-images-idx3-ubyte.gz",
                    dir + "t10k-labels-idx1-ubyte.gz", 1.0f, error),
            nullptr);
  EXPECT_TRUE(contains(error, "60000 images")) << error;
}

//===----------------------------------------------------------------------===//
// Tokens and text
//===----------------------------------------------------------------------===//

TEST(DataTest, TokenWindows) {
  ScratchDir scratch;
  const std::string &dir = scratch.path;
  const size_t count = 50;
  writeFile(dir + "/tok.bin", tokenFile(countingTokens(count)));
  std::string error;
  auto data = openTokens(dir + "/tok.bin", 8, error);
  ASSERT_NE(data, nullptr) << error;
  EXPECT_EQ(data->size(), (50 - 1) / 8);
  EXPECT_EQ(data->inputSpec().dtype, DType::I32);
  EXPECT_EQ(data->inputSpec().shape, std::vector<int64_t>{8});
  EXPECT_EQ(data->labelSpec().dtype, DType::I32);
  EXPECT_EQ(data->labelSpec().shape, std::vector<int64_t>{8});

  // Without a generator, example i starts at i * seq.
  for (int64_t i = 0; i < data->size(); ++i) {
    int32_t in[8], out[8];
    data->read(i, nullptr, in, out);
    for (int k = 0; k < 8; ++k) {
      EXPECT_EQ(in[k], 1000 + i * 8 + k);
      EXPECT_EQ(out[k], 1000 + i * 8 + k + 1);
    }
  }
  // With one, the start is uniform over every window that fits.
  std::set<int32_t> starts;
  Rng rng(5);
  for (int n = 0; n < 2000; ++n) {
    int32_t in[8], out[8];
    data->read(0, &rng, in, out);
    int32_t s = in[0] - 1000;
    ASSERT_GE(s, 0);
    ASSERT_LE(s, int32_t(count) - 8 - 1);
    for (int k = 0; k < 8; ++k) {
      ASSERT_EQ(in[k], 1000 + s + k);
      ASSERT_EQ(out[k], 1000 + s + k + 1);
    }
    starts.insert(s);
  }
  EXPECT_EQ(starts.size(), count - 8); // every start 0..41 was drawn
  // The same generator state gives the same window.
  int32_t a[8], b[8], la[8], lb[8];
  Rng r1(99), r2(99);
  data->read(3, &r1, a, la);
  data->read(3, &r2, b, lb);
  EXPECT_EQ(0, std::memcmp(a, b, sizeof a));
  EXPECT_EQ(0, std::memcmp(la, lb, sizeof la));

  // The smallest file that works: seq + 1 tokens, one example.
  writeFile(dir + "/min.bin", tokenFile(countingTokens(9)));
  data = openTokens(dir + "/min.bin", 8, error);
  ASSERT_NE(data, nullptr) << error;
  EXPECT_EQ(data->size(), 1);
}

TEST(DataTest, TokenErrors) {
  ScratchDir scratch;
  const std::string &dir = scratch.path;
  auto tokensError = [&](const std::string &name, const Bytes &bytes,
                         int64_t seq = 4) {
    writeFile(dir + "/" + name, bytes);
    std::string error;
    EXPECT_EQ(openTokens(dir + "/" + name, seq, error), nullptr) << name;
    EXPECT_TRUE(contains(error, dir + "/" + name)) << error;
    return error;
  };
  auto tokens = countingTokens(20);
  EXPECT_TRUE(contains(tokensError("magic", tokenFile(tokens, 12345)),
                       "not a token file (magic 12345, expected 20240520)"));
  EXPECT_TRUE(contains(tokensError("version", tokenFile(tokens, 20240520, 2)),
                       "version 2 is not supported"));
  EXPECT_TRUE(
      contains(tokensError("short", tokenFile(tokens, 20240520, 1, 21)),
               "truncated: header says 21 tokens (1066 bytes), file has 1064"));
  EXPECT_TRUE(contains(tokensError("long", tokenFile(tokens, 20240520, 1, 19)),
                       "2 bytes of unexpected data after 19 tokens"));
  EXPECT_TRUE(contains(tokensError("few", tokenFile(tokens), 20),
                       "has 20 tokens, fewer than seq + 1 = 21"));
  EXPECT_TRUE(contains(tokensError("seq", tokenFile(tokens), 0),
                       "seq must be positive"));
  EXPECT_TRUE(
      contains(tokensError("header", Bytes(100, 0)), "not a token file"));
  Bytes truncatedHeader = tokenFile(tokens);
  truncatedHeader.resize(500);
  EXPECT_TRUE(contains(tokensError("header2", truncatedHeader), "truncated"));
  EXPECT_TRUE(
      contains(tokensError("neg", tokenFile(tokens, 20240520, 1, 0x80000000)),
               "corrupt"));

  writeGzip(dir + "/tok.gz", tokenFile(tokens));
  std::string error;
  EXPECT_EQ(openTokens(dir + "/tok.gz", 4, error), nullptr);
  EXPECT_TRUE(contains(error, "gzip")) << error;
  EXPECT_EQ(openTokens(dir + "/nothing", 4, error), nullptr);
  EXPECT_EQ(error,
            "cannot open '" + dir + "/nothing': No such file or directory");

  // Truncated anywhere: always an error. (Every length near the ends of the
  // magic, the header and the data; a sample of the rest.)
  Bytes full = tokenFile(tokens);
  std::set<size_t> lengths;
  for (size_t n = 0; n < full.size(); n += 17)
    lengths.insert(n);
  for (size_t n = 0; n < 16; ++n)
    lengths.insert({n, 1016 + n, full.size() - 1 - n});
  for (size_t n : lengths) {
    writeFile(dir + "/cut", Bytes(full.begin(), full.begin() + n));
    EXPECT_EQ(openTokens(dir + "/cut", 4, error), nullptr) << n;
  }
}

TEST(DataTest, TextWindows) {
  ScratchDir scratch;
  const std::string &dir = scratch.path;
  std::string text = "hello, world\n\xff\x80 the end";
  writeFile(dir + "/t.txt", Bytes(text.begin(), text.end()));
  std::string error;
  auto data = openText(dir + "/t.txt", 4, error);
  ASSERT_NE(data, nullptr) << error;
  EXPECT_EQ(data->size(), int64_t(text.size() - 1) / 4);
  EXPECT_EQ(data->inputSpec().shape, std::vector<int64_t>{4});
  for (int64_t i = 0; i < data->size(); ++i) {
    int32_t in[4], out[4];
    data->read(i, nullptr, in, out);
    for (int k = 0; k < 4; ++k) {
      EXPECT_EQ(in[k], int32_t(uint8_t(text[i * 4 + k])));
      EXPECT_EQ(out[k], int32_t(uint8_t(text[i * 4 + k + 1])));
    }
  }
  int32_t in[4], out[4];
  data->read(3, nullptr, in, out); // "\xff\x80 t" -> bytes, not signed chars
  EXPECT_EQ(in[1], 0xff);
  EXPECT_EQ(in[2], 0x80);
  // The largest id of the whole file, inputs and labels alike: '\xff'.
  EXPECT_EQ(data->largestInputId(), 0xff);
  EXPECT_EQ(data->largestLabelId(), 0xff);

  Rng rng(3);
  for (int n = 0; n < 200; ++n) {
    data->read(0, &rng, in, out);
    for (int k = 0; k + 1 < 4; ++k)
      EXPECT_EQ(out[k], in[k + 1]);
  }

  writeFile(dir + "/short.txt", {'a', 'b', 'c', 'd'});
  EXPECT_EQ(openText(dir + "/short.txt", 4, error), nullptr);
  EXPECT_TRUE(contains(error, "short.txt: has 4 bytes, fewer than seq + 1 = 5"))
      << error;
  writeFile(dir + "/empty.txt", {});
  EXPECT_EQ(openText(dir + "/empty.txt", 1, error), nullptr);
  EXPECT_TRUE(contains(error, "has 0 bytes")) << error;
  EXPECT_NE(openText(dir + "/short.txt", 3, error), nullptr) << error;
  EXPECT_EQ(openText(dir + "/nope.txt", 3, error), nullptr);
  EXPECT_EQ(error,
            "cannot open '" + dir + "/nope.txt': No such file or directory");
}

//===----------------------------------------------------------------------===//
// Loader
//===----------------------------------------------------------------------===//

/// Example i: input {i, a random draw or -1}, label 10 * i.
class CountingDataset : public Dataset {
public:
  explicit CountingDataset(int64_t n) : n(n) {}
  int64_t size() const override { return n; }
  ExampleSpec inputSpec() const override { return {DType::I32, {2}}; }
  ExampleSpec labelSpec() const override { return {DType::I32, {}}; }
  void read(int64_t index, Rng *random, void *input,
            void *label) const override {
    auto *in = static_cast<int32_t *>(input);
    in[0] = int32_t(index);
    in[1] = random ? int32_t(random->below(1000000)) : -1;
    *static_cast<int32_t *>(label) = int32_t(index * 10);
  }
  std::string describe() const override { return "counting"; }

private:
  int64_t n;
};

struct Batch {
  std::vector<int32_t> input, label;
  bool operator==(const Batch &o) const {
    return input == o.input && label == o.label;
  }
};

Batch fetch(const Loader &loader, int64_t epoch, int64_t b) {
  Batch batch;
  int64_t n = loader.batchSize(b);
  batch.input.assign(size_t(n) * 2, -7);
  batch.label.assign(size_t(n), -7);
  loader.fill(epoch, b, batch.input.data(), batch.label.data());
  return batch;
}

TEST(LoaderTest, InOrderWithPartialLastBatch) {
  CountingDataset data(10);
  Loader loader(data, 4, 1, /*shuffle=*/false, /*dropLast=*/false);
  ASSERT_EQ(loader.batchesPerEpoch(), 3);
  EXPECT_EQ(loader.batchSize(0), 4);
  EXPECT_EQ(loader.batchSize(2), 2);
  EXPECT_EQ(loader.batchSize(3), 0);
  for (int64_t b = 0; b < 3; ++b) {
    Batch batch = fetch(loader, 0, b);
    for (int64_t i = 0; i < loader.batchSize(b); ++i) {
      EXPECT_EQ(batch.input[2 * i], b * 4 + i);
      EXPECT_EQ(batch.input[2 * i + 1], -1); // no generator
      EXPECT_EQ(batch.label[i], (b * 4 + i) * 10);
    }
  }
  // The same in every epoch.
  EXPECT_EQ(fetch(loader, 0, 1), fetch(loader, 5, 1));

  Loader dropping(data, 4, 1, false, /*dropLast=*/true);
  EXPECT_EQ(dropping.batchesPerEpoch(), 2);
  EXPECT_EQ(dropping.batchSize(1), 4);
  EXPECT_EQ(dropping.batchSize(2), 0);
  Loader exact(data, 5, 1, false, true);
  EXPECT_EQ(exact.batchesPerEpoch(), 2);
  Loader tooBig(data, 11, 1, false, true);
  EXPECT_EQ(tooBig.batchesPerEpoch(), 0);
  Loader oneBatch(data, 11, 1, false, false);
  EXPECT_EQ(oneBatch.batchesPerEpoch(), 1);
  EXPECT_EQ(oneBatch.batchSize(0), 10);
}

std::vector<int32_t> epochIndices(const Loader &loader, int64_t epoch) {
  std::vector<int32_t> indices;
  for (int64_t b = 0; b < loader.batchesPerEpoch(); ++b) {
    Batch batch = fetch(loader, epoch, b);
    for (size_t i = 0; i < batch.label.size(); ++i) {
      EXPECT_EQ(batch.label[i], batch.input[2 * i] * 10);
      EXPECT_GE(batch.input[2 * i + 1], 0); // a generator was supplied
      indices.push_back(batch.input[2 * i]);
    }
  }
  return indices;
}

TEST(LoaderTest, ShuffleIsASeededPermutation) {
  CountingDataset data(103);
  Loader loader(data, 8, 1234, /*shuffle=*/true, /*dropLast=*/false);
  ASSERT_EQ(loader.batchesPerEpoch(), 13);
  EXPECT_EQ(loader.batchSize(12), 103 - 12 * 8);

  std::vector<int32_t> e0 = epochIndices(loader, 0);
  std::vector<int32_t> sorted = e0;
  std::sort(sorted.begin(), sorted.end());
  for (int32_t i = 0; i < 103; ++i)
    ASSERT_EQ(sorted[size_t(i)], i);
  std::vector<int32_t> identity(sorted);
  EXPECT_NE(e0, identity);

  std::vector<int32_t> e1 = epochIndices(loader, 1);
  EXPECT_NE(e0, e1); // a new order each epoch
  std::sort(e1.begin(), e1.end());
  EXPECT_EQ(e1, identity);

  // Same seed: same batches, including the per-example randomness.
  Loader again(data, 8, 1234, true, false);
  for (int64_t b = 0; b < 13; ++b)
    EXPECT_EQ(fetch(loader, 0, b), fetch(again, 0, b));
  // Another seed: another order.
  Loader other(data, 8, 4321, true, false);
  EXPECT_NE(epochIndices(other, 0), e0);
}

TEST(LoaderTest, BatchDependsOnlyOnSeedEpochAndIndex) {
  CountingDataset data(50);
  Loader a(data, 7, 77, true, true);
  Loader b(data, 7, 77, true, true);
  // `a` visits epochs in a scrambled order (its cache changes); `b` asks
  // directly. The answers agree.
  Batch fromB = fetch(b, 3, 4);
  fetch(a, 0, 0);
  fetch(a, 3, 1);
  fetch(a, 1, 6);
  EXPECT_EQ(fetch(a, 3, 4), fromB);
  EXPECT_EQ(fetch(a, 3, 4), fromB);
  // The random part differs across epochs even for the same example.
  std::vector<int32_t> draws0, draws1;
  for (int64_t epoch : {0, 1}) {
    for (int64_t bi = 0; bi < a.batchesPerEpoch(); ++bi) {
      Batch batch = fetch(a, epoch, bi);
      for (size_t i = 0; i < batch.label.size(); ++i)
        (epoch ? draws1 : draws0).push_back(batch.input[2 * i + 1]);
    }
  }
  EXPECT_NE(draws0, draws1);
  EXPECT_EQ(a.batchesPerEpoch(), 7);
}

TEST(LoaderTest, TokenWindowsThroughTheLoader) {
  ScratchDir scratch;
  const std::string &dir = scratch.path;
  writeFile(dir + "/tok.bin", tokenFile(countingTokens(200)));
  std::string error;
  auto data = openTokens(dir + "/tok.bin", 16, error);
  ASSERT_NE(data, nullptr) << error;
  Loader loader(*data, 4, 9, /*shuffle=*/true, /*dropLast=*/true);
  auto batch = [&](int64_t epoch, int64_t b) {
    std::vector<int32_t> in(4 * 16), out(4 * 16);
    loader.fill(epoch, b, in.data(), out.data());
    for (int i = 0; i < 4; ++i)
      for (int k = 0; k < 16; ++k)
        EXPECT_EQ(out[size_t(i * 16 + k)], in[size_t(i * 16 + k)] + 1);
    return in;
  };
  auto first = batch(0, 0);
  EXPECT_EQ(batch(0, 0), first); // deterministic for a seed
  EXPECT_NE(batch(1, 0), first); // different across epochs
  Loader same(*data, 4, 9, true, true);
  std::vector<int32_t> in(4 * 16), out(4 * 16);
  same.fill(0, 0, in.data(), out.data());
  EXPECT_EQ(in, first);
}

} // namespace
