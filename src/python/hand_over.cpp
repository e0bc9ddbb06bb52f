// Building another library's array from a dlbridge tensor through that
// library's DLPack C exchange API (managed_tensor_to_py_object_no_sync).
// Why: torch.from_dlpack is Python that probes keywords and asks
// __dlpack_device__ and __dlpack__ before its C++ runs; the table entry is
// that C++ alone (bench/callgrind.py compares the two).
#include "bindings.hpp"
#include "hand_over.hpp"

namespace dlbridge::python {

namespace {

using ExportContext = detail::ExportContext<abi::DLManagedTensorVersioned>;

// The entry steals the struct, but a library that fails may or may not have
// run its deleter first (torch drops a struct it could not convert without
// running it). The deleter of a handed-over struct therefore notes which
// struct it freed, so that a failed hand-over frees it exactly once. One
// note per thread: the GIL is held from the hand-over to the check.
thread_local const abi::DLManagedTensorVersioned* freed_by_library = nullptr;

void note_and_destroy(abi::DLManagedTensorVersioned* self) noexcept {
  freed_by_library = self;
  ExportContext::destroy(self);
}

}  // namespace

PyObject* hand_over(const abi::DLPackExchangeAPI* api, const Tensor& tensor) {
  abi::DLManagedTensorVersioned* managed = export_versioned(tensor, 0);
  // export_versioned's struct is an ExportContext; only its deleter changes.
  managed->deleter = &note_and_destroy;
  freed_by_library = nullptr;
  void* out = nullptr;
  const int status = api->managed_tensor_to_py_object_no_sync(managed, &out);
  if (status == 0 && out != nullptr) return static_cast<PyObject*>(out);
  if (freed_by_library != managed) ExportContext::destroy(managed);
  freed_by_library = nullptr;
  if (!PyErr_Occurred())
    PyErr_SetString(PyExc_RuntimeError,
                    "The target library's managed_tensor_to_py_object_no_sync failed without an error.");
  return nullptr;
}

}  // namespace dlbridge::python
