// Device support that needs Python: where pip put the CUDA runtime, and
// __cuda_array_interface__.
#include <nanobind/stl/string.h>

#include <dlbridge/backend/registry.hpp>

#include <string>
#include <vector>

#include "devices.hpp"

namespace dlbridge::python {

namespace {

// nvidia-* wheels install libcudart below a sys.path entry; the loader asks
// once, on the first CUDA request, so an import of dlbridge costs nothing.
std::vector<std::string> wheel_runtime_dirs() {
  std::vector<std::string> dirs;
  if (!Py_IsInitialized() || python_is_finalizing()) return dirs;
  PyGILState_STATE state = PyGILState_Ensure();
  PyObject* path = PySys_GetObject("path");  // borrowed
  if (path != nullptr && PyList_Check(path)) {
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(path); ++i) {
      PyObject* entry = PyList_GET_ITEM(path, i);
      const char* text = PyUnicode_Check(entry) ? PyUnicode_AsUTF8(entry) : nullptr;
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

std::vector<int64_t> ints(nb::handle value, const char* what) {
  std::vector<int64_t> out;
  if (!PyTuple_Check(value.ptr()) && !PyList_Check(value.ptr()))
    bad_interface(std::string(what) + " must be a tuple of ints.");
  for (nb::handle item : nb::borrow<nb::sequence>(value)) {
    if (!PyLong_Check(item.ptr())) bad_interface(std::string(what) + " must hold ints.");
    out.push_back(nb::cast<int64_t>(item));
  }
  return out;
}

// "<f4", "|u1", "<c8", "|b1": little-endian or byte-sized numbers only.
DType dtype_of(const std::string& typestr) {
  auto refuse = [&]() -> DType {
    detail::fail(ErrorCode::unsupported_dtype,
                 "dlbridge cannot represent the element type '" + typestr + "' in DLPack.",
                 "Convert the data to a little-endian numeric dtype first.");
  };
  if (typestr.size() < 3 || typestr[0] == '>') return refuse();
  int64_t bytes = 0;
  for (size_t i = 2; i < typestr.size(); ++i) {
    if (typestr[i] < '0' || typestr[i] > '9' || bytes > 16) return refuse();
    bytes = bytes * 10 + (typestr[i] - '0');
  }
  if (bytes < 1 || bytes > 16) return refuse();
  const auto bits = uint8_t(bytes * 8);
  switch (typestr[1]) {
    case 'b': return bytes == 1 ? DType{abi::kDLBool, 8, 1} : refuse();
    case 'i': return DType{abi::kDLInt, bits, 1};
    case 'u': return DType{abi::kDLUInt, bits, 1};
    case 'f': return DType{abi::kDLFloat, bits, 1};
    case 'c': return DType{abi::kDLComplex, bits, 1};
  }
  return refuse();
}

// Keeps the exporting object alive while the tensor is; the last reference
// may drop on any thread or during shutdown.
struct Owner {
  PyObject* object = nullptr;
  ~Owner() {
    if (!Py_IsInitialized() || python_is_finalizing()) return;
    PyGILState_STATE state = PyGILState_Ensure();
    Py_XDECREF(object);
    PyGILState_Release(state);
  }
};

}  // namespace

Tensor import_cuda_array_interface(nb::handle x, nb::handle interface) {
  if (!PyDict_Check(interface.ptr())) bad_interface("must be a dict.");
  nb::dict d = nb::borrow<nb::dict>(interface);
  if (!d.contains("shape") || !d.contains("typestr") || !d.contains("data"))
    bad_interface("needs 'shape', 'typestr' and 'data'.");
  if (d.contains("mask") && !d["mask"].is_none())
    detail::fail(ErrorCode::unsupported_layout,
                 "__cuda_array_interface__ has a mask; DLPack has no masked arrays.",
                 "Fill the masked elements and export the plain array.");
  const DType dtype = dtype_of(nb::cast<std::string>(d["typestr"]));
  const std::vector<int64_t> shape = ints(d["shape"], "shape");
  std::vector<int64_t> strides;
  if (d.contains("strides") && !d["strides"].is_none()) {
    const int64_t item = int64_t(dtype.element_bytes());
    for (int64_t s : ints(d["strides"], "strides")) {
      if (s % item != 0)
        detail::fail(ErrorCode::unsupported_layout,
                     "A byte stride of " + std::to_string(s) + " is not a multiple of the item "
                     "size " + std::to_string(item) + "; DLPack counts strides in elements.",
                     "Copy the data into a regular array first.");
      strides.push_back(s / item);
    }
  }
  nb::handle data = d["data"];
  if (!PyTuple_Check(data.ptr()) || PyTuple_GET_SIZE(data.ptr()) != 2)
    bad_interface("'data' must be a (pointer, read_only) tuple.");
  const auto address = nb::cast<uintptr_t>(nb::borrow<nb::tuple>(data)[0]);
  const bool readonly = nb::cast<bool>(nb::borrow<nb::tuple>(data)[1]);

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
  // for the producer's without blocking the host.
  if (d.contains("stream") && !d["stream"].is_none() && device.type == abi::kDLCUDA) {
    nb::handle stream = d["stream"];
    if (!PyLong_Check(stream.ptr()) || PyBool_Check(stream.ptr()))
      bad_interface("'stream' must be None or an int.");
    const auto value = nb::cast<int64_t>(stream);
    if (value == 0)
      detail::fail(ErrorCode::invalid_stream,
                   "__cuda_array_interface__ stream=0 is invalid: it is ambiguous between the "
                   "legacy and per-thread default streams.",
                   "The producer must export 1, 2 or a stream pointer.");
    const backend::Stream producer = backend::resolve_stream(device, StreamArg{true, value});
    cuda->wait_for(device, producer, backend::resolve_stream(device, StreamArg{}));
  }

  const uint64_t flags = readonly ? DLBRIDGE_FLAG_READ_ONLY : 0;
  TensorView view = TensorView::from_data(reinterpret_cast<void*>(address), dtype, shape,
                                          strides, device, flags);
  auto owner = std::make_shared<Owner>();
  owner->object = nb::borrow(x).release().ptr();
  return tensor_from_managed(ManagedTensor::adopt(make_versioned(view, std::move(owner), flags)));
}

}  // namespace dlbridge::python
