// The functions both caster test modules bind, written once against dlbridge
// types only; casters_nanobind.cpp and casters_pybind11.cpp differ only in
// the binding framework.
#pragma once

#include <dlbridge/allocate.hpp>
#include <dlbridge/python/tensor_arg.hpp>

#include <complex>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace caster_test {

namespace req = dlbridge::require;

// "float32 (2, 3) cpu ro" for what the function received.
inline std::string describe(const dlbridge::TensorView& v) {
  std::string text = dlbridge::dtype_name(v.dtype()) + " (";
  for (int32_t d = 0; d < v.ndim(); ++d) text += (d ? ", " : "") + std::to_string(v.shape(d));
  text += ") " + dlbridge::to_string(v.device());
  return text + (v.readonly() ? " ro" : " rw");
}

// All a caller can observe of what the function received, for the tests that
// hold a caster's answer beside dlbridge.from_dlpack's: describe(), the
// strides, and the elements' bytes in row-major order (host memory only).
inline std::string snapshot(dlbridge::TensorView v) {
  std::string text = describe(v) + " strides " + dlbridge::dims_text(v.ndim(), v.strides());
  if (!dlbridge::is_host_accessible(v.device().type) || v.size() > 4096) return text;
  static const char digits[] = "0123456789abcdef";
  auto add_bytes = [&](const unsigned char* p, int64_t count) {
    for (int64_t i = 0; i < count; ++i) text += {digits[p[i] >> 4], digits[p[i] & 15]};
  };
  text += " data ";
  const auto* base = static_cast<const unsigned char*>(v.data());
  if (v.packed()) {  // several elements a byte: only a compact tensor has a byte order
    if (v.is_c_contiguous()) add_bytes(base, v.nbytes());
    return text;
  }
  const int64_t unit = v.dtype().element_bytes();
  std::vector<int64_t> index(size_t(v.ndim()), 0);
  for (int64_t n = 0; n < v.size(); ++n) {
    int64_t offset = 0;
    for (int32_t d = 0; d < v.ndim(); ++d) offset += index[size_t(d)] * v.stride(d);
    add_bytes(base + offset * unit, unit);
    for (int32_t d = v.ndim() - 1; d >= 0 && ++index[size_t(d)] == v.shape(d); --d) index[size_t(d)] = 0;
  }
  return text;
}

inline std::string view(dlbridge::TensorView v) { return describe(v); }
// Overloads that differ in the second argument only: a capsule must survive
// the first one's failed match.
inline std::string pick_int(dlbridge::TensorView v, int64_t) { return "int " + describe(v); }
inline std::string pick_text(dlbridge::TensorView v, const std::string&) { return "text " + describe(v); }
inline std::string float_matrix(dlbridge::TensorArg<req::dtype<float>, req::ndim<2>> v) { return describe(v); }
inline std::string on_cuda(dlbridge::TensorArg<req::device<dlbridge::abi::kDLCUDA>> v) { return describe(v); }
// The three ways to read the checked view (docs/cpp-extensions.md): x.view(), *x, and x itself.
inline std::string compact(dlbridge::TensorArg<req::c_contiguous> v) { return describe(v.view()); }
inline std::string writable(dlbridge::TensorArg<req::writable> v) { return describe(*v); }
// Signatures only (test_caster_signatures.py): more of the words a type names.
inline std::string scalar_flag(dlbridge::TensorArg<req::dtype<bool>, req::ndim<0>, req::host_accessible> v) {
  return describe(v);
}
inline std::string pinned_row(
    dlbridge::TensorArg<req::dtype<std::complex<double>>, req::ndim<1>, req::device<dlbridge::abi::kDLCUDAHost>> v) {
  return describe(v);
}

// The address of element 0 as the function saw it: zero-copy is checkable.
inline uintptr_t address(dlbridge::TensorView v) { return reinterpret_cast<uintptr_t>(v.data()); }

// Owned tensors the module keeps after the call returned.
inline std::vector<dlbridge::ManagedTensor>& kept() {
  static std::vector<dlbridge::ManagedTensor> tensors;
  return tensors;
}
inline void keep(dlbridge::ManagedTensor t) { kept().push_back(std::move(t)); }
inline double kept_sum() {
  double sum = 0;
  for (const auto& t : kept()) {
    const auto* data = static_cast<const double*>(t.view().data());
    for (int64_t i = 0; i < t.view().size(); ++i) sum += data[i];
  }
  return sum;
}
inline void drop_kept() { kept().clear(); }

// Back to Python as a dlbridge.Tensor: the same memory, still owned.
inline dlbridge::ManagedTensor pass_through(dlbridge::ManagedTensor t) { return t; }

inline dlbridge::ManagedTensor arange(int64_t n) {
  dlbridge::ManagedTensor out = dlbridge::allocate_compact(dlbridge::dtype_of<int32_t>(), {n});
  auto* data = static_cast<int32_t*>(out.view().data());
  for (int64_t i = 0; i < n; ++i) data[i] = int32_t(i);
  return out;
}

}  // namespace caster_test
