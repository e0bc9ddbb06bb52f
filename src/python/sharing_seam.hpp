// The one place where the core extension (dlbridge._core) meets the sharing
// module (dlbridge._share: pickles, shared memory, CUDA IPC), which the
// build may leave out (-DDLBRIDGE_SHARE=OFF).
//
// The core binds the Tensor methods that belong to sharing (__reduce_ex__,
// __copy__, __deepcopy__, share_memory, is_shared) and empty(shared=True),
// and each calls the hook that the sharing module registered; without the
// module they refuse (sharing_seam.cpp says how). The sharing module is a
// separate shared library, so it reaches the few bindings functions it
// uses through the table the core publishes (_core._sharing_seam), never
// through a second copy of them (the Tensor type, the GIL helpers).
#pragma once

#include <cstddef>
#include <vector>

#include "bindings.hpp"

namespace dlbridge::python {

// What the sharing module provides; every pointer is set.
struct SharingHooks {
  nb::object (*reduce_ex)(nb::handle self, int protocol);
  nb::object (*copy)(const Tensor& t);
  nb::object (*deep_copy)(const Tensor& t);
  nb::object (*share_memory)(nb::handle self);
  bool (*is_shared)(const Tensor& t);
  Tensor (*empty_shared)(const std::vector<int64_t>& shape, DType dtype, Device device);
};

// What the core provides: the bindings functions the sharing sources call
// (declared in bindings.hpp and gil.hpp), and where the hooks go.
struct SharingSeam {
  // The sharing module refuses a core of another build: the table and the
  // Tensor it passes are only the same types within one build.
  const char* build;
  size_t size;
  nb::object (*wrap_tensor)(Tensor tensor);
  PyTypeObject* (*tensor_type)() noexcept;
  const Tensor& (*initialised_tensor)(nb::handle self, const char* method);
  Tensor (*tensor_from_managed)(ManagedTensor&& managed);
  Tensor (*tensor_over)(const TensorView& view, std::shared_ptr<void> owner);
  Tensor (*copy_tensor)(const Tensor& source, Device target, StreamArg consumer_stream);
  std::string (*utf8_of)(nb::handle text);
  IntRead (*read_int64)(PyObject* value, int64_t& out) noexcept;
  bool (*python_is_finalizing)() noexcept;
  void (*restore_thread)(PyThreadState* state) noexcept;
  PyGILState_STATE (*ensure_gil)() noexcept;
  void (*park_thread)() noexcept;
  void (*register_hooks)(const SharingHooks* hooks) noexcept;
};

// The build a seam belongs to: both modules compile this same string.
#define DLBRIDGE_SHARING_SEAM_BUILD DLBRIDGE_VERSION_STRING " " __VERSION__

// The capsule name of _core._sharing_seam.
inline constexpr const char* sharing_seam_capsule = "dlbridge._core.sharing_seam";

// --- sharing_seam.cpp (the core's side)
// Binds the sharing methods of dlbridge.Tensor and _core._sharing_seam;
// after bind_tensor.
void bind_sharing_seam(nb::module_& m);
// dlbridge.empty(..., shared=True), through the sharing module.
Tensor empty_shared_through_seam(const std::vector<int64_t>& shape, DType dtype, Device device);

}  // namespace dlbridge::python
