// pybind11 type casters for dlbridge tensors. Include after
// <pybind11/pybind11.h>; then extension functions may take
//
//   dlbridge::TensorView            borrowed for the call, validated
//   dlbridge::TensorArg<require...> the same, plus requirements in its type
//   dlbridge::ManagedTensor         owned: the function may keep it
//
// from any object that dlbridge.from_dlpack reads, and return
// dlbridge::ManagedTensor as a dlbridge.Tensor (which exports __dlpack__).
// pybind11 has no DLPack support of its own; this gives it dlbridge's. Every
// argument is read by the installed dlbridge package, so a tensor is
// accepted or refused exactly as dlbridge.from_dlpack would (refusals are its
// coded DLPackError, with .code and .hint); an object that is no tensor at
// all lets pybind11 try the next overload. The caster itself is caster.hpp's,
// shared with nanobind.hpp. See docs/cpp-extensions.md.
#pragma once

#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <utility>

#include "../managed_tensor.hpp"
#include "../tensor_view.hpp"
#include "caster.hpp"
#include "tensor_arg.hpp"

namespace dlbridge::python {

struct Pybind11Glue {
  [[noreturn]] static void raise() { throw pybind11::error_already_set(); }
  template <size_t N>
  static constexpr auto text(const char (&s)[N]) {
    return pybind11::detail::const_name(s);
  }
  template <size_t V>
  static constexpr auto number() {
    return pybind11::detail::const_name<V>();
  }
  template <size_t N1, size_t N2>
  static constexpr auto io_text(const char (&in)[N1], const char (&out)[N2]) {
    return pybind11::detail::io_name(in, out);
  }
};

// Call in PYBIND11_MODULE to make a missing or mismatched dlbridge package an
// ImportError of this module's import, instead of its first tensor call's.
// Thrown as a C++ exception, whose text becomes the ImportError's own: pybind11
// would put a Python error under a generic "initialization failed".
inline void require_dlbridge(pybind11::module_&) {
  if (!load_dlbridge()) throw std::runtime_error(bridge::take_error_text());
}

}  // namespace dlbridge::python

PYBIND11_NAMESPACE_BEGIN(PYBIND11_NAMESPACE)
PYBIND11_NAMESPACE_BEGIN(detail)

// pybind11's caster protocol around the shared caster. The argument is
// taken from the caster (cast_op) only once every argument has loaded, so
// that is where a capsule is consumed: an overload that fails on another
// argument leaves it for the next one.
template <typename Value>
class dlbridge_type_caster {
 protected:
  using Shared = dlbridge::python::TensorCaster<Value, dlbridge::python::Pybind11Glue>;
  Shared shared;

 public:
  static constexpr auto name = Shared::name();

  bool load(handle src, bool) { return shared.load(src.ptr()); }

  operator Value*() { return &shared.committed(); }
  operator Value&() { return shared.committed(); }
  operator Value&&() && { return std::move(shared.committed()); }
  template <typename T_>
  using cast_op_type = movable_cast_op_type<T_>;
};

template <>
class type_caster<dlbridge::TensorView> : public dlbridge_type_caster<dlbridge::TensorView> {};

template <typename... Requirements>
class type_caster<dlbridge::TensorArg<Requirements...>>
    : public dlbridge_type_caster<dlbridge::TensorArg<Requirements...>> {};

template <>
class type_caster<dlbridge::ManagedTensor> : public dlbridge_type_caster<dlbridge::ManagedTensor> {
 public:
  static handle cast(dlbridge::ManagedTensor&& tensor, return_value_policy, handle) {
    PyObject* object = Shared::to_python(std::move(tensor));
    if (object == nullptr) throw error_already_set();
    return object;
  }
};

PYBIND11_NAMESPACE_END(detail)
PYBIND11_NAMESPACE_END(PYBIND11_NAMESPACE)
