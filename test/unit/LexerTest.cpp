//===- LexerTest.cpp - Unit tests for the .gt lexer -----------------------===//

#include "gtc/Frontend/Lexer.h"
#include "gtest/gtest.h"
#include <vector>

using namespace gtc;

namespace {

std::vector<Token> lexAll(llvm::StringRef source) {
  Lexer lexer(source);
  std::vector<Token> tokens;
  while (true) {
    tokens.push_back(lexer.next());
    if (tokens.back().kind == TokenKind::Eof ||
        tokens.back().kind == TokenKind::Error)
      return tokens;
  }
}

TEST(LexerTest, KeywordsNamesAndPunctuation) {
  auto t = lexAll("model m { input x: f32[B, 784] }");
  ASSERT_EQ(t.size(), 14u);
  EXPECT_EQ(t[0].kind, TokenKind::KwModel);
  EXPECT_EQ(t[1].kind, TokenKind::Identifier);
  EXPECT_EQ(t[1].text, "m");
  EXPECT_EQ(t[2].kind, TokenKind::LBrace);
  EXPECT_EQ(t[3].kind, TokenKind::KwInput);
  EXPECT_EQ(t[5].kind, TokenKind::Colon);
  EXPECT_EQ(t[7].kind, TokenKind::LBracket);
  EXPECT_EQ(t[9].kind, TokenKind::Comma);
  EXPECT_EQ(t[10].kind, TokenKind::Number);
  EXPECT_EQ(t[10].integer, 784);
  EXPECT_EQ(t[12].kind, TokenKind::RBrace);
  EXPECT_EQ(t[13].kind, TokenKind::Eof);
}

TEST(LexerTest, LocationsAreOneBasedAndSkipComments) {
  auto t = lexAll("# comment\n  let x = 1 # trailing\n\ty");
  EXPECT_EQ(t[0].loc.line, 2u);
  EXPECT_EQ(t[0].loc.col, 3u);
  EXPECT_EQ(t[4].text, "y");
  EXPECT_EQ(t[4].loc.line, 3u);
  EXPECT_EQ(t[4].loc.col, 2u);
}

TEST(LexerTest, Numbers) {
  auto t = lexAll("0 42 1e-3 2.5 .5 3E2 1e400");
  EXPECT_TRUE(t[0].isInteger);
  EXPECT_EQ(t[0].integer, 0);
  EXPECT_EQ(t[1].integer, 42);
  EXPECT_FALSE(t[2].isInteger);
  EXPECT_DOUBLE_EQ(t[2].number, 1e-3);
  EXPECT_DOUBLE_EQ(t[3].number, 2.5);
  EXPECT_DOUBLE_EQ(t[4].number, 0.5);
  EXPECT_DOUBLE_EQ(t[5].number, 300);
  EXPECT_FALSE(t[5].isInteger); // written with an exponent: a float
  EXPECT_EQ(t[6].kind, TokenKind::Error);
  EXPECT_NE(t[6].value.find("too large"), std::string::npos);
}

TEST(LexerTest, HugeIntegersBecomeFloats) {
  auto t = lexAll("123456789012345678901234567890");
  EXPECT_EQ(t[0].kind, TokenKind::Number);
  EXPECT_FALSE(t[0].isInteger);
}

TEST(LexerTest, SizeSuffixes) {
  auto t = lexAll("12GiB 1.5MiB 2KB 3xyz");
  EXPECT_EQ(t[0].integer, int64_t(12) << 30);
  EXPECT_TRUE(t[1].isInteger);
  EXPECT_EQ(t[1].integer, 1572864);
  EXPECT_EQ(t[2].integer, 2000);
  EXPECT_EQ(t[3].kind, TokenKind::Error);
  EXPECT_NE(t[3].value.find("invalid suffix 'xyz'"), std::string::npos);
}

TEST(LexerTest, StringsAndEscapes) {
  auto t = lexAll(R"("a\"b\\c\n" "unterminated)");
  EXPECT_EQ(t[0].kind, TokenKind::String);
  EXPECT_EQ(t[0].value, "a\"b\\c\n");
  EXPECT_EQ(t[1].kind, TokenKind::Error);
  EXPECT_NE(t[1].value.find("unterminated"), std::string::npos);
}

TEST(LexerTest, BadEscape) {
  auto t = lexAll(R"("\q")");
  EXPECT_EQ(t[0].kind, TokenKind::Error);
  EXPECT_NE(t[0].value.find("escape"), std::string::npos);
}

TEST(LexerTest, StringCannotSpanLines) {
  auto t = lexAll("\"abc\ndef\"");
  EXPECT_EQ(t[0].kind, TokenKind::Error);
}

TEST(LexerTest, UnexpectedBytesAreErrorsNotCrashes) {
  for (llvm::StringRef s : {llvm::StringRef("@"), llvm::StringRef("\x01", 1),
                            llvm::StringRef("\0", 1), llvm::StringRef("\xff"),
                            llvm::StringRef("é")}) {
    auto t = lexAll(s);
    ASSERT_EQ(t.back().kind, TokenKind::Error) << s.str();
    EXPECT_NE(t.back().value.find("unexpected character"), std::string::npos);
  }
}

TEST(LexerTest, EofIsSticky) {
  Lexer lexer("x");
  EXPECT_EQ(lexer.next().kind, TokenKind::Identifier);
  EXPECT_EQ(lexer.next().kind, TokenKind::Eof);
  EXPECT_EQ(lexer.next().kind, TokenKind::Eof);
}

TEST(LexerTest, SemicolonsSeparateLikeSpaces) {
  auto t = lexAll("a;b");
  EXPECT_EQ(t[0].text, "a");
  EXPECT_EQ(t[1].text, "b");
}

} // namespace
