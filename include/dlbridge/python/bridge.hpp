// The casters' side of the caster interface (caster_api.hpp): finding the
// installed dlbridge._core's table once, the per-call hold of what a view
// borrows, and turning a dlbridge::Error raised in the extension into the
// Python exception dlbridge raises for its code. Plain Python C API, shared
// by the nanobind and pybind11 glue. Call only with the GIL held.
//
// The dlbridge Python package is a run-time dependency of every extension
// built with the casters: without it the first tensor argument (or
// require_dlbridge at module import) raises one ImportError that says how to
// install it.
#pragma once

#include <Python.h>

#include <atomic>
#include <exception>
#include <new>
#include <string>
#include <utility>

#include "../error.hpp"
#include "caster_api.hpp"

namespace dlbridge::python::bridge {

// The exception being raised, normalised and cleared (a new reference), or
// NULL; and the reverse. Python 3.12 deprecates the Fetch/Restore triple.
inline PyObject* take_raised() noexcept {
#if PY_VERSION_HEX >= 0x030C0000
  return PyErr_GetRaisedException();
#else
  PyObject *type = nullptr, *value = nullptr, *traceback = nullptr;
  PyErr_Fetch(&type, &value, &traceback);
  PyErr_NormalizeException(&type, &value, &traceback);
  if (value != nullptr && traceback != nullptr) PyException_SetTraceback(value, traceback);
  Py_XDECREF(type);
  Py_XDECREF(traceback);
  return value;
#endif
}

inline void raise_again(PyObject* exception) noexcept {  // steals exception
#if PY_VERSION_HEX >= 0x030C0000
  PyErr_SetRaisedException(exception);
#else
  PyObject* type = reinterpret_cast<PyObject*>(Py_TYPE(exception));
  Py_INCREF(type);
  PyErr_Restore(type, exception, PyException_GetTraceback(exception));
#endif
}

// Replaces the Python error being raised by an ImportError saying `text`
// and the original reason, with the original as its __cause__.
inline void raise_import_error(const char* text) noexcept {
  PyObject* cause = take_raised();
  PyObject* reason = cause != nullptr ? PyObject_Str(cause) : nullptr;
  if (reason == nullptr) PyErr_Clear();
  if (reason != nullptr)
    PyErr_Format(PyExc_ImportError, "%s (%U)", text, reason);
  else
    PyErr_SetString(PyExc_ImportError, text);
  Py_XDECREF(reason);
  if (cause == nullptr) return;
  PyObject* error = take_raised();
  if (error == nullptr) {
    Py_DECREF(cause);
    return;
  }
  PyException_SetCause(error, cause);  // steals cause
  raise_again(error);
}

inline constexpr const char* install_advice =
    "This extension's dlbridge type casters read every tensor argument through the installed "
    "dlbridge Python package (dlbridge._core._caster_api), which this Python cannot load. Install "
    "dlbridge into this environment from a built wheel (pip install dlbridge-<version>-<tag>.whl) "
    "or from a clone of its repository (pip install <path to the clone>); it is not on PyPI";

inline const CasterApi* load_api() noexcept {
  // Imported here rather than by PyCapsule_Import, whose error says only
  // that it failed, not why.
  PyObject* core = PyImport_ImportModule(caster_api_module);
  PyObject* capsule = core != nullptr ? PyObject_GetAttrString(core, caster_api_attribute) : nullptr;
  Py_XDECREF(core);
  const void* pointer = capsule != nullptr ? PyCapsule_GetPointer(capsule, caster_api_capsule_name) : nullptr;
  const auto* table = static_cast<const CasterApi*>(pointer);
  // The table is static in dlbridge._core, which is never unloaded.
  Py_XDECREF(capsule);
  if (table == nullptr) {
    raise_import_error(install_advice);
    return nullptr;
  }
  if (table->major != caster_api_major || table->minor < caster_api_minor ||
      table->hold_size > call_hold_capacity) {
    PyErr_Format(PyExc_ImportError,
                 "The installed dlbridge offers the casters' interface %u.%u; this extension was "
                 "built with dlbridge headers that need %u.%u (holding %u bytes). Rebuild the "
                 "extension against the installed dlbridge (python -m dlbridge --cmake-dir), or "
                 "install the dlbridge it was built with.",
                 unsigned(table->major), unsigned(table->minor), unsigned(caster_api_major),
                 unsigned(caster_api_minor), unsigned(call_hold_capacity));
    return nullptr;
  }
  return table;
}

// The text of the Python error being raised, which is cleared.
inline std::string take_error_text() noexcept {
  PyObject* error = take_raised();
  PyObject* text = error != nullptr ? PyObject_Str(error) : nullptr;
  Py_XDECREF(error);
  const char* utf8 = text != nullptr ? PyUnicode_AsUTF8AndSize(text, nullptr) : nullptr;
  std::string out;
  try {
    out = utf8 != nullptr ? utf8 : "dlbridge could not be loaded";
  } catch (...) {
  }
  Py_XDECREF(text);
  PyErr_Clear();
  return out;
}

// The installed dlbridge's table; NULL with an ImportError set when there is
// no usable one (asked again next time: the package may be installed later).
inline const CasterApi* api() noexcept {
  static std::atomic<const CasterApi*> loaded{nullptr};
  const CasterApi* table = loaded.load(std::memory_order_acquire);
  if (table != nullptr) return table;
  table = load_api();
  if (table != nullptr) loaded.store(table, std::memory_order_release);
  return table;
}

// Sets the Python error that dlbridge raises for the exception in flight
// (call from a catch block): a dlbridge::Error by the error table, through
// the installed package; MemoryError for anything else.
inline void set_current_error(const CasterApi* table) noexcept {
  try {
    throw;
  } catch (const Error& e) {
    const std::string code(e.code_name());
    table->set_error(code.c_str(), e.message().c_str(), e.hint().c_str());
  } catch (...) {
    PyErr_NoMemory();
  }
}

// The space one argument's import keeps alive for the call, in the caster
// itself; released when the caster goes.
class CallHold {
 public:
  CallHold() = default;
  CallHold(const CallHold&) = delete;
  CallHold& operator=(const CallHold&) = delete;
  ~CallHold() { release(); }

  // import_view into this hold; the table's result code.
  int import(const CasterApi* table, PyObject* object, abi::DLTensor& view, uint64_t& flags) noexcept {
    release();
    const int result = table->import_view(object, space_, &view, &flags);
    if (result == caster_imported || result == caster_imported_pending) table_ = table;
    return result;
  }
  int commit(abi::DLTensor& view, uint64_t& flags) noexcept { return table_->commit(space_, &view, &flags); }
  int take(abi::DLManagedTensorVersioned*& out) noexcept { return table_->take(space_, &out); }
  void release() noexcept {
    if (table_ != nullptr) std::exchange(table_, nullptr)->release(space_);
  }

 private:
  const CasterApi* table_ = nullptr;  // set while something is held
  alignas(call_hold_alignment) unsigned char space_[call_hold_capacity];
};

}  // namespace dlbridge::python::bridge
