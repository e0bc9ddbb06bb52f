// Device support that needs Python: where pip put the CUDA runtime, and
// __cuda_array_interface__.
#include <nanobind/stl/string.h>

#include <dlbridge/backend/registry.hpp>

#include <string>
#include <vector>

#include "array_like.hpp"
#include "gil.hpp"
#include "devices.hpp"

namespace dlbridge::python {

namespace {

// nvidia-* wheels install libcudart below a sys.path entry; the loader asks
// once, on the first CUDA request, so an import of dlbridge costs nothing.
std::vector<std::string> wheel_runtime_dirs() {
  std::vector<std::string> dirs;
  if (!Py_IsInitialized() || python_is_finalizing()) return dirs;
  PyGILState_STATE state = ensure_gil();
  PyObject* path = PySys_GetObject("path");  // borrowed
  if (path != nullptr && PyList_Check(path)) {
    for (Py_ssize_t i = 0; i < py::list_size(path); ++i) {
      nb::object entry = nb::steal(py::list_item_ref(path, i));
      const char* text = entry.is_valid() && PyUnicode_Check(entry.ptr()) ? py::utf8(entry.ptr()) : nullptr;
      if (text == nullptr) {
        PyErr_Clear();
        continue;
      }
      for (const std::string& sub : backend::cuda::wheel_runtime_subdirs())
        dirs.push_back(std::string(text) + "/" + sub);
    }
  }
  PyGILState_Release(state);
  return dirs;
}

// Registered when the extension loads; it only stores a function pointer.
const bool hints_registered = [] {
  backend::cuda::default_loader().set_hint_provider(&wheel_runtime_dirs);
  return true;
}();

[[noreturn]] void bad_interface(const std::string& what) {
  throw nb::type_error(("__cuda_array_interface__ " + what).c_str());
}

}  // namespace

Tensor tensor_from_cuda_array_interface(nb::handle x, nb::handle interface) {
  const ArrayInterface fields = read_array_interface(interface, "__cuda_array_interface__");
  nb::dict d = nb::borrow<nb::dict>(interface);
  if (d.contains("mask") && !d["mask"].is_none())
    detail::fail(ErrorCode::unsupported_layout,
                 "__cuda_array_interface__ has a mask; DLPack has no masked arrays.",
                 "Fill the masked elements and export the plain array.");
  const uintptr_t address = fields.address;

  // Which device holds the pointer is the runtime's knowledge, not the
  // current device's: CuPy and Numba export arrays of any device.
  const Device probe{abi::kDLCUDA, 0};
  auto cuda = backend::default_registry().find(abi::kDLCUDA);
  if (!cuda) fail_unsupported_device(abi::kDLCUDA);
  backend::Availability available = cuda->availability(probe);
  if (!available.available)
    fail_unavailable_device(probe, "reading __cuda_array_interface__ needs the CUDA runtime: " +
                                       available.reason);
  Device device = probe;
  if (address != 0) {
    auto info = cuda->pointer_info(reinterpret_cast<const void*>(address));
    if (!info)
      detail::fail(ErrorCode::invalid_tensor,
                   "The CUDA runtime does not know the pointer in __cuda_array_interface__.",
                   "The producer is broken or its memory was freed; report it there.");
    device = info->device;
  }

  // Version 3: "stream" is where the producer's work on the data is
  // queued (absent or None: nothing pending; 0 is forbidden). dlbridge
  // tensors are ready on the legacy default stream, so that stream waits
  // for the producer's without blocking the host. Managed or pinned
  // memory is read by the host directly, so there the host waits.
  if (d.contains("stream") && !d["stream"].is_none()) {
    nb::handle stream = d["stream"];
    int64_t value = 0;
    const IntRead read = read_int64(stream.ptr(), value);
    if (read == IntRead::not_an_int) bad_interface("'stream' must be None or an int.");
    if (read == IntRead::too_big) bad_interface("'stream' does not fit in 64 bits.");
    if (value == 0)
      detail::fail(ErrorCode::invalid_stream,
                   "__cuda_array_interface__ stream=0 is invalid: it is ambiguous between the "
                   "legacy and per-thread default streams.",
                   "The producer must export 1, 2 or a stream pointer.");
    // The value is a CUDA stream whatever the memory: resolve it as one
    // (the host rule would refuse every value but -1).
    const Device queue{abi::kDLCUDA, device.type == abi::kDLCUDA ? device.id : 0};
    const backend::Stream producer = backend::resolve_stream(queue, StreamArg{true, value});
    if (device.type == abi::kDLCUDA)
      cuda->wait_for(device, producer, backend::resolve_stream(device, StreamArg{}));
    else if (producer.kind != backend::StreamKind::no_sync)
      // kDLCUDAManaged: the backend synchronises it on the current device,
      // where a producer's 1 or 2 names its default stream.
      cuda->synchronize(Device{abi::kDLCUDAManaged, 0}, producer);
  }

  return tensor_over_object(nb::make_tuple(x, interface), fields, device);
}

}  // namespace dlbridge::python
