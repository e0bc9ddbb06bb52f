// dlbridge::Error: one exception type whose stable code tells callers (and the
// Python layer, which maps each code to its own exception class) what failed.
#pragma once

#include <cstddef>
#include <exception>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace dlbridge {

// The one table of error codes. Every layer reads it: the ErrorCode enum and
// its names below, the C exchange API's error kinds (exchange_api.hpp), the
// Python extension's exception mapping (src/python/errors.cpp) and the
// Python classes (python/dlbridge/errors.py builds them from this table
// through the extension). docs/errors.md documents each code from
// python/dlbridge/catalogue/dlbridge.json; tests/python/test_error_table.py
// checks that the two agree.
//
// X(code, python_class, python_bases, meaning):
//
//     code          the stable name: the C++ enumerator, Python's `.code`;
//     python_class  the dlbridge exception class, or the built-in one
//                   (ValueError, MemoryError) for codes Python reports as such;
//     python_bases  the class's bases, in order; empty for built-ins;
//     meaning       one line: what went wrong (the class docstring).
#define DLBRIDGE_ERROR_CODES(X)                                                              \
  X(unsupported_device_type, "UnsupportedDeviceError", "DLPackError",                       \
    "A DLDeviceType that this build cannot serve.")                                         \
  X(device_unavailable, "DeviceUnavailableError", "DLPackError",                            \
    "A supported device type whose backend or device id is absent here.")                   \
  X(unsupported_dtype, "UnsupportedDTypeError", "DLPackError",                              \
    "A dtype that the target cannot hold.")                                                 \
  X(unsupported_layout, "LayoutError", "DLPackError",                                       \
    "Strides or offsets the target cannot represent without a forbidden copy.")             \
  X(read_only, "ReadOnlyError", "DLPackError",                                              \
    "Read-only data requested as writable (convert with copy=False included), or as a "    \
    "legacy capsule without copy=True.")                                                   \
  X(unsupported_version, "VersionError", "DLPackError",                                     \
    "A DLPack major version from the future, or a max_version that cannot be met.")         \
  X(copy_required, "CopyRequiredError", "DLPackError ValueError",                           \
    "copy=False where only a copy would do (also a ValueError, as the array API asks).")    \
  X(invalid_stream, "StreamError", "DLPackError ValueError",                                \
    "A stream value that is invalid for the device (also a ValueError: a bad argument).")   \
  X(capsule_consumed, "ConsumedCapsuleError", "DLPackError",                                \
    "A DLPack capsule that was already consumed.")                                          \
  X(invalid_tensor, "InvalidTensorError", "DLPackError", "A malformed DLTensor.")           \
  X(producer_refused, "ProducerError", "DLPackError",                                       \
    "The producer refused the export for a reason no other code names; its exception "     \
    "is the __cause__.")                                                                    \
  X(not_an_array, "NotAnArrayError", "DLPackError TypeError",                               \
    "A leaf of a structure that is not an array (also a TypeError: a bad argument).")       \
  X(invalid_argument, "ValueError", "", "An argument value dlbridge cannot use.")           \
  X(out_of_memory, "MemoryError", "", "An allocation failed.")

enum class ErrorCode {
#define DLBRIDGE_ERROR_ENUMERATOR(code, python_class, python_bases, meaning) code,
  DLBRIDGE_ERROR_CODES(DLBRIDGE_ERROR_ENUMERATOR)
#undef DLBRIDGE_ERROR_ENUMERATOR
};

struct ErrorCodeInfo {
  ErrorCode code;
  std::string_view name;
  std::string_view python_class;
  std::string_view python_bases;  // space-separated; empty for a built-in class
  std::string_view meaning;
};

inline constexpr ErrorCodeInfo error_code_table[] = {
#define DLBRIDGE_ERROR_ROW(code, python_class, python_bases, meaning) \
  {ErrorCode::code, #code, python_class, python_bases, meaning},
    DLBRIDGE_ERROR_CODES(DLBRIDGE_ERROR_ROW)
#undef DLBRIDGE_ERROR_ROW
};

inline constexpr size_t error_code_count = sizeof(error_code_table) / sizeof(error_code_table[0]);

// The table's row of code (rows are in enumerator order).
constexpr const ErrorCodeInfo& error_code_info(ErrorCode code) noexcept {
  return error_code_table[static_cast<size_t>(code)];
}

constexpr std::string_view error_code_name(ErrorCode code) noexcept {
  return static_cast<size_t>(code) < error_code_count ? error_code_info(code).name : "unknown";
}

// The code of a name of the table; false when there is none.
constexpr bool find_error_code(std::string_view name, ErrorCode& out) noexcept {
  for (const ErrorCodeInfo& row : error_code_table)
    if (row.name == name) {
      out = row.code;
      return true;
    }
  return false;
}

// Whether Python reports the code as a built-in exception (ValueError,
// MemoryError) rather than a dlbridge.DLPackError.
constexpr bool is_builtin_python_error(ErrorCode code) noexcept {
  return error_code_info(code).python_bases.empty();
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

// The one way an exception stops at a boundary C cannot cross (a C function
// pointer of the exchange API, a Python slot): body's result, or `failed`
// after on_error (noexcept) has been handed the exception to report.
template <typename Result, typename OnError, typename Body>
Result error_boundary(Result failed, OnError&& on_error, Body&& body) noexcept {
  try {
    return body();
  } catch (...) {
    std::exception_ptr error = std::current_exception();
    // A thread's exit (pthread_exit, cancellation) unwinds with no exception
    // object: it is no error to report, may not end in a handler, and cannot
    // go on through this frame to a C caller. (Caught by type, as
    // abi::__forced_unwind, UBSan reports binding the missing object.)
    if (!error) std::terminate();
    on_error(std::move(error));
    return failed;
  }
}

[[noreturn]] inline void fail(ErrorCode code, const std::string& message,
                              std::string hint = {}) {
  throw Error(code, message, std::move(hint));
}
}  // namespace detail

}  // namespace dlbridge
