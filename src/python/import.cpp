// from_dlpack / to_dlpack / empty: reading any array-like object into a
// dlbridge.Tensor. Order of preference: a dlbridge.Tensor, a raw capsule,
// __dlpack__, the buffer protocol, __array_interface__.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <string>

#include <dlbridge/exchange/plan_import.hpp>

#include "array_like.hpp"
#include "bindings.hpp"
#include "devices.hpp"
#include "dlpack_protocol.hpp"
#include "pickling.hpp"

namespace dlbridge::python {

namespace {

// Applies what the producer could not, by the consumer rules of the core
// (plan_import): a move to another device, the copy that copy=True
// promises, or a copy=False refusal.
Tensor finish_import(Tensor t, const ExchangeRequest& request, bool copied_by_producer) {
  // plan_import's identity case, skipped: from_dlpack(x) of a tensor.
  if (asks_nothing(request)) return t;
  const ExchangePlan plan = plan_import(t.view(), request, copied_by_producer);
  return carry_out_plan(std::move(t), plan, request.stream);
}

// The producers this thread is importing from right now: a producer whose
// __dlpack__ (or C exchange API) asks dlbridge to import that same object
// again would recurse in C until the stack ran out.
// The guards form a list through the stack frames of the imports under way;
// its head is a plain pointer, which needs no thread-local initialisation
// on the import path.
class ImportingGuard {
 public:
  explicit ImportingGuard(PyObject* x) : x_(x), outer_(innermost_) {
    for (const ImportingGuard* g = outer_; g != nullptr; g = g->outer_)
      if (g->x_ == x)
        detail::fail(ErrorCode::producer_refused,
                     "The producer asked dlbridge to import the same object while dlbridge was importing it "
                     "(its __dlpack__ or C exchange API calls back into dlbridge).",
                     "Export the data in __dlpack__ itself (return a capsule) instead of importing self again.");
    innermost_ = this;
  }
  ~ImportingGuard() { innermost_ = outer_; }
  ImportingGuard(const ImportingGuard&) = delete;
  ImportingGuard& operator=(const ImportingGuard&) = delete;

 private:
  PyObject* x_;
  const ImportingGuard* outer_;
  static thread_local const ImportingGuard* innermost_;
};
thread_local const ImportingGuard* ImportingGuard::innermost_ = nullptr;

Tensor import_from_producer(nb::handle x, ProducerType& known, const ExchangeRequest& request) {
  const ImportingGuard guard(x.ptr());
  const ProducerPolicy& policy = policy_of(known);
  if (policy.family != ProducerFamily::generic) {
    const LazyState lazy = resolve_lazy_state(x, policy, request);
    if (lazy.replacement.is_valid()) {
      Tensor t = import_object(lazy.replacement, ExchangeRequest{});
      if (lazy.read_only) t = t.with_view(t.view().with_flags(t.view().flags() | DLBRIDGE_FLAG_READ_ONLY));
      return finish_import(std::move(t), request, lazy.copied);
    }
  }
  // The library states what its legacy capsule could not: the memory may be written.
  const auto writable_if_stated = [&](Tensor t) {
    return policy.legacy_writable && t.writability_unknown() ? t.known_writable() : t;
  };
  if (asks_nothing(request)) {
    if (!policy.legacy_writable) return import_dlpack_tensor(x, known, request);
    return writable_if_stated(import_dlpack_tensor(x, known, request));
  }
  ManagedTensor managed = import_dlpack(x, known, request);
  const bool copied = (managed.flags() & DLBRIDGE_FLAG_IS_COPIED) != 0;
  return finish_import(writable_if_stated(tensor_from_managed(std::move(managed))), request, copied);
}

// dlbridge.libraries.arrow.second_look(x, refusal, device, copy), installed by
// the package: pyarrow's __dlpack__ refuses nulls, booleans and chunked
// arrays, which it refuses with a code or takes. Asked only after such a
// refusal, so every other import costs nothing more.
PyObject* arrow_second_look = nullptr;

Tensor ask_arrow_second_look(nb::handle x, const ExchangeRequest& request) {
  set_python_error(std::current_exception());  // the refusal, as the Python exception it would raise
  PyObject *type = nullptr, *value = nullptr, *traceback = nullptr;
  PyErr_Fetch(&type, &value, &traceback);
  PyErr_NormalizeException(&type, &value, &traceback);
  if (!PyErr_GivenExceptionMatches(value, PyExc_Exception)) {  // KeyboardInterrupt and the like go on
    PyErr_Restore(type, value, traceback);
    throw nb::python_error();
  }
  if (traceback != nullptr) PyException_SetTraceback(value, traceback);
  Py_XDECREF(type);
  Py_XDECREF(traceback);
  nb::object refusal = nb::steal(value);
  nb::object device = request.device ? nb::object(nb::make_tuple(int32_t(request.device->type), request.device->id))
                                     : nb::object(nb::none());
  nb::object copy = request.copy ? nb::object(nb::bool_(*request.copy)) : nb::object(nb::none());
  nb::object out = nb::borrow(arrow_second_look)(x, refusal, device, copy);
  const Tensor* t = as_tensor(out);
  if (t == nullptr) throw nb::type_error("Arrow's second look returned no dlbridge.Tensor.");
  return *t;
}

}  // namespace

Tensor after_producer_refusal(nb::handle x, ProducerType& known, const ExchangeRequest& request,
                              nb::python_error& refusal) {
  // KeyboardInterrupt, SystemExit and dlbridge's own coded errors go on as
  // they are; every other exception of the producer is its refusal,
  // reported as the coded error it stands for.
  if (!refusal.matches(PyExc_Exception) || is_dlpack_error(refusal)) throw;
  std::optional<Tensor> fallback;
  if (refusal.matches(PyExc_BufferError)) {
    fallback = import_extension_dtype(x);
    if (!fallback) check_byte_order(x);
  }
  if (!fallback) raise_producer_refusal(x, policy_of(known), refusal);
  return finish_import(std::move(*fallback), request, false);
}

Tensor after_import_failure(nb::handle x, const ExchangeRequest& request) {
  if (arrow_second_look == nullptr || !type_from_module(Py_TYPE(x.ptr()), "pyarrow")) throw;
  return ask_arrow_second_look(x, request);
}

namespace {

Tensor import_any(nb::handle x, const ExchangeRequest& request, const char* entry) {
  ProducerType* known = recent_producer(Py_TYPE(x.ptr()));
  if (known == nullptr) {
    if (const Tensor* t = as_tensor(x)) return finish_import(*t, request, false);
    if (PyObject_TypeCheck(x.ptr(), tensor_type()))
      throw nb::type_error("This dlbridge.Tensor was never initialised (made by Tensor.__new__); "
                           "it holds no tensor.");
    if (PyCapsule_CheckExact(x.ptr()))
      return finish_import(tensor_from_capsule(x), request, false);
    known = find_producer(x);
  }
  if (known != nullptr) {
    try {
      return import_from_producer(x, *known, request);
    } catch (nb::python_error& e) {
      return after_producer_refusal(x, *known, request, e);
    }
  }
  // An object with both views is read through __array_interface__, which
  // names the element type: NumPy's datetime64 scalar exports its buffer as
  // eight 'B' bytes. Python's own byte containers have no such attribute.
  const bool byte_container = PyBytes_CheckExact(x.ptr()) || PyByteArray_CheckExact(x.ptr()) ||
                              PyMemoryView_Check(x.ptr());
  nb::object interface = byte_container ? nb::none() : attribute_or_none(x, "__array_interface__");
  if (interface.is_none() && PyObject_CheckBuffer(x.ptr()))
    return finish_import(import_buffer(x), request, false);
  if (!interface.is_none())
    return finish_import(import_array_interface(x, interface), request, false);
  nb::object cuda_interface = attribute_or_none(x, "__cuda_array_interface__");
  if (!cuda_interface.is_none())
    return finish_import(import_cuda_array_interface(x, cuda_interface), request, false);
  throw nb::type_error((std::string(entry) + " cannot read a " +
                        nb::inst_name(x).c_str() +
                        ": it has no __dlpack__, buffer protocol or __array_interface__.")
                           .c_str());
}

}  // namespace

Tensor import_object(nb::handle x, const ExchangeRequest& request, const char* entry) {
  try {
    return import_any(x, request, entry);
  } catch (...) {
    return after_import_failure(x, request);
  }
}

void bind_import(nb::module_& m) {
  m.def("_install_arrow_second_look", [](nb::object fn) { py::replace(arrow_second_look, fn.release().ptr()); });
  m.def("_install_producer_facts", &install_producer_facts, nb::arg("facts"),
        "Set what the package's library modules say about a producer type (dlbridge/__init__.py does, once).");
  // from_dlpack is a raw entry point: fast_calls.cpp.
  m.def("to_dlpack",
        [](nb::handle x, nb::handle stream, nb::handle max_version, nb::handle dl_device,
           nb::handle copy) {
          Tensor t = import_object(x, ExchangeRequest{}, "dlbridge.to_dlpack");
          ExchangeRequest request{max_version_from_python(max_version),
                                  dl_device_from_python(dl_device), copy_from_python(copy),
                                  stream_from_python(stream), {}};
          return export_capsule(t, request);
        },
        nb::sig("def to_dlpack(x: object, /, *, stream: int | None = None, "
                "max_version: tuple[int, int] | None = None, dl_device: object | None = None, "
                "copy: bool | None = None) -> types.CapsuleType"),
        nb::arg(), nb::kw_only(), nb::arg("stream") = nb::none(),
        nb::arg("max_version") = nb::none(), nb::arg("dl_device") = nb::none(),
        nb::arg("copy") = nb::none(),
        "Export any array-like object as a DLPack capsule with the DLPack producer rules.");
  m.def("empty",
        [](nb::handle shape, nb::handle dtype, nb::handle device, bool shared) {
          Device target = device_from_python(device);
          (void)served_backend(target);
          std::vector<int64_t> dims;
          // An int is a 1-d shape, checked like a tuple's entries (a huge
          // one is a ValueError, not a failed cast).
          dims = ints_from_python(PyLong_Check(shape.ptr()) ? nb::make_tuple(shape) : shape, "shape");
          if (shared) return wrap_tensor(empty_shared(dims, dtype_from_python(dtype), target));
          // Allocated on the target by its backend: nothing is uploaded.
          return wrap_tensor(tensor_from_managed(empty_on(target, dtype_from_python(dtype), dims)));
        },
        nb::arg("shape"), nb::arg("dtype") = "float32", nb::arg("device") = "cpu", nb::kw_only(),
        nb::arg("shared") = false,
        nb::sig("def empty(shape: int | tuple[int, ...] | list[int], dtype: object = 'float32', "
                "device: object = 'cpu', *, shared: bool = False) -> Tensor"),
        "A new, writable, compact tensor with uninitialised contents; shared=True places it "
        "in POSIX shared memory (zero-filled), or for device=\"cuda:N\" in CUDA memory "
        "exported with CUDA IPC, that pickles pass to other processes by name.");
}

}  // namespace dlbridge::python
