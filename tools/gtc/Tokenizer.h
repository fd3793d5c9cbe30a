//===- Tokenizer.h - Tokenizers for gtc sample ------------------*- C++ -*-===//
//
// `gtc sample --tokenizer FILE` encodes prompts and decodes what the model
// writes with one of two tokenizers:
//  - GPT-2's byte-level BPE as a Hugging Face tokenizer.json describes it
//    (model.type "BPE": its vocab and merges), read here (Tokenizer.cpp);
//  - a SentencePiece model (Llama-2's tokenizer.model), read by Debian's
//    libsentencepiece where gtc was built with it (SentencePiece.cpp).
//===----------------------------------------------------------------------===//

#ifndef GTC_TOOLS_TOKENIZER_H
#define GTC_TOOLS_TOKENIZER_H

#include "llvm/ADT/StringRef.h"
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace gtc {

class Tokenizer {
public:
  virtual ~Tokenizer() = default;
  /// Reads `path`: a JSON file as a tokenizer.json, anything else as a
  /// SentencePiece model. Null with `error` (naming the file and what is
  /// wrong, or that this gtc was built without libsentencepiece).
  static std::unique_ptr<Tokenizer> load(const std::string &path,
                                         std::string &error);
  /// The ids of `text` (UTF-8). False with `error` when it cannot be
  /// encoded.
  virtual bool encode(const std::string &text, std::vector<int32_t> &ids,
                      std::string &error) const = 0;
  /// The bytes of `ids` (ids the vocabulary lacks decode to nothing).
  virtual std::string decode(const std::vector<int32_t> &ids) const = 0;
  /// Whether the vocabulary has `id` (a model's vocabulary padded past the
  /// tokenizer's, or another model's tokenizer, gives ids it lacks).
  virtual bool has(int32_t id) const = 0;
};

/// The SentencePiece model at `path` (null with `error` if it cannot be
/// read). It encodes as Hugging Face's LlamaTokenizer does: the model's
/// beginning-of-sequence id first, where it has one.
std::unique_ptr<Tokenizer> loadSentencePiece(const std::string &path,
                                             std::string &error);

class BpeTokenizer : public Tokenizer {
public:
  /// The tokenizer.json `text` (read from `path`); null with `error`
  /// (naming the file and what is wrong) if it is not a byte-level BPE
  /// tokenizer.
  static std::unique_ptr<BpeTokenizer>
  parse(llvm::StringRef text, const std::string &path, std::string &error);
  /// GPT-2's pre-tokenization, then the merges in rank order within each
  /// piece. False with `error` when a piece needs a symbol the vocabulary
  /// lacks.
  bool encode(const std::string &text, std::vector<int32_t> &ids,
              std::string &error) const override;
  std::string decode(const std::vector<int32_t> &ids) const override;
  bool has(int32_t id) const override { return tokens_.count(id) != 0; }

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
