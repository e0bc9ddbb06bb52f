// The dlbridge._share extension: pickles, shared memory and CUDA IPC for
// dlbridge.Tensor (pickling.cpp, shared_memory.cpp, cuda_ipc.cpp), a
// satellite of the core that the build may leave out (-DDLBRIDGE_SHARE=OFF).
//
// The sharing sources call a few functions of the core's bindings; this
// module is a library of its own, so they are defined here as calls through
// the table the core publishes (sharing_seam.hpp): one Tensor type, one set
// of GIL helpers, whichever module a call starts in.
#include "gil.hpp"
#include "pickling.hpp"
#include "sharing_seam.hpp"

#include <cstdlib>
#include <cstring>

namespace dlbridge::python {

namespace {

const SharingSeam* core = nullptr;

// The core's table, refused when another build of dlbridge published it.
const SharingSeam* read_seam() {
  nb::object capsule = nb::module_::import_("dlbridge._core").attr("_sharing_seam");
  const auto* seam = static_cast<const SharingSeam*>(PyCapsule_GetPointer(capsule.ptr(), sharing_seam_capsule));
  if (seam == nullptr) throw nb::python_error();
  if (seam->size != sizeof(SharingSeam) || std::strcmp(seam->build, DLBRIDGE_SHARING_SEAM_BUILD) != 0)
    throw nb::import_error(
        (std::string("dlbridge._share belongs to another build of dlbridge than dlbridge._core (") +
         seam->build + "); reinstall dlbridge.")
            .c_str());
  return seam;
}

SharingHooks hooks{};

}  // namespace

nb::object wrap_tensor(Tensor tensor) { return core->wrap_tensor(std::move(tensor)); }
PyTypeObject* tensor_type() noexcept { return core->tensor_type(); }
const Tensor& initialised_tensor(nb::handle self, const char* method) {
  return core->initialised_tensor(self, method);
}
Tensor tensor_from_managed(ManagedTensor&& managed) { return core->tensor_from_managed(std::move(managed)); }
Tensor tensor_over(const TensorView& view, std::shared_ptr<void> owner) {
  return core->tensor_over(view, std::move(owner));
}
Tensor copy_tensor(const Tensor& source, Device target, StreamArg consumer_stream) {
  return core->copy_tensor(source, target, consumer_stream);
}
std::string utf8_of(nb::handle text) { return core->utf8_of(text); }
IntRead read_int64(PyObject* value, int64_t& out) noexcept { return core->read_int64(value, out); }
bool python_is_finalizing() noexcept { return core->python_is_finalizing(); }
void restore_thread(PyThreadState* state) noexcept { core->restore_thread(state); }
PyGILState_STATE ensure_gil() noexcept { return core->ensure_gil(); }
void park_thread() noexcept {
  core->park_thread();
  std::abort();  // not reached: the core's park_thread never returns
}

}  // namespace dlbridge::python

NB_MODULE(_share, m) {
  using namespace dlbridge::python;
  core = read_seam();
  bind_pickling(m, hooks);
  core->register_hooks(&hooks);
}
