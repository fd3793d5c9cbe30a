//===- Lexer.cpp - Tokens of the .gt language -----------------------------===//

#include "gtc/Frontend/Lexer.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/Format.h"
#include <cerrno>
#include <cmath>
#include <cstdlib>

using namespace gtc;

const char *gtc::describe(TokenKind kind) {
  switch (kind) {
  case TokenKind::Eof:
    return "the end of the file";
  case TokenKind::Error:
    return "an invalid token";
  case TokenKind::Identifier:
    return "a name";
  case TokenKind::Number:
    return "a number";
  case TokenKind::String:
    return "a string";
  case TokenKind::LBrace:
    return "'{'";
  case TokenKind::RBrace:
    return "'}'";
  case TokenKind::LParen:
    return "'('";
  case TokenKind::RParen:
    return "')'";
  case TokenKind::LBracket:
    return "'['";
  case TokenKind::RBracket:
    return "']'";
  case TokenKind::Comma:
    return "','";
  case TokenKind::Colon:
    return "':'";
  case TokenKind::Equal:
    return "'='";
  case TokenKind::Plus:
    return "'+'";
  case TokenKind::Minus:
    return "'-'";
  case TokenKind::Star:
    return "'*'";
  case TokenKind::Slash:
    return "'/'";
  case TokenKind::KwModel:
    return "'model'";
  case TokenKind::KwTrain:
    return "'train'";
  case TokenKind::KwInput:
    return "'input'";
  case TokenKind::KwLabel:
    return "'label'";
  case TokenKind::KwParam:
    return "'param'";
  case TokenKind::KwLet:
    return "'let'";
  case TokenKind::KwDef:
    return "'def'";
  case TokenKind::KwReturn:
    return "'return'";
  case TokenKind::KwRepeat:
    return "'repeat'";
  case TokenKind::KwAs:
    return "'as'";
  }
  return "a token";
}

void Lexer::advance() {
  if (atEnd())
    return;
  if (buffer[pos] == '\n') {
    ++line;
    col = 1;
  } else {
    ++col;
  }
  ++pos;
}

void Lexer::skipSpaceAndComments() {
  while (!atEnd()) {
    char c = peek();
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == ';') {
      advance();
    } else if (c == '#') {
      while (!atEnd() && peek() != '\n')
        advance();
    } else {
      return;
    }
  }
}

Token Lexer::make(TokenKind kind, size_t start, Loc loc) {
  Token t;
  t.kind = kind;
  t.loc = loc;
  t.text = buffer.slice(start, pos);
  return t;
}

Token Lexer::error(Loc loc, size_t start, std::string message) {
  Token t = make(TokenKind::Error, start, loc);
  t.value = std::move(message);
  return t;
}

static bool isIdentStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static bool isDigit(char c) { return c >= '0' && c <= '9'; }
static bool isIdentChar(char c) { return isIdentStart(c) || isDigit(c); }

Token Lexer::next() {
  skipSpaceAndComments();
  Loc loc{line, col};
  size_t start = pos;
  if (atEnd())
    return make(TokenKind::Eof, start, loc);

  char c = peek();
  if (isIdentStart(c)) {
    while (isIdentChar(peek()) && !atEnd())
      advance();
    Token t = make(TokenKind::Identifier, start, loc);
    t.kind = llvm::StringSwitch<TokenKind>(t.text)
                 .Case("model", TokenKind::KwModel)
                 .Case("train", TokenKind::KwTrain)
                 .Case("input", TokenKind::KwInput)
                 .Case("label", TokenKind::KwLabel)
                 .Case("param", TokenKind::KwParam)
                 .Case("let", TokenKind::KwLet)
                 .Case("def", TokenKind::KwDef)
                 .Case("return", TokenKind::KwReturn)
                 .Case("repeat", TokenKind::KwRepeat)
                 .Case("as", TokenKind::KwAs)
                 .Default(TokenKind::Identifier);
    return t;
  }
  if (isDigit(c) || (c == '.' && isDigit(peek(1))))
    return lexNumber(start, loc);
  if (c == '"')
    return lexString(start, loc);

  advance();
  switch (c) {
  case '{':
    return make(TokenKind::LBrace, start, loc);
  case '}':
    return make(TokenKind::RBrace, start, loc);
  case '(':
    return make(TokenKind::LParen, start, loc);
  case ')':
    return make(TokenKind::RParen, start, loc);
  case '[':
    return make(TokenKind::LBracket, start, loc);
  case ']':
    return make(TokenKind::RBracket, start, loc);
  case ',':
    return make(TokenKind::Comma, start, loc);
  case ':':
    return make(TokenKind::Colon, start, loc);
  case '=':
    return make(TokenKind::Equal, start, loc);
  case '+':
    return make(TokenKind::Plus, start, loc);
  case '-':
    return make(TokenKind::Minus, start, loc);
  case '*':
    return make(TokenKind::Star, start, loc);
  case '/':
    return make(TokenKind::Slash, start, loc);
  default:
    break;
  }
  std::string shown;
  llvm::raw_string_ostream os(shown);
  unsigned char uc = static_cast<unsigned char>(c);
  if (uc >= 0x20 && uc < 0x7f)
    os << "'" << c << "'";
  else
    os << "byte 0x" << llvm::format_hex_no_prefix(uc, 2);
  return error(loc, start,
               "unexpected character " + shown +
                   "; expected a name, a number, a string, an operator "
                   "(+ - * / =), a bracket or punctuation (, :)");
}

Token Lexer::lexNumber(size_t start, Loc loc) {
  bool whole = true;
  while (isDigit(peek()))
    advance();
  if (peek() == '.' && isDigit(peek(1))) {
    whole = false;
    advance();
    while (isDigit(peek()))
      advance();
  }
  if ((peek() == 'e' || peek() == 'E') &&
      (isDigit(peek(1)) ||
       ((peek(1) == '+' || peek(1) == '-') && isDigit(peek(2))))) {
    whole = false;
    advance();
    if (peek() == '+' || peek() == '-')
      advance();
    while (isDigit(peek()))
      advance();
  }
  std::string spelling = buffer.slice(start, pos).str();
  double value = std::strtod(spelling.c_str(), nullptr);
  if (!std::isfinite(value))
    return error(loc, start, "number '" + spelling + "' is too large");
  // Digits alone are read exactly, as far as int64 goes (a double holds
  // whole numbers exactly only to 2^53: a seed of 2^53 + 1 would change).
  errno = 0;
  int64_t exact = whole ? std::strtoll(spelling.c_str(), nullptr, 10) : 0;
  bool isExact = whole && errno != ERANGE;

  // A size suffix turns the number into a whole number of bytes.
  size_t suffixStart = pos;
  while (isIdentChar(peek()) && !atEnd())
    advance();
  llvm::StringRef suffix = buffer.slice(suffixStart, pos);
  if (!suffix.empty()) {
    double scale = llvm::StringSwitch<double>(suffix)
                       .Case("KiB", 1024.0)
                       .Case("MiB", 1024.0 * 1024)
                       .Case("GiB", 1024.0 * 1024 * 1024)
                       .Case("TiB", 1024.0 * 1024 * 1024 * 1024)
                       .Case("KB", 1e3)
                       .Case("MB", 1e6)
                       .Case("GB", 1e9)
                       .Case("TB", 1e12)
                       .Default(0);
    if (scale == 0)
      return error(loc, start,
                   "invalid suffix '" + suffix.str() + "' on number '" +
                       spelling +
                       "'; expected a size unit (KiB, MiB, GiB, TiB, KB, "
                       "MB, GB, TB) or a space");
    value = std::round(value * scale);
    if (!std::isfinite(value))
      return error(loc, start,
                   "number '" + spelling + suffix.str() + "' is too large");
    isExact = isExact && !__builtin_mul_overflow(
                             exact, static_cast<int64_t>(scale), &exact);
    whole = true;
  }
  Token t = make(TokenKind::Number, start, loc);
  t.number = value;
  // Other whole numbers beyond 2^53 lose precision as doubles; they stay
  // floats.
  t.isInteger = isExact || (whole && std::fabs(value) <= 9007199254740992.0);
  t.integer = isExact     ? exact
              : t.isInteger ? static_cast<int64_t>(value)
                            : 0;
  return t;
}

Token Lexer::lexString(size_t start, Loc loc) {
  advance(); // the opening quote
  std::string value;
  while (true) {
    if (atEnd() || peek() == '\n')
      return error(loc, start,
                   "unterminated string; expected a closing '\"' on the "
                   "same line");
    char c = peek();
    advance();
    if (c == '"')
      break;
    if (c != '\\') {
      value.push_back(c);
      continue;
    }
    char e = peek();
    Loc escLoc{line, col};
    advance();
    switch (e) {
    case '"':
    case '\\':
      value.push_back(e);
      break;
    case 'n':
      value.push_back('\n');
      break;
    case 't':
      value.push_back('\t');
      break;
    default:
      return error(escLoc, start,
                   "unknown escape sequence in string; expected \\\", \\\\, "
                   "\\n or \\t");
    }
  }
  Token t = make(TokenKind::String, start, loc);
  t.value = std::move(value);
  return t;
}
