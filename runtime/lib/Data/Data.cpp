//===- Data.cpp - Datasets and the batch loader ---------------------------===//
//
// IDX files are read through zlib, which decompresses gzip data and passes any
// other file through unchanged, so compression is detected by content (the
// gzip magic 1f 8b), never by the file name. Token and text files are read as
// they are. Every file is validated completely when it is opened and then kept
// in memory, so Dataset::read cannot fail.
//===----------------------------------------------------------------------===//

#include "gtc/Runtime/Data.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

namespace gtc::rt {

int64_t ExampleSpec::elements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

Dataset::~Dataset() = default;

namespace {

/// The most a buffer grows per read: memory is only committed as data
/// arrives, so a corrupt header cannot make us allocate gigabytes.
constexpr uint64_t kChunk = uint64_t(16) << 20;

std::string quoted(const std::string &path) { return "'" + path + "'"; }

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

/// zlib's message without the "<fd:3>: " that gzdopen puts in front.
std::string zlibMessage(const char *message) {
  if (!message || !*message)
    return "unknown error";
  std::string text = message;
  if (text.compare(0, 4, "<fd:") == 0) {
    size_t colon = text.find(": ");
    if (colon != std::string::npos)
      text.erase(0, colon + 2);
  }
  return text;
}

/// Sequential reader of a whole file: through zlib (gzip or plain, detected
/// by content) or with plain read().
class InputFile {
public:
  InputFile() = default;
  InputFile(const InputFile &) = delete;
  InputFile &operator=(const InputFile &) = delete;
  ~InputFile() {
    if (gz)
      gzclose(gz);
    else if (fd >= 0)
      ::close(fd);
  }

  bool open(const std::string &path, bool decompress, std::string &error) {
    this->path = path;
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      error = "cannot open " + quoted(path) + ": " + std::strerror(errno);
      return false;
    }
    struct stat st;
    if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
      error = "cannot read " + quoted(path) + ": " + std::strerror(EISDIR);
      return false;
    }
    // A device or a pipe may never end (/dev/zero): the readers hold whole
    // files, so only a regular file, of a known size, is read.
    if (::fstat(fd, &st) == 0 && !S_ISREG(st.st_mode)) {
      error = "cannot read " + quoted(path) +
              ": not a regular file (a device, pipe or socket); give the "
              "data as a file";
      return false;
    }
    if (!decompress)
      return true;
    gz = gzdopen(fd, "rb");
    if (!gz) {
      error = "cannot open " + quoted(path) + ": out of memory";
      return false;
    }
    gzbuffer(gz, 1 << 18);
    return true;
  }

  /// True when zlib is decompressing (the file starts with the gzip magic).
  bool compressed() const { return gz && gzdirect(gz) == 0; }

  /// Reads up to n bytes, fewer only at the end of the file. Returns the
  /// count, or -1 with `error` set.
  int64_t read(void *buffer, uint64_t n, std::string &error) {
    auto *p = static_cast<unsigned char *>(buffer);
    uint64_t got = 0;
    while (got < n) {
      uint64_t want = std::min<uint64_t>(n - got, uint64_t(1) << 30);
      if (gz) {
        int r = gzread(gz, p + got, static_cast<unsigned>(want));
        int code = Z_OK;
        const char *message = gzerror(gz, &code);
        if (r < 0 || code != Z_OK) {
          if (code == Z_ERRNO)
            error = "cannot read " + quoted(path) + ": " + std::strerror(errno);
          else
            error = path + ": corrupt or truncated gzip data (zlib: " +
                    zlibMessage(message) + "); download the file again";
          return -1;
        }
        got += static_cast<uint64_t>(r);
        if (static_cast<uint64_t>(r) < want)
          break;
      } else {
        ssize_t r = ::read(fd, p + got, static_cast<size_t>(want));
        if (r < 0) {
          if (errno == EINTR)
            continue;
          error = "cannot read " + quoted(path) + ": " + std::strerror(errno);
          return -1;
        }
        if (r == 0)
          break;
        got += static_cast<uint64_t>(r);
      }
    }
    return static_cast<int64_t>(got);
  }

  /// Reads `expected` bytes into `out` (resized to hold them, in elements of
  /// T), growing it only as data arrives. `got` is the number of bytes read:
  /// less than `expected` if the file ended early.
  template <typename T>
  bool readInto(std::vector<T> &out, uint64_t expected, uint64_t &got,
                std::string &error) {
    got = 0;
    out.clear();
    while (got < expected) {
      // Grow geometrically from 64 KiB up to kChunk per step.
      uint64_t step =
          std::min(std::max<uint64_t>(got, uint64_t(1) << 16), kChunk);
      uint64_t want = std::min(expected - got, step);
      out.resize((got + want + sizeof(T) - 1) / sizeof(T));
      int64_t r = read(reinterpret_cast<unsigned char *>(out.data()) + got,
                       want, error);
      if (r < 0)
        return false;
      got += static_cast<uint64_t>(r);
      if (static_cast<uint64_t>(r) < want)
        break;
    }
    out.resize((got + sizeof(T) - 1) / sizeof(T));
    out.shrink_to_fit();
    return true;
  }

  /// Reads the `dataBytes` a `headerBytes` header promised into `out` and
  /// checks that the file ends right there. `contents` names what the header
  /// promised ("21 tokens") for the messages.
  template <typename T>
  bool readBody(std::vector<T> &out, uint64_t headerBytes, uint64_t dataBytes,
                const std::string &contents, std::string &error) {
    const std::string uncompressed = compressed() ? " (uncompressed)" : "";
    const uint64_t expectedTotal = headerBytes + dataBytes;
    uint64_t dataGot = 0;
    if (!readInto(out, dataBytes, dataGot, error))
      return false;
    if (dataGot < dataBytes) {
      error = path + ": truncated: header says " + contents + " (" +
              std::to_string(expectedTotal) + " bytes), file has " +
              std::to_string(headerBytes + dataGot) + " bytes" + uncompressed +
              "; download the file again";
      return false;
    }
    int64_t extra = countRest(error);
    if (extra < 0)
      return false;
    if (extra > 0) {
      error = path + ": " + std::to_string(extra) +
              " bytes of unexpected data after " + contents + " (expected " +
              std::to_string(expectedTotal) + " bytes, file has " +
              std::to_string(expectedTotal + uint64_t(extra)) + uncompressed +
              ")";
      return false;
    }
    return true;
  }

  /// Reads everything left; returns the byte count, or -1 with `error` set.
  int64_t countRest(std::string &error) {
    std::vector<unsigned char> buffer(1 << 16);
    int64_t total = 0;
    while (true) {
      int64_t r = read(buffer.data(), buffer.size(), error);
      if (r < 0)
        return -1;
      total += r;
      if (static_cast<size_t>(r) < buffer.size())
        return total;
    }
  }

private:
  std::string path;
  int fd = -1;
  gzFile gz = nullptr;
};

uint32_t bigEndian32(const unsigned char *p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 |
         uint32_t(p[3]);
}

int32_t littleEndian32(const unsigned char *p) {
  return static_cast<int32_t>(uint32_t(p[0]) | uint32_t(p[1]) << 8 |
                              uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24);
}

bool hostIsLittleEndian() {
  uint16_t probe = 1;
  unsigned char first;
  std::memcpy(&first, &probe, 1);
  return first == 1;
}

const char *idxTypeName(unsigned type) {
  switch (type) {
  case 0x08:
    return "unsigned byte";
  case 0x09:
    return "signed byte";
  case 0x0B:
    return "short";
  case 0x0C:
    return "int";
  case 0x0D:
    return "float";
  case 0x0E:
    return "double";
  default:
    return "unknown";
  }
}

/// The contents of one IDX file: dims and the u8 data after the header.
struct IdxContents {
  std::vector<uint32_t> dims;
  std::vector<uint8_t> data;
};

/// Reads and validates an IDX file of unsigned bytes with `rank` dimensions
/// (3 for images, 1 for labels).
bool readIdx(const std::string &path, unsigned rank, IdxContents &out,
             std::string &error) {
  const bool images = rank == 3;
  const char *what = images ? "image" : "label";
  const uint32_t expectedMagic = 0x800 | rank;
  const uint32_t otherMagic = images ? 0x801 : 0x803;

  InputFile in;
  if (!in.open(path, /*decompress=*/true, error))
    return false;
  const std::string uncompressed = in.compressed() ? " (uncompressed)" : "";

  unsigned char header[16];
  const uint64_t headerBytes = 4 + 4 * uint64_t(rank);
  int64_t got = in.read(header, headerBytes, error);
  if (got < 0)
    return false;
  if (got < 4) {
    error = path + ": not an IDX " + what + " file (only " +
            std::to_string(got) + " bytes" + uncompressed +
            "; an IDX file starts with a 4-byte magic number)";
    return false;
  }

  uint32_t magic = bigEndian32(header);
  if (magic != expectedMagic) {
    if (magic == otherMagic) {
      error = path + ": this is an IDX " + (images ? "label" : "image") +
              " file (magic " + hex32(magic) + "), expected an " + what +
              " file (" + hex32(expectedMagic) +
              "); are the images and labels swapped?";
    } else if ((magic >> 16) != 0) {
      error = path + ": not an IDX " + what + " file (magic " + hex32(magic) +
              ", expected " + hex32(expectedMagic) + ")";
    } else if (((magic >> 8) & 0xFF) != 0x08) {
      unsigned type = (magic >> 8) & 0xFF;
      char buf[8];
      std::snprintf(buf, sizeof buf, "0x%02x", type);
      error = path + ": IDX element type " + buf + " (" + idxTypeName(type) +
              ") is not supported; " + what +
              "s must be unsigned bytes (magic " + hex32(expectedMagic) + ")";
    } else {
      error = path + ": IDX file has " + std::to_string(magic & 0xFF) +
              " dimensions, but an " + what + " file has " +
              std::to_string(rank) +
              (images ? " (count, rows, columns)" : " (count)") + " (magic " +
              hex32(magic) + ", expected " + hex32(expectedMagic) + ")";
    }
    return false;
  }
  if (static_cast<uint64_t>(got) < headerBytes) {
    error = path + ": truncated: the IDX header needs " +
            std::to_string(headerBytes) + " bytes, file has " +
            std::to_string(got) + uncompressed;
    return false;
  }

  out.dims.clear();
  for (unsigned i = 0; i < rank; ++i)
    out.dims.push_back(bigEndian32(header + 4 + 4 * i));
  if (out.dims[0] == 0) {
    error = path + ": contains no " + what + "s (count 0 in the header)";
    return false;
  }
  std::string shape = std::to_string(out.dims[0]) + " " + what + "s";
  uint64_t dataBytes = out.dims[0];
  if (images) {
    if (out.dims[1] == 0 || out.dims[2] == 0) {
      error = path + ": images have zero size (" + std::to_string(out.dims[1]) +
              "x" + std::to_string(out.dims[2]) + " in the header)";
      return false;
    }
    shape += " of " + std::to_string(out.dims[1]) + "x" +
             std::to_string(out.dims[2]);
    uint64_t pixels = uint64_t(out.dims[1]) * out.dims[2];
    if (pixels > uint64_t(INT32_MAX) ||
        __builtin_mul_overflow(dataBytes, pixels, &dataBytes) ||
        dataBytes > uint64_t(INT64_MAX) - headerBytes) {
      error = path + ": header claims " + shape +
              ", which is too large to be real; the file is corrupt";
      return false;
    }
  }
  return in.readBody(out.data, headerBytes, dataBytes, shape, error);
}

class IdxDataset final : public Dataset {
public:
  IdxDataset(std::string imagesFile, std::string labelsFile,
             IdxContents imageData, IdxContents labelData, float scale)
      : imagesPath(std::move(imagesFile)), labelsPath(std::move(labelsFile)),
        count(imageData.dims[0]), rows(imageData.dims[1]),
        cols(imageData.dims[2]), pixels(std::move(imageData.data)),
        labels(std::move(labelData.data)), scale(scale),
        largestLabel(labels.empty()
                         ? -1
                         : *std::max_element(labels.begin(), labels.end())) {}

  int64_t size() const override { return count; }
  ExampleSpec inputSpec() const override { return {DType::F32, {rows * cols}}; }
  ExampleSpec labelSpec() const override { return {DType::I32, {}}; }

  void read(int64_t index, Rng *, void *input, void *label) const override {
    const int64_t n = rows * cols;
    const uint8_t *src = pixels.data() + index * n;
    float *dst = static_cast<float *>(input);
    for (int64_t i = 0; i < n; ++i)
      dst[i] = static_cast<float>(src[i]) * scale;
    int32_t value = labels[static_cast<size_t>(index)];
    std::memcpy(label, &value, sizeof value);
  }

  std::string describe() const override {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", static_cast<double>(scale));
    return std::to_string(count) + " images " + std::to_string(rows) + "x" +
           std::to_string(cols) + " from " + imagesPath + " (labels from " +
           labelsPath + ", scale " + buf + ")";
  }

  int64_t largestLabelId() const override { return largestLabel; }

private:
  std::string imagesPath, labelsPath;
  int64_t count, rows, cols;
  std::vector<uint8_t> pixels;
  std::vector<uint8_t> labels;
  float scale;
  int64_t largestLabel;
};

/// Windows of seq + 1 consecutive tokens over a token sequence.
template <typename T> class WindowDataset final : public Dataset {
public:
  WindowDataset(std::vector<T> tokens, int64_t count, int64_t seq,
                std::string description)
      : tokens(std::move(tokens)), count(count), seq(seq),
        description(std::move(description)),
        largest(count > 0 ? *std::max_element(this->tokens.begin(),
                                              this->tokens.begin() + count)
                          : -1) {}

  int64_t size() const override { return (count - 1) / seq; }
  ExampleSpec inputSpec() const override { return {DType::I32, {seq}}; }
  ExampleSpec labelSpec() const override { return {DType::I32, {seq}}; }

  void read(int64_t index, Rng *random, void *input,
            void *label) const override {
    int64_t start =
        random ? static_cast<int64_t>(random->below(uint64_t(count - seq)))
               : index * seq;
    auto *in = static_cast<int32_t *>(input);
    auto *out = static_cast<int32_t *>(label);
    const T *src = tokens.data() + start;
    for (int64_t i = 0; i < seq; ++i) {
      in[i] = static_cast<int32_t>(src[i]);
      out[i] = static_cast<int32_t>(src[i + 1]);
    }
  }

  std::string describe() const override {
    return description + " (seq " + std::to_string(seq) + ", " +
           std::to_string(size()) + " examples per epoch)";
  }

  int64_t largestInputId() const override { return largest; }
  int64_t largestLabelId() const override { return largest; }

private:
  std::vector<T> tokens;
  int64_t count;
  int64_t seq;
  std::string description;
  int64_t largest;
};

bool checkSeq(const std::string &path, int64_t seq, std::string &error) {
  if (seq > 0)
    return true;
  error = path + ": seq must be positive (got " + std::to_string(seq) + ")";
  return false;
}

std::string tooFewTokens(const std::string &path, int64_t have,
                         const char *unit, int64_t seq) {
  return path + ": has " + std::to_string(have) + " " + unit +
         ", fewer than seq + 1 = " + std::to_string(seq + 1) +
         " needed for one example; use a smaller seq or a larger file";
}

constexpr int32_t kTokenMagic = 20240520;
constexpr int32_t kTokenVersion = 1;
constexpr uint64_t kTokenHeaderBytes = 256 * 4;

} // namespace

std::unique_ptr<Dataset> openIdx(const std::string &images,
                                 const std::string &labels, float scale,
                                 std::string &error) {
  IdxContents imageData, labelData;
  if (!readIdx(images, 3, imageData, error) ||
      !readIdx(labels, 1, labelData, error))
    return nullptr;
  if (imageData.dims[0] != labelData.dims[0]) {
    error = images + ": has " + std::to_string(imageData.dims[0]) +
            " images, but " + labels + " has " +
            std::to_string(labelData.dims[0]) +
            " labels; use the images and labels of the same set";
    return nullptr;
  }
  // Labels are unsigned bytes, so every one is in 0..255 by construction.
  return std::make_unique<IdxDataset>(images, labels, std::move(imageData),
                                      std::move(labelData), scale);
}

std::unique_ptr<Dataset> openTokens(const std::string &path, int64_t seq,
                                    std::string &error) {
  if (!checkSeq(path, seq, error))
    return nullptr;
  InputFile in;
  if (!in.open(path, /*decompress=*/false, error))
    return nullptr;

  unsigned char header[kTokenHeaderBytes];
  int64_t got = in.read(header, kTokenHeaderBytes, error);
  if (got < 0)
    return nullptr;
  if (got >= 2 && header[0] == 0x1f && header[1] == 0x8b) {
    error = path + ": is gzip-compressed; decompress it first (gunzip)";
    return nullptr;
  }
  if (got >= 4 && littleEndian32(header) != kTokenMagic) {
    error = path + ": not a token file (magic " +
            std::to_string(littleEndian32(header)) + ", expected " +
            std::to_string(kTokenMagic) + ")";
    return nullptr;
  }
  if (static_cast<uint64_t>(got) < kTokenHeaderBytes) {
    error = path + ": truncated: a token file starts with a " +
            std::to_string(kTokenHeaderBytes) + "-byte header, file has " +
            std::to_string(got) + " bytes";
    return nullptr;
  }
  int32_t version = littleEndian32(header + 4);
  if (version != kTokenVersion) {
    error = path + ": token file version " + std::to_string(version) +
            " is not supported (expected " + std::to_string(kTokenVersion) +
            ": uint16 tokens)";
    return nullptr;
  }
  int32_t count = littleEndian32(header + 8);
  if (count < 0) {
    error = path + ": header says " + std::to_string(count) +
            " tokens; the file is corrupt";
    return nullptr;
  }

  std::vector<uint16_t> tokens;
  if (!in.readBody(tokens, kTokenHeaderBytes, uint64_t(count) * 2,
                   std::to_string(count) + " tokens", error))
    return nullptr;
  if (count < seq + 1) {
    error = tooFewTokens(path, count, "tokens", seq);
    return nullptr;
  }
  if (!hostIsLittleEndian())
    for (uint16_t &t : tokens)
      t = static_cast<uint16_t>((t >> 8) | (t << 8));
  return std::make_unique<WindowDataset<uint16_t>>(
      std::move(tokens), count, seq,
      std::to_string(count) + " tokens from " + path);
}

std::unique_ptr<Dataset> openText(const std::string &path, int64_t seq,
                                  std::string &error) {
  if (!checkSeq(path, seq, error))
    return nullptr;
  InputFile in;
  if (!in.open(path, /*decompress=*/false, error))
    return nullptr;
  std::vector<uint8_t> bytes;
  uint64_t got = 0;
  if (!in.readInto(bytes, UINT64_MAX, got, error))
    return nullptr;
  int64_t count = static_cast<int64_t>(got);
  if (count < seq + 1) {
    error = tooFewTokens(path, count, "bytes", seq);
    return nullptr;
  }
  return std::make_unique<WindowDataset<uint8_t>>(
      std::move(bytes), count, seq,
      std::to_string(count) + " bytes of text from " + path);
}

//===----------------------------------------------------------------------===//
// Loader
//===----------------------------------------------------------------------===//

Loader::Loader(const Dataset &data, int64_t batch, uint64_t seed, bool shuffle,
               bool dropLast)
    : data(data), batch(batch), seed(seed), shuffle(shuffle),
      dropLast(dropLast) {}

int64_t Loader::batchesPerEpoch() const {
  if (batch <= 0)
    return 0;
  int64_t n = data.size();
  return dropLast ? n / batch : (n + batch - 1) / batch;
}

int64_t Loader::batchSize(int64_t b) const {
  if (b < 0 || b >= batchesPerEpoch())
    return 0;
  return std::min(batch, data.size() - b * batch);
}

std::vector<int64_t> Loader::order(int64_t epoch) const {
  const int64_t n = data.size();
  std::vector<int64_t> result(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    result[static_cast<size_t>(i)] = i;
  if (shuffle) {
    Rng rng(mixSeed(mixSeed(seed, "shuffle"), static_cast<uint64_t>(epoch)));
    for (int64_t i = n - 1; i > 0; --i) {
      int64_t j = static_cast<int64_t>(rng.below(static_cast<uint64_t>(i + 1)));
      std::swap(result[static_cast<size_t>(i)], result[static_cast<size_t>(j)]);
    }
  }
  return result;
}

void Loader::fill(int64_t epoch, int64_t b, void *input, void *label) const {
  fill(epoch, b, 0, batchSize(b), input, label);
}

void Loader::fill(int64_t epoch, int64_t b, int64_t first, int64_t count,
                  void *input, void *label) const {
  count = std::min(count, batchSize(b) - first);
  if (count <= 0)
    return;
  if (cachedEpoch != epoch || cachedOrder.size() != size_t(data.size())) {
    cachedOrder = order(epoch);
    cachedEpoch = epoch;
  }
  // Both example dtypes (F32, I32) are 4 bytes wide.
  const size_t inputBytes = size_t(data.inputSpec().elements()) * 4;
  const size_t labelBytes = size_t(data.labelSpec().elements()) * 4;
  auto *in = static_cast<unsigned char *>(input);
  auto *out = static_cast<unsigned char *>(label);
  const uint64_t epochSeed =
      mixSeed(mixSeed(seed, "example"), static_cast<uint64_t>(epoch));
  for (int64_t i = 0; i < count; ++i) {
    const int64_t position = b * batch + first + i; // index within the epoch
    const int64_t example = cachedOrder[static_cast<size_t>(position)];
    void *inputSlot = in + size_t(i) * inputBytes;
    void *labelSlot = out + size_t(i) * labelBytes;
    if (shuffle) {
      Rng rng(mixSeed(epochSeed, static_cast<uint64_t>(position)));
      data.read(example, &rng, inputSlot, labelSlot);
    } else {
      data.read(example, nullptr, inputSlot, labelSlot);
    }
  }
}

} // namespace gtc::rt
