//===- Checkpoint.cpp - safetensors files, written atomically -------------===//
//
// Writing follows the reference implementation (huggingface/safetensors): the
// header is compact JSON padded with spaces to a multiple of 8 bytes, so the
// data starts 8-byte aligned, and the data holds the tensors back to back with
// no gaps, largest element size first (then by name), so every tensor is
// aligned to its element size. The JSON keys are sorted.
//
// Reading uses a small strict parser for exactly the JSON that a safetensors
// header may hold and checks the same rules as the reference reader: a header
// of at most 100 MB in valid UTF-8, known dtypes, byte counts that match the
// shapes, and offsets that cover the data section exactly (no overlaps, no
// gaps, nothing after the last tensor). Corrupt input gives an error, never a
// crash or an allocation larger than the file.
//===----------------------------------------------------------------------===//

#include "gtc/Runtime/Checkpoint.h"
#include "gtc/Runtime/Files.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <set>
#include <string_view>
#include <sys/stat.h>
#include <unistd.h>

namespace gtc::rt {

namespace {

constexpr uint64_t kMaxHeaderBytes = 100'000'000;
/// PyTorch's limit; anything deeper is corruption, and the cap keeps a
/// malicious header from allocating much.
constexpr size_t kMaxRank = 64;

/// Element sizes of the safetensors dtypes (all but the sub-byte ones).
size_t dtypeSize(std::string_view dtype) {
  static const struct {
    const char *name;
    size_t size;
  } kTypes[] = {{"BOOL", 1},    {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1},
                {"F8_E4M3", 1}, {"I16", 2}, {"U16", 2}, {"F16", 2},
                {"BF16", 2},    {"I32", 4}, {"U32", 4}, {"F32", 4},
                {"F64", 8},     {"I64", 8}, {"U64", 8}};
  for (const auto &t : kTypes)
    if (dtype == t.name)
      return t.size;
  return 0;
}

std::string quoted(const std::string &s) { return "'" + s + "'"; }

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

/// Bytes for `shape` of elements of `size` bytes; false on a negative
/// dimension or overflow.
bool byteCount(const std::vector<int64_t> &shape, size_t size,
               uint64_t &bytes) {
  uint64_t n = size;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, static_cast<uint64_t>(d), &n))
      return false;
  }
  if (n > uint64_t(INT64_MAX))
    return false;
  bytes = n;
  return true;
}

bool validUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t len;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (s.size() - i < len)
      return false;
    for (size_t k = 1; k < len; ++k) {
      unsigned char d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80)
        return false;
      cp = cp << 6 | (d & 0x3F);
    }
    // Reject overlong forms, surrogates and code points past U+10FFFF.
    static const uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
      return false;
    i += len;
  }
  return true;
}

void appendJsonString(std::string &out, std::string_view s) {
  out += '"';
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\b':
      out += "\\b";
      break;
    case '\f':
      out += "\\f";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\r':
      out += "\\r";
      break;
    case '\t':
      out += "\\t";
      break;
    default:
      if (c < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        out += buf;
      } else {
        out += ch;
      }
    }
  }
  out += '"';
}

/// A JSON object of `members`, whose values are already JSON text.
std::string jsonObject(const std::map<std::string, std::string> &members) {
  std::string out = "{";
  for (const auto &[key, value] : members) {
    if (out.size() > 1)
      out += ',';
    appendJsonString(out, key);
    out += ':';
    out += value;
  }
  out += '}';
  return out;
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

bool writeAll(int fd, const void *data, size_t n) {
  const auto *p = static_cast<const unsigned char *>(data);
  while (n > 0) {
    ssize_t r = ::write(fd, p, std::min<size_t>(n, size_t(1) << 30));
    if (r < 0) {
      if (errno == EINTR)
        continue;
      return false;
    }
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Reading: a strict parser for safetensors headers
//===----------------------------------------------------------------------===//

struct TensorEntry {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

class HeaderParser {
public:
  HeaderParser(std::string_view text) : text(text) {}

  /// Parses the whole header; on failure returns false and `message` says
  /// what is wrong (without the file name).
  bool parse(std::vector<TensorEntry> &tensors,
             std::map<std::string, std::string> &metadata) {
    std::set<std::string> seen;
    skipSpace();
    if (!expect('{', "the header must be a JSON object"))
      return false;
    bool ok = parseMembers([&](const std::string &key, size_t keyAt) {
      if (!seen.insert(key).second)
        return failAt(keyAt, "duplicate key \"" + key + "\"");
      if (key == "__metadata__")
        return parseMetadata(metadata);
      TensorEntry entry;
      entry.name = key;
      if (!parseTensor(entry))
        return false;
      tensors.push_back(std::move(entry));
      return true;
    });
    if (!ok)
      return false;
    skipSpace();
    if (pos != text.size())
      return failAt(pos, "unexpected text after the header's JSON object");
    return true;
  }

  std::string message;

private:
  bool failAt(size_t at, const std::string &what) {
    message = "invalid header JSON at byte " + std::to_string(at) + ": " + what;
    return false;
  }
  bool fail(const std::string &what) { return failAt(pos, what); }

  void skipSpace() {
    while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\t' ||
                                 text[pos] == '\n' || text[pos] == '\r'))
      ++pos;
  }
  bool consume(char c) {
    if (pos < text.size() && text[pos] == c) {
      ++pos;
      return true;
    }
    return false;
  }
  bool expect(char c, const char *what) {
    if (consume(c))
      return true;
    if (pos >= text.size())
      return fail(std::string(what) + " (the header ends here)");
    return fail(what);
  }
  bool colon() {
    skipSpace();
    if (!expect(':', "expected ':' after a key"))
      return false;
    skipSpace();
    return true;
  }

  static int hexDigit(char c) {
    if (c >= '0' && c <= '9')
      return c - '0';
    if (c >= 'a' && c <= 'f')
      return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
      return c - 'A' + 10;
    return -1;
  }

  bool parseHex4(uint32_t &value) {
    if (text.size() - pos < 4)
      return fail("incomplete \\u escape");
    value = 0;
    for (int i = 0; i < 4; ++i) {
      int d = hexDigit(text[pos + i]);
      if (d < 0)
        return fail("invalid \\u escape");
      value = value << 4 | uint32_t(d);
    }
    pos += 4;
    return true;
  }

  static void appendUtf8(std::string &out, uint32_t cp) {
    if (cp < 0x80) {
      out += char(cp);
    } else if (cp < 0x800) {
      out += char(0xC0 | (cp >> 6));
      out += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += char(0xE0 | (cp >> 12));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    } else {
      out += char(0xF0 | (cp >> 18));
      out += char(0x80 | ((cp >> 12) & 0x3F));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    }
  }

  /// A JSON string; the text was checked to be valid UTF-8 beforehand.
  bool parseString(std::string &out) {
    if (!expect('"', "expected a string"))
      return false;
    out.clear();
    while (true) {
      if (pos >= text.size())
        return fail("unterminated string");
      char c = text[pos++];
      if (c == '"')
        return true;
      if (static_cast<unsigned char>(c) < 0x20)
        return failAt(pos - 1, "control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos >= text.size())
        return fail("unterminated string");
      char e = text[pos++];
      switch (e) {
      case '"':
        out += '"';
        break;
      case '\\':
        out += '\\';
        break;
      case '/':
        out += '/';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'u': {
        uint32_t cp = 0;
        if (!parseHex4(cp))
          return false;
        if (cp >= 0xDC00 && cp <= 0xDFFF)
          return failAt(pos - 6, "unpaired surrogate in a \\u escape");
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          uint32_t low = 0;
          if (text.size() - pos < 2 || text[pos] != '\\' ||
              text[pos + 1] != 'u')
            return failAt(pos - 6, "unpaired surrogate in a \\u escape");
          pos += 2;
          if (!parseHex4(low))
            return false;
          if (low < 0xDC00 || low > 0xDFFF)
            return failAt(pos - 6, "unpaired surrogate in a \\u escape");
          cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        }
        appendUtf8(out, cp);
        break;
      }
      default:
        return failAt(pos - 1, std::string("invalid escape '\\") + e + "'");
      }
    }
  }

  /// A non-negative integer that fits in int64.
  bool parseInteger(uint64_t &value) {
    size_t start = pos;
    if (pos < text.size() && text[pos] == '-')
      return fail("negative numbers are not allowed here");
    if (pos >= text.size() || text[pos] < '0' || text[pos] > '9')
      return fail("expected a non-negative integer");
    value = 0;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      uint64_t digit = uint64_t(text[pos] - '0');
      if (value > (uint64_t(INT64_MAX) - digit) / 10)
        return failAt(start, "number too large");
      value = value * 10 + digit;
      ++pos;
    }
    if (text[start] == '0' && pos - start > 1)
      return failAt(start, "numbers may not have leading zeros");
    if (pos < text.size() &&
        (text[pos] == '.' || text[pos] == 'e' || text[pos] == 'E'))
      return fail("numbers must be integers");
    return true;
  }

  /// `[int, int, ...]`, at most `maxCount` elements.
  bool parseIntegerArray(std::vector<uint64_t> &out, size_t maxCount,
                         const char *what) {
    if (!expect('[', (std::string("expected an array for ") + what).c_str()))
      return false;
    out.clear();
    skipSpace();
    if (consume(']'))
      return true;
    while (true) {
      if (out.size() == maxCount)
        return fail(std::string(what) + " has more than " +
                    std::to_string(maxCount) + " elements");
      uint64_t v;
      if (!parseInteger(v))
        return false;
      out.push_back(v);
      skipSpace();
      if (consume(']'))
        return true;
      if (!expect(',', "expected ',' or ']' in an array"))
        return false;
      skipSpace();
    }
  }

  /// Parses the members of an object whose '{' was just consumed, through
  /// its '}': `member(key, keyAt)` parses each value.
  template <typename F> bool parseMembers(F member) {
    skipSpace();
    if (consume('}'))
      return true;
    while (true) {
      std::string key;
      size_t keyAt = pos;
      if (!parseString(key) || !colon() || !member(key, keyAt))
        return false;
      skipSpace();
      if (consume('}'))
        return true;
      if (!expect(',', "expected ',' or '}' after a value"))
        return false;
      skipSpace();
    }
  }

  bool parseMetadata(std::map<std::string, std::string> &metadata) {
    if (!expect('{', "\"__metadata__\" must be an object of strings"))
      return false;
    return parseMembers([&](const std::string &key, size_t keyAt) {
      std::string value;
      if (pos < text.size() && text[pos] != '"')
        return fail("values in \"__metadata__\" must be strings");
      if (!parseString(value))
        return false;
      if (!metadata.emplace(key, std::move(value)).second)
        return failAt(keyAt, "duplicate key in \"__metadata__\"");
      return true;
    });
  }

  bool parseTensor(TensorEntry &entry) {
    const std::string context = "tensor \"" + entry.name + "\": ";
    if (!expect('{', (context + "expected an object").c_str()))
      return false;
    bool haveDtype = false, haveShape = false, haveOffsets = false;
    bool ok = parseMembers([&](const std::string &key, size_t keyAt) {
      bool *have = nullptr;
      if (key == "dtype") {
        have = &haveDtype;
      } else if (key == "shape") {
        have = &haveShape;
      } else if (key == "data_offsets") {
        have = &haveOffsets;
      } else {
        return failAt(keyAt, context + "unexpected key \"" + key +
                                 "\" (expected dtype, shape, data_offsets)");
      }
      if (*have)
        return failAt(keyAt, context + "duplicate key \"" + key + "\"");
      *have = true;
      if (key == "dtype") {
        if (!parseString(entry.dtype))
          return false;
      } else if (key == "shape") {
        std::vector<uint64_t> dims;
        if (!parseIntegerArray(dims, kMaxRank, "shape"))
          return false;
        entry.shape.assign(dims.begin(), dims.end());
      } else {
        std::vector<uint64_t> offsets;
        size_t at = pos;
        if (!parseIntegerArray(offsets, 2, "data_offsets"))
          return false;
        if (offsets.size() != 2)
          return failAt(at, context + "data_offsets must be [begin, end]");
        entry.begin = offsets[0];
        entry.end = offsets[1];
      }
      return true;
    });
    if (!ok)
      return false;
    if (!haveDtype || !haveShape || !haveOffsets)
      return fail(context + "missing " +
                  (!haveDtype   ? "dtype"
                   : !haveShape ? "shape"
                                : "data_offsets"));
    return true;
  }

  std::string_view text;
  size_t pos = 0;
};

bool readAt(int fd, void *buffer, size_t n, uint64_t offset) {
  auto *p = static_cast<unsigned char *>(buffer);
  while (n > 0) {
    ssize_t r = ::pread(fd, p, std::min<size_t>(n, size_t(1) << 30),
                        static_cast<off_t>(offset));
    if (r < 0) {
      if (errno == EINTR)
        continue;
      return false;
    }
    if (r == 0) {
      errno = 0; // the file shrank while we read it
      return false;
    }
    p += r;
    n -= static_cast<size_t>(r);
    offset += static_cast<uint64_t>(r);
  }
  return true;
}

class FileCloser {
public:
  explicit FileCloser(int fd) : fd(fd) {}
  ~FileCloser() {
    if (fd >= 0)
      ::close(fd);
  }
  FileCloser(const FileCloser &) = delete;
  FileCloser &operator=(const FileCloser &) = delete;

private:
  int fd;
};

} // namespace

bool writeSafetensors(const std::string &path,
                      const std::vector<StoredTensor> &tensors,
                      const std::map<std::string, std::string> &metadata,
                      std::string &error) {
  const std::string prefix = "cannot write " + quoted(path) + ": ";

  // Validate everything before touching the file system.
  std::vector<const StoredTensor *> layout;
  std::set<std::string_view> names;
  for (const StoredTensor &t : tensors) {
    const std::string which = "tensor " + quoted(t.name) + ": ";
    if (t.name == "__metadata__") {
      error = prefix + "\"__metadata__\" is reserved and cannot name a tensor";
      return false;
    }
    if (!validUtf8(t.name)) {
      error = prefix + "a tensor name is not valid UTF-8";
      return false;
    }
    if (!names.insert(t.name).second) {
      error = prefix + "two tensors are named " + quoted(t.name);
      return false;
    }
    size_t size = dtypeSize(t.dtype);
    if (size == 0) {
      error = prefix + which + "unknown dtype " + quoted(t.dtype);
      return false;
    }
    uint64_t expected;
    if (!byteCount(t.shape, size, expected)) {
      error = prefix + which + "invalid shape " + shapeText(t.shape);
      return false;
    }
    if (t.bytes.size() != expected) {
      error = prefix + which + std::to_string(t.bytes.size()) +
              " bytes of data, but " + t.dtype + " " + shapeText(t.shape) +
              " needs " + std::to_string(expected);
      return false;
    }
    layout.push_back(&t);
  }
  for (const auto &[key, value] : metadata) {
    if (!validUtf8(key) || !validUtf8(value)) {
      error = prefix + "metadata " + quoted(key) + " is not valid UTF-8";
      return false;
    }
  }

  // Data layout: larger elements first, then by name, so every tensor is
  // aligned to its element size (the data section starts 8-byte aligned).
  std::sort(layout.begin(), layout.end(),
            [](const StoredTensor *a, const StoredTensor *b) {
              size_t sa = dtypeSize(a->dtype), sb = dtypeSize(b->dtype);
              if (sa != sb)
                return sa > sb;
              return a->name < b->name;
            });
  std::map<std::string, std::string> entries; // key -> JSON value, sorted
  uint64_t offset = 0;
  for (const StoredTensor *t : layout) {
    std::string value = "{\"dtype\":";
    appendJsonString(value, t->dtype);
    value += ",\"shape\":[";
    for (size_t i = 0; i < t->shape.size(); ++i)
      value += (i ? "," : "") + std::to_string(t->shape[i]);
    value += "],\"data_offsets\":[" + std::to_string(offset) + "," +
             std::to_string(offset + t->bytes.size()) + "]}";
    offset += t->bytes.size();
    entries.emplace(t->name, std::move(value));
  }
  if (!metadata.empty()) {
    std::map<std::string, std::string> members;
    for (const auto &[key, text] : metadata)
      appendJsonString(members[key], text);
    entries.emplace("__metadata__", jsonObject(members));
  }
  std::string header = jsonObject(entries);
  header.append((8 - header.size() % 8) % 8, ' ');
  if (header.size() > kMaxHeaderBytes) {
    error = prefix + "the header would be " + std::to_string(header.size()) +
            " bytes, over the 100 MB that readers accept";
    return false;
  }
  unsigned char length[8];
  for (int i = 0; i < 8; ++i)
    length[i] = static_cast<unsigned char>(uint64_t(header.size()) >> (8 * i));

  // Write a temporary file beside `path`, then rename it over `path`.
  const std::string temp = tempPathBeside(path);
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    error =
        prefix + "cannot create " + quoted(temp) + ": " + std::strerror(errno);
    return false;
  }
  // `step` is a verb; the OS error is taken from errno before anything else.
  auto failWith = [&](const char *step, bool renaming = false) {
    int saved = errno;
    if (fd >= 0)
      ::close(fd);
    ::unlink(temp.c_str());
    error = prefix + step + " " + quoted(temp) +
            (renaming ? " to " + quoted(path) : std::string()) + ": " +
            (saved ? std::strerror(saved) : "unknown error");
    return false;
  };
  if (!writeAll(fd, length, sizeof length) ||
      !writeAll(fd, header.data(), header.size()))
    return failWith("writing");
  for (const StoredTensor *t : layout)
    if (!t->bytes.empty() && !writeAll(fd, t->bytes.data(), t->bytes.size()))
      return failWith("writing");
  if (::fsync(fd) != 0)
    return failWith("syncing");
  int closed = ::close(fd);
  fd = -1;
  if (closed != 0)
    return failWith("closing");
  if (::rename(temp.c_str(), path.c_str()) != 0)
    return failWith("renaming", /*renaming=*/true);

  // Make the rename durable. A directory that cannot be opened for reading
  // or a file system without directory fsync is not an error; an I/O error is
  // (the new file is in place but may not survive a crash).
  int dir =
      ::open(directoryOf(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    int synced = ::fsync(dir);
    int saved = errno;
    ::close(dir);
    if (synced != 0 && saved != EINVAL && saved != ENOTSUP && saved != EROFS) {
      error = prefix + "the file was replaced, but syncing its directory " +
              quoted(directoryOf(path)) + " failed: " + std::strerror(saved);
      return false;
    }
  }
  return true;
}

/// The header's tensors against the data section of `dataBytes`: known
/// dtypes, sizes that match their shapes, offsets inside the data, and
/// together the whole of it (no overlaps, no gaps). Empty when they fit,
/// else what is wrong (without the file's name).
std::string checkEntries(const std::vector<TensorEntry> &entries,
                         uint64_t dataBytes) {
  for (const TensorEntry &e : entries) {
    const std::string which = "tensor " + quoted(e.name) + ": ";
    size_t size = dtypeSize(e.dtype);
    if (size == 0) {
      return which + "unknown dtype " + quoted(e.dtype);
    }
    uint64_t expected;
    if (!byteCount(e.shape, size, expected)) {
      return which + "shape " + shapeText(e.shape) + " is too large";
    }
    if (e.end < e.begin) {
      return which + "data_offsets [" + std::to_string(e.begin) + ", " +
             std::to_string(e.end) + "] end before they begin";
    }
    if (e.end - e.begin != expected) {
      return which + "data_offsets [" + std::to_string(e.begin) + ", " +
             std::to_string(e.end) + "] hold " +
             std::to_string(e.end - e.begin) + " bytes, but " + e.dtype + " " +
             shapeText(e.shape) + " needs " + std::to_string(expected);
    }
    if (e.end > dataBytes) {
      return which + "data_offsets [" + std::to_string(e.begin) + ", " +
             std::to_string(e.end) + "] run past the end of the data (" +
             std::to_string(dataBytes) + " bytes); the file is truncated";
    }
  }

  // The tensors must tile the data section: no overlaps, no gaps.
  std::vector<const TensorEntry *> byOffset;
  for (const TensorEntry &e : entries)
    byOffset.push_back(&e);
  std::sort(byOffset.begin(), byOffset.end(),
            [](const TensorEntry *a, const TensorEntry *b) {
              if (a->begin != b->begin)
                return a->begin < b->begin;
              return a->end < b->end;
            });
  uint64_t covered = 0;
  const TensorEntry *previous = nullptr;
  for (const TensorEntry *e : byOffset) {
    if (e->begin < covered) {
      return "tensors " + quoted(previous->name) + " and " + quoted(e->name) +
             " overlap";
    }
    if (e->begin > covered) {
      return "bytes " + std::to_string(covered) + ".." +
             std::to_string(e->begin) + " of the data belong to no tensor";
    }
    covered = e->end;
    previous = e;
  }
  if (covered != dataBytes) {
    return std::to_string(dataBytes - covered) +
           " bytes after the last tensor's data (the header accounts for " +
           std::to_string(covered) + " of " + std::to_string(dataBytes) + ")";
  }
  return "";
}

bool readSafetensors(const std::string &path,
                     std::vector<StoredTensor> &tensors,
                     std::map<std::string, std::string> &metadata,
                     std::string &error) {
  tensors.clear();
  metadata.clear();
  const std::string prefix = path + ": ";

  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    error = "cannot open " + quoted(path) + ": " + std::strerror(errno);
    return false;
  }
  FileCloser closer(fd);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    error = "cannot read " + quoted(path) + ": " + std::strerror(errno);
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    error =
        "cannot read " + quoted(path) + ": " +
        (S_ISDIR(st.st_mode) ? std::strerror(EISDIR) : "not a regular file");
    return false;
  }
  const uint64_t fileSize = static_cast<uint64_t>(st.st_size);
  auto readFailed = [&]() {
    error = "cannot read " + quoted(path) + ": " +
            (errno ? std::strerror(errno) : "the file changed while reading");
    return false;
  };

  if (fileSize < 8) {
    error = prefix + "not a safetensors file: it has " +
            std::to_string(fileSize) +
            " bytes, too few for the 8-byte header length";
    return false;
  }
  unsigned char length[8];
  if (!readAt(fd, length, 8, 0))
    return readFailed();
  uint64_t headerBytes = 0;
  for (int i = 0; i < 8; ++i)
    headerBytes |= uint64_t(length[i]) << (8 * i);
  if (headerBytes > kMaxHeaderBytes) {
    error = prefix + "header length " + std::to_string(headerBytes) +
            " is over the 100 MB limit; not a safetensors file, or corrupt";
    return false;
  }
  if (headerBytes > fileSize - 8) {
    error = prefix + "truncated: header says " + std::to_string(headerBytes) +
            " bytes, file has " + std::to_string(fileSize - 8) +
            " after the 8-byte length";
    return false;
  }
  if (headerBytes == 0) {
    error = prefix + "the header is empty";
    return false;
  }
  std::string header(static_cast<size_t>(headerBytes), '\0');
  if (!readAt(fd, header.data(), header.size(), 8))
    return readFailed();
  if (!validUtf8(header)) {
    error = prefix + "the header is not valid UTF-8; not a safetensors file, "
                     "or corrupt";
    return false;
  }

  std::vector<TensorEntry> entries;
  std::map<std::string, std::string> meta;
  HeaderParser parser(header);
  if (!parser.parse(entries, meta)) {
    error = prefix + parser.message;
    return false;
  }

  const uint64_t dataStart = 8 + headerBytes;
  const uint64_t dataBytes = fileSize - dataStart;
  if (std::string wrong = checkEntries(entries, dataBytes); !wrong.empty()) {
    error = prefix + wrong;
    return false;
  }

  std::sort(entries.begin(), entries.end(),
            [](const TensorEntry &a, const TensorEntry &b) {
              return a.name < b.name;
            });
  std::vector<StoredTensor> result;
  result.reserve(entries.size());
  for (TensorEntry &e : entries) {
    StoredTensor t;
    t.name = std::move(e.name);
    t.dtype = std::move(e.dtype);
    t.shape = std::move(e.shape);
    t.bytes.resize(static_cast<size_t>(e.end - e.begin));
    if (!t.bytes.empty() &&
        !readAt(fd, t.bytes.data(), t.bytes.size(), dataStart + e.begin))
      return readFailed();
    result.push_back(std::move(t));
  }
  tensors = std::move(result);
  metadata = std::move(meta);
  return true;
}

} // namespace gtc::rt
