//===- Data.h - Datasets and the batch loader -------------------*- C++ -*-===//
//
// Plain C++ (no MLIR). Readers for the data sources of the train block:
//   idx(images, labels, scale:)  IDX files, optionally gzip-compressed (.gz)
//   tokens(path, seq:)           llm.c / nanoGPT token files: a 256 x int32
//                                header (magic 20240520, version 1, token count)
//                                followed by uint16 tokens
//   text(path, seq:)             a plain text file; every byte is a token (0..255)
// and a Loader that shuffles with a seed and cuts batches.
//===----------------------------------------------------------------------===//

#ifndef GTC_RUNTIME_DATA_H
#define GTC_RUNTIME_DATA_H

#include "gtc/Runtime/Rng.h"
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gtc::rt {

/// Element types of tensors. Example tensors are F32 or I32; BF16 and F16
/// appear in plans compiled with precision bf16/fp16 (gt-autocast).
enum class DType { F32, I32, BF16, F16 };

/// Bytes of one element.
inline int dtypeBytes(DType d) {
  return d == DType::BF16 || d == DType::F16 ? 2 : 4;
}
/// Whether elements are floating point.
inline bool isFloat(DType d) { return d != DType::I32; }
/// "f32", "i32", "bf16", "f16".
const char *dtypeName(DType d);
/// A tensor type for messages: "bf16[1001, 784]".
std::string typeText(DType d, const std::vector<int64_t> &shape);
/// The bits of `v` as a BF16 or F16 element, rounded to nearest (ties to
/// even); F16 overflows to infinity beyond 65504 and keeps subnormals.
uint16_t toHalfBits(float v, DType d);
/// The value of BF16 or F16 bits.
float fromHalfBits(uint16_t bits, DType d);

/// The shape of one example's tensor (without the batch dimension).
struct ExampleSpec {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  int64_t elements() const;
};

/// A source of examples. Reading never fails after a successful open (the
/// whole file is validated, then kept in memory).
class Dataset {
public:
  virtual ~Dataset();
  /// Examples per epoch.
  virtual int64_t size() const = 0;
  virtual ExampleSpec inputSpec() const = 0;
  virtual ExampleSpec labelSpec() const = 0;
  /// Writes example `index` (0 <= index < size()) of an epoch. `random`
  /// supplies the randomness of sources that sample (token windows): the
  /// loader passes a generator seeded from (seed, epoch, index), or null for
  /// the deterministic order used in evaluation.
  virtual void read(int64_t index, Rng *random, void *input,
                    void *label) const = 0;
  /// What the data is, for logs: "60000 images 28x28 from train-images...".
  virtual std::string describe() const = 0;
  /// The largest id among the input's (the label's) i32 values, found when
  /// the data was opened (the files store ids unsigned, so none is
  /// negative), or -1 when it holds no ids or the source does not say.
  virtual int64_t largestInputId() const { return -1; }
  virtual int64_t largestLabelId() const { return -1; }
};

/// Opens IDX image and label files (.gz or raw). Images become f32 examples of
/// shape [rows * cols] (flattened) times `scale`; labels become i32 scalars.
/// Returns null and sets `error` (naming the file and the problem) on failure.
std::unique_ptr<Dataset> openIdx(const std::string &images,
                                 const std::string &labels, float scale,
                                 std::string &error);

/// Opens a token file. An example is a window of seq + 1 tokens: the input is
/// tokens [s, s + seq), the label tokens [s + 1, s + seq + 1), both i32 [seq].
/// An epoch has (tokens - 1) / seq examples. With a generator, the start s is
/// uniform in [0, tokens - seq - 1]; without, example i starts at i * seq.
std::unique_ptr<Dataset> openTokens(const std::string &path, int64_t seq,
                                    std::string &error);

/// Opens a text file as byte tokens, with windows as in openTokens.
std::unique_ptr<Dataset> openText(const std::string &path, int64_t seq,
                                  std::string &error);

/// Cuts a dataset into batches, shuffling each epoch with the seed.
class Loader {
public:
  /// `shuffle`: permute the examples each epoch (Fisher-Yates, seeded from
  /// (seed, epoch)) and give sampling sources a generator. `dropLast`: skip a
  /// final partial batch.
  Loader(const Dataset &data, int64_t batch, uint64_t seed, bool shuffle,
         bool dropLast);

  int64_t batchesPerEpoch() const;
  /// Examples in batch `b` (batch, or fewer for a final partial batch).
  int64_t batchSize(int64_t b) const;
  /// Writes batch `b` of `epoch`: batchSize(b) examples, one after another,
  /// into `input` and `label`. The result depends only on (seed, epoch, b).
  void fill(int64_t epoch, int64_t b, void *input, void *label) const;
  /// Writes examples [first, first + count) of that batch: one micro-batch
  /// of gradient accumulation, the same examples a whole batch would hold.
  void fill(int64_t epoch, int64_t b, int64_t first, int64_t count,
            void *input, void *label) const;

private:
  std::vector<int64_t> order(int64_t epoch) const;

  const Dataset &data;
  int64_t batch;
  uint64_t seed;
  bool shuffle;
  bool dropLast;
  mutable int64_t cachedEpoch = -1;
  mutable std::vector<int64_t> cachedOrder;
};

} // namespace gtc::rt

#endif // GTC_RUNTIME_DATA_H
