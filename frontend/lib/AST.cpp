//===- AST.cpp - Printing the .gt syntax tree -----------------------------===//

#include "gtc/Frontend/AST.h"
#include "llvm/Support/Format.h"

using namespace gtc;

Expr::~Expr() {
  // Moves the subtrees into a work list instead of destroying them
  // recursively, so only this loop's frame is on the stack.
  std::vector<ExprPtr> pending;
  auto take = [&](Expr &e) {
    for (ExprPtr &o : e.operands)
      pending.push_back(std::move(o));
    for (Arg &a : e.args)
      pending.push_back(std::move(a.value));
  };
  take(*this);
  while (!pending.empty()) {
    ExprPtr e = std::move(pending.back());
    pending.pop_back();
    if (e)
      take(*e); // e then goes with no children left
  }
}

namespace {
/// Prints one node per line, indented by depth, with its location.
class ASTPrinter {
public:
  explicit ASTPrinter(llvm::raw_ostream &os) : os(os) {}

  void print(const File &file) {
    os << "File \"" << file.path << "\"\n";
    if (file.model)
      print(*file.model);
    if (file.train)
      print(*file.train);
  }

private:
  llvm::raw_ostream &line() {
    os.indent(depth * 2);
    return os;
  }
  void at(Loc loc) { os << " @" << loc.line << ":" << loc.col << "\n"; }

  void print(const ModelDecl &model) {
    line() << "Model " << model.name;
    at(model.loc);
    ++depth;
    for (const StmtPtr &s : model.body)
      print(*s);
    --depth;
  }

  void print(const TrainDecl &train) {
    line() << "Train";
    at(train.loc);
    ++depth;
    for (const Setting &s : train.settings) {
      line() << "Setting " << s.key;
      at(s.loc);
      ++depth;
      print(*s.value);
      --depth;
    }
    --depth;
  }

  void print(const TypeExpr &type) {
    line() << "Type " << type.dtype
                   << (type.dims.empty() ? " (scalar)" : "");
    at(type.loc);
    ++depth;
    for (const ExprPtr &d : type.dims)
      print(*d);
    --depth;
  }

  void print(const Stmt &s) {
    switch (s.kind) {
    case Stmt::Kind::Input:
    case Stmt::Kind::Label:
    case Stmt::Kind::Param:
      line() << (s.kind == Stmt::Kind::Input   ? "Input "
                      : s.kind == Stmt::Kind::Label ? "Label "
                                                    : "Param ")
                  << s.name;
      at(s.loc);
      ++depth;
      print(s.type);
      if (s.value)
        print(*s.value);
      --depth;
      return;
    case Stmt::Kind::Let:
    case Stmt::Kind::Assign:
      line() << (s.kind == Stmt::Kind::Let ? "Let " : "Assign ")
                  << s.name;
      at(s.loc);
      ++depth;
      print(*s.value);
      --depth;
      return;
    case Stmt::Kind::Return:
      line() << "Return";
      at(s.loc);
      ++depth;
      print(*s.value);
      --depth;
      return;
    case Stmt::Kind::Def:
      line() << "Def " << s.name << "(";
      for (size_t i = 0; i < s.params.size(); ++i)
        os << (i ? ", " : "") << s.params[i];
      os << ")";
      at(s.loc);
      break;
    case Stmt::Kind::Repeat:
      line() << "Repeat" << (s.name.empty() ? "" : " as " + s.name);
      at(s.loc);
      ++depth;
      print(*s.value);
      --depth;
      break;
    }
    ++depth;
    for (const StmtPtr &b : s.body)
      print(*b);
    --depth;
  }

  void print(const Expr &e) {
    // A chain of binary operators (`a + b - c`, a left spine of Binary
    // nodes) in a loop: the nodes down the spine, then their right
    // operands back up, as the recursion would print them.
    if (e.kind == Expr::Kind::Binary &&
        e.operands[0]->kind == Expr::Kind::Binary) {
      std::vector<const Expr *> spine;
      const Expr *x = &e;
      for (; x->kind == Expr::Kind::Binary; x = x->operands[0].get()) {
        line() << "Binary " << x->text;
        at(x->loc);
        ++depth;
        spine.push_back(x);
      }
      print(*x);
      for (auto it = spine.rbegin(); it != spine.rend(); ++it) {
        print(*(*it)->operands[1]);
        --depth;
      }
      return;
    }
    switch (e.kind) {
    case Expr::Kind::Number:
      line() << "Number " << e.text;
      break;
    case Expr::Kind::String:
      line() << "String \"";
      os.write_escaped(e.text) << "\"";
      break;
    case Expr::Kind::Name:
      line() << "Name " << e.text;
      break;
    case Expr::Kind::Unary:
    case Expr::Kind::Binary:
      line() << (e.kind == Expr::Kind::Unary ? "Unary " : "Binary ")
                  << e.text;
      break;
    case Expr::Kind::Call:
      line() << "Call " << e.text;
      break;
    case Expr::Kind::Tuple:
      line() << "Tuple";
      break;
    }
    at(e.loc);
    ++depth;
    for (const ExprPtr &o : e.operands)
      print(*o);
    for (const Arg &a : e.args) {
      if (a.keyword.empty()) {
        print(*a.value);
        continue;
      }
      line() << "Keyword " << a.keyword;
      at(a.loc);
      ++depth;
      print(*a.value);
      --depth;
    }
    --depth;
  }

  llvm::raw_ostream &os;
  unsigned depth = 0;
};
} // namespace

void gtc::dump(const File &file, llvm::raw_ostream &os) {
  ASTPrinter(os).print(file);
}
