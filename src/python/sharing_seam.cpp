// The core's side of the seam with the sharing module (sharing_seam.hpp).
// The module is imported the first time a sharing method is called, not
// when dlbridge is, so a build without it costs an import nothing and the
// core imports no satellite at import time.
//
// Without the module: pickling and copy.copy / copy.deepcopy of a Tensor
// raise TypeError, as Python does for any object it cannot pickle, with
// the reason; t.share_memory() raises TypeError too; empty(shared=True) is
// a ValueError; t.is_shared is False (nothing can be shared).
#include "sharing_seam.hpp"

#include <atomic>
#include <string>

#include "gil.hpp"

namespace dlbridge::python {

namespace {

std::atomic<const SharingHooks*> registered_hooks{nullptr};
// Whether the import of dlbridge._share was tried; a missing module is
// looked for once, not at every pickle.
std::atomic<bool> import_tried{false};

void register_hooks(const SharingHooks* hooks) noexcept {
  registered_hooks.store(hooks, std::memory_order_release);
}

const SharingSeam seam{
    DLBRIDGE_SHARING_SEAM_BUILD,
    sizeof(SharingSeam),
    &wrap_tensor,
    &tensor_type,
    &initialised_tensor,
    &tensor_from_managed,
    &tensor_over,
    &copy_tensor,
    &utf8_of,
    &read_int64,
    &python_is_finalizing,
    &restore_thread,
    &ensure_gil,
    &park_thread,
    &register_hooks,
};

constexpr const char* share_module = "dlbridge._share";
constexpr const char* left_out =
    "this dlbridge was built without its sharing module (dlbridge._share; the build option "
    "DLBRIDGE_SHARE=OFF)";

// The sharing module's hooks, or NULL when this build has no such module.
// Any other failure of its import (a module of another build) propagates.
const SharingHooks* sharing_hooks() {
  if (const SharingHooks* hooks = registered_hooks.load(std::memory_order_acquire)) return hooks;
  if (!import_tried.load(std::memory_order_acquire)) {
    try {
      nb::module_::import_(share_module);
    } catch (nb::python_error& e) {
      if (!e.matches(PyExc_ModuleNotFoundError)) throw;
      nb::object name = nb::getattr(e.value(), "name", nb::none());
      if (!PyUnicode_Check(name.ptr()) || utf8_of(name) != share_module) throw;
    }
    import_tried.store(true, std::memory_order_release);
  }
  return registered_hooks.load(std::memory_order_acquire);
}

const SharingHooks& hooks_or_type_error(const std::string& what) {
  if (const SharingHooks* hooks = sharing_hooks()) return *hooks;
  throw nb::type_error((what + ": " + left_out + ".").c_str());
}

}  // namespace

Tensor empty_shared_through_seam(const std::vector<int64_t>& shape, DType dtype, Device device) {
  if (const SharingHooks* hooks = sharing_hooks()) return hooks->empty_shared(shape, dtype, device);
  detail::fail(ErrorCode::invalid_argument, std::string("shared=True is not available: ") + left_out + ".",
               "Install a dlbridge built with the sharing module (the default build), or pass "
               "shared=False.");
}

void bind_sharing_seam(nb::module_& m) {
  m.attr("_sharing_seam") = nb::capsule(&seam, sharing_seam_capsule);
  auto cls = nb::borrow<nb::class_<Tensor>>(nb::handle(reinterpret_cast<PyObject*>(tensor_type())));
  cls.def("__reduce_ex__",
          [](nb::handle self, int protocol) {
            return hooks_or_type_error("cannot pickle 'dlbridge.Tensor' object").reduce_ex(self, protocol);
          },
          nb::arg("protocol"),
          nb::sig("def __reduce_ex__(self, protocol: int) -> tuple[object, tuple[object, ...]]"),
          "Pickle support: protocol 5 sends the data as one out-of-band buffer, without a "
          "copy when the tensor is dense; older protocols send one bytes copy; a shared tensor "
          "(share_memory(), host or CUDA) sends only its segment's name.")
      .def("__copy__",
           [](const Tensor& t) { return hooks_or_type_error("cannot copy 'dlbridge.Tensor' object").copy(t); },
           "A new Tensor object over the same memory.")
      .def("__deepcopy__",
           [](const Tensor& t, nb::handle) {
             return hooks_or_type_error("cannot copy 'dlbridge.Tensor' object").deep_copy(t);
           },
           nb::arg("memo").none(), "A new tensor with its own copy of the data and the same flags.")
      .def("share_memory",
           [](nb::handle self) {
             return hooks_or_type_error("dlbridge.Tensor.share_memory() is not available").share_memory(self);
           },
           nb::sig("def share_memory(self) -> Tensor"),
           "This tensor if it already lives in shared memory, else a copy in a new POSIX "
           "shared-memory segment (compact, same flags); for a CUDA tensor, a device copy "
           "exported with CUDA IPC. Pickles of it carry a segment's name, so other processes on "
           "this machine map the same pages (or open the same device memory).")
      .def_prop_ro("is_shared",
                   [](const Tensor& t) {
                     const SharingHooks* hooks = sharing_hooks();
                     return hooks != nullptr && hooks->is_shared(t);
                   },
                   "True when the tensor's memory is a shared-memory segment, or CUDA memory "
                   "exported for other processes, that pickles pass by name.");
}

}  // namespace dlbridge::python
