// TensorArg<Requirements...>: a validated TensorView that also meets the
// requirements written in its type, for extension function signatures:
//
//   using Image = dlbridge::TensorArg<dlbridge::require::dtype<float>,
//                                     dlbridge::require::ndim<2>,
//                                     dlbridge::require::writable,
//                                     dlbridge::require::cpu>;
//   void blur(Image image);   // with <dlbridge/python/nanobind.hpp> or <dlbridge/python/pybind11.hpp>
//
// A tensor that misses one is refused with the code of what it missed
// (unsupported_dtype, unsupported_layout, device_unavailable, read_only) and a
// hint, never silently converted. The requirements are data (ArgRequirements),
// so they can also be built at run time. Plain C++ (no Python): it lives
// beside the casters that give it its meaning in a function signature.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "../abi.hpp"
#include "../device.hpp"
#include "../dtype.hpp"
#include "../error.hpp"
#include "../layout.hpp"
#include "../platform/platform.hpp"
#include "../tensor_view.hpp"

namespace dlbridge {

// What an argument must be. ImportPolicy holds the checks that TensorView
// already knows (writable, C-contiguous, host-accessible, alignment).
struct ArgRequirements {
  ImportPolicy policy;
  std::optional<DType> dtype;
  int32_t ndim = -1;  // any
  std::optional<abi::DLDeviceType> device_type;

  // Raises the first requirement that view misses.
  void check(const TensorView& view) const {
    if (!meets_own(view)) raise_own_miss(view);
    // The rest are TensorView's own checks; the two above are not asked
    // again.
    ImportPolicy rest = policy;
    rest.require_writable = false;
    rest.require_c_contiguous = false;
    view.check(rest);
  }

 private:
  // The requirements checked here rather than by TensorView::check.
  bool meets_own(const TensorView& view) const noexcept {
    return (!dtype || view.dtype() == *dtype) && (ndim < 0 || view.ndim() == ndim) &&
           (!device_type || view.device().type == *device_type) &&
           !(policy.require_writable && !owns_writable_memory(view)) &&
           !(policy.require_c_contiguous && !view.is_c_contiguous());
  }

  // A writable argument is how a function answers its caller: only memory
  // the caller's object holds meets it. A copy the import had to make (a
  // torch tensor's lazily resolved negation or conjugation, a producer's
  // IS_COPIED export) would take the writes and drop them.
  static bool owns_writable_memory(const TensorView& view) noexcept {
    return !view.readonly() && (view.flags() & DLBRIDGE_FLAG_IS_COPIED) == 0;
  }

  // Throws the first of meets_own's requirements that view misses.
  DLBRIDGE_COLD_PATH void raise_own_miss(const TensorView& view) const {
    if (dtype && view.dtype() != *dtype)
      detail::fail(ErrorCode::unsupported_dtype,
                   "This function takes " + dtype_name(*dtype) + " tensors; got " +
                       dtype_name(view.dtype()) + ".",
                   "Convert it first (NumPy: x.astype('" + dtype_name(*dtype) +
                       "'); PyTorch: x.to(torch." + dtype_name(*dtype) + ")).");
    if (ndim >= 0 && view.ndim() != ndim)
      detail::fail(ErrorCode::unsupported_layout,
                   "This function takes " + std::to_string(ndim) +
                       "-dimensional tensors; got " + std::to_string(view.ndim()) +
                       " dimensions.",
                   "Reshape it to " + std::to_string(ndim) + " dimensions first.");
    if (device_type && view.device().type != *device_type)
      detail::fail(ErrorCode::device_unavailable,
                   "This function takes tensors on " + device_type_label(*device_type) +
                       "; got one on " + to_string(view.device()) + ".",
                   "Move it there first (e.g. dlbridge.from_dlpack(x, device=...)).");
    // The two requirements a caller most often misses get a fix that fits a
    // function argument.
    // A copy first, as from_dlpack(x, copy=False) refuses it (read-only or not).
    if (policy.require_writable && (view.flags() & DLBRIDGE_FLAG_IS_COPIED) != 0)
      detail::fail(ErrorCode::copy_required,
                   "This function writes to its argument, and the tensor reaches it only as a copy "
                   "that its import had to make (a torch tensor with its negative or conjugate bit "
                   "set, Arrow booleans or chunks, a producer's IS_COPIED export): the writes would "
                   "be lost.",
                   "Pass a tensor whose memory holds its values, and use it afterwards (PyTorch: "
                   "x = x.resolve_neg().resolve_conj()).");
    if (policy.require_writable && view.readonly())
      detail::fail(ErrorCode::read_only,
                   "This function writes to its argument, and the tensor is read-only.",
                   "Pass a writable copy (NumPy: x.copy(); dlbridge: "
                   "dlbridge.from_dlpack(x, copy=True)).");
    if (policy.require_c_contiguous && !view.is_c_contiguous())
      detail::fail(ErrorCode::unsupported_layout,
                   "This function takes C-contiguous tensors; got strides " +
                       dlbridge::dims_text(view.ndim(), view.strides()) + " for shape " +
                       dlbridge::dims_text(view.ndim(), view.shape()) + ".",
                   "Pass a compact copy (NumPy: np.ascontiguousarray(x); PyTorch: "
                   "x.contiguous()).");
  }
};

// The requirement tags of TensorArg.
namespace require {
template <typename T>
struct dtype {};
template <int32_t N>
struct ndim {
  static_assert(N >= 0 && N <= max_ndim, "require::ndim<N>: N is out of range");
};
struct writable {};
struct c_contiguous {};
struct host_accessible {};
template <abi::DLDeviceType Type>
struct device {};
using cpu = device<abi::kDLCPU>;
}  // namespace require

namespace detail {

// The type casters' way to build a TensorArg in place: fill the view, then
// check it. Not for other use: a TensorArg is meant to hold a checked view.
struct TensorArgAccess;

template <typename T>
void apply_requirement(ArgRequirements& r, require::dtype<T>) { r.dtype = dtype_of<T>(); }
template <int32_t N>
void apply_requirement(ArgRequirements& r, require::ndim<N>) { r.ndim = N; }
inline void apply_requirement(ArgRequirements& r, require::writable) { r.policy.require_writable = true; }
inline void apply_requirement(ArgRequirements& r, require::c_contiguous) {
  r.policy.require_c_contiguous = true;
}
inline void apply_requirement(ArgRequirements& r, require::host_accessible) {
  r.policy.require_host_accessible = true;
}
template <abi::DLDeviceType Type>
void apply_requirement(ArgRequirements& r, require::device<Type>) { r.device_type = Type; }

template <typename Tag>
struct element_of {
  using type = void;
};
template <typename T>
struct element_of<require::dtype<T>> {
  using type = T;
};

// The element type named by a require::dtype<T> among Tags, else void.
template <typename... Tags>
struct element_type_of {
  using type = void;
};
template <typename First, typename... Rest>
struct element_type_of<First, Rest...> {
  using type = std::conditional_t<std::is_void_v<typename element_of<First>::type>,
                                  typename element_type_of<Rest...>::type,
                                  typename element_of<First>::type>;
};

}  // namespace detail

template <typename... Requirements>
class TensorArg {
 public:
  // float for require::dtype<float>; void when the dtype is not fixed.
  using element_type = typename detail::element_type_of<Requirements...>::type;

  static const ArgRequirements& requirements() {
    static const ArgRequirements r = [] {
      ArgRequirements out;
      (detail::apply_requirement(out, Requirements{}), ...);
      return out;
    }();
    return r;
  }

  // An empty argument; the type casters fill it in.
  TensorArg() = default;
  // Checks view against Requirements: throws dlbridge::Error if it misses one.
  explicit TensorArg(const TensorView& view) : view_(view) { requirements().check(view_); }

  // The checked view, three ways: x.view(), *x (as for a pointer or an
  // optional, which x->size() already reads like), or passed on as a
  // const TensorView&.
  const TensorView& view() const noexcept { return view_; }
  const TensorView& operator*() const noexcept { return view_; }
  const TensorView* operator->() const noexcept { return &view_; }
  operator const TensorView&() const noexcept { return view_; }

  // Element 0, typed when the dtype is fixed.
  element_type* data() const noexcept { return static_cast<element_type*>(view_.data()); }

 private:
  friend struct detail::TensorArgAccess;
  TensorView view_;
};

namespace detail {

struct TensorArgAccess {
  template <typename... Requirements>
  static TensorView& unchecked_view(TensorArg<Requirements...>& arg) noexcept {
    return arg.view_;
  }
  // Throws dlbridge::Error if the filled view misses a requirement.
  template <typename... Requirements>
  static void check(const TensorArg<Requirements...>& arg) {
    TensorArg<Requirements...>::requirements().check(arg.view_);
  }
};

}  // namespace detail

}  // namespace dlbridge
