#include "common/status.h"

#include <gtest/gtest.h>

#include <cerrno>

namespace dsd {
namespace {

Result<int> Half(int x) {
  if (x % 2) return InvalidArgument("odd: " + std::to_string(x));
  return x / 2;
}

Result<int> Quarter(int x) {
  DSD_ASSIGN_OR_RETURN(int h, Half(x));
  return Half(h);
}

TEST(StatusTest, OkAndErrorCarryCodeAndMessage) {
  EXPECT_TRUE(Status::Ok().ok());
  Status s = NotFound("libnccl.so.2");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.ToString(), "NotFound: libnccl.so.2");
  EXPECT_EQ(s.WithContext("probe").message(), "probe: libnccl.so.2");
}

TEST(StatusTest, ErrnoMapsToCodes) {
  EXPECT_EQ(ErrnoError("x", ENOENT).code(), StatusCode::kNotFound);
  EXPECT_EQ(ErrnoError("x", EACCES).code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(ErrnoError("x", ETIMEDOUT).code(), StatusCode::kTimeout);
  EXPECT_NE(ErrnoError("/etc/x", ENOENT).message().find("/etc/x"), std::string::npos);
}

TEST(ResultTest, AssignOrReturnPropagates) {
  EXPECT_EQ(*Quarter(8), 2);
  auto bad = Quarter(6);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "odd: 3");
  EXPECT_EQ(bad.value_or(-1), -1);
}

}  // namespace
}  // namespace dsd
