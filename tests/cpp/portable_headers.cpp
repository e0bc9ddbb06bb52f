// The tensor model and its layout arithmetic, which compile on any C++17
// compiler: only platform/ and backend/ (and what includes them: the host
// allocator, the copy engine, the plans) are POSIX- and GCC/Clang-specific.
// scripts/test compiles this file with -fsyntax-only and the GNU and POSIX
// macros undefined, standing in for MSVC; tests/python/test_include_floors.py
// holds the list below to the headers that include neither folder.
#include <dlbridge/abi.hpp>
#include <dlbridge/buffer_view.hpp>
#include <dlbridge/compiler.hpp>
#include <dlbridge/device.hpp>
#include <dlbridge/dlpack_compat.hpp>
#include <dlbridge/dtype.hpp>
#include <dlbridge/error.hpp>
#include <dlbridge/export.hpp>
#include <dlbridge/layout.hpp>
#include <dlbridge/managed_tensor.hpp>
#include <dlbridge/request.hpp>
#include <dlbridge/tensor_view.hpp>
#include <dlbridge/version.hpp>

#if defined(__GNUC__) || defined(__unix__) || defined(__APPLE__)
#error "compile this file with the GNU and POSIX macros undefined (scripts/test)"
#endif

#include <cstdint>

// The standard overflow arithmetic, instantiated for the widths the core uses.
int main() {
  int64_t i = 0;
  uint64_t u = 0;
  return int(dlbridge::detail::add_overflow(int64_t(1), int64_t(2), i)) +
         int(dlbridge::detail::sub_overflow(uint64_t(1), uint64_t(2), u)) +
         int(dlbridge::detail::mul_overflow(i, i, i));
}
