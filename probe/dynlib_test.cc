#include "probe/dynlib.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>

namespace dsd::probe {
namespace {

TEST(DynamicLibraryTest, OpensLibcAndResolvesSymbols) {
  auto lib = DynamicLibrary::Open("libc.so.6");
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  EXPECT_EQ(lib->path().front(), '/');  // the loader's real path, not the soname
  auto strlen_fn = lib->Symbol<size_t (*)(const char*)>("strlen");
  ASSERT_TRUE(strlen_fn.ok());
  EXPECT_EQ((*strlen_fn)("dsdoctor"), 8u);
  auto missing = lib->Symbol<void (*)()>("dsdoctor_no_such_symbol");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("dsdoctor_no_such_symbol"), std::string::npos);
}

TEST(DynamicLibraryTest, MissingLibraryIsNotFound) {
  auto lib = DynamicLibrary::Open("libdsdoctor-does-not-exist.so.9");
  ASSERT_FALSE(lib.ok());
  EXPECT_EQ(lib.status().code(), StatusCode::kNotFound);
}

TEST(FindAndOpenTest, SearchesDirectoriesAndRecordsAttempts) {
  LibrarySearch s{"test lib", "", {"libdsdoctor-nope.so", "libm.so.6"}, {"/nonexistent-a", "/nonexistent-*"}};
  std::vector<LoadAttempt> attempts;
  auto lib = FindAndOpen(s, &attempts);
  ASSERT_TRUE(lib.ok());
  ASSERT_EQ(attempts.size(), 1u);  // the bare libdsdoctor-nope.so before libm.so.6 worked
  EXPECT_EQ(attempts[0].candidate, "libdsdoctor-nope.so");
}

TEST(FindAndOpenTest, OverrideVariableIsExactWithoutFallback) {
  ::setenv("DSD_TEST_LIB_OVERRIDE", "/nonexistent/libforced.so", 1);
  LibrarySearch s{"forced lib", "DSD_TEST_LIB_OVERRIDE", {"libc.so.6"}, {}};
  auto lib = FindAndOpen(s);
  ::unsetenv("DSD_TEST_LIB_OVERRIDE");
  ASSERT_FALSE(lib.ok());  // libc.so.6 would load, but the override wins
  EXPECT_NE(lib.status().message().find("DSD_TEST_LIB_OVERRIDE=/nonexistent/libforced.so"), std::string::npos);
}

}  // namespace
}  // namespace dsd::probe
