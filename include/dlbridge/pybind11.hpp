// pybind11 type casters for dlbridge tensors. Include after
// <pybind11/pybind11.h>; then extension functions may take
//
//   dlbridge::TensorView            borrowed for the call, validated
//   dlbridge::TensorArg<require...> the same, plus requirements in its type
//   dlbridge::ManagedTensor         owned: the function may keep it
//
// from any object that dlbridge.from_dlpack reads, and return
// dlbridge::ManagedTensor as a dlbridge.Tensor (which exports __dlpack__).
// pybind11 has no DLPack support of its own; this gives it dlbridge's. A
// tensor that cannot be used raises dlbridge's coded DLPackError (with .code
// and .hint); an object that is no tensor at all lets pybind11 try the next
// overload. See docs/cpp-extensions.md.
#pragma once

#include <pybind11/pybind11.h>

#include "detail/python_bridge.hpp"
#include "managed_tensor.hpp"
#include "tensor_arg.hpp"
#include "tensor_view.hpp"

namespace dlbridge::detail {

// True with out filled, false for "not a tensor", and
// pybind11::error_already_set for a refusal.
inline bool pybind11_outcome(python_bridge::ImportOutcome outcome) {
  switch (outcome) {
    case python_bridge::ImportOutcome::imported: return true;
    case python_bridge::ImportOutcome::not_a_tensor: return false;
    case python_bridge::ImportOutcome::failed: break;
  }
  throw pybind11::error_already_set();
}

inline bool pybind11_import(pybind11::handle src, ManagedTensor& out) {
  return pybind11_outcome(python_bridge::import_managed(src.ptr(), out));
}

// The view is validated in place, in the caster's own value; owner keeps
// the producer's struct for the call.
inline bool pybind11_import(pybind11::handle src, python_bridge::CallOwner& owner, TensorView& view) {
  return pybind11_outcome(python_bridge::import_view(src.ptr(), owner, view));
}

template <typename Check>
void pybind11_check(Check&& check) {
  if (!python_bridge::check_or_set_error(check)) throw pybind11::error_already_set();
}

}  // namespace dlbridge::detail

PYBIND11_NAMESPACE_BEGIN(PYBIND11_NAMESPACE)
PYBIND11_NAMESPACE_BEGIN(detail)

template <>
struct type_caster<dlbridge::ManagedTensor> {
  PYBIND11_TYPE_CASTER(dlbridge::ManagedTensor, io_name("object", "dlbridge.Tensor"));

  bool load(handle src, bool) { return dlbridge::detail::pybind11_import(src, value); }

  static handle cast(dlbridge::ManagedTensor&& tensor, return_value_policy, handle) {
    PyObject* object = dlbridge::detail::python_bridge::to_python(std::move(tensor));
    if (object == nullptr) throw error_already_set();
    return object;
  }
};

// The view is the owner's: it lives as long as this caster, i.e. the call.
template <>
struct type_caster<dlbridge::TensorView> {
  PYBIND11_TYPE_CASTER(dlbridge::TensorView, const_name("object"));

  bool load(handle src, bool) { return dlbridge::detail::pybind11_import(src, owner, value); }

 private:
  dlbridge::detail::python_bridge::CallOwner owner;
};

template <typename... Requirements>
struct type_caster<dlbridge::TensorArg<Requirements...>> {
  PYBIND11_TYPE_CASTER(dlbridge::TensorArg<Requirements...>, const_name("object"));

  bool load(handle src, bool) {
    using Access = dlbridge::detail::TensorArgAccess;
    if (!dlbridge::detail::pybind11_import(src, owner, Access::unchecked_view(value))) return false;
    dlbridge::detail::pybind11_check([&] { Access::check(value); });
    return true;
  }

 private:
  dlbridge::detail::python_bridge::CallOwner owner;
};

PYBIND11_NAMESPACE_END(detail)
PYBIND11_NAMESPACE_END(PYBIND11_NAMESPACE)
