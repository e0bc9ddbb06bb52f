// The consumer side of the DLPack Python protocol: ask max_version=(1, 3),
// fall back to fewer keywords for old producers (once per type), prefer a
// producer type's C exchange API, and pass streams for device memory.
#include <nanobind/stl/string.h>

#include <unordered_map>

#include "dlpack_protocol.hpp"

namespace dlbridge::python {

// How much of the DLPack keyword protocol a producer type accepts, learnt
// from the first call and remembered: probing by TypeError on every call
// would cost microseconds each time.
namespace {

enum class ProtocolLevel : uint8_t { unknown, max_version_only, no_keywords };

}  // namespace

// What dlbridge has learnt about one producer type.
struct ProducerType {
  // A weak reference whose callback drops this entry when the type dies, so
  // the cache keeps no class alive (20,000 dynamic classes stayed alive
  // before) and a later type at the same address starts afresh.
  nb::object type_watch;
  ProducerPolicy policy;
  const abi::DLPackExchangeAPI* api = nullptr;  // its C exchange API, if trusted
  ProtocolLevel level = ProtocolLevel::unknown;
  // Has delivered device memory: from then on __dlpack_device__ is asked
  // first so that a stream can be passed. CPU-only types never pay for it.
  bool serves_devices = false;
  // __dlpack__ as the type's MRO holds it, and the version tag it was read
  // at (see dlpack_method).
  PyObject* method = nullptr;  // borrowed: an unchanged tag means it is still there
  unsigned int method_tag = 0;
};

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

// Only types with __dlpack__ are entered, so a hit also answers "is this a
// DLPack producer" without an attribute lookup.
std::unordered_map<PyTypeObject*, ProducerType>& producer_types() {
  static auto* cache = new std::unordered_map<PyTypeObject*, ProducerType>();
  return *cache;
}

ProducerType* known_producer(PyTypeObject* type) {
  auto& cache = producer_types();
  auto found = cache.find(type);
  return found == cache.end() ? nullptr : &found->second;
}

void forget_producer(PyTypeObject* type) { producer_types().erase(type); }

ProducerType& learn_producer(PyTypeObject* type) {
  ProducerType entry;
  nb::object forget = nb::cpp_function([type](nb::handle) { forget_producer(type); });
  PyObject* watch = PyWeakref_NewRef(reinterpret_cast<PyObject*>(type), forget.ptr());
  if (watch == nullptr) throw nb::python_error();
  entry.type_watch = nb::steal(watch);
  entry.policy = policy_for_type(type);
  entry.api = entry.policy.exchange_api;
  return producer_types().emplace(type, std::move(entry)).first->second;
}

PyObject* dlpack_name() {
  static PyObject* name = PyUnicode_InternFromString("__dlpack__");
  return name;
}

// What x.__dlpack__ finds without the lookup, or NULL: the function or C
// method in x's type, to be called with x first. That lookup (the MRO cache,
// the instance check, binding) is ~140 of an import's ~1,900 instructions.
// Taken only where it is exactly what the lookup would find: the generic
// attribute lookup, no instance dict to shadow it, a plain method, and the
// version tag it was read at (which any change to the type or a base
// replaces). The limited API shows no tags: the abi3 build looks it up.
PyObject* dlpack_method([[maybe_unused]] ProducerType* known, [[maybe_unused]] PyTypeObject* type) {
#ifdef Py_LIMITED_API
  return nullptr;
#else
  if (known == nullptr || type->tp_version_tag == 0 || type->tp_getattro != PyObject_GenericGetAttr ||
      type->tp_dictoffset != 0)
    return nullptr;
#ifdef Py_TPFLAGS_MANAGED_DICT
  if (type->tp_flags & Py_TPFLAGS_MANAGED_DICT) return nullptr;
#endif
  if (known->method_tag == type->tp_version_tag) return known->method;
  PyObject* found = _PyType_Lookup(type, dlpack_name());  // borrowed, no exception
  if (found == nullptr || !(Py_TYPE(found) == &PyMethodDescr_Type || PyFunction_Check(found)))
    return nullptr;
  known->method = found;
  known->method_tag = type->tp_version_tag;
  return found;
#endif
}

// x.__dlpack__(max_version=(1, 3)) through vectorcall with interned names:
// the common call builds no dict and no tuple.
nb::object call_dlpack_max_version(nb::handle x, nb::handle stream, ProducerType* known = nullptr) {
  static PyObject* version =
      nb::make_tuple(DLBRIDGE_DLPACK_MAJOR, DLBRIDGE_DLPACK_MINOR).release().ptr();
  // Interned names: a producer's argument parser (NumPy's among them)
  // matches keywords by pointer first and falls back to comparing text.
  static PyObject* names_version =
      nb::make_tuple(nb::steal(PyUnicode_InternFromString("max_version"))).release().ptr();
  static PyObject* names_version_stream =
      nb::make_tuple(nb::steal(PyUnicode_InternFromString("max_version")),
                     nb::steal(PyUnicode_InternFromString("stream")))
          .release()
          .ptr();
  const bool with_stream = !stream.is_none();
  PyObject* names = with_stream ? names_version_stream : names_version;
  PyObject* args[] = {x.ptr(), version, stream.ptr()};
  PyObject* method = dlpack_method(known, Py_TYPE(x.ptr()));
  PyObject* result = method != nullptr
                         ? PyObject_Vectorcall(method, args, 1, names)
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
nb::object call_dlpack_probing(nb::handle x, ProducerType& known, const ExchangeRequest& request) {
  if (request.device || request.copy == false) {
    nb::dict kwargs;
    kwargs["max_version"] = nb::make_tuple(DLBRIDGE_DLPACK_MAJOR, DLBRIDGE_DLPACK_MINOR);
    if (request.stream.given) kwargs["stream"] = stream_object(request.stream);
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
  if (known.level != ProtocolLevel::no_keywords) {
    try {
      nb::object capsule = call_dlpack_max_version(x, stream_object(request.stream));
      known.level = ProtocolLevel::max_version_only;
      return capsule;
    } catch (nb::python_error& e) {
      if (!rejects_keywords(e) || known.level == ProtocolLevel::max_version_only) throw;
    }
  }
  nb::object capsule = x.attr("__dlpack__")();
  known.level = ProtocolLevel::no_keywords;
  return capsule;
}

// Through the producer's C exchange API when it has one and the request is
// plain; std::nullopt sends the caller to __dlpack__. Non-host results go
// back: the _no_sync entry leaves stream ordering to the caller, and
// __dlpack__ lets the producer do it.
std::optional<ManagedTensor> import_exchange_api(nb::handle x, const ProducerType& known,
                                                 const ExchangeRequest& request) {
  if (known.api == nullptr || request.device || request.copy == false) return std::nullopt;
  abi::DLManagedTensorVersioned* out = nullptr;
  if (known.api->managed_tensor_from_py_object_no_sync(x.ptr(), &out) != 0) {
    // torch's entry reports what its __dlpack__ calls a BufferError as a
    // RuntimeError with a C++ stack trace; __dlpack__ is asked instead, and
    // its refusal is mapped to a code (import_object).
    if (PyErr_Occurred()) {
      nb::python_error failure;
      if (is_dlpack_error(failure)) throw;
      return std::nullopt;
    }
    detail::fail(ErrorCode::invalid_tensor,
                 "The producer's C exchange API failed without saying why.",
                 "Report it to the producing library.");
  }
  ManagedTensor managed = ManagedTensor::adopt(out);
  if (!is_host_accessible(managed.view().device().type)) return std::nullopt;
  return managed;
}

ManagedTensor import_dlpack_once(nb::handle x, ProducerType& known,
                                const ExchangeRequest& request) {
  if (auto managed = import_exchange_api(x, known, request)) return std::move(*managed);
  if (known.level == ProtocolLevel::max_version_only && !request.device && request.copy != false)
    return consume_capsule(call_dlpack_max_version(x, stream_object(request.stream), &known));
  if (known.level == ProtocolLevel::no_keywords) return consume_capsule(x.attr("__dlpack__")());
  return consume_capsule(call_dlpack_probing(x, known, request));
}

}  // namespace

const ProducerPolicy& policy_of(const ProducerType& known) noexcept { return known.policy; }

namespace {

// The last type find_producer learnt or found, recognised by address and
// version tag: a program converts the same kind of array over and over, and
// the tag tells a new type at a freed type's address apart (tags are not
// reused), so no reference is held here either.
struct LastProducer {
  PyTypeObject* type = nullptr;
  unsigned int tag = 0;
  ProducerType* known = nullptr;
};
LastProducer last_producer;

}  // namespace

ProducerType* recent_producer(PyTypeObject* type) noexcept {
  const LastProducer& last = last_producer;
  if (type == last.type && last.tag != 0 && py::type_version_tag(type) == last.tag) return last.known;
  return nullptr;
}

ProducerType* find_producer(nb::handle x) {
  PyTypeObject* type = Py_TYPE(x.ptr());
  if (ProducerType* known = recent_producer(type)) return known;
  ProducerType* known = known_producer(type);
  if (known == nullptr && !attribute_or_none(x, "__dlpack__").is_none())
    known = &learn_producer(type);
  if (known != nullptr) last_producer = {type, py::type_version_tag(type), known};
  return known;
}

// A producer asked without a stream may hand over device memory whose
// writes are still queued; such a tensor is dropped and asked for again
// with the device's default stream (once per type: the type is marked).
ManagedTensor import_dlpack(nb::handle x, ProducerType& known, ExchangeRequest request) {
  if (known.serves_devices && !request.stream.given) request.stream = stream_for_producer(x);
  ManagedTensor managed = import_dlpack_once(x, known, request);
  if (!request.stream.given) {
    const StreamArg stream = backend::default_stream_arg(managed.view().device().type);
    if (stream.given) {
      known.serves_devices = true;
      managed.reset();
      request.stream = stream;
      managed = import_dlpack_once(x, known, request);
    }
  }
  return managed;  // one named result: returned without a move
}

nb::object plain_capsule(nb::handle x, ProducerType& known, const ExchangeRequest& request) {
  // The producer that import_dlpack_once calls with max_version alone and
  // import_dlpack asks without a stream: no C exchange API, no device
  // memory served so far.
  if (known.api != nullptr || known.level != ProtocolLevel::max_version_only || known.serves_devices ||
      request.stream.given || request.device || request.copy == false)
    return nb::object();
  return call_dlpack_max_version(x, nb::none(), &known);
}

ManagedTensor ask_again_with_stream(nb::handle x, ProducerType& known, const ExchangeRequest& request,
                                    StreamArg stream) {
  known.serves_devices = true;
  ExchangeRequest with_stream = request;
  with_stream.stream = stream;
  return import_dlpack_once(x, known, with_stream);
}

Tensor import_dlpack_tensor(nb::handle x, ProducerType& known, const ExchangeRequest& request) {
  // A plain producer's versioned tensor is adopted in its storage.
  if (nb::object capsule = plain_capsule(x, known, request)) {
    Tensor tensor = tensor_from_capsule(capsule);
    const StreamArg stream = backend::default_stream_arg(tensor.view().device().type);
    if (!stream.given) return tensor;
    tensor = Tensor();
    return tensor_from_managed(ask_again_with_stream(x, known, request, stream));
  }
  return tensor_from_managed(import_dlpack(x, known, request));
}


}  // namespace dlbridge::python
