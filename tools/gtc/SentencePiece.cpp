//===- SentencePiece.cpp - SentencePiece models for gtc sample -----------===//
//
// Llama-2-style vocabularies come as a SentencePiece model
// (tokenizer.model). gtc reads them through Debian's libsentencepiece
// (libsentencepiece-dev) where the build found it; portable (GTC_STATIC)
// binaries are built without it, as Debian ships it as a shared library only.
//===----------------------------------------------------------------------===//

#include "Tokenizer.h"

#ifdef GTC_HAVE_SENTENCEPIECE
#include <sentencepiece_processor.h>
#endif

using namespace gtc;

#ifdef GTC_HAVE_SENTENCEPIECE
namespace {

class SentencePieceTokenizer : public Tokenizer {
public:
  sentencepiece::SentencePieceProcessor processor;

  bool encode(const std::string &text, std::vector<int32_t> &ids,
              std::string &error) const override {
    std::vector<int> pieces;
    auto status = processor.Encode(text, &pieces);
    if (!status.ok()) {
      error = "SentencePiece cannot encode the prompt: " + status.ToString();
      return false;
    }
    // Hugging Face's LlamaTokenizer (add_bos_token) starts every sequence
    // with <s>; the model was trained on sequences that do.
    if (processor.bos_id() >= 0)
      ids.push_back(processor.bos_id());
    ids.insert(ids.end(), pieces.begin(), pieces.end());
    return true;
  }

  bool has(int32_t id) const override {
    return id >= 0 && id < processor.GetPieceSize();
  }

  std::string decode(const std::vector<int32_t> &ids) const override {
    // Ids past the vocabulary (a model's padded rows) decode to nothing,
    // as in the BPE tokenizer; control ids (<s>, </s>) decode to nothing
    // in SentencePiece itself.
    std::vector<int> known;
    for (int32_t id : ids)
      if (has(id))
        known.push_back(id);
    std::string text;
    if (!processor.Decode(known, &text).ok())
      return "";
    return text;
  }
};

} // namespace

std::unique_ptr<Tokenizer> gtc::loadSentencePiece(const std::string &path,
                                                  std::string &error) {
  auto t = std::make_unique<SentencePieceTokenizer>();
  auto status = t->processor.Load(path);
  if (!status.ok()) {
    error = "the tokenizer '" + path +
            "' is neither a Hugging Face tokenizer.json nor a SentencePiece "
            "model (" +
            status.ToString() + ")";
    return nullptr;
  }
  return t;
}
#else
std::unique_ptr<Tokenizer> gtc::loadSentencePiece(const std::string &path,
                                                  std::string &error) {
  error = "the tokenizer '" + path +
          "' is not a JSON tokenizer.json, so it would be read as a "
          "SentencePiece model, and this gtc was built without "
          "libsentencepiece (install libsentencepiece-dev and rebuild gtc, "
          "or give --prompt-tokens and read the ids it prints)";
  return nullptr;
}
#endif
