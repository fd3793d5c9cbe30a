//===- Parser.h - Recursive-descent parser for .gt files --------*- C++ -*-===//

#ifndef GTC_FRONTEND_PARSER_H
#define GTC_FRONTEND_PARSER_H

#include "gtc/Frontend/AST.h"
#include "gtc/Frontend/Lexer.h"
#include "llvm/ADT/Twine.h"
#include <functional>
#include <optional>

namespace gtc {

/// Receives the parser's (single) error.
using ErrorFn = std::function<void(Loc, const llvm::Twine &)>;

/// Parses a whole .gt file. Stops at the first error, which it reports
/// through `onError`, and returns nullopt then.
class Parser {
public:
  /// Parentheses, brackets and blocks nest at most this deep, and so do
  /// expression trees (a chain of n binary operators is n deep).
  static constexpr unsigned kMaxDepth = 200;

  Parser(llvm::StringRef path, llvm::StringRef buffer, ErrorFn onError);

  std::optional<File> parseFile();

private:
  // Token handling.
  void consume();
  bool consumeIf(TokenKind kind);
  bool expect(TokenKind kind, const llvm::Twine &context);
  bool fail(Loc loc, const llvm::Twine &message);
  bool failExpected(const llvm::Twine &what);

  // Declarations and statements.
  std::unique_ptr<ModelDecl> parseModel();
  std::unique_ptr<TrainDecl> parseTrain();
  bool parseBlock(std::vector<StmtPtr> &body, const char *what);
  StmtPtr parseStatement();
  StmtPtr parseDeclaration(Stmt::Kind kind);
  bool parseLet(std::vector<StmtPtr> &out);
  StmtPtr parseDef();
  StmtPtr parseRepeat();
  bool parseType(TypeExpr &type);

  // Expressions, by precedence: additive < multiplicative < unary < postfix.
  ExprPtr parseExpr();
  ExprPtr parseAdditive();
  ExprPtr parseMultiplicative();
  ExprPtr parseUnary();
  ExprPtr parsePrimary();
  bool parseCallArgs(Expr &call);

  /// Counts nesting; reports an error when too deep.
  bool enter(Loc loc);
  /// Sets e's height from its operands and arguments; fails (at `at`) when
  /// it exceeds kMaxDepth.
  bool measure(Expr &e, Loc at);
  void leave() { --depth; }

  std::string path;
  Lexer lexer;
  ErrorFn onError;
  Token tok;
  bool failed = false;
  unsigned depth = 0;
};

} // namespace gtc

#endif // GTC_FRONTEND_PARSER_H
