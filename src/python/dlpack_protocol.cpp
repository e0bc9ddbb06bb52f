// The consumer side of the DLPack Python protocol (dlpack_protocol.hpp): ask
// max_version=(1, 3), fall back to fewer keywords for old producers (once per
// type), prefer a producer type's trusted C exchange API, and pass streams
// for device memory.
#include <nanobind/stl/string.h>

#include <optional>

#include "dlpack_protocol.hpp"

namespace dlbridge::python {

namespace {

// The stream dlbridge asks a producer to make data ready on: the family's
// default (backend::default_stream_arg).
StreamArg stream_for_producer(nb::handle x) {
  return backend::default_stream_arg(
      device_from_dlpack_device(x.attr("__dlpack_device__")(), x).type);
}

// A stream value as the producer's __dlpack__ receives it.
nb::object stream_object(StreamArg stream) {
  return stream.given ? nb::object(nb::int_(stream.value)) : nb::none();
}

PyObject* dlpack_name() {
  static PyObject* name = PyUnicode_InternFromString("__dlpack__");
  return name;
}

// What x.__dlpack__ finds, without the lookup, or an invalid handle: the
// function or C method in x's type, to be called with x first. That lookup
// (the MRO cache, the instance check, binding) is a visible part of an
// import. Taken only where it is exactly what the lookup would find:
// the generic attribute lookup, no instance dict to shadow it, a plain
// method. With the GIL the answer is kept per type with the version tag it
// was read at (which any change to the type or a base replaces), as a
// borrowed reference that only the GIL keeps valid; without it the MRO is
// asked each time, for a reference of the caller's own. The limited API
// shows neither version tags nor the type's slots: the abi3 build keeps the
// answer only for a type that can never change (py::lookup_in_immutable_type),
// decided once per type, and looks the attribute up for the others.
#if defined(Py_GIL_DISABLED)
using MethodRef = nb::object;
#else
using MethodRef = nb::handle;
#endif

MethodRef dlpack_method([[maybe_unused]] ProducerType* known, [[maybe_unused]] PyTypeObject* type) {
#ifdef Py_LIMITED_API
  if (known == nullptr) return MethodRef();
  // method_tag: 0 undecided, 1 decided (method is NULL where the type may change).
  if (known->method_tag != 0) return known->method;
  PyObject* found = nullptr;
  nb::object dict_offset = nb::steal(PyObject_GetAttrString(reinterpret_cast<PyObject*>(type), "__dictoffset__"));
  if (!dict_offset.is_valid()) PyErr_Clear();
  // The generic attribute lookup (a static type's slot is readable since 3.10), and no instance dict to
  // shadow the class's attribute (__dictoffset__ 0: none, -1 a managed one).
  if (dict_offset.is_valid() && PyLong_Check(dict_offset.ptr()) && PyLong_AsSsize_t(dict_offset.ptr()) == 0 &&
      PyType_GetSlot(type, Py_tp_getattro) == reinterpret_cast<void*>(PyObject_GenericGetAttr)) {
    found = py::lookup_in_immutable_type(type, dlpack_name());
    if (found != nullptr && Py_TYPE(found) != &PyMethodDescr_Type) found = nullptr;
  }
  PyErr_Clear();  // a check that failed only means "look the attribute up each time"
  known->method = found;
  known->method_tag = 1;
  return found;
#else
  if (known == nullptr || type->tp_getattro != PyObject_GenericGetAttr || type->tp_dictoffset != 0)
    return MethodRef();
#ifdef Py_TPFLAGS_MANAGED_DICT
  if (type->tp_flags & Py_TPFLAGS_MANAGED_DICT) return MethodRef();
#endif
  const auto plain_method = [](PyObject* found) {
    return found != nullptr && (Py_TYPE(found) == &PyMethodDescr_Type || PyFunction_Check(found));
  };
#if defined(Py_GIL_DISABLED)
  nb::object found = nb::steal(py::type_lookup_ref(type, dlpack_name()));
  return plain_method(found.ptr()) ? found : nb::object();
#else
  if (type->tp_version_tag == 0) return MethodRef();
  if (known->method_tag == type->tp_version_tag) return known->method;
  PyObject* found = _PyType_Lookup(type, dlpack_name());  // borrowed, no exception
  if (!plain_method(found)) return MethodRef();
  known->method = found;
  known->method_tag = type->tp_version_tag;
  return found;
#endif
#endif
}

// What every call with max_version passes, made once when the extension
// loads (the interpreter is running then): interned names, since a
// producer's argument parser (NumPy's among them) matches keywords by
// pointer first and falls back to comparing text.
struct MaxVersionCall {
  PyObject* version = nb::make_tuple(DLBRIDGE_DLPACK_MAJOR, DLBRIDGE_DLPACK_MINOR).release().ptr();
  PyObject* names_version = nb::make_tuple(nb::steal(PyUnicode_InternFromString("max_version"))).release().ptr();
  PyObject* names_version_stream = nb::make_tuple(nb::steal(PyUnicode_InternFromString("max_version")),
                                                  nb::steal(PyUnicode_InternFromString("stream")))
                                       .release()
                                       .ptr();
};
const MaxVersionCall* const max_version_call = new MaxVersionCall();  // never destroyed: used at exit too

// x.__dlpack__(max_version=(1, 3)) through vectorcall with interned names:
// the common call builds no dict and no tuple.
nb::object call_dlpack_max_version(nb::handle x, nb::handle stream, ProducerType* known = nullptr) {
  const MaxVersionCall& call = *max_version_call;
  const bool with_stream = !stream.is_none();
  PyObject* names = with_stream ? call.names_version_stream : call.names_version;
  PyObject* args[] = {x.ptr(), call.version, stream.ptr()};
  const MethodRef method = dlpack_method(known, Py_TYPE(x.ptr()));
  PyObject* result = method.is_valid()
                         ? PyObject_Vectorcall(method.ptr(), args, 1, names)
                         : PyObject_VectorcallMethod(dlpack_name(), args,
                                                     1 | PY_VECTORCALL_ARGUMENTS_OFFSET, names);
  if (result == nullptr) throw nb::python_error();
  return nb::steal(result);
}

// Whether a producer's exception says it does not take a keyword: a plain
// TypeError, as Python, Cython and the binding libraries raise for an
// unexpected keyword. A subclass is the producer refusing the data itself
// (pyarrow's ArrowTypeError for nulls is a TypeError): taking it for a
// missing keyword would ask again with no keywords (a legacy capsule, with
// pyarrow's deprecation warning at the caller's line) and remember that.
bool rejects_keywords(const nb::python_error& e) { return e.type().ptr() == PyExc_TypeError; }

// The first call to a type's __dlpack__, with every keyword the request
// needs; a TypeError walks down to fewer keywords.
nb::object call_dlpack_probing(nb::handle x, ProducerType& known, const ExchangeRequest& request,
                               StreamArg stream) {
  if (request.device || request.copy == false) {
    nb::dict kwargs;
    kwargs["max_version"] = nb::make_tuple(DLBRIDGE_DLPACK_MAJOR, DLBRIDGE_DLPACK_MINOR);
    if (stream.given) kwargs["stream"] = stream_object(stream);
    if (request.device)
      kwargs["dl_device"] = nb::make_tuple(int32_t(request.device->type), request.device->id);
    // copy=True is not forwarded: dlbridge copies itself, so that "never
    // aliases" holds even for producers that ignore the keyword.
    if (request.copy == false) kwargs["copy"] = false;
    try {
      return x.attr("__dlpack__")(**kwargs);
    } catch (nb::python_error& e) {
      // A TypeError may be about the device rather than the keyword, so it
      // teaches nothing to remember. A BufferError is the producer saying
      // it cannot serve dl_device or copy=False itself: dlbridge then takes
      // the data as it is and moves it, or refuses with its own coded error
      // (finish_import), instead of passing on an uncoded one.
      if (!rejects_keywords(e) && !e.matches(PyExc_BufferError)) throw;
    }
  }
  const ProtocolLevel level = known.level.load(std::memory_order_relaxed);
  if (level != ProtocolLevel::no_keywords) {
    try {
      nb::object capsule = call_dlpack_max_version(x, stream_object(stream));
      known.level.store(ProtocolLevel::max_version_only, std::memory_order_relaxed);
      return capsule;
    } catch (nb::python_error& e) {
      if (!rejects_keywords(e) || level == ProtocolLevel::max_version_only) throw;
    }
  }
  nb::object capsule = x.attr("__dlpack__")();
  known.level.store(ProtocolLevel::no_keywords, std::memory_order_relaxed);
  return capsule;
}

// Through the producer's trusted C exchange API when the request is plain;
// std::nullopt sends the caller to __dlpack__. Non-host results go back:
// the _no_sync entry leaves stream ordering to the caller, and __dlpack__
// lets the producer do it.
std::optional<TakenStruct> ask_exchange_api(nb::handle x, const ProducerType& known,
                                            const ExchangeRequest& request) {
  if (known.exchange_api == nullptr || request.device || request.copy == false) return std::nullopt;
  abi::DLManagedTensorVersioned* out = nullptr;
  if (known.exchange_api->managed_tensor_from_py_object_no_sync(x.ptr(), &out) != 0) {
    // torch's entry reports what its __dlpack__ calls a BufferError as a
    // RuntimeError with a C++ stack trace; __dlpack__ is asked instead, and
    // its refusal is mapped to a code (import.cpp).
    if (PyErr_Occurred()) {
      nb::python_error failure;
      if (is_dlpack_error(failure)) throw;
      return std::nullopt;
    }
    detail::fail(ErrorCode::invalid_tensor,
                 "The producer's C exchange API failed without saying why.",
                 "Report it to the producing library.");
  }
  TakenStruct taken(out);
  const abi::DLTensor* tensor = taken.dl_tensor();
  if (tensor == nullptr || is_host_accessible(tensor->device.device_type)) return taken;
  (void)std::move(taken).adopt();  // validated (a malformed tensor is refused as such), then dropped
  return std::nullopt;
}

// One call of the producer, for request with `stream` (request.stream, or
// the stream dlbridge chose).
TakenStruct ask_once(nb::handle x, ProducerType& known, const ExchangeRequest& request, StreamArg stream) {
  if (std::optional<TakenStruct> taken = ask_exchange_api(x, known, request)) return std::move(*taken);
  const ProtocolLevel level = known.level.load(std::memory_order_relaxed);
  if (level == ProtocolLevel::max_version_only && !request.device && request.copy != false) {
    if (!stream.given) return take_capsule(call_dlpack_max_version(x, nb::handle(Py_None), &known));
    return take_capsule(call_dlpack_max_version(x, stream_object(stream), &known));
  }
  if (level == ProtocolLevel::no_keywords) return take_capsule(x.attr("__dlpack__")());
  return take_capsule(call_dlpack_probing(x, known, request, stream));
}

}  // namespace

TakenStruct ask_producer(nb::handle x, ProducerType& known, const ExchangeRequest& request) {
  StreamArg stream = request.stream;
  if (!stream.given && known.serves_devices.load(std::memory_order_relaxed)) stream = stream_for_producer(x);
  for (;;) {
    TakenStruct taken = ask_once(x, known, request, stream);
    const abi::DLTensor* tensor = taken.dl_tensor();
    // Asked with a stream, or unreadable (refused by whoever adopts it).
    if (stream.given || tensor == nullptr) return taken;
    stream = backend::default_stream_arg(tensor->device.device_type);
    if (!stream.given) return taken;
    (void)std::move(taken).adopt();  // device memory after all: validated first, then dropped
    known.serves_devices.store(true, std::memory_order_relaxed);
  }
}

}  // namespace dlbridge::python
