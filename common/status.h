// Status and Result<T>: values for expected failures (bad input, missing library, I/O error).
// Exceptions are reserved for programming errors and are caught at the CLI boundary.
// Both types are plain values: copyable, movable, no shared state, thread-compatible.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace dsd {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // bad user input: flag, hostfile, config, frame
  kNotFound,         // a file, library, symbol or host that is not there
  kIoError,          // a system call failed
  kTimeout,
  kUnavailable,      // a peer or service did not answer
  kPermissionDenied,
  kCorruption,       // data on disk or on the wire is malformed
  kUnimplemented,
  kInternal,
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "NotFound: libnccl.so.2: cannot open shared object file"
  std::string ToString() const;

  // Returns a copy whose message is "<context>: <message>", so errors read outside-in.
  Status WithContext(const std::string& context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status IoError(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
inline Status Timeout(std::string m) { return {StatusCode::kTimeout, std::move(m)}; }
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status PermissionDenied(std::string m) { return {StatusCode::kPermissionDenied, std::move(m)}; }
inline Status Corruption(std::string m) { return {StatusCode::kCorruption, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status Unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
// IoError carrying strerror(errno_value).
Status ErrnoError(const std::string& what, int errno_value);

// Either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}                   // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) { assert(!std::get<Status>(v_).ok()); }  // NOLINT

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T value_or(T fallback) const { return ok() ? value() : std::move(fallback); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace dsd

#define DSD_CONCAT_INNER(a, b) a##b
#define DSD_CONCAT(a, b) DSD_CONCAT_INNER(a, b)

// Returns the Status from the enclosing function when it is not OK.
#define DSD_RETURN_IF_ERROR(expr)          \
  do {                                     \
    ::dsd::Status dsd_status_ = (expr);    \
    if (!dsd_status_.ok()) return dsd_status_; \
  } while (0)

// DSD_ASSIGN_OR_RETURN(auto x, Foo()): binds the value or returns the Status.
#define DSD_ASSIGN_OR_RETURN(lhs, expr)                          \
  auto DSD_CONCAT(dsd_result_, __LINE__) = (expr);               \
  if (!DSD_CONCAT(dsd_result_, __LINE__).ok())                   \
    return DSD_CONCAT(dsd_result_, __LINE__).status();           \
  lhs = std::move(DSD_CONCAT(dsd_result_, __LINE__)).value()
