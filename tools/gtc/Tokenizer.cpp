//===- Tokenizer.cpp - Hugging Face byte-level BPE for gtc sample ---------===//

#include "Tokenizer.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include <algorithm>
#include <climits>

using namespace gtc;

namespace {

/// UTF-8 of code point `cp`.
std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

/// The code points of UTF-8 `text` with their byte offsets (a byte that is
/// not valid UTF-8 counts as one code point of its own).
std::vector<std::pair<uint32_t, size_t>> codePoints(const std::string &text) {
  std::vector<std::pair<uint32_t, size_t>> out;
  for (size_t i = 0; i < text.size();) {
    auto c = static_cast<unsigned char>(text[i]);
    int n = c < 0x80         ? 1
            : (c >> 5) == 6  ? 2
            : (c >> 4) == 14 ? 3
            : (c >> 3) == 30 ? 4
                             : 1;
    if (i + n > text.size())
      n = 1;
    uint32_t cp = n == 1 ? c : c & (0x7F >> n);
    for (int j = 1; j < n; ++j)
      cp = (cp << 6) | (static_cast<unsigned char>(text[i + j]) & 0x3F);
    out.push_back({cp, i});
    i += n;
  }
  return out;
}

bool isSpace(uint32_t c) {
  return c == ' ' || (c >= '\t' && c <= '\r') || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}
bool isNumber(uint32_t c) { return c >= '0' && c <= '9'; }
/// ASCII letters, and every other non-space code point above ASCII (the
/// approximation of \p{L}: non-ASCII punctuation counts as letters).
bool isLetter(uint32_t c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= 0x80 && !isSpace(c));
}

/// GPT-2's pre-tokenization: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+|
/// ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+, as pieces of `text`.
std::vector<std::string> pieces(const std::string &text) {
  auto cps = codePoints(text);
  const size_t n = cps.size();
  auto at = [&](size_t i) { return i < n ? cps[i].first : 0u; };
  auto offset = [&](size_t i) { return i < n ? cps[i].second : text.size(); };
  std::vector<std::string> out;
  size_t i = 0;
  while (i < n) {
    size_t j = i;
    if (at(i) == '\'') {
      for (const char *c : {"s", "t", "re", "ve", "m", "ll", "d"}) {
        size_t k = 0;
        while (c[k] && at(i + 1 + k) == static_cast<unsigned char>(c[k]))
          ++k;
        if (!c[k]) {
          j = i + 1 + k;
          break;
        }
      }
    }
    if (j == i) {
      size_t s = at(i) == ' ' ? i + 1 : i;
      auto run = [&](bool (*cls)(uint32_t)) {
        size_t k = s;
        while (k < n && cls(at(k)))
          ++k;
        return k;
      };
      auto other = [](uint32_t c) {
        return !isSpace(c) && !isLetter(c) && !isNumber(c);
      };
      if (s < n && isLetter(at(s)))
        j = run(isLetter);
      else if (s < n && isNumber(at(s)))
        j = run(isNumber);
      else if (s < n && other(at(s)))
        j = run(other);
    }
    if (j == i) {
      // Whitespace: all of it, but the last if a non-space follows.
      size_t k = i;
      while (k < n && isSpace(at(k)))
        ++k;
      j = k < n && k - i > 1 ? k - 1 : k;
    }
    out.push_back(text.substr(offset(i), offset(j) - offset(i)));
    i = j;
  }
  return out;
}

} // namespace

std::unique_ptr<Tokenizer> Tokenizer::load(const std::string &path,
                                           std::string &error) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer) {
    error = "cannot read the tokenizer '" + path +
            "': " + buffer.getError().message();
    return nullptr;
  }
  // A tokenizer.json is a JSON object; a SentencePiece model is a binary
  // protocol buffer.
  llvm::StringRef text = (*buffer)->getBuffer();
  if (text.ltrim().starts_with("{"))
    return BpeTokenizer::parse(text, path, error);
  return loadSentencePiece(path, error);
}

/// How deep `text`'s arrays and objects nest (outside strings): LLVM's JSON
/// parser recurses once a level, so a file nested a million deep would
/// overflow the stack.
static size_t jsonDepth(llvm::StringRef text) {
  size_t depth = 0, deepest = 0;
  bool inString = false, escaped = false;
  for (char c : text) {
    if (inString) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        inString = false;
    } else if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

std::unique_ptr<BpeTokenizer> BpeTokenizer::parse(llvm::StringRef text,
                                                  const std::string &path,
                                                  std::string &error) {
  // A tokenizer.json nests a few levels (model, vocab, merges' pairs).
  constexpr size_t kMaxDepth = 64;
  if (size_t depth = jsonDepth(text); depth > kMaxDepth) {
    error = "the tokenizer '" + path + "' nests its arrays and objects " +
            std::to_string(depth) + " deep (a tokenizer.json nests a few " +
            "levels, at most " + std::to_string(kMaxDepth) +
            " here); give a Hugging Face tokenizer.json";
    return nullptr;
  }
  llvm::Expected<llvm::json::Value> json = llvm::json::parse(text);
  if (!json) {
    error = "the tokenizer '" + path +
            "' is not JSON: " + llvm::toString(json.takeError());
    return nullptr;
  }
  const llvm::json::Object *root = json->getAsObject();
  const llvm::json::Object *model = root ? root->getObject("model") : nullptr;
  const llvm::json::Object *vocab = model ? model->getObject("vocab") : nullptr;
  const llvm::json::Array *merges = model ? model->getArray("merges") : nullptr;
  if (!model || model->getString("type").value_or("BPE") != "BPE" || !vocab ||
      !merges) {
    error = "the tokenizer '" + path +
            "' is not a Hugging Face BPE tokenizer.json (its model needs "
            "type \"BPE\", a vocab and merges)";
    return nullptr;
  }
  auto t = std::make_unique<BpeTokenizer>();
  for (const auto &[key, value] : *vocab) {
    std::optional<int64_t> id = value.getAsInteger();
    if (!id || *id < 0 || *id > INT32_MAX) {
      error = "the tokenizer '" + path + "': vocab entry '" + key.str() +
              "' has no id";
      return nullptr;
    }
    t->vocab_[key.str()] = static_cast<int32_t>(*id);
    t->tokens_[static_cast<int32_t>(*id)] = key.str();
  }
  if (const llvm::json::Array *added = root->getArray("added_tokens"))
    for (const llvm::json::Value &a : *added)
      if (const llvm::json::Object *o = a.getAsObject())
        if (auto id = o->getInteger("id"))
          if (auto content = o->getString("content"))
            t->tokens_[static_cast<int32_t>(*id)] = content->str();
  int rank = 0;
  for (const llvm::json::Value &m : *merges) {
    std::string a, b;
    if (std::optional<llvm::StringRef> s = m.getAsString()) {
      auto [x, y] = s->split(' ');
      a = x.str(), b = y.str();
    } else if (const llvm::json::Array *pair = m.getAsArray();
               pair && pair->size() == 2 && (*pair)[0].getAsString() &&
               (*pair)[1].getAsString()) {
      a = (*pair)[0].getAsString()->str(), b = (*pair)[1].getAsString()->str();
    }
    if (a.empty() || b.empty()) {
      error = "the tokenizer '" + path + "': merge " + std::to_string(rank) +
              " is not a pair of symbols";
      return nullptr;
    }
    t->ranks_.emplace(std::make_pair(a, b), rank++);
  }
  // GPT-2's bytes_to_unicode: printable bytes stand for themselves, the
  // others for code points from 256 on.
  int next = 0;
  for (int b = 0; b < 256; ++b) {
    bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) ||
                     (b >= 0xAE && b <= 0xFF);
    t->byteSymbol_[b] = utf8(printable ? b : 256 + next++);
    t->symbolByte_[t->byteSymbol_[b]] = static_cast<uint8_t>(b);
  }
  return t;
}

bool BpeTokenizer::encode(const std::string &text, std::vector<int32_t> &ids,
                          std::string &error) const {
  for (const std::string &piece : pieces(text)) {
    std::vector<std::string> symbols;
    for (unsigned char c : piece)
      symbols.push_back(byteSymbol_[c]);
    // Merge the pair of lowest rank until none is left.
    while (symbols.size() > 1) {
      int best = INT_MAX;
      size_t at = 0;
      for (size_t i = 0; i + 1 < symbols.size(); ++i) {
        auto it = ranks_.find({symbols[i], symbols[i + 1]});
        if (it != ranks_.end() && it->second < best)
          best = it->second, at = i;
      }
      if (best == INT_MAX)
        break;
      symbols[at] += symbols[at + 1];
      symbols.erase(symbols.begin() + at + 1);
    }
    for (const std::string &s : symbols) {
      auto it = vocab_.find(s);
      if (it == vocab_.end()) {
        error = "the tokenizer's vocabulary has no symbol '" + s +
                "' (of the prompt's piece '" + piece + "')";
        return false;
      }
      ids.push_back(it->second);
    }
  }
  return true;
}

std::string BpeTokenizer::decode(const std::vector<int32_t> &ids) const {
  std::string out;
  for (int32_t id : ids) {
    auto it = tokens_.find(id);
    if (it == tokens_.end())
      continue;
    const std::string &s = it->second;
    auto cps = codePoints(s);
    for (size_t i = 0; i < cps.size(); ++i) {
      size_t end = i + 1 < cps.size() ? cps[i + 1].second : s.size();
      std::string sym = s.substr(cps[i].second, end - cps[i].second);
      auto b = symbolByte_.find(sym);
      out += b != symbolByte_.end()
                 ? std::string(1, static_cast<char>(b->second))
                 : sym;
    }
  }
  return out;
}
