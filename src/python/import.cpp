// from_dlpack / to_dlpack / empty: reading any array-like object into a
// dlbridge.Tensor. Order of preference: a dlbridge.Tensor, a raw capsule,
// __dlpack__, the buffer protocol, __array_interface__.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <string>
#include <unordered_map>

#include "bindings.hpp"
#include "devices.hpp"

namespace dlbridge::python {

namespace {

// Keeps a Python object alive for as long as a tensor borrows its memory.
// The last reference may drop on any thread, or during shutdown, when
// touching Python is no longer allowed.
struct PythonOwner {
  PyObject* object;
  Py_buffer buffer{};
  bool has_buffer = false;

  ~PythonOwner() {
    if (!Py_IsInitialized() || python_is_finalizing()) return;
    PyGILState_STATE state = PyGILState_Ensure();
    if (has_buffer) PyBuffer_Release(&buffer);
    Py_XDECREF(object);
    PyGILState_Release(state);
  }
};

// How much of the DLPack keyword protocol a producer type accepts, learnt
// from the first call and remembered: probing by TypeError on every call
// would cost microseconds each time.
enum class ProtocolLevel : uint8_t { unknown, max_version_only, no_keywords };

// What dlbridge has learnt about one producer type.
struct ProducerType {
  nb::object type;  // a strong reference keeps the address from being reused
  const abi::DLPackExchangeAPI* api = nullptr;  // its C exchange API, if any
  ProtocolLevel level = ProtocolLevel::unknown;
  // Has delivered device memory: from then on __dlpack_device__ is asked
  // first so that a stream can be passed. CPU-only types never pay for it.
  bool serves_devices = false;
};

// The stream dlbridge asks a producer to make data ready on: the family's
// default, which every blocking stream is ordered after. None for host
// memory, where the spec gives streams no meaning.
nb::object default_stream_for(DeviceType type) {
  switch (type) {
    case abi::kDLCUDA:
    case abi::kDLCUDAManaged: return nb::int_(1);  // legacy default stream
    case abi::kDLROCM: return nb::int_(0);         // ROCm's default stream
    default: return nb::none();
  }
}

nb::object stream_for_producer(nb::handle x) {
  nb::tuple device = nb::borrow<nb::tuple>(x.attr("__dlpack_device__")());
  return default_stream_for(DeviceType(nb::cast<int32_t>(device[0])));
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

ProducerType& learn_producer(PyTypeObject* type) {
  ProducerType entry;
  entry.type = nb::borrow(reinterpret_cast<PyObject*>(type));
  entry.api = find_exchange_api(type);
  return producer_types().emplace(type, std::move(entry)).first->second;
}

// x.__dlpack__(max_version=(1, 3)) through vectorcall with interned names:
// the common call builds no dict and no tuple.
nb::object call_dlpack_max_version(nb::handle x, nb::handle stream) {
  static PyObject* method = PyUnicode_InternFromString("__dlpack__");
  static PyObject* version =
      nb::make_tuple(DLBRIDGE_DLPACK_MAJOR, DLBRIDGE_DLPACK_MINOR).release().ptr();
  static PyObject* names_version = nb::make_tuple("max_version").release().ptr();
  static PyObject* names_version_stream = nb::make_tuple("max_version", "stream").release().ptr();
  const bool with_stream = !stream.is_none();
  PyObject* args[] = {x.ptr(), version, stream.ptr()};
  PyObject* result = PyObject_VectorcallMethod(
      method, args, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET,
      with_stream ? names_version_stream : names_version);
  if (result == nullptr) throw nb::python_error();
  return nb::steal(result);
}

// The first call to a type's __dlpack__, with every keyword the request
// needs; a TypeError walks down to fewer keywords.
nb::object call_dlpack_probing(nb::handle x, ProducerType& known, const ExchangeRequest& request) {
  if (request.device || request.copy == false) {
    nb::dict kwargs;
    kwargs["max_version"] = nb::make_tuple(DLBRIDGE_DLPACK_MAJOR, DLBRIDGE_DLPACK_MINOR);
    if (!request.stream.is_none()) kwargs["stream"] = request.stream;
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
      if (!e.matches(PyExc_TypeError) && !e.matches(PyExc_BufferError)) throw;
    }
  }
  if (known.level != ProtocolLevel::no_keywords) {
    try {
      nb::object capsule = call_dlpack_max_version(x, request.stream);
      known.level = ProtocolLevel::max_version_only;
      return capsule;
    } catch (nb::python_error& e) {
      if (!e.matches(PyExc_TypeError) || known.level == ProtocolLevel::max_version_only) throw;
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
    if (PyErr_Occurred()) throw nb::python_error();
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
    return consume_capsule(call_dlpack_max_version(x, request.stream));
  if (known.level == ProtocolLevel::no_keywords) return consume_capsule(x.attr("__dlpack__")());
  return consume_capsule(call_dlpack_probing(x, known, request));
}

// A producer asked without a stream may hand over device memory whose
// writes are still queued; such a tensor is dropped and asked for again
// with the device's default stream (once per type: the type is marked).
ManagedTensor import_dlpack(nb::handle x, ProducerType& known, ExchangeRequest request) {
  if (known.serves_devices && request.stream.is_none()) request.stream = stream_for_producer(x);
  ManagedTensor managed = import_dlpack_once(x, known, request);
  if (request.stream.is_none()) {
    nb::object stream = default_stream_for(managed.view().device().type);
    if (!stream.is_none()) {
      known.serves_devices = true;
      managed.reset();
      request.stream = stream;
      managed = import_dlpack_once(x, known, request);
    }
  }
  return managed;  // one named result: returned without a move
}

[[noreturn]] void unsupported_format(const std::string& what) {
  detail::fail(ErrorCode::unsupported_dtype,
               "dlbridge cannot represent the element type " + what + " in DLPack.",
               "Convert the data to a standard numeric dtype first.");
}

// A struct-module format with one element ("<f", "=q", "Zd") as a DType.
DType dtype_from_buffer_format(const char* format, int64_t itemsize) {
  std::string f = format ? format : "B";
  if (!f.empty() && (f[0] == '@' || f[0] == '=' || f[0] == '<')) f = f.substr(1);
  else if (!f.empty() && (f[0] == '>' || f[0] == '!'))
    unsupported_format("'" + f + "' (big-endian)");
  const auto bits = uint8_t(itemsize * 8);
  if (f == "?") return DType{abi::kDLBool, 8, 1};
  if (f == "b" || f == "h" || f == "i" || f == "l" || f == "q" || f == "n")
    return DType{abi::kDLInt, bits, 1};
  if (f == "B" || f == "H" || f == "I" || f == "L" || f == "Q" || f == "N" || f == "c")
    return DType{abi::kDLUInt, bits, 1};
  if (f == "e" || f == "f" || f == "d") return DType{abi::kDLFloat, bits, 1};
  if (f == "Zf" || f == "Zd") return DType{abi::kDLComplex, bits, 1};
  unsupported_format("'" + f + "' (buffer format)");
}

// "<f4", "|b1", "<c8" as a DType.
DType dtype_from_typestr(const std::string& typestr) {
  if (typestr.size() < 3) unsupported_format("'" + typestr + "'");
  const char order = typestr[0], kind = typestr[1];
  if (order == '>') unsupported_format("'" + typestr + "' (big-endian)");
  int64_t itemsize = 0;
  for (size_t i = 2; i < typestr.size(); ++i) {
    if (typestr[i] < '0' || typestr[i] > '9' || itemsize > 1024)
      unsupported_format("'" + typestr + "'");
    itemsize = itemsize * 10 + (typestr[i] - '0');
  }
  const auto bits = uint8_t(itemsize * 8);
  if (itemsize <= 0 || itemsize > 16) unsupported_format("'" + typestr + "'");
  switch (kind) {
    case 'b': return DType{abi::kDLBool, 8, 1};
    case 'i': return DType{abi::kDLInt, bits, 1};
    case 'u': return DType{abi::kDLUInt, bits, 1};
    case 'f': return DType{abi::kDLFloat, bits, 1};
    case 'c': return DType{abi::kDLComplex, bits, 1};
  }
  unsupported_format("'" + typestr + "'");
}

std::vector<int64_t> element_strides(const std::vector<int64_t>& byte_strides, int64_t itemsize) {
  std::vector<int64_t> out;
  for (int64_t s : byte_strides) {
    if (s % itemsize != 0)
      detail::fail(ErrorCode::unsupported_layout,
                   "A byte stride of " + std::to_string(s) +
                       " is not a multiple of the item size " + std::to_string(itemsize) +
                       "; DLPack counts strides in elements.",
                   "Copy the data into a regular array first.");
    out.push_back(s / itemsize);
  }
  return out;
}

Tensor tensor_over_python_memory(std::shared_ptr<PythonOwner> owner, void* data, DType dtype,
                                 const std::vector<int64_t>& shape,
                                 const std::vector<int64_t>& strides, bool readonly,
                                 uint64_t extra_flags = 0) {
  const uint64_t flags = (readonly ? DLBRIDGE_FLAG_READ_ONLY : 0) | extra_flags;
  TensorView view = TensorView::from_data(data, dtype, shape, strides, Device{}, flags);
  return tensor_from_managed(ManagedTensor::adopt(make_versioned(view, std::move(owner), flags)));
}

Tensor import_buffer(nb::handle x) {
  auto owner = std::make_shared<PythonOwner>();
  owner->object = nullptr;
  if (PyObject_GetBuffer(x.ptr(), &owner->buffer, PyBUF_RECORDS_RO) != 0) throw nb::python_error();
  owner->has_buffer = true;
  const Py_buffer& b = owner->buffer;
  DType dtype = dtype_from_buffer_format(b.format, b.itemsize);
  if (int64_t(dtype.element_bytes()) != b.itemsize)
    unsupported_format(std::string("'") + (b.format ? b.format : "B") + "' of itemsize " +
                       std::to_string(b.itemsize));
  std::vector<int64_t> shape(b.shape, b.shape + b.ndim), byte_strides;
  if (b.strides) byte_strides.assign(b.strides, b.strides + b.ndim);
  std::vector<int64_t> strides = element_strides(byte_strides, b.itemsize);
  return tensor_over_python_memory(owner, b.buf, dtype, shape, strides, b.readonly != 0);
}

std::vector<int64_t> int_tuple(nb::handle value, const char* what) {
  std::vector<int64_t> out;
  for (nb::handle item : nb::borrow<nb::sequence>(value)) {
    if (!PyLong_Check(item.ptr()))
      throw nb::type_error((std::string(what) + " entries must be ints.").c_str());
    out.push_back(nb::cast<int64_t>(item));
  }
  return out;
}

// dtype overrides the typestr, for extension dtypes that the interface can
// only describe as opaque bytes ("<V2" for ml_dtypes' bfloat16).
Tensor import_array_interface(nb::handle x, nb::handle interface,
                              std::optional<DType> dtype_override = std::nullopt) {
  if (!PyDict_Check(interface.ptr()))
    throw nb::type_error("__array_interface__ must be a dict.");
  nb::dict d = nb::borrow<nb::dict>(interface);
  if (!d.contains("shape") || !d.contains("typestr") || !d.contains("data") || d["data"].is_none())
    throw nb::type_error("__array_interface__ needs 'shape', 'typestr' and a 'data' tuple.");
  const std::string typestr = nb::cast<std::string>(d["typestr"]);
  DType dtype;
  uint64_t flags = 0;
  if (dtype_override) {
    dtype = *dtype_override;
    // ml_dtypes describes its types as opaque bytes, or as 'f' for some
    // float8 types; only the item size has to agree.
    if (typestr.size() < 3 || (typestr[1] != 'V' && typestr[1] != 'f') ||
        typestr.substr(2) != std::to_string(dtype.element_bytes()))
      unsupported_format("'" + typestr + "' as " + dtype_name(dtype));
    // A sub-byte type with one element per byte (ml_dtypes' float4/float6).
    if (dtype.is_subbyte()) flags = DLBRIDGE_FLAG_IS_SUBBYTE_TYPE_PADDED;
  } else {
    dtype = dtype_from_typestr(typestr);
  }
  nb::tuple data = nb::borrow<nb::tuple>(d["data"]);
  auto address = nb::cast<uintptr_t>(data[0]);
  bool readonly = nb::cast<bool>(data[1]);
  std::vector<int64_t> shape = int_tuple(d["shape"], "shape"), strides;
  if (d.contains("strides") && !d["strides"].is_none())
    strides = element_strides(int_tuple(d["strides"], "strides"), dtype.element_bytes());
  auto owner = std::make_shared<PythonOwner>();
  owner->object = nb::borrow(x).release().ptr();
  return tensor_over_python_memory(owner, reinterpret_cast<void*>(address), dtype, shape, strides,
                                   readonly, flags);
}

// Applies what the producer could not: a move to another device, or the
// copy that copy=True promises; copy_tensor moves data between devices
// through the device backends.
Tensor finish_import(Tensor t, const ExchangeRequest& request, bool copied_by_producer) {
  const Device source = t.view().device();
  const Device target = request.device.value_or(source);
  const bool host_alias = target == Device{} && is_host_accessible(source.type);
  const bool moved = target != source && !host_alias;
  if (moved && request.copy == false)
    detail::fail(ErrorCode::copy_required,
                 "The tensor is on " + to_string(source) + " but device=" + to_string(target) +
                     " was requested with copy=False.",
                 "Pass copy=None to allow the transfer.");
  if (copied_by_producer && request.copy == false)
    detail::fail(ErrorCode::copy_required,
                 "copy=False was requested, but the producer could only deliver a copy "
                 "(it set IS_COPIED).",
                 "Pass copy=None to accept the copy.");
  if (moved || (request.copy == true && !copied_by_producer)) return copy_tensor(t, target);
  if (target != source) t = Tensor(t.storage(), t.view().with_device(target));
  return t;
}

// NumPy exports only its built-in dtypes through DLPack. An array of an
// extension dtype (ml_dtypes' bfloat16 and float8 types) still names its
// dtype, and its memory is described by __array_interface__.
std::optional<Tensor> import_extension_dtype(nb::handle x) {
  nb::object interface = nb::getattr(x, "__array_interface__", nb::none());
  nb::object dtype = nb::getattr(x, "dtype", nb::none());
  if (interface.is_none() || dtype.is_none()) return std::nullopt;
  std::optional<DType> parsed;
  try {
    parsed = dtype_from_python(dtype);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  const bool numpy_exports_it = !parsed->is_subbyte() &&
                                (parsed->code == abi::kDLInt || parsed->code == abi::kDLUInt ||
                                 parsed->code == abi::kDLFloat || parsed->code == abi::kDLComplex ||
                                 parsed->code == abi::kDLBool);
  if (numpy_exports_it) return std::nullopt;  // refused for another reason: keep that error
  return import_array_interface(x, interface, parsed);
}

Tensor import_from_producer(nb::handle x, ProducerType& known, const ExchangeRequest& request) {
  ManagedTensor managed = import_dlpack(x, known, request);
  const bool copied = (managed.flags() & DLBRIDGE_FLAG_IS_COPIED) != 0;
  if (!request.device && !request.copy) return tensor_from_managed(std::move(managed));
  return finish_import(tensor_from_managed(std::move(managed)), request, copied);
}

}  // namespace

Tensor import_object(nb::handle x, const ExchangeRequest& request) {
  if (const Tensor* t = as_tensor(x)) return finish_import(*t, request, false);
  if (PyCapsule_CheckExact(x.ptr()))
    return finish_import(tensor_from_managed(consume_capsule(x)), request, false);
  ProducerType* known = known_producer(Py_TYPE(x.ptr()));
  if (known == nullptr && nb::hasattr(x, "__dlpack__")) known = &learn_producer(Py_TYPE(x.ptr()));
  if (known != nullptr) {
    try {
      return import_from_producer(x, *known, request);
    } catch (nb::python_error& e) {
      if (!e.matches(PyExc_BufferError)) throw;
      std::optional<Tensor> fallback = import_extension_dtype(x);
      if (!fallback) throw;
      return finish_import(std::move(*fallback), request, false);
    }
  }
  if (PyObject_CheckBuffer(x.ptr())) return finish_import(import_buffer(x), request, false);
  nb::object interface = nb::getattr(x, "__array_interface__", nb::none());
  if (!interface.is_none())
    return finish_import(import_array_interface(x, interface), request, false);
  nb::object cuda_interface = nb::getattr(x, "__cuda_array_interface__", nb::none());
  if (!cuda_interface.is_none())
    return finish_import(import_cuda_array_interface(x, cuda_interface), request, false);
  throw nb::type_error((std::string("dlbridge.from_dlpack cannot read a ") +
                        nb::inst_name(x).c_str() +
                        ": it has no __dlpack__, buffer protocol or __array_interface__.")
                           .c_str());
}

void bind_import(nb::module_& m) {
  m.def("from_dlpack",
        [](nb::handle x, nb::handle device, nb::handle copy) {
          ExchangeRequest request{std::nullopt, dl_device_from_python(device),
                                  copy_from_python(copy), nb::none()};
          return wrap_tensor(import_object(x, request));
        },
        nb::arg(), nb::kw_only(), nb::arg("device") = nb::none(),
        nb::arg("copy") = nb::none(),
        // Positional-only arguments are unnamed in nanobind; the signature
        // users see names it as the array API standard does.
        nb::sig("def from_dlpack(x: object, /, *, device: object | None = None, "
                "copy: bool | None = None) -> Tensor"),
        "Import x (a DLPack producer, a DLPack capsule, or any object with the buffer "
        "protocol or __array_interface__) as a dlbridge.Tensor, zero-copy whenever the "
        "request allows. copy=True never aliases; copy=False never copies.");
  m.def("to_dlpack",
        [](nb::handle x, nb::handle stream, nb::handle max_version, nb::handle dl_device,
           nb::handle copy) {
          Tensor t = import_object(x, ExchangeRequest{});
          ExchangeRequest request{max_version_from_python(max_version),
                                  dl_device_from_python(dl_device), copy_from_python(copy),
                                  nb::borrow(stream)};
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
        [](nb::handle shape, nb::handle dtype, nb::handle device) {
          Device target = device_from_python(device);
          if (target != Device{}) {
            if (device_support(target) == DeviceSupport::unsupported)
              fail_unsupported_device(target.type);
            fail_unavailable_device(target, "no runtime for it was found.");
          }
          std::vector<int64_t> dims;
          if (PyLong_Check(shape.ptr())) dims.push_back(nb::cast<int64_t>(shape));
          else dims = int_tuple(shape, "shape");
          return wrap_tensor(tensor_from_managed(allocate_compact(dtype_from_python(dtype), dims)));
        },
        nb::arg("shape"), nb::arg("dtype") = "float32", nb::arg("device") = "cpu",
        "A new, writable, compact tensor with uninitialised contents.");
}

}  // namespace dlbridge::python
