// Shared by the C++ tests: run code that is expected to refuse, and hand
// back the dlbridge::Error it threw so the test can check code and message.
#pragma once

#include <dlbridge/error.hpp>

#include <functional>
#include <optional>

namespace test_support {

// The error f throws, or nullopt (which the caller's ASSERT turns into a
// failure) when it returns normally.
inline std::optional<dlbridge::Error> error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const dlbridge::Error& e) {
    return e;
  }
  return std::nullopt;
}

}  // namespace test_support
