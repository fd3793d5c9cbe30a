//===- Lexer.h - Tokens of the .gt language ---------------------*- C++ -*-===//

#ifndef GTC_FRONTEND_LEXER_H
#define GTC_FRONTEND_LEXER_H

#include "gtc/Frontend/AST.h"
#include "llvm/ADT/StringRef.h"
#include <cstdint>
#include <string>

namespace gtc {

/// The kinds of token of the .gt language.
enum class TokenKind {
  Eof,
  Error,
  Identifier,
  Number, ///< 12, 1e-3, 0.5, 12GiB (a size: a whole number of bytes)
  String, ///< "text" with \" \\ \n \t escapes
  LBrace,
  RBrace,
  LParen,
  RParen,
  LBracket,
  RBracket,
  Comma,
  Colon,
  Equal,
  Plus,
  Minus,
  Star,
  Slash,
  // Keywords.
  KwModel,
  KwTrain,
  KwInput,
  KwLabel,
  KwParam,
  KwLet,
  KwDef,
  KwReturn,
  KwRepeat,
  KwAs,
};

/// Describes a token kind for diagnostics, e.g. "'{'" or "a name".
const char *describe(TokenKind kind);

/// One token with its location and, for literals, its value.
struct Token {
  TokenKind kind = TokenKind::Eof;
  Loc loc;
  llvm::StringRef text;  ///< The source spelling.
  std::string value;     ///< The decoded string literal, or the error text.
  double number = 0;     ///< The value of a number.
  bool isInteger = false; ///< Whether the number is a whole number.
  int64_t integer = 0;   ///< The value of an integer number.
};

/// Splits a .gt source buffer into tokens. Never fails hard: bad input gives
/// an Error token whose `value` says what is wrong.
class Lexer {
public:
  /// A UTF-8 byte-order mark at the start is skipped (columns count from
  /// what follows it).
  explicit Lexer(llvm::StringRef buffer)
      : buffer(buffer), pos(buffer.starts_with("\xEF\xBB\xBF") ? 3 : 0) {}

  /// Returns the next token; Eof at the end (and forever after).
  Token next();

private:
  char peek(size_t ahead = 0) const {
    return pos + ahead < buffer.size() ? buffer[pos + ahead] : '\0';
  }
  bool atEnd() const { return pos >= buffer.size(); }
  void advance();
  void skipSpaceAndComments();
  Token make(TokenKind kind, size_t start, Loc loc);
  Token error(Loc loc, size_t start, std::string message);
  Token lexNumber(size_t start, Loc loc);
  Token lexString(size_t start, Loc loc);

  llvm::StringRef buffer;
  size_t pos = 0;
  unsigned line = 1, col = 1;
};

} // namespace gtc

#endif // GTC_FRONTEND_LEXER_H
