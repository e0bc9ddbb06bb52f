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

#include "../abi.hpp"
#include "../error.hpp"
#include "../exchange_api.hpp"
#include "../managed_tensor.hpp"

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

// Imports object as an owned, validated tensor into out. A TypeError from
// dlbridge means "no array-like at all" and becomes not_a_tensor, so that
// the binding framework can try other overloads.
inline ImportOutcome import_managed(PyObject* object, ManagedTensor& out) noexcept {
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
  try {
    out = ManagedTensor::adopt(managed);
  } catch (const Error& e) {
    set_python_error(e);
    return ImportOutcome::failed;
  } catch (...) {
    PyErr_NoMemory();
    return ImportOutcome::failed;
  }
  return ImportOutcome::imported;
}

// Checks requirements against a freshly imported view; false with the
// coded Python error set when one is missed.
template <typename Check>
bool check_or_set_error(Check&& check) noexcept {
  try {
    check();
    return true;
  } catch (const Error& e) {
    set_python_error(e);
  } catch (...) {
    PyErr_NoMemory();
  }
  return false;
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
