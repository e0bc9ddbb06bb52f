// What the tensor model asks of the compiler, with a standard C++17 form for
// every compiler: overflow-checked integer arithmetic and the attributes that
// place a function in the binary. GCC and Clang get their builtins and
// attributes; any other compiler gets the standard arithmetic below and
// attributes that change nothing but speed. Everything POSIX- or
// GCC-specific (shared libraries, vector sets) is in platform/.
#pragma once

#include <limits>
#include <type_traits>

// Keeps a function out of its callers, so that the common case beside it
// stays small (copy_into's general path; a caster's message-building
// failure path, which is also marked cold).
#if defined(__GNUC__)
#define DLBRIDGE_NOINLINE __attribute__((noinline))
#define DLBRIDGE_COLD_PATH __attribute__((noinline, cold))
#elif defined(_MSC_VER)
#define DLBRIDGE_NOINLINE __declspec(noinline)
#define DLBRIDGE_COLD_PATH __declspec(noinline)
#else
#define DLBRIDGE_NOINLINE
#define DLBRIDGE_COLD_PATH
#endif

// Groups a function with the other hot ones (.text.hot), so that its place
// in the binary, and with it its speed, does not depend on unrelated code:
// code layout alone measurably moves a small call such as
// numpy.from_dlpack(tensor) when the copy kernels beside it grow.
#if defined(__GNUC__)
#define DLBRIDGE_HOT __attribute__((hot))
#else
#define DLBRIDGE_HOT
#endif

namespace dlbridge::detail {

// The standard forms: a op b into out, true when the exact result does not
// fit in T (out then holds the result modulo 2^bits, as the builtins leave
// it). Every compiler runs them; GCC and Clang use their builtins instead,
// and tests/cpp/test_compiler.cpp holds the two to each other.
namespace standard {

template <typename T>
bool add_overflow(T a, T b, T& out) noexcept {
  static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>);
  using U = std::make_unsigned_t<T>;
  out = T(U(a) + U(b));
  if constexpr (std::is_signed_v<T>)
    return b > 0 ? a > std::numeric_limits<T>::max() - b : a < std::numeric_limits<T>::min() - b;
  else
    return out < a;
}

template <typename T>
bool sub_overflow(T a, T b, T& out) noexcept {
  static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>);
  using U = std::make_unsigned_t<T>;
  out = T(U(a) - U(b));
  if constexpr (std::is_signed_v<T>)
    return b > 0 ? a < std::numeric_limits<T>::min() + b : a > std::numeric_limits<T>::max() + b;
  else
    return a < b;
}

template <typename T>
bool mul_overflow(T a, T b, T& out) noexcept {
  static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>);
  // Multiplied as unsigned, wide enough that int8/int16 do not promote to a
  // signed int that could itself overflow.
  using U = std::common_type_t<std::make_unsigned_t<T>, unsigned>;
  out = T(U(a) * U(b));
  constexpr T max = std::numeric_limits<T>::max(), min = std::numeric_limits<T>::min();
  if (a == 0 || b == 0) return false;
  if constexpr (std::is_signed_v<T>) {
    if (a > 0) return b > 0 ? a > max / b : b < min / a;
    return b > 0 ? a < min / b : a < max / b;
  } else {
    return a > max / b;
  }
}

}  // namespace standard

#if defined(__GNUC__)
template <typename T>
bool add_overflow(T a, T b, T& out) noexcept {
  return __builtin_add_overflow(a, b, &out);
}
template <typename T>
bool sub_overflow(T a, T b, T& out) noexcept {
  return __builtin_sub_overflow(a, b, &out);
}
template <typename T>
bool mul_overflow(T a, T b, T& out) noexcept {
  return __builtin_mul_overflow(a, b, &out);
}
#else
using standard::add_overflow;
using standard::mul_overflow;
using standard::sub_overflow;
#endif

}  // namespace dlbridge::detail
