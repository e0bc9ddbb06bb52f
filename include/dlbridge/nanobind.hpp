// nanobind type casters for dlbridge tensors. Include after
// <nanobind/nanobind.h>; then extension functions may take
//
//   dlbridge::TensorView            borrowed for the call, validated
//   dlbridge::TensorArg<require...> the same, plus requirements in its type
//   dlbridge::ManagedTensor         owned: the function may keep it
//
// from any object that dlbridge.from_dlpack reads, and return
// dlbridge::ManagedTensor as a dlbridge.Tensor (which exports __dlpack__).
// A tensor that cannot be used raises dlbridge's coded DLPackError (with
// .code and .hint); an object that is no tensor at all lets nanobind try the
// next overload, as nb::ndarray does. See docs/cpp-extensions.md.
#pragma once

#include <nanobind/nanobind.h>

#include "detail/python_bridge.hpp"
#include "managed_tensor.hpp"
#include "tensor_arg.hpp"
#include "tensor_view.hpp"

namespace dlbridge::detail {

// The import every caster below starts with: true with out filled, false
// for "not a tensor", and nanobind::python_error for a refusal.
inline bool nanobind_outcome(python_bridge::ImportOutcome outcome) {
  switch (outcome) {
    case python_bridge::ImportOutcome::imported: return true;
    case python_bridge::ImportOutcome::not_a_tensor: return false;
    case python_bridge::ImportOutcome::failed: break;
  }
  throw nanobind::python_error();
}

inline bool nanobind_import(nanobind::handle src, ManagedTensor& out) {
  return nanobind_outcome(python_bridge::import_managed(src.ptr(), out));
}

// The view is validated in place, in the caster's own value; owner keeps
// the producer's struct for the call.
inline bool nanobind_import(nanobind::handle src, python_bridge::CallOwner& owner, TensorView& view) {
  return nanobind_outcome(python_bridge::import_view(src.ptr(), owner, view));
}

template <typename Check>
void nanobind_check(Check&& check) {
  if (!python_bridge::check_or_set_error(check)) throw nanobind::python_error();
}

}  // namespace dlbridge::detail

NAMESPACE_BEGIN(NB_NAMESPACE)
NAMESPACE_BEGIN(detail)

template <>
struct type_caster<dlbridge::ManagedTensor> {
  NB_TYPE_CASTER(dlbridge::ManagedTensor, io_name("object", "dlbridge.Tensor"))

  bool from_python(handle src, uint8_t, cleanup_list*) {
    return dlbridge::detail::nanobind_import(src, value);
  }

  static handle from_cpp(dlbridge::ManagedTensor&& tensor, rv_policy, cleanup_list*) noexcept {
    return dlbridge::detail::python_bridge::to_python(std::move(tensor));
  }
};

// The view is the owner's: it lives as long as this caster, i.e. the call.
template <>
struct type_caster<dlbridge::TensorView> {
  NB_TYPE_CASTER(dlbridge::TensorView, const_name("object"))

  bool from_python(handle src, uint8_t, cleanup_list*) {
    return dlbridge::detail::nanobind_import(src, owner, value);
  }

  dlbridge::detail::python_bridge::CallOwner owner;
};

template <typename... Requirements>
struct type_caster<dlbridge::TensorArg<Requirements...>> {
  NB_TYPE_CASTER(dlbridge::TensorArg<Requirements...>, const_name("object"))

  bool from_python(handle src, uint8_t, cleanup_list*) {
    using Access = dlbridge::detail::TensorArgAccess;
    if (!dlbridge::detail::nanobind_import(src, owner, Access::unchecked_view(value))) return false;
    dlbridge::detail::nanobind_check([&] { Access::check(value); });
    return true;
  }

  dlbridge::detail::python_bridge::CallOwner owner;
};

NAMESPACE_END(detail)
NAMESPACE_END(NB_NAMESPACE)
