// from_dlpack / to_dlpack / empty: reading any array-like object into a
// dlbridge.Tensor. Order of preference: a dlbridge.Tensor, a raw capsule,
// __dlpack__, the buffer protocol, __array_interface__.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <string>

#include <dlbridge/consumer.hpp>

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
  const ImportPlan plan = plan_import(t.view(), request, copied_by_producer);
  return carry_out_plan(std::move(t), plan, request.stream);
}

Tensor import_from_producer(nb::handle x, ProducerType& known, const ExchangeRequest& request) {
  nb::object resolved = resolve_lazy_state(x, policy_of(known), request);
  if (!resolved.is_none())
    return finish_import(import_object(resolved, ExchangeRequest{}), request, true);
  if (asks_nothing(request)) return import_dlpack_tensor(x, known, request);
  ManagedTensor managed = import_dlpack(x, known, request);
  const bool copied = (managed.flags() & DLBRIDGE_FLAG_IS_COPIED) != 0;
  return finish_import(tensor_from_managed(std::move(managed)), request, copied);
}

}  // namespace

Tensor after_producer_refusal(nb::handle x, ProducerType& known, const ExchangeRequest& request,
                              nb::python_error& refusal) {
  if (!refusal.matches(PyExc_BufferError)) throw;
  std::optional<Tensor> fallback = import_extension_dtype(x);
  if (!fallback && is_dlpack_error(refusal)) throw;
  if (!fallback) check_byte_order(x);
  if (!fallback) raise_producer_refusal(x, policy_of(known), refusal);
  return finish_import(std::move(*fallback), request, false);
}

Tensor import_object(nb::handle x, const ExchangeRequest& request, const char* entry) {
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

void bind_import(nb::module_& m) {
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
          require_served(target);
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
