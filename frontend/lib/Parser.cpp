//===- Parser.cpp - Recursive-descent parser for .gt files ----------------===//
//
// Grammar (see frontend/LANGUAGE.md):
//   file      := (model | train)*
//   model     := 'model' NAME '{' stmt* '}'
//   train     := 'train' '{' (NAME '=' expr)* '}'
//   stmt      := ('input' | 'label') NAME ':' type
//              | 'param' NAME ':' type ('=' expr)?
//              | 'let' NAME '=' expr (',' NAME '=' expr)*
//              | 'def' NAME '(' (NAME (',' NAME)*)? ')' '{' stmt* '}'
//              | 'return' expr
//              | 'repeat' expr ('as' NAME)? '{' stmt* '}'
//              | NAME '=' expr
//   type      := DTYPE ('[' expr (',' expr)* ']')?
//   expr      := term (('+' | '-') term)*
//   term      := unary (('*' | '/') unary)*
//   unary     := '-' unary | postfix
//   postfix   := NAME '(' args? ')' | primary      (one call, of a name)
//   primary   := NUMBER | STRING | NAME | '(' expr ')' | '(' expr ',' ... ')'
//   args      := arg (',' arg)* ','?      arg := (NAME ':')? expr
// A tuple may end with ','. Newlines are not significant.
//===----------------------------------------------------------------------===//

#include "gtc/Frontend/Parser.h"
#include <algorithm>

using namespace gtc;

Parser::Parser(llvm::StringRef path, llvm::StringRef buffer, ErrorFn onError)
    : path(path.str()), lexer(buffer), onError(std::move(onError)) {
  consume();
}

void Parser::consume() {
  if (tok.kind == TokenKind::Error)
    return;
  tok = lexer.next();
  if (tok.kind == TokenKind::Error)
    fail(tok.loc, tok.value);
}

bool Parser::consumeIf(TokenKind kind) {
  if (tok.kind != kind)
    return false;
  consume();
  return true;
}

bool Parser::fail(Loc loc, const llvm::Twine &message) {
  if (!failed)
    onError(loc, message);
  failed = true;
  return false;
}

bool Parser::failExpected(const llvm::Twine &what) {
  if (tok.kind == TokenKind::Error)
    return fail(tok.loc, tok.value);
  std::string found = tok.kind == TokenKind::Eof
                          ? std::string(describe(tok.kind))
                          : "'" + tok.text.str() + "'";
  return fail(tok.loc, "expected " + what + ", found " + found);
}

bool Parser::expect(TokenKind kind, const llvm::Twine &context) {
  if (failed)
    return false;
  if (tok.kind == kind) {
    consume();
    return !failed;
  }
  return failExpected(llvm::Twine(describe(kind)) + " " + context);
}

bool Parser::enter(Loc loc) {
  if (++depth > kMaxDepth)
    return fail(loc, "nesting is too deep (more than " +
                         llvm::Twine(kMaxDepth) +
                         " levels); split the expression");
  return true;
}

bool Parser::measure(Expr &e, Loc at) {
  unsigned below = 0;
  for (const ExprPtr &o : e.operands)
    below = std::max(below, o->height);
  for (const Arg &a : e.args)
    below = std::max(below, a.value->height);
  e.height = below + 1;
  // A chain of binary operators is walked in a loop (see Expr::height).
  if (e.kind == Expr::Kind::Binary &&
      e.operands[0]->kind == Expr::Kind::Binary)
    e.height = std::max(e.operands[0]->height, e.operands[1]->height + 1);
  if (e.height > kMaxDepth)
    return fail(at, "this expression is too deep (more than " +
                        llvm::Twine(kMaxDepth) +
                        " operations inside one another); split it into "
                        "named parts");
  return true;
}

std::optional<File> Parser::parseFile() {
  File file;
  file.path = path;
  while (!failed && tok.kind != TokenKind::Eof) {
    if (tok.kind == TokenKind::KwModel) {
      Loc loc = tok.loc;
      if (file.model) {
        fail(loc, "a file holds one model; '" + file.model->name +
                      "' is already defined at line " +
                      llvm::Twine(file.model->loc.line));
        break;
      }
      file.model = parseModel();
    } else if (tok.kind == TokenKind::KwTrain) {
      Loc loc = tok.loc;
      if (file.train) {
        fail(loc, "a file holds one train block; the first is at line " +
                      llvm::Twine(file.train->loc.line));
        break;
      }
      file.train = parseTrain();
    } else {
      failExpected("'model' or 'train' at the top level");
    }
  }
  if (failed)
    return std::nullopt;
  if (!file.model) {
    fail(Loc{1, 1}, "expected a 'model NAME { ... }' block in the file");
    return std::nullopt;
  }
  return file;
}

std::unique_ptr<ModelDecl> Parser::parseModel() {
  auto model = std::make_unique<ModelDecl>();
  model->loc = tok.loc;
  consume(); // 'model'
  model->nameLoc = tok.loc;
  model->name = tok.text.str();
  if (!expect(TokenKind::Identifier, "after 'model' (the model's name)") ||
      !parseBlock(model->body, "model body"))
    return nullptr;
  return model;
}

std::unique_ptr<TrainDecl> Parser::parseTrain() {
  auto train = std::make_unique<TrainDecl>();
  train->loc = tok.loc;
  consume(); // 'train'
  if (!expect(TokenKind::LBrace, "to open the train block"))
    return nullptr;
  while (!failed && tok.kind != TokenKind::RBrace) {
    if (tok.kind != TokenKind::Identifier) {
      failExpected("a setting name (data, batch, optimizer, ...) or '}'");
      return nullptr;
    }
    Setting setting;
    setting.key = tok.text.str();
    setting.loc = tok.loc;
    consume();
    if (!expect(TokenKind::Equal, "after the setting name"))
      return nullptr;
    setting.value = parseExpr();
    if (!setting.value)
      return nullptr;
    train->settings.push_back(std::move(setting));
  }
  if (!expect(TokenKind::RBrace, "to close the train block"))
    return nullptr;
  return train;
}

bool Parser::parseBlock(std::vector<StmtPtr> &body, const char *what) {
  Loc open = tok.loc;
  if (!expect(TokenKind::LBrace, llvm::Twine("to open the ") + what) ||
      !enter(open))
    return false;
  while (!failed && tok.kind != TokenKind::RBrace &&
         tok.kind != TokenKind::Eof) {
    if (tok.kind == TokenKind::KwLet) {
      if (!parseLet(body))
        return false;
      continue;
    }
    StmtPtr s = parseStatement();
    if (!s)
      return false;
    body.push_back(std::move(s));
  }
  leave();
  if (tok.kind == TokenKind::Eof)
    return fail(open, llvm::Twine("this '{' of the ") + what +
                          " is never closed; expected '}'");
  return expect(TokenKind::RBrace, llvm::Twine("to close the ") + what);
}

StmtPtr Parser::parseStatement() {
  switch (tok.kind) {
  case TokenKind::KwInput:
    return parseDeclaration(Stmt::Kind::Input);
  case TokenKind::KwLabel:
    return parseDeclaration(Stmt::Kind::Label);
  case TokenKind::KwParam:
    return parseDeclaration(Stmt::Kind::Param);
  case TokenKind::KwDef:
    return parseDef();
  case TokenKind::KwRepeat:
    return parseRepeat();
  case TokenKind::KwReturn: {
    auto s = std::make_unique<Stmt>(Stmt::Kind::Return, tok.loc);
    consume();
    s->value = parseExpr();
    return s->value ? std::move(s) : nullptr;
  }
  case TokenKind::Identifier: {
    auto s = std::make_unique<Stmt>(Stmt::Kind::Assign, tok.loc);
    s->name = tok.text.str();
    s->nameLoc = tok.loc;
    consume();
    if (!expect(TokenKind::Equal, "after '" + s->name + "' (an assignment)"))
      return nullptr;
    s->value = parseExpr();
    return s->value ? std::move(s) : nullptr;
  }
  default:
    failExpected("a statement (input, label, param, let, def, repeat, "
                 "return or NAME = ...)");
    return nullptr;
  }
}

StmtPtr Parser::parseDeclaration(Stmt::Kind kind) {
  auto s = std::make_unique<Stmt>(kind, tok.loc);
  std::string keyword = tok.text.str();
  consume();
  s->name = tok.text.str();
  s->nameLoc = tok.loc;
  if (!expect(TokenKind::Identifier, "after '" + keyword + "'") ||
      !expect(TokenKind::Colon,
              "after '" + s->name + "' (then its type, e.g. f32[B, 784])") ||
      !parseType(s->type))
    return nullptr;
  if (kind == Stmt::Kind::Param && consumeIf(TokenKind::Equal)) {
    s->value = parseExpr();
    if (!s->value)
      return nullptr;
  }
  if (kind == Stmt::Kind::Param && consumeIf(TokenKind::KwAs)) {
    s->storedName = tok.value;
    s->storedNameLoc = tok.loc;
    if (tok.kind == TokenKind::String && tok.value.empty()) {
      fail(tok.loc, "the name after 'as' is empty; give the parameter's "
                    "name in checkpoints, e.g. \"transformer.wte.weight\", "
                    "or leave out 'as'");
      return nullptr;
    }
    if (!expect(TokenKind::String, "after 'as' (the parameter's name in "
                                   "checkpoints, e.g. \"transformer.wte.weight\")"))
      return nullptr;
  }
  return failed ? nullptr : std::move(s);
}

bool Parser::parseLet(std::vector<StmtPtr> &out) {
  consume(); // 'let'
  do {
    auto s = std::make_unique<Stmt>(Stmt::Kind::Let, tok.loc);
    s->name = tok.text.str();
    s->nameLoc = tok.loc;
    if (!expect(TokenKind::Identifier, "after 'let' (the constant's name)") ||
        !expect(TokenKind::Equal, "after '" + s->name + "'"))
      return false;
    s->value = parseExpr();
    if (!s->value)
      return false;
    out.push_back(std::move(s));
  } while (consumeIf(TokenKind::Comma));
  return !failed;
}

StmtPtr Parser::parseDef() {
  auto s = std::make_unique<Stmt>(Stmt::Kind::Def, tok.loc);
  consume(); // 'def'
  s->name = tok.text.str();
  s->nameLoc = tok.loc;
  if (!expect(TokenKind::Identifier, "after 'def' (the function's name)") ||
      !expect(TokenKind::LParen, "after the function's name"))
    return nullptr;
  if (tok.kind != TokenKind::RParen) {
    do {
      s->params.push_back(tok.text.str());
      s->paramLocs.push_back(tok.loc);
      if (!expect(TokenKind::Identifier, "(a parameter name)"))
        return nullptr;
    } while (consumeIf(TokenKind::Comma));
  }
  if (!expect(TokenKind::RParen, "to close the parameter list") ||
      !parseBlock(s->body, "function body"))
    return nullptr;
  return s;
}

StmtPtr Parser::parseRepeat() {
  auto s = std::make_unique<Stmt>(Stmt::Kind::Repeat, tok.loc);
  consume(); // 'repeat'
  s->value = parseExpr();
  if (!s->value)
    return nullptr;
  s->nameLoc = s->loc;
  if (consumeIf(TokenKind::KwAs)) {
    // A name, or a string of dot-separated parts ("transformer.h").
    s->name = tok.kind == TokenKind::String ? tok.value : tok.text.str();
    s->nameLoc = tok.loc;
    if (tok.kind == TokenKind::String && tok.value.empty()) {
      fail(tok.loc, "the name after 'as' is empty; give the loop's name, "
                    "e.g. \"transformer.h\", or leave out 'as'");
      return nullptr;
    }
    if (tok.kind == TokenKind::String)
      consume();
    else if (!expect(TokenKind::Identifier, "after 'as' (the loop's name)"))
      return nullptr;
  }
  if (!parseBlock(s->body, "repeat body"))
    return nullptr;
  return s;
}

bool Parser::parseType(TypeExpr &type) {
  type.loc = tok.loc;
  type.dtypeLoc = tok.loc;
  type.dtype = tok.text.str();
  if (!expect(TokenKind::Identifier, "(a type such as f32[B, 784])"))
    return false;
  if (!consumeIf(TokenKind::LBracket))
    return !failed;
  if (tok.kind == TokenKind::RBracket)
    return failExpected("a dimension");
  do {
    ExprPtr d = parseExpr();
    if (!d)
      return false;
    type.dims.push_back(std::move(d));
  } while (consumeIf(TokenKind::Comma));
  return expect(TokenKind::RBracket, "to close the shape");
}

ExprPtr Parser::parseExpr() {
  if (failed || !enter(tok.loc))
    return nullptr;
  ExprPtr e = parseAdditive();
  leave();
  return failed ? nullptr : std::move(e);
}

static ExprPtr makeBinary(Loc loc, llvm::StringRef op, ExprPtr l, ExprPtr r) {
  auto e = std::make_unique<Expr>(Expr::Kind::Binary, loc);
  e->text = op.str();
  e->operands.push_back(std::move(l));
  e->operands.push_back(std::move(r));
  return e;
}

ExprPtr Parser::parseAdditive() {
  ExprPtr lhs = parseMultiplicative();
  while (lhs && (tok.kind == TokenKind::Plus || tok.kind == TokenKind::Minus)) {
    Token op = tok;
    consume();
    ExprPtr rhs = parseMultiplicative();
    if (!rhs)
      return nullptr;
    lhs = makeBinary(op.loc, op.text, std::move(lhs), std::move(rhs));
    if (!measure(*lhs, op.loc))
      return nullptr;
  }
  return lhs;
}

ExprPtr Parser::parseMultiplicative() {
  ExprPtr lhs = parseUnary();
  while (lhs && (tok.kind == TokenKind::Star || tok.kind == TokenKind::Slash)) {
    Token op = tok;
    consume();
    ExprPtr rhs = parseUnary();
    if (!rhs)
      return nullptr;
    lhs = makeBinary(op.loc, op.text, std::move(lhs), std::move(rhs));
    if (!measure(*lhs, op.loc))
      return nullptr;
  }
  return lhs;
}

ExprPtr Parser::parseUnary() {
  if (tok.kind != TokenKind::Minus)
    return parsePrimary();
  Loc loc = tok.loc;
  consume();
  if (!enter(loc))
    return nullptr;
  ExprPtr operand = parseUnary();
  leave();
  if (!operand)
    return nullptr;
  // Fold negative literals so that `-1` is a number, not an operation.
  if (operand->kind == Expr::Kind::Number) {
    operand->number = -operand->number;
    operand->integer = -operand->integer;
    operand->text = "-" + operand->text;
    operand->loc = loc;
    return operand;
  }
  auto e = std::make_unique<Expr>(Expr::Kind::Unary, loc);
  e->text = "-";
  e->operands.push_back(std::move(operand));
  return measure(*e, loc) ? std::move(e) : nullptr;
}

ExprPtr Parser::parsePrimary() {
  if (failed)
    return nullptr;
  ExprPtr e;
  switch (tok.kind) {
  case TokenKind::Number:
    e = std::make_unique<Expr>(Expr::Kind::Number, tok.loc);
    e->number = tok.number;
    e->isInteger = tok.isInteger;
    e->integer = tok.integer;
    e->text = tok.text.str();
    consume();
    break;
  case TokenKind::String:
    e = std::make_unique<Expr>(Expr::Kind::String, tok.loc);
    e->text = tok.value;
    consume();
    break;
  case TokenKind::Identifier:
    e = std::make_unique<Expr>(Expr::Kind::Name, tok.loc);
    e->text = tok.text.str();
    consume();
    break;
  case TokenKind::LParen: {
    Loc loc = tok.loc;
    consume();
    ExprPtr first = parseExpr();
    if (!first)
      return nullptr;
    if (tok.kind != TokenKind::Comma) {
      if (!expect(TokenKind::RParen, "to close '('"))
        return nullptr;
      e = std::move(first);
      break;
    }
    e = std::make_unique<Expr>(Expr::Kind::Tuple, loc);
    e->operands.push_back(std::move(first));
    while (consumeIf(TokenKind::Comma) && tok.kind != TokenKind::RParen) {
      ExprPtr next = parseExpr();
      if (!next)
        return nullptr;
      e->operands.push_back(std::move(next));
    }
    if (!expect(TokenKind::RParen, "to close the tuple") || !measure(*e, loc))
      return nullptr;
    break;
  }
  default:
    failExpected("an expression");
    return nullptr;
  }
  if (failed)
    return nullptr;

  // Calls: only a name can be called.
  while (tok.kind == TokenKind::LParen) {
    if (e->kind != Expr::Kind::Name) {
      fail(tok.loc, "only a name can be called; expected an operator or the "
                    "end of the expression before '('");
      return nullptr;
    }
    e->kind = Expr::Kind::Call;
    if (!parseCallArgs(*e) || !measure(*e, e->loc))
      return nullptr;
    if (tok.kind == TokenKind::LParen) {
      fail(tok.loc, "the result of a call cannot be called");
      return nullptr;
    }
  }
  return e;
}

bool Parser::parseCallArgs(Expr &call) {
  Loc open = tok.loc;
  consume(); // '('
  if (!enter(open))
    return false;
  bool sawKeyword = false;
  while (!failed && tok.kind != TokenKind::RParen) {
    Arg arg;
    arg.loc = tok.loc;
    if (tok.kind == TokenKind::Identifier) {
      // Look ahead for `name:` without consuming an expression.
      Token name = tok;
      Lexer saved = lexer;
      Token after = lexer.next();
      lexer = saved;
      if (after.kind == TokenKind::Colon) {
        consume();
        consume();
        arg.keyword = name.text.str();
        for (const Arg &other : call.args)
          if (other.keyword == arg.keyword)
            return fail(name.loc, "keyword argument '" + arg.keyword +
                                      "' is given twice");
        sawKeyword = true;
      }
    }
    if (arg.keyword.empty() && sawKeyword)
      return fail(arg.loc, "positional argument after a keyword argument; "
                           "put positional arguments first");
    arg.value = parseExpr();
    if (!arg.value)
      return false;
    call.args.push_back(std::move(arg));
    if (!consumeIf(TokenKind::Comma))
      break;
  }
  leave();
  return expect(TokenKind::RParen, "to close the argument list of '" +
                                       call.text + "'");
}
