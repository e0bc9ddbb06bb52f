// What the nanobind and pybind11 type casters share, in plain Python C API:
// importing any Python object as a ManagedTensor and returning ManagedTensors
// as dlbridge.Tensor objects, both through the C exchange API of the
// *installed* dlbridge package. So an extension accepts exactly what
// dlbridge.from_dlpack accepts (__dlpack__ with version negotiation, producers'
// own C exchange APIs, the buffer protocol, array interfaces) without a second
// copy of that logic, and its refusals are dlbridge's coded exceptions.
//
// dlbridge is imported on first use, so an extension works without the user
// importing dlbridge first. Call only with the GIL held.
#pragma once

#include <Python.h>

#include <string>
#include <utility>
#include <vector>

#include "../abi.hpp"
#include "../device.hpp"
#include "../error.hpp"
#include "../exchange_api.hpp"
#include "../managed_tensor.hpp"
#include "../tensor_view.hpp"

namespace dlbridge::detail::python_bridge {

// A strong reference kept for the life of the process: the dlbridge module
// (and its exchange API table) can then never go away under a caster.
inline PyObject* import_attribute(const char* module_name, const char* name) {
  PyObject* module = PyImport_ImportModule(module_name);
  if (module == nullptr) return nullptr;
  PyObject* attribute = PyObject_GetAttrString(module, name);
  Py_DECREF(module);
  return attribute;
}

// The installed dlbridge's exchange API table; NULL with a Python error set
// when dlbridge cannot be imported.
inline const abi::DLPackExchangeAPI* dlbridge_api() noexcept {
  static const abi::DLPackExchangeAPI* api = nullptr;
  if (api != nullptr) return api;
  PyObject* tensor_type = import_attribute("dlbridge", "Tensor");
  if (tensor_type == nullptr) return nullptr;
  PyObject* capsule = PyObject_GetAttrString(tensor_type, "__dlpack_c_exchange_api__");
  Py_DECREF(tensor_type);
  if (capsule == nullptr) return nullptr;
  auto* header = static_cast<const abi::DLPackExchangeAPIHeader*>(
      PyCapsule_GetPointer(capsule, "dlpack_exchange_api"));
  // The table is static inside dlbridge._core, which stays loaded; keeping
  // the capsule alive says so.
  if (header == nullptr) {
    Py_DECREF(capsule);
    return nullptr;
  }
  api = usable_exchange_api(header);
  if (api == nullptr) {
    Py_DECREF(capsule);
    PyErr_SetString(PyExc_ImportError,
                    "The installed dlbridge has no usable DLPack exchange API table; "
                    "install a dlbridge matching these headers.");
  }
  return api;
}

// Sets the Python exception that dlbridge.from_dlpack would raise for e: the
// dlbridge.errors class of its code (a DLPackError with .code and .hint),
// ValueError for a bad argument, MemoryError when out of memory.
inline void set_python_error(const Error& e) noexcept {
  if (e.code() == ErrorCode::invalid_argument) {
    PyErr_SetString(PyExc_ValueError, e.what());
    return;
  }
  if (e.code() == ErrorCode::out_of_memory) {
    PyErr_NoMemory();
    return;
  }
  static PyObject* classes = nullptr;
  if (classes == nullptr) classes = import_attribute("dlbridge.errors", "ERROR_CLASSES");
  const std::string name(e.code_name());
  PyObject* cls = classes != nullptr ? PyDict_GetItemString(classes, name.c_str()) : nullptr;
  if (cls == nullptr) {
    // dlbridge.errors itself failed to import: still a BufferError.
    PyErr_Clear();
    PyErr_SetString(PyExc_BufferError, e.what());
    return;
  }
  PyObject* value = PyObject_CallFunction(cls, "ss", e.message().c_str(), e.hint().c_str());
  if (value != nullptr) {
    PyErr_SetObject(cls, value);
    Py_DECREF(value);
  }
}

enum class ImportOutcome {
  imported,
  not_a_tensor,  // no Python error set: the caster reports a type mismatch
  failed,        // a Python error is set: the caster raises it
};

// Runs one step that may throw dlbridge::Error; false with the coded Python
// error set when it does (anything else is reported as MemoryError).
template <typename Step>
bool call_or_set_error(Step&& step) noexcept {
  try {
    step();
    return true;
  } catch (const Error& e) {
    set_python_error(e);
  } catch (...) {
    PyErr_NoMemory();
  }
  return false;
}

// What a route hands over: a versioned struct, a legacy one, or neither.
// Whoever receives it owns it.
struct Handed {
  abi::DLManagedTensorVersioned* versioned = nullptr;
  abi::DLManagedTensor* legacy = nullptr;
  explicit operator bool() const noexcept { return versioned != nullptr || legacy != nullptr; }
};

// The producer's struct behind a view that lives for one call: its deleter
// runs once, when the owner is reset or dies. The view is kept beside it by
// the caster, validated in place, so that no ManagedTensor is built and
// moved per call (that was ~40% of the caster's own cost, issue 14).
class CallOwner {
 public:
  CallOwner() = default;
  CallOwner(const CallOwner&) = delete;
  CallOwner& operator=(const CallOwner&) = delete;
  ~CallOwner() { reset(); }

  void hold(Handed handed) noexcept {
    reset();
    held_ = handed;
  }
  void reset() noexcept {
    Handed held = std::exchange(held_, Handed{});
    if (held.versioned != nullptr && held.versioned->deleter != nullptr) held.versioned->deleter(held.versioned);
    if (held.legacy != nullptr && held.legacy->deleter != nullptr) held.legacy->deleter(held.legacy);
  }

 private:
  Handed held_;
};

// A legacy capsule cannot say whether its memory may be written, so what it
// delivers is read-only, as dlbridge.from_dlpack imports it (docs/boundary.md).
inline constexpr uint64_t legacy_flags = DLBRIDGE_FLAG_READ_ONLY;

// Receives into a CallOwner and a TensorView, accepting exactly what
// ManagedTensor::adopt accepts: the view is validated the same way, and any
// struct that adopt's own checks (major version, unknown flags, NULL) would
// refuse goes to adopt itself, so the refusal is adopt's.
struct ViewReceiver {
  CallOwner& owner;
  TensorView& view;

  void receive(Handed handed) {
    if (handed.legacy != nullptr) {
      owner.hold(handed);
      view.assign(handed.legacy->dl_tensor, legacy_flags);
      return;
    }
    abi::DLManagedTensorVersioned* m = handed.versioned;
    if (m != nullptr && m->version.major == DLBRIDGE_DLPACK_MAJOR && (m->flags & ~known_flags) == 0) {
      owner.hold(handed);
      view.assign(m->dl_tensor, m->flags);
      return;
    }
    ManagedTensor adopted = ManagedTensor::adopt(m);  // raises the refusal
    view = adopted.view();
    owner.hold(Handed{adopted.release_versioned(), nullptr});
  }
  const TensorView& received() const noexcept { return view; }
  void reset() noexcept { owner.reset(); }
};

// Receives into an owned ManagedTensor (the ManagedTensor caster).
struct ManagedReceiver {
  ManagedTensor& out;

  void receive(Handed handed) {
    if (handed.legacy != nullptr) {
      out = ManagedTensor::adopt(handed.legacy, legacy_flags);
    } else {
      out = ManagedTensor::adopt(handed.versioned);
    }
  }
  const TensorView& received() const noexcept { return out.view(); }
  void reset() noexcept { out.reset(); }
};

// Everything through dlbridge's own import (dlbridge.from_dlpack's path). A
// TypeError from it means "no array-like at all" and becomes not_a_tensor,
// so that the binding framework can try other overloads.
template <typename Receiver>
ImportOutcome import_through_dlbridge(PyObject* object, Receiver& receiver) noexcept {
  const abi::DLPackExchangeAPI* api = dlbridge_api();
  if (api == nullptr) return ImportOutcome::failed;
  abi::DLManagedTensorVersioned* managed = nullptr;
  if (api->managed_tensor_from_py_object_no_sync(object, &managed) != 0) {
    if (!PyErr_Occurred()) {
      PyErr_SetString(PyExc_BufferError, "dlbridge's import failed without saying why.");
      return ImportOutcome::failed;
    }
    if (!PyErr_ExceptionMatches(PyExc_TypeError)) return ImportOutcome::failed;
    PyErr_Clear();
    return ImportOutcome::not_a_tensor;
  }
  // On a refusal the deleter has run and the coded Python error is set.
  return call_or_set_error([&] { receiver.receive(Handed{managed, nullptr}); }) ? ImportOutcome::imported
                                                                                : ImportOutcome::failed;
}

// The per-call fast paths below serve the common case, host memory from a
// producer that answers plainly, in one call without dlbridge's bookkeeping.
// Anything else (device memory, which needs a stream; an old producer; a
// refusal) is handed to import_through_dlbridge, which does it all and
// raises the coded error.
enum class Route : uint8_t {
  exchange_api,  // the type's own DLPack C exchange API
  dlpack_method, // __dlpack__(max_version=(1, 3))
  dlbridge,      // import_through_dlbridge
};

struct TypeRoute {
  PyTypeObject* type;  // a strong reference: the address is never reused
  Route route;
  const abi::DLPackExchangeAPI* api;
  // The type's __dlpack__, called with the object as its first argument:
  // no attribute lookup per call.
  PyObject* dlpack = nullptr;
};

inline const abi::DLPackExchangeAPI* exchange_api_of(PyTypeObject* type) noexcept {
  PyObject* capsule = PyObject_GetAttrString(reinterpret_cast<PyObject*>(type), "__dlpack_c_exchange_api__");
  const abi::DLPackExchangeAPI* api = nullptr;
  if (capsule != nullptr && PyCapsule_IsValid(capsule, "dlpack_exchange_api"))
    api = usable_exchange_api(
        static_cast<const abi::DLPackExchangeAPIHeader*>(PyCapsule_GetPointer(capsule, "dlpack_exchange_api")));
  // A table is static in its module, which the type keeps loaded.
  Py_XDECREF(capsule);
  PyErr_Clear();
  return api;
}

// Decided at the first object of each type; a linear scan, as an extension
// meets a handful of types.
inline TypeRoute& route_of(PyTypeObject* type) {
  static auto* routes = new std::vector<TypeRoute>();
  for (TypeRoute& known : *routes)
    if (known.type == type) return known;
  TypeRoute route{type, Route::dlbridge, exchange_api_of(type)};
  if (route.api != nullptr) {
    route.route = Route::exchange_api;
  } else if ((route.dlpack = PyObject_GetAttrString(reinterpret_cast<PyObject*>(type), "__dlpack__"))) {
    route.route = Route::dlpack_method;
  }
  PyErr_Clear();
  Py_INCREF(type);
  routes->push_back(route);
  return routes->back();
}

// What __dlpack__(max_version=(1, 3)) hands over; nothing (and no error
// set) when the producer did not answer with a capsule.
inline Handed from_dlpack_method(PyObject* object, TypeRoute& route) noexcept {
  struct Arguments {
    PyObject* max_version;
    PyObject* keywords;
  };
  // The keyword name is interned, as producers' own are: NumPy's argument
  // parser then matches it by pointer instead of comparing strings.
  static const Arguments fixed = [] {
    PyObject* name = PyUnicode_InternFromString("max_version");
    Arguments made{Py_BuildValue("(II)", unsigned(DLBRIDGE_DLPACK_MAJOR), unsigned(DLBRIDGE_DLPACK_MINOR)),
                   name != nullptr ? PyTuple_Pack(1, name) : nullptr};
    Py_XDECREF(name);
    return made;
  }();
  if (fixed.max_version == nullptr || fixed.keywords == nullptr) {
    PyErr_Clear();
    return {};
  }
  PyObject* args[] = {object, fixed.max_version};
  PyObject* capsule = PyObject_Vectorcall(route.dlpack, args, 1, fixed.keywords);
  if (capsule == nullptr) {
    // A producer older than max_version: dlbridge's path knows how to ask
    // it, and is taken for its type from now on.
    if (PyErr_ExceptionMatches(PyExc_TypeError)) route.route = Route::dlbridge;
    PyErr_Clear();
    return {};
  }
  // Taken by renaming to the "used_" name, which tells the capsule's own
  // destructor to leave the tensor alone; ours from here on.
  void* versioned = PyCapsule_GetPointer(capsule, "dltensor_versioned");
  void* legacy = versioned == nullptr ? PyCapsule_GetPointer(capsule, "dltensor") : nullptr;
  if (versioned == nullptr) PyErr_Clear();
  const bool taken = (versioned != nullptr || legacy != nullptr) &&
                     PyCapsule_SetName(capsule, versioned ? "used_dltensor_versioned" : "used_dltensor") == 0;
  Py_DECREF(capsule);
  if (!taken) {
    PyErr_Clear();
    return {};
  }
  return Handed{static_cast<abi::DLManagedTensorVersioned*>(versioned), static_cast<abi::DLManagedTensor*>(legacy)};
}

inline Handed from_exchange_api(PyObject* object, const abi::DLPackExchangeAPI* api) noexcept {
  abi::DLManagedTensorVersioned* managed = nullptr;
  if (api->managed_tensor_from_py_object_no_sync(object, &managed) != 0) {
    PyErr_Clear();
    return {};
  }
  return Handed{managed, nullptr};
}

// Imports object as a validated tensor into receiver, as
// dlbridge.from_dlpack(object) would.
template <typename Receiver>
ImportOutcome import_into(PyObject* object, Receiver& receiver) noexcept {
  try {
    TypeRoute& route = route_of(Py_TYPE(object));
    Handed handed;
    if (route.route == Route::exchange_api) handed = from_exchange_api(object, route.api);
    if (route.route == Route::dlpack_method) handed = from_dlpack_method(object, route);
    if (handed) {
      bool received = false;
      try {
        receiver.receive(handed);
        received = true;
      } catch (...) {
        // Let go of it (the deleter runs once); dlbridge asks again and
        // explains the refusal.
        receiver.reset();
      }
      if (received && is_host_accessible(receiver.received().device().type)) return ImportOutcome::imported;
      if (received) {
        // Device memory wants a stream: dlbridge's path passes one. The
        // type goes there from now on.
        receiver.reset();
        route.route = Route::dlbridge;
      }
    }
  } catch (...) {
    PyErr_Clear();  // the route table could not grow: dlbridge's path still works
  }
  return import_through_dlbridge(object, receiver);
}

// Imports object as an owned, validated tensor into out.
inline ImportOutcome import_managed(PyObject* object, ManagedTensor& out) noexcept {
  ManagedReceiver receiver{out};
  return import_into(object, receiver);
}

// Imports object into view, validated in place, with owner holding the
// producer's struct for as long as the view is used.
inline ImportOutcome import_view(PyObject* object, CallOwner& owner, TensorView& view) noexcept {
  ViewReceiver receiver{owner, view};
  return import_into(object, receiver);
}

// Checks requirements against a freshly imported view; false with the
// coded Python error set when one is missed.
template <typename Check>
bool check_or_set_error(Check&& check) noexcept {
  return call_or_set_error(std::forward<Check>(check));
}

// A new dlbridge.Tensor owning tensor (which is left empty); NULL with a
// Python error set on failure, after the tensor's deleter ran.
inline PyObject* to_python(ManagedTensor&& tensor) noexcept {
  const abi::DLPackExchangeAPI* api = dlbridge_api();
  if (api == nullptr) return nullptr;
  abi::DLManagedTensorVersioned* managed = nullptr;
  try {
    managed = tensor.release_versioned();
  } catch (...) {
    PyErr_NoMemory();
    return nullptr;
  }
  if (managed == nullptr) {
    PyErr_SetString(PyExc_ValueError, "An empty dlbridge::ManagedTensor cannot be returned to Python.");
    return nullptr;
  }
  void* object = nullptr;
  if (api->managed_tensor_to_py_object_no_sync(managed, &object) != 0) return nullptr;
  return static_cast<PyObject*>(object);
}

}  // namespace dlbridge::detail::python_bridge
