#include "common/status.h"

#include <cstring>

namespace dsd {

const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "InvalidArgument";
    case StatusCode::kNotFound: return "NotFound";
    case StatusCode::kIoError: return "IoError";
    case StatusCode::kTimeout: return "Timeout";
    case StatusCode::kUnavailable: return "Unavailable";
    case StatusCode::kPermissionDenied: return "PermissionDenied";
    case StatusCode::kCorruption: return "Corruption";
    case StatusCode::kUnimplemented: return "Unimplemented";
    case StatusCode::kInternal: return "Internal";
  }
  return "Unknown";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(StatusCodeName(code_)) + ": " + message_;
}

Status Status::WithContext(const std::string& context) const {
  if (ok()) return *this;
  return Status(code_, context + ": " + message_);
}

Status ErrnoError(const std::string& what, int errno_value) {
  StatusCode code = StatusCode::kIoError;
  if (errno_value == ENOENT) code = StatusCode::kNotFound;
  if (errno_value == EACCES || errno_value == EPERM) code = StatusCode::kPermissionDenied;
  if (errno_value == ETIMEDOUT) code = StatusCode::kTimeout;
  return Status(code, what + ": " + std::strerror(errno_value));
}

}  // namespace dsd
