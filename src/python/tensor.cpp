// dlbridge.Tensor: properties, __dlpack__ / __dlpack_device__, copy() and
// repr. Its host-memory views (buffer protocol, __array_interface__) are in
// host_views.cpp.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <string>

#include <dlbridge/exchange/carry_out.hpp>
#include <dlbridge/exchange/plan_import.hpp>

#include "bindings.hpp"
#include "entry_points.hpp"
#include "gil.hpp"
#include "storage_pool.hpp"

namespace dlbridge::python {

namespace {

nb::tuple dims_tuple(const int64_t* dims, int32_t ndim) {
  nb::list out;
  for (int32_t d = 0; d < ndim; ++d) out.append(dims[d]);
  return nb::tuple(out);
}

std::string tensor_repr(const Tensor& t) {
  const TensorView& v = t.view();
  std::string text = "dlbridge.Tensor(shape=" + dims_text(v.ndim(), v.shape()) +
                     ", dtype=" + dtype_name(v.dtype()) + ", device=" + to_string(v.device()) +
                     ", strides=" + dims_text(v.ndim(), v.strides());
  if (v.readonly()) text += ", readonly=True";
  if (v.subbyte_padded()) text += ", subbyte_padded=True";
  return text + ")";
}

}  // namespace

namespace {

std::shared_ptr<const ManagedTensor> new_storage(ManagedTensor&& managed) {
  return std::allocate_shared<const ManagedTensor>(StoragePoolAllocator<ManagedTensor>(),
                                                   std::move(managed));
}

}  // namespace

namespace {

// The tensor a stored ManagedTensor is seen as, by its flags.
Tensor tensor_from_storage(std::shared_ptr<const ManagedTensor> storage) {
  const uint64_t flags = storage->flags();
  const uint64_t shown = imported_flags(storage->is_versioned(), flags);
  if (!storage->is_versioned() && !(flags & DLBRIDGE_FLAG_READ_ONLY)) {
    Tensor out(storage, storage->view().with_flags(shown));
    out.set_writability_unknown();
    return out;
  }
  if (shown != flags) {
    TensorView view = storage->view().with_flags(shown);
    return Tensor(std::move(storage), std::move(view));
  }
  return Tensor(std::move(storage));
}

}  // namespace

uint64_t imported_flags(bool versioned, uint64_t flags) noexcept {
  // A legacy capsule cannot say whether its memory may be written;
  // IS_COPIED described only the exchange that delivered the tensor, which
  // speaks for the data from now on.
  return (versioned ? flags : flags | DLBRIDGE_FLAG_READ_ONLY) & ~DLBRIDGE_FLAG_IS_COPIED;
}

Tensor tensor_from_managed(ManagedTensor&& managed) {
  return tensor_from_storage(new_storage(std::move(managed)));
}

Tensor tensor_adopting(abi::DLManagedTensorVersioned* m) {
  try {
    return tensor_from_storage(std::allocate_shared<const ManagedTensor>(
        StoragePoolAllocator<ManagedTensor>(), ManagedTensor::adopting, m));
  } catch (...) {
    // Still set: the allocation failed before the constructor took m.
    if (m != nullptr && m->deleter != nullptr) m->deleter(m);
    throw;
  }
}

Tensor tensor_from_struct(TakenStruct&& taken) {
  if (taken.is_versioned()) return tensor_adopting(taken.release_versioned());
  return tensor_from_managed(std::move(taken).adopt());
}

Tensor tensor_over(const TensorView& view, std::shared_ptr<void> owner) {
  return tensor_from_managed(export_tensor(view, std::move(owner), view.flags()));
}

namespace {
PyTypeObject* tensor_type_object = nullptr;
}

PyTypeObject* tensor_type() noexcept { return tensor_type_object; }

const Tensor* as_tensor(nb::handle object) noexcept {
  PyObject* o = object.ptr();
  // Tensor.__new__(Tensor) makes an instance that was never constructed;
  // it holds no tensor and must not be read as one.
  if (o != nullptr && PyObject_TypeCheck(o, tensor_type_object) && nb::inst_ready(object))
    return nb::inst_ptr<Tensor>(o);
  return nullptr;
}

const Tensor& initialised_tensor(nb::handle self, const char* method) {
  const Tensor* t = as_tensor(self);
  if (t == nullptr) throw nb::type_error((std::string(method) + " needs an initialised dlbridge.Tensor.").c_str());
  return *t;
}

// Builds the Python object around the tensor in place: no intermediate
// moves and no type lookup, which matters on every import.
nb::object wrap_tensor(Tensor tensor) {
  nb::object out = nb::inst_alloc(nb::handle(reinterpret_cast<PyObject*>(tensor_type_object)));
  new (nb::inst_ptr<Tensor>(out)) Tensor(std::move(tensor));
  nb::inst_mark_ready(out);
  return out;
}

// A host copy below this size runs with the GIL held: releasing and taking
// it again costs more than such a copy.
constexpr int64_t small_copy_bytes = int64_t(1) << 20;

Tensor carry_out_plan(Tensor source, const ExchangePlan& plan, StreamArg stream) {
  const TensorView& v = source.view();
  if (!plan.copy) {
    (void)carry_out(v, plan, stream);  // the stream wait; the result is the tensor itself
    if (plan.target == v.device()) return source;
    return source.with_view(v.with_device(plan.target));
  }
  // The copy's flags describe the tensor, not the exchange (see
  // tensor_from_managed): IS_COPIED goes on the capsule, not here.
  constexpr uint64_t flags = 0;
  if (!plan.to && !stream.given && v.nbytes() < small_copy_bytes)
    return tensor_from_managed(copy_to_compact(v, flags));  // carry_out's host-only copy
  Tensor out;
  {
    GilReleased unlocked;  // large copies and device transfers run without the GIL
    out = tensor_from_managed(*carry_out(v, plan, stream, flags));
  }
  return out;
}

Tensor copy_tensor(const Tensor& source, Device target, StreamArg consumer_stream) {
  // A small CPU-to-CPU copy with no stream is what the plan below would
  // decide (host only, no backend), reached without planning.
  if (!consumer_stream.given && target == Device{} && source.view().device() == Device{} &&
      source.view().nbytes() < small_copy_bytes)
    return tensor_from_managed(copy_to_compact(source.view(), 0));
  // A plain copy is an import that asks for one: the plan settles
  // availability while the GIL is held (the first CUDA lookup asks Python
  // where pip put libcudart). No consumer stream is known here, so a copy
  // to a device is queued on its legacy default stream, which every
  // blocking stream (PyTorch's and CuPy's defaults among them) is ordered
  // after.
  ExchangeRequest request;
  request.device = target;
  request.copy = true;
  return carry_out_plan(source, plan_import(source.view(), request), consumer_stream);
}

StreamArg stream_from_python(nb::handle stream) {
  if (stream.is_none()) return {};
  int64_t value = 0;
  const IntRead read = read_int64(stream.ptr(), value);
  if (read == IntRead::not_an_int)
    throw nb::type_error("stream must be None or an int (a stream handle).");
  if (read == IntRead::too_big)
    detail::fail(ErrorCode::invalid_stream, "stream does not fit in 64 bits.",
                 "Pass a stream handle as an int.");
  return {true, value};
}

nb::object export_capsule(const Tensor& tensor, const ExchangeRequest& request) {
  const TensorView& v = tensor.view();
  const ExchangePlan plan = plan_export(v, tensor.writability(), request);
  if (plan.drop_read_only) {
    const Tensor as_delivered(tensor.storage(), v.with_flags(v.flags() & ~DLBRIDGE_FLAG_READ_ONLY));
    return make_capsule(carry_out_plan(as_delivered, plan, request.stream), plan.format, 0);
  }
  return make_capsule(carry_out_plan(tensor, plan, request.stream), plan.format,
                      plan.copy ? DLBRIDGE_FLAG_IS_COPIED : 0);
}

namespace {

// A max_version that is a (major >= 1, minor) tuple of plain ints in range,
// the form every versioned consumer sends; anything else (None, a legacy
// major, a list, bools, huge values) takes max_version_from_python's checks.
bool plain_versioned_request(PyObject* max_version) {
  if (!PyTuple_CheckExact(max_version) || py::tuple_size(max_version) != 2) return false;
  PyObject* major = py::tuple_item(max_version, 0);
  PyObject* minor = py::tuple_item(max_version, 1);
  if (!PyLong_CheckExact(major) || !PyLong_CheckExact(minor)) return false;
  int64_t ma = 0, mi = 0;
  if (read_int64(major, ma) != IntRead::ok || read_int64(minor, mi) != IntRead::ok) return false;
  return ma >= 1 && ma <= UINT32_MAX && mi >= 0 && mi <= UINT32_MAX;
}

// The export of a CPU tensor as itself: no stream, no dl_device, copy None or
// False, a versioned request. plan_export decides exactly this for it (same
// device, nothing to copy, versioned so no legacy flag checks, no stream on
// the host), so the request needs no parsing into ExchangeRequest/ExchangePlan.
bool plain_host_export(const Tensor& t, PyObject* const values[4]) {
  return values[0] == Py_None && values[2] == Py_None &&
         (values[3] == Py_None || values[3] == Py_False) &&
         t.view().device().type == abi::kDLCPU && plain_versioned_request(values[1]);
}

// The legacy export of a writable CPU tensor as itself, asked with no keyword
// at all (NumPy before 2.1, and every DLPack 0.x consumer): plan_export
// decides exactly this for it (legacy, same device, nothing to copy, no
// stream), as the read-only, writability-unknown and padded sub-byte cases,
// which it refuses or treats apart, are left to it.
bool plain_legacy_host_export(const Tensor& t, PyObject* const values[4]) {
  return values[0] == Py_None && values[1] == Py_None && values[2] == Py_None && values[3] == Py_None &&
         t.view().device().type == abi::kDLCPU && !t.writability_unknown() &&
         (t.view().flags() & (DLBRIDGE_FLAG_READ_ONLY | DLBRIDGE_FLAG_IS_SUBBYTE_TYPE_PADDED)) == 0;
}

// __dlpack__ as a plain METH_FASTCALL method: consumers call it on every
// exchange, and nanobind's general keyword matching cost about as much as
// the export itself. Keywords are matched by interned pointer first.
DLBRIDGE_HOT PyObject* tensor_dlpack(PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                                     PyObject* kwnames) noexcept {
  return python_boundary<PyObject*>(nullptr, [&]() -> PyObject* {
    static PyObject* const names[] = {
        PyUnicode_InternFromString("stream"), PyUnicode_InternFromString("max_version"),
        PyUnicode_InternFromString("dl_device"), PyUnicode_InternFromString("copy")};
    if (PyVectorcall_NARGS(nargs) != 0)
      throw nb::type_error("__dlpack__() takes keyword arguments only "
                           "(stream, max_version, dl_device, copy).");
    PyObject* values[4] = {Py_None, Py_None, Py_None, Py_None};
    if (kwnames != nullptr) match_keywords("__dlpack__", names, 4, args, kwnames, values);
    const Tensor* t = as_tensor(nb::handle(self));
    if (t == nullptr) throw nb::type_error("__dlpack__ needs an initialised dlbridge.Tensor.");
    if (plain_host_export(*t, values))
      return make_capsule(*t, ExportFormat::versioned, 0).release().ptr();
    if (plain_legacy_host_export(*t, values))
      return make_capsule(*t, ExportFormat::legacy, 0).release().ptr();
    ExchangeRequest request{max_version_from_python(values[1]), dl_device_from_python(values[2]),
                            copy_from_python(values[3]), stream_from_python(values[0]), {}};
    return export_capsule(*t, request).release().ptr();
  });
}

// __dlpack_device__ as a plain METH_NOARGS method: consumers
// (torch.from_dlpack, and convert through it) ask it before every
// __dlpack__, and nanobind's dispatch plus its enum conversion cost about
// 200 instructions a call (bench/callgrind.py). The (kDLCPU, 0) answer is one
// tuple, made once: tuples are immutable.
PyObject* tensor_dlpack_device(PyObject* self, PyObject*) noexcept {
  return python_boundary<PyObject*>(nullptr, [&]() -> PyObject* {
    const Tensor* t = as_tensor(nb::handle(self));
    if (t == nullptr) throw nb::type_error("__dlpack_device__ needs an initialised dlbridge.Tensor.");
    const Device device = t->view().device();
    if (device.type == abi::kDLCPU && device.id == 0) {
      static PyObject* const cpu = nb::make_tuple(device_type_to_python(abi::kDLCPU), 0).release().ptr();
      Py_INCREF(cpu);
      return cpu;
    }
    return nb::make_tuple(device_type_to_python(device.type), device.id).release().ptr();
  });
}

PyMethodDef tensor_dlpack_device_def = {
    "__dlpack_device__",
    reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(tensor_dlpack_device)), METH_NOARGS,
    "__dlpack_device__($self, /)\n--\n\n"
    "(device_type, device_id) of the data, as the DLPack protocol asks."};

PyMethodDef tensor_dlpack_def = {
    "__dlpack__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(tensor_dlpack)),
    METH_FASTCALL | METH_KEYWORDS,
    "__dlpack__($self, /, *, stream=None, max_version=None, dl_device=None, copy=None)\n--\n\n"
    "Export as a DLPack capsule: versioned (1, 3) when max_version >= (1, 0), legacy "
    "otherwise; dl_device and copy as the DLPack spec defines them."};

}  // namespace

// pooled: freed Tensor objects are kept for reuse, which skips nanobind's
// instance registration and Python's allocator on every import
// (bench/callgrind.py). Not on a free-threaded interpreter: there each thread
// has pools of its own, and the thread-exit callback that drains them takes
// a thread state (nanobind's cleanup_guard). A daemon thread that CPython ends while
// it finalizes runs that callback, is ended again inside it, and the unwind
// through that noexcept callback was std::terminate ("terminate called
// without an active exception"). Capacity 0 turns pooling off.
#if defined(NB_FREE_THREADED)
constexpr std::uint32_t tensor_pool_capacity = 0;
#else
constexpr std::uint32_t tensor_pool_capacity = 128;
#endif

void bind_tensor(nb::module_& m) {
  auto cls = nb::class_<Tensor>(m, "Tensor", nb::type_slots(tensor_buffer_slots),
                                nb::pooled(tensor_pool_capacity),
                     "A validated DLPack tensor: a zero-copy view of another "
                     "library's memory, or the owner of its own.")
      .def_prop_ro("shape", [](const Tensor& t) { return dims_tuple(t.view().shape(), t.view().ndim()); })
      .def_prop_ro("strides", [](const Tensor& t) { return dims_tuple(t.view().strides(), t.view().ndim()); },
                   "Strides in elements, always filled in.")
      .def_prop_ro("ndim", [](const Tensor& t) { return t.view().ndim(); })
      .def_prop_ro("size", [](const Tensor& t) { return t.view().size(); })
      .def_prop_ro("nbytes", [](const Tensor& t) { return t.view().nbytes(); },
                   "Bytes of a compact copy (packed for sub-byte dtypes).")
      .def_prop_ro("dtype", [](const Tensor& t) { return t.view().dtype(); })
      .def_prop_ro("device", [](const Tensor& t) { return t.view().device(); })
      .def_prop_ro("readonly", [](const Tensor& t) { return t.view().readonly(); })
      .def_prop_ro("flags", [](const Tensor& t) { return t.view().flags(); },
                   "DLPack flag bits (READ_ONLY=1, IS_SUBBYTE_TYPE_PADDED=4).")
      .def_prop_ro("data_ptr", [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.view().data()); },
                   "Address of element 0 (data + byte_offset).")
      .def_prop_ro("is_c_contiguous", [](const Tensor& t) { return t.view().is_c_contiguous(); })
      .def_prop_ro("is_f_contiguous", [](const Tensor& t) { return t.view().is_f_contiguous(); })
      // __dlpack__ and __dlpack_device__ are raw methods, added below.
      .def("copy",
           [](const Tensor& t, nb::handle device) {
             Device target = device.is_none() ? t.view().device() : device_from_python(device);
             return wrap_tensor(copy_tensor(t, target));
           },
           nb::arg("device") = nb::none(),
           nb::sig("def copy(self, device: object | None = None) -> Tensor"),
           "A new, writable, compact (C-order) copy. A host result of 8-256 MiB may take the "
           "memory of the last such result freed, of the same size, whose pages the kernel then "
           "need not zero again (DLBRIDGE_KEEP_FREED=0 turns that off).")
      .def("copy_unpacked",
           [](const Tensor& t) {
             ManagedTensor out;
             {
               GilReleased unlocked;
               out = copy_unpacked(t.view());
             }
             return wrap_tensor(tensor_from_managed(std::move(out)));
           },
           "A new, writable, compact host copy with one element per byte: sub-byte "
           "values padded (IS_SUBBYTE_TYPE_PADDED) and vector lanes split into a "
           "trailing axis.")
      .def_prop_ro("__array_interface__", &array_interface,
                   "NumPy's array interface (version 3) for host tensors; dtypes without "
                   "a NumPy type code are '|V<itemsize>'.")
      .def("__repr__", &tensor_repr);
  tensor_type_object = reinterpret_cast<PyTypeObject*>(cls.ptr());
  // The protocol's two methods are raw methods (above), added as descriptors.
  for (PyMethodDef* def : {&tensor_dlpack_def, &tensor_dlpack_device_def}) {
    nb::object method = nb::steal(PyDescr_NewMethod(tensor_type_object, def));
    if (!method.is_valid()) throw nb::python_error();
    cls.attr(def->ml_name) = method;
  }
}

}  // namespace dlbridge::python
