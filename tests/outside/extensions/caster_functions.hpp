// The functions both caster test modules bind, written once against dlbridge
// types only; casters_nanobind.cpp and casters_pybind11.cpp differ only in
// the binding framework.
#pragma once

#include <dlbridge/allocate.hpp>
#include <dlbridge/tensor_arg.hpp>

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

inline std::string view(dlbridge::TensorView v) { return describe(v); }
inline std::string float_matrix(dlbridge::TensorArg<req::dtype<float>, req::ndim<2>> v) { return describe(v); }
inline std::string on_cuda(dlbridge::TensorArg<req::device<dlbridge::abi::kDLCUDA>> v) { return describe(v); }
inline std::string compact(dlbridge::TensorArg<req::c_contiguous> v) { return describe(v); }
inline std::string writable(dlbridge::TensorArg<req::writable> v) { return describe(v); }

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
