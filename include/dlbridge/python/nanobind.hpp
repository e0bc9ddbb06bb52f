// nanobind type casters for dlbridge tensors. Include after
// <nanobind/nanobind.h>; then extension functions may take
//
//   dlbridge::TensorView            borrowed for the call, validated
//   dlbridge::TensorArg<require...> the same, plus requirements in its type
//   dlbridge::ManagedTensor         owned: the function may keep it
//
// from any object that dlbridge.from_dlpack reads, and return
// dlbridge::ManagedTensor as a dlbridge.Tensor (which exports __dlpack__).
// Every argument is read by the installed dlbridge package, so a tensor is
// accepted or refused exactly as dlbridge.from_dlpack would (refusals are its
// coded DLPackError, with .code and .hint); an object that is no tensor at
// all lets nanobind try the next overload, as nb::ndarray does. The caster
// itself is caster.hpp's, shared with pybind11.hpp. See docs/cpp-extensions.md.
#pragma once

#include <nanobind/nanobind.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <utility>

#include "../managed_tensor.hpp"
#include "../tensor_view.hpp"
#include "caster.hpp"
#include "tensor_arg.hpp"

namespace dlbridge::python {

struct NanobindGlue {
  [[noreturn]] static void raise() { throw nanobind::python_error(); }
  template <size_t N>
  static constexpr auto text(const char (&s)[N]) {
    return nanobind::detail::const_name(s);
  }
  template <size_t V>
  static constexpr auto number() {
    return nanobind::detail::const_name<V>();
  }
  template <size_t N1, size_t N2>
  static constexpr auto io_text(const char (&in)[N1], const char (&out)[N2]) {
    return nanobind::detail::io_name(in, out);
  }
};

// Call in NB_MODULE to make a missing or mismatched dlbridge package an
// ImportError of this module's import, instead of its first tensor call's.
// Thrown as a C++ exception, whose text becomes the ImportError's own: nanobind
// would put a Python error under a generic "initialization failed".
inline void require_dlbridge(nanobind::module_&) {
  if (!load_dlbridge()) throw std::runtime_error(bridge::take_error_text());
}

}  // namespace dlbridge::python

NAMESPACE_BEGIN(NB_NAMESPACE)
NAMESPACE_BEGIN(detail)

// nanobind's caster protocol around the shared caster. The argument is
// taken from the caster (operator cast_t) only once every argument has
// loaded, so that is where a capsule is consumed: an overload that fails on
// another argument leaves it for the next one.
template <typename Value_>
struct dlbridge_type_caster {
  using Value = Value_;
  using Shared = dlbridge::python::TensorCaster<Value, dlbridge::python::NanobindGlue>;
  static constexpr auto Name = Shared::name();
  template <typename T_>
  using Cast = movable_cast_t<T_>;
  template <typename T_>
  static constexpr bool can_cast() {
    return true;
  }

  bool from_python(handle src, uint8_t, cleanup_list*) { return shared.load(src.ptr()); }

  explicit operator Value*() { return &shared.committed(); }
  explicit operator Value&() { return shared.committed(); }
  explicit operator Value&&() { return std::move(shared.committed()); }

  Shared shared;
};

template <>
struct type_caster<dlbridge::TensorView> : dlbridge_type_caster<dlbridge::TensorView> {};

template <typename... Requirements>
struct type_caster<dlbridge::TensorArg<Requirements...>>
    : dlbridge_type_caster<dlbridge::TensorArg<Requirements...>> {};

template <>
struct type_caster<dlbridge::ManagedTensor> : dlbridge_type_caster<dlbridge::ManagedTensor> {
  static handle from_cpp(dlbridge::ManagedTensor&& tensor, rv_policy, cleanup_list*) noexcept {
    return Shared::to_python(std::move(tensor));
  }
};

NAMESPACE_END(detail)
NAMESPACE_END(NB_NAMESPACE)
