#include "agent/token.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "common/file.h"

namespace dsd::agent {
namespace {

class TokenFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("dsd_token_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(TokenFileTest, WriteThenLoad) {
  auto token = GenerateToken();
  ASSERT_TRUE(token.ok());
  EXPECT_EQ(token->size(), 64u);
  std::string path = (dir_ / "t").string();
  ASSERT_TRUE(WriteTokenFile(path, *token).ok());
  struct stat st {};
  ::stat(path.c_str(), &st);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto back = LoadTokenFile(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, *token);
}

TEST_F(TokenFileTest, RejectsWorldReadableEmptyAndMissing) {
  std::string path = (dir_ / "open").string();
  ASSERT_TRUE(WriteFileAtomic(path, "secret\n").ok());
  ::chmod(path.c_str(), 0644);
  auto r = LoadTokenFile(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("mode 0644"), std::string::npos);
  ::chmod(path.c_str(), 0600);
  ASSERT_TRUE(WriteFileAtomic(path, "  \n").ok());
  ::chmod(path.c_str(), 0600);
  EXPECT_NE(LoadTokenFile(path).status().message().find("is empty"), std::string::npos);
  EXPECT_EQ(LoadTokenFile((dir_ / "none").string()).status().code(), StatusCode::kNotFound);
}

// A token runs commands on every node: one a person could guess (short, or one character repeated)
// is refused with how to make a good one; 16 random bytes in hex or base64 pass.
TEST_F(TokenFileTest, RefusesTokensWithLessThan128Bits) {
  std::string path = (dir_ / "weak").string();
  const std::pair<std::string, std::string> weak[] = {
      {"x", "about 6 bits"},
      {"secret-token", "about 72 bits"},
      {std::string(64, 'c'), "only 1 distinct characters"},
      {"0123456789abcdef0123456789abcde", "about 124 bits"},  // 31 hex digits
  };
  for (const auto& [token, why] : weak) {
    ASSERT_TRUE(WriteTokenFile(path, token).ok());
    auto r = LoadTokenFile(path);
    ASSERT_FALSE(r.ok()) << token;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(why), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("head -c 32 /dev/urandom"), std::string::npos) << "says how to make one";
  }
  for (const std::string strong : {"0123456789abcdef0123456789abcdef", "q8RZ3xK1mLp0Vb7Tn2Wc9Yd4"}) {
    ASSERT_TRUE(WriteTokenFile(path, strong).ok());
    EXPECT_TRUE(LoadTokenFile(path).ok()) << strong;
  }
  EXPECT_TRUE(CheckTokenStrength(*GenerateToken(), "generated").ok());
}

TEST(TokensEqualTest, ComparesWholeStrings) {
  EXPECT_TRUE(TokensEqual("abc", "abc"));
  EXPECT_FALSE(TokensEqual("abc", "abd"));
  EXPECT_FALSE(TokensEqual("abc", "abcd"));
  EXPECT_FALSE(TokensEqual("", "a"));
  EXPECT_TRUE(TokensEqual("", ""));
}

TEST(GenerateTokenTest, TokensDiffer) { EXPECT_NE(*GenerateToken(), *GenerateToken()); }

}  // namespace
}  // namespace dsd::agent
