//===- Tokenizer.h - Hugging Face byte-level BPE for gtc sample -*- C++ -*-===//
//
// `gtc sample --tokenizer tokenizer.json`: GPT-2's byte-level BPE as a
// Hugging Face tokenizer.json describes it (model.type "BPE": its vocab and
// merges), to encode prompts and decode what the model writes.
//===----------------------------------------------------------------------===//

#ifndef GTC_TOOLS_TOKENIZER_H
#define GTC_TOOLS_TOKENIZER_H

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace gtc {

class BpeTokenizer {
public:
  /// Reads a tokenizer.json; null with `error` (naming the file and what
  /// is wrong) if it is not a byte-level BPE tokenizer.
  static std::unique_ptr<BpeTokenizer> load(const std::string &path,
                                            std::string &error);
  /// The ids of `text` (UTF-8): GPT-2's pre-tokenization, then the merges
  /// in rank order within each piece. False with `error` when a piece
  /// needs a symbol the vocabulary lacks.
  bool encode(const std::string &text, std::vector<int32_t> &ids,
              std::string &error) const;
  /// The bytes of `ids` (ids the vocabulary lacks decode to nothing).
  std::string decode(const std::vector<int32_t> &ids) const;

private:
  std::map<std::string, int32_t> vocab_;
  std::map<int32_t, std::string> tokens_;
  std::map<std::pair<std::string, std::string>, int> ranks_;
  /// byte -> its printable stand-in (UTF-8), and back.
  std::string byteSymbol_[256];
  std::map<std::string, uint8_t> symbolByte_;
};

} // namespace gtc

#endif // GTC_TOOLS_TOKENIZER_H
