//===- AST.h - Abstract syntax tree of the .gt language ---------*- C++ -*-===//

#ifndef GTC_FRONTEND_AST_H
#define GTC_FRONTEND_AST_H

#include "llvm/Support/raw_ostream.h"
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gtc {

/// A position in the source file: 1-based line and column.
struct Loc {
  unsigned line = 1;
  unsigned col = 1;
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

/// An argument of a call: positional when `keyword` is empty.
struct Arg {
  std::string keyword;
  Loc loc;
  ExprPtr value;
};

/// An expression. One struct for all kinds keeps the tree easy to walk.
struct Expr {
  enum class Kind { Number, String, Name, Unary, Binary, Call, Tuple };

  Expr(Kind kind, Loc loc) : kind(kind), loc(loc) {}
  Expr(Expr &&) = default;
  Expr &operator=(Expr &&) = default;
  /// Frees the tree below without recursion: a chain of 10,000 additions is
  /// a left spine 10,000 nodes long.
  ~Expr();

  Kind kind;
  Loc loc;
  double number = 0;       ///< Number.
  bool isInteger = false;  ///< Number: a whole number.
  int64_t integer = 0;     ///< Number: its value when whole.
  std::string text;        ///< String value, Name, callee, or operator.
  std::vector<ExprPtr> operands; ///< Unary (1), Binary (2), Tuple elements.
  std::vector<Arg> args;   ///< Call arguments in source order.
  /// Levels of the tree from here down (1 for a leaf) that a walk
  /// recurses through: the parser bounds it, so the passes that walk a tree
  /// recursively have bounded depth. A Binary's left operand that is a
  /// Binary too continues its chain (`a + b - c`), which every walk follows
  /// in a loop, so it adds no level.
  unsigned height = 1;
};

/// A tensor type: `f32[B, 784]`, or a scalar `f32`.
struct TypeExpr {
  Loc loc;
  std::string dtype;
  Loc dtypeLoc;
  std::vector<ExprPtr> dims;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;

/// A statement of a model body, a `def` body or a `repeat` body.
struct Stmt {
  enum class Kind { Input, Label, Param, Let, Def, Return, Repeat, Assign };

  Stmt(Kind kind, Loc loc) : kind(kind), loc(loc) {}

  Kind kind;
  Loc loc;
  std::string name;     ///< Declared or assigned name; def name; repeat name
                        ///< (empty when the loop is unnamed).
  Loc nameLoc;
  std::string storedName; ///< Param `as "NAME"`: its name in checkpoints
                          ///< (empty: the declared name).
  Loc storedNameLoc;
  TypeExpr type;        ///< Input, Label, Param.
  ExprPtr value;        ///< Param initializer, Let, Assign, Return, Repeat count.
  std::vector<std::string> params; ///< Def parameters.
  std::vector<Loc> paramLocs;
  std::vector<StmtPtr> body; ///< Def, Repeat.
};

/// `model NAME { ... }`.
struct ModelDecl {
  Loc loc;
  std::string name;
  Loc nameLoc;
  std::vector<StmtPtr> body;
};

/// One `key = value` line of a train block.
struct Setting {
  std::string key;
  Loc loc;
  ExprPtr value;
};

/// `train { key = value ... }`.
struct TrainDecl {
  Loc loc;
  std::vector<Setting> settings;
};

/// A parsed .gt file.
struct File {
  std::string path;
  std::unique_ptr<ModelDecl> model;
  std::unique_ptr<TrainDecl> train;
};

/// Prints the tree as an indented outline (for `gtc --emit=ast`).
void dump(const File &file, llvm::raw_ostream &os);

} // namespace gtc

#endif // GTC_FRONTEND_AST_H
