// dlbridge::Error: one exception type whose stable code tells callers (and the
// Python layer, which maps each code to its own exception class) what failed.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace dlbridge {

// The stable codes (docs/errors.md). Their spelling is part of the public contract:
// docs/errors.md documents each, and Python exposes them as `.code`.
enum class ErrorCode {
  unsupported_device_type,
  device_unavailable,
  unsupported_dtype,
  unsupported_layout,
  read_only,
  unsupported_version,
  copy_required,
  invalid_stream,
  capsule_consumed,
  invalid_tensor,
  invalid_argument,  // bad argument values: Python maps it to ValueError
  out_of_memory,     // allocation failure: Python maps it to MemoryError
};

inline constexpr ErrorCode all_error_codes[] = {
    ErrorCode::unsupported_device_type, ErrorCode::device_unavailable,
    ErrorCode::unsupported_dtype,       ErrorCode::unsupported_layout,
    ErrorCode::read_only,               ErrorCode::unsupported_version,
    ErrorCode::copy_required,           ErrorCode::invalid_stream,
    ErrorCode::capsule_consumed,        ErrorCode::invalid_tensor,
    ErrorCode::invalid_argument,        ErrorCode::out_of_memory,
};

constexpr std::string_view error_code_name(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::unsupported_device_type: return "unsupported_device_type";
    case ErrorCode::device_unavailable: return "device_unavailable";
    case ErrorCode::unsupported_dtype: return "unsupported_dtype";
    case ErrorCode::unsupported_layout: return "unsupported_layout";
    case ErrorCode::read_only: return "read_only";
    case ErrorCode::unsupported_version: return "unsupported_version";
    case ErrorCode::copy_required: return "copy_required";
    case ErrorCode::invalid_stream: return "invalid_stream";
    case ErrorCode::capsule_consumed: return "capsule_consumed";
    case ErrorCode::invalid_tensor: return "invalid_tensor";
    case ErrorCode::invalid_argument: return "invalid_argument";
    case ErrorCode::out_of_memory: return "out_of_memory";
  }
  return "unknown";
}

// what() is "<message> <hint>", so a plain catch still shows the fix.
class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message, std::string hint = {})
      : std::runtime_error(hint.empty() ? message : message + " " + hint),
        code_(code),
        message_(message),
        hint_(std::move(hint)) {}

  ErrorCode code() const noexcept { return code_; }
  std::string_view code_name() const noexcept { return error_code_name(code_); }
  // What was found, without the fix.
  const std::string& message() const noexcept { return message_; }
  // What to do about it; may be empty.
  const std::string& hint() const noexcept { return hint_; }

 private:
  ErrorCode code_;
  std::string message_;
  std::string hint_;
};

namespace detail {
[[noreturn]] inline void fail(ErrorCode code, const std::string& message,
                              std::string hint = {}) {
  throw Error(code, message, std::move(hint));
}
}  // namespace detail

}  // namespace dlbridge
