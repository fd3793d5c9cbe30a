//===- Checkpoint.h - safetensors files, written atomically -----*- C++ -*-===//
//
// The safetensors format (https://huggingface.co/docs/safetensors): an 8-byte
// little-endian header length N, N bytes of JSON mapping each tensor name to
// {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the
// end of the header) plus an optional "__metadata__" map of strings, then the
// tensor bytes. Python's `safetensors` and `json` modules read it.
//===----------------------------------------------------------------------===//

#ifndef GTC_RUNTIME_CHECKPOINT_H
#define GTC_RUNTIME_CHECKPOINT_H

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace gtc::rt {

/// One tensor of a checkpoint. dtype is a safetensors name: "F32", "F64",
/// "I32", "I64", "U8", "BF16", "F16".
struct StoredTensor {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

/// Writes `tensors` (header keys sorted; data laid out largest element size
/// first, as the reference writer does) and `metadata` to `path` atomically:
/// a temporary file beside it, fsync, rename over `path`, fsync of the
/// directory. On failure `path` is untouched, the temporary is removed, and
/// `error` names the file and the OS error.
bool writeSafetensors(const std::string &path,
                      const std::vector<StoredTensor> &tensors,
                      const std::map<std::string, std::string> &metadata,
                      std::string &error);

/// Reads a safetensors file, validating everything (header size and JSON,
/// dtypes, shapes against byte counts, offsets inside the file and not
/// overlapping). On failure returns false with `error` naming the file and
/// what is wrong (e.g. "truncated: header says 1024 bytes, file has 512").
bool readSafetensors(const std::string &path,
                     std::vector<StoredTensor> &tensors,
                     std::map<std::string, std::string> &metadata,
                     std::string &error);

} // namespace gtc::rt

#endif // GTC_RUNTIME_CHECKPOINT_H
