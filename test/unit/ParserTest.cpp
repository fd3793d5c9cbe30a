//===- ParserTest.cpp - Unit tests for the .gt parser ---------------------===//

#include "gtc/Frontend/Parser.h"
#include "gtest/gtest.h"
#include <random>

using namespace gtc;

namespace {

struct Result {
  std::optional<File> file;
  std::string error;
  Loc loc;
  int errors = 0;
};

Result parse(llvm::StringRef source) {
  Result r;
  Parser parser("t.gt", source, [&](Loc loc, const llvm::Twine &msg) {
    ++r.errors;
    r.error = msg.str();
    r.loc = loc;
  });
  r.file = parser.parseFile();
  return r;
}

TEST(ParserTest, MinimalModel) {
  Result r = parse("model m { input x: f32[B, 4]\n loss = mean(x) }");
  ASSERT_TRUE(r.file) << r.error;
  ASSERT_TRUE(r.file->model);
  EXPECT_EQ(r.file->model->name, "m");
  ASSERT_EQ(r.file->model->body.size(), 2u);
  const Stmt &in = *r.file->model->body[0];
  EXPECT_EQ(in.kind, Stmt::Kind::Input);
  EXPECT_EQ(in.type.dtype, "f32");
  EXPECT_EQ(in.type.dims.size(), 2u);
  EXPECT_EQ(r.file->model->body[1]->kind, Stmt::Kind::Assign);
  EXPECT_FALSE(r.file->train);
}

TEST(ParserTest, PrecedenceAndAssociativity) {
  Result r = parse("model m { let a = 1 - 2 - 3 * 4 / 5 }");
  ASSERT_TRUE(r.file) << r.error;
  const Expr &e = *r.file->model->body[0]->value;
  // ((1 - 2) - ((3 * 4) / 5))
  ASSERT_EQ(e.kind, Expr::Kind::Binary);
  EXPECT_EQ(e.text, "-");
  EXPECT_EQ(e.operands[0]->text, "-");
  EXPECT_EQ(e.operands[1]->text, "/");
  EXPECT_EQ(e.operands[1]->operands[0]->text, "*");
}

TEST(ParserTest, NegativeLiteralsFold) {
  Result r = parse("model m { let a = -3, b = --2.5 }");
  ASSERT_TRUE(r.file) << r.error;
  EXPECT_EQ(r.file->model->body[0]->value->kind, Expr::Kind::Number);
  EXPECT_EQ(r.file->model->body[0]->value->integer, -3);
  EXPECT_DOUBLE_EQ(r.file->model->body[1]->value->number, 2.5);
}

TEST(ParserTest, CallsWithKeywordsAndTuples) {
  Result r = parse("train { optimizer = adamw(lr: 6e-4, betas: (0.9, 0.95)) }"
                   "model m {}");
  ASSERT_TRUE(r.file) << r.error;
  ASSERT_TRUE(r.file->train);
  const Expr &call = *r.file->train->settings[0].value;
  EXPECT_EQ(call.kind, Expr::Kind::Call);
  EXPECT_EQ(call.text, "adamw");
  ASSERT_EQ(call.args.size(), 2u);
  EXPECT_EQ(call.args[0].keyword, "lr");
  EXPECT_EQ(call.args[1].value->kind, Expr::Kind::Tuple);
  EXPECT_EQ(call.args[1].value->operands.size(), 2u);
}

TEST(ParserTest, SettingsNeedNoSeparators) {
  Result r = parse("model m {} train { batch = 16  epochs = 2 seed = 1 }");
  ASSERT_TRUE(r.file) << r.error;
  EXPECT_EQ(r.file->train->settings.size(), 3u);
}

TEST(ParserTest, DefRepeatReturn) {
  Result r = parse("model m { def f(x, y) { z = x + y\n return z }\n"
                   "repeat 3 as layers { h = f(h, h) } }");
  ASSERT_TRUE(r.file) << r.error;
  const Stmt &def = *r.file->model->body[0];
  EXPECT_EQ(def.kind, Stmt::Kind::Def);
  EXPECT_EQ(def.params.size(), 2u);
  EXPECT_EQ(def.body.back()->kind, Stmt::Kind::Return);
  const Stmt &rep = *r.file->model->body[1];
  EXPECT_EQ(rep.kind, Stmt::Kind::Repeat);
  EXPECT_EQ(rep.name, "layers");
}

TEST(ParserTest, TrailingCommaInTuple) {
  Result r = parse("model m { let t = (1, 2,) }");
  ASSERT_TRUE(r.file) << r.error;
  EXPECT_EQ(r.file->model->body[0]->value->operands.size(), 2u);
}

TEST(ParserTest, ErrorsHaveLocations) {
  Result r = parse("model m {\n  x = relu(\n}");
  EXPECT_FALSE(r.file);
  EXPECT_EQ(r.errors, 1);
  EXPECT_EQ(r.loc.line, 3u);
  EXPECT_EQ(r.loc.col, 1u);
  EXPECT_NE(r.error.find("expected an expression"), std::string::npos);
}

TEST(ParserTest, UnclosedBlockPointsAtTheBrace) {
  Result r = parse("model m {\n  x = 1\n");
  EXPECT_FALSE(r.file);
  EXPECT_EQ(r.loc.line, 1u);
  EXPECT_EQ(r.loc.col, 9u);
  EXPECT_NE(r.error.find("never closed"), std::string::npos);
}

TEST(ParserTest, PositionalAfterKeyword) {
  Result r = parse("model m { x = f(a: 1, 2) }");
  EXPECT_FALSE(r.file);
  EXPECT_NE(r.error.find("positional argument after a keyword"),
            std::string::npos);
}

TEST(ParserTest, DuplicateKeyword) {
  Result r = parse("model m { x = f(a: 1, a: 2) }");
  EXPECT_FALSE(r.file);
  EXPECT_NE(r.error.find("given twice"), std::string::npos);
}

TEST(ParserTest, TwoModels) {
  Result r = parse("model a {} model b {}");
  EXPECT_FALSE(r.file);
  EXPECT_NE(r.error.find("one model"), std::string::npos);
}

TEST(ParserTest, NoModel) {
  Result r = parse("# nothing\n");
  EXPECT_FALSE(r.file);
  EXPECT_NE(r.error.find("expected a 'model"), std::string::npos);
}

TEST(ParserTest, DeepNestingIsAnErrorNotAStackOverflow) {
  std::string deep = "model m { x = " + std::string(100000, '(') + "1" +
                     std::string(100000, ')') + " }";
  Result r = parse(deep);
  EXPECT_FALSE(r.file);
  EXPECT_NE(r.error.find("nesting is too deep"), std::string::npos);
  std::string minus = "model m { x = " + std::string(100000, '-') + "1 }";
  EXPECT_FALSE(parse(minus).file);
  std::string blocks = "model m { " ;
  for (int i = 0; i < 100000; ++i)
    blocks += "repeat 1 { ";
  EXPECT_FALSE(parse(blocks).file);
}

/// A chain of one operator is walked in a loop: 100,000 terms parse with
/// a height of 2 (real nesting alone is bounded), print in the order the
/// recursion printed, and free without recursion.
TEST(ParserTest, LongChainsAreNotDeep) {
  std::string sum = "model m { x = a";
  for (int i = 0; i < 100000; ++i)
    sum += i % 2 ? " + a" : " - a";
  Result r = parse(sum + " }");
  ASSERT_TRUE(r.file) << r.error;
  EXPECT_EQ(r.file->model->body[0]->value->height, 2u);

  Result small = parse("model m { x = a + b * c - d }");
  ASSERT_TRUE(small.file) << small.error;
  std::string dumped;
  llvm::raw_string_ostream os(dumped);
  dump(*small.file, os);
  EXPECT_NE(dumped.find("    Binary - @1:25\n"
                        "      Binary + @1:17\n"
                        "        Name a @1:15\n"
                        "        Binary * @1:21\n"
                        "          Name b @1:19\n"
                        "          Name c @1:23\n"
                        "      Name d @1:27\n"),
            std::string::npos)
      << dumped;
}

TEST(ParserTest, CallingACallIsAnError) {
  Result r = parse("model m { x = f(1)(2) }");
  EXPECT_FALSE(r.file);
  EXPECT_NE(r.error.find("cannot be called"), std::string::npos);
}

/// Random and truncated inputs: every one ends in a parse tree or exactly one
/// error, never a crash.
TEST(ParserTest, RandomAndTruncatedInputsNeverCrash) {
  const std::string good =
      "model m {\n let D = 8\n input x: f32[B, D]\n label y: i32[B]\n"
      " def f(h) { return relu(linear(h, D)) }\n repeat 2 { x = f(x) }\n"
      " loss = cross_entropy(linear(x, 3), y)\n}\n"
      "train { batch = 4 optimizer = adamw(lr: 1e-3, betas: (0.9, 0.99)) }\n";
  for (size_t n = 0; n <= good.size(); ++n) {
    Result r = parse(llvm::StringRef(good).take_front(n));
    EXPECT_TRUE(r.file.has_value() || r.errors == 1) << n;
  }
  std::mt19937 rng(1234);
  const std::string alphabet = "model{}()[],:=+-*/#\"\\ \n\tabcxyz0123456789.e";
  for (int iter = 0; iter < 3000; ++iter) {
    std::string s;
    size_t len = rng() % 200;
    for (size_t i = 0; i < len; ++i)
      s.push_back(iter % 2 ? char(rng() % 256)
                           : alphabet[rng() % alphabet.size()]);
    Result r = parse(s);
    EXPECT_TRUE(r.file.has_value() || r.errors == 1);
  }
}

} // namespace
