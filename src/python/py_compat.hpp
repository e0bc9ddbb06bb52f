// The few CPython calls of the extension that lie outside the limited API, each
// behind one inline function: the fast macro or field in a version-specific
// build, a limited-API call in the stable-ABI (abi3) build for Python >= 3.12
// (Py_LIMITED_API, set by nanobind's STABLE_ABI). Arguments are checked by the
// callers exactly as before; these functions only hide the access.
#pragma once

#include <nanobind/nanobind.h>

#include <string>

namespace dlbridge::python::py {

// Borrowed references, as the macros give.
inline Py_ssize_t tuple_size(PyObject* tuple) noexcept {
#ifdef Py_LIMITED_API
  return PyTuple_Size(tuple);
#else
  return PyTuple_GET_SIZE(tuple);
#endif
}

inline PyObject* tuple_item(PyObject* tuple, Py_ssize_t i) noexcept {
#ifdef Py_LIMITED_API
  return PyTuple_GetItem(tuple, i);
#else
  return PyTuple_GET_ITEM(tuple, i);
#endif
}

inline Py_ssize_t list_size(PyObject* list) noexcept {
#ifdef Py_LIMITED_API
  return PyList_Size(list);
#else
  return PyList_GET_SIZE(list);
#endif
}

inline PyObject* list_item(PyObject* list, Py_ssize_t i) noexcept {
#ifdef Py_LIMITED_API
  return PyList_GetItem(list, i);
#else
  return PyList_GET_ITEM(list, i);
#endif
}

// The *Ref lookups return a new reference, which stays valid when another
// thread changes the container: what a free-threaded build needs (and any
// build from 3.13 on is given), a borrowed reference taken under the GIL
// before.
#if PY_VERSION_HEX >= 0x030D0000 && (!defined(Py_LIMITED_API) || Py_LIMITED_API >= 0x030D0000)
#define DLBRIDGE_HAS_GET_ITEM_REF 1
#endif

// dict[key] (a new reference), or an invalid object when absent; an error
// raised while comparing keys reads as absent, as PyDict_GetItemString has it.
inline nanobind::object dict_item_ref(PyObject* dict, const char* key) noexcept {
#ifdef DLBRIDGE_HAS_GET_ITEM_REF
  PyObject* found = nullptr;
  if (PyDict_GetItemStringRef(dict, key, &found) < 0) PyErr_Clear();
  return nanobind::steal(found);
#else
  return nanobind::borrow(PyDict_GetItemString(dict, key));
#endif
}

// dict[key] (a new reference), or an invalid object when absent; the error
// that comparing keys raised is thrown.
inline nanobind::object dict_get_ref(PyObject* dict, PyObject* key) {
#ifdef DLBRIDGE_HAS_GET_ITEM_REF
  PyObject* found = nullptr;
  if (PyDict_GetItemRef(dict, key, &found) < 0) throw nanobind::python_error();
  return nanobind::steal(found);
#else
  PyObject* found = PyDict_GetItemWithError(dict, key);
  if (found == nullptr && PyErr_Occurred() != nullptr) throw nanobind::python_error();
  return nanobind::borrow(found);
#endif
}

// list[i] (a new reference) for 0 <= i < len(list); NULL with IndexError set
// otherwise.
inline PyObject* list_item_ref(PyObject* list, Py_ssize_t i) noexcept {
#ifdef DLBRIDGE_HAS_GET_ITEM_REF
  return PyList_GetItemRef(list, i);
#else
  return Py_XNewRef(list_item(list, i));
#endif
}

// The attribute `name` as type's MRO holds it, looked up without calling a
// descriptor (a new reference), or NULL with no exception set. Only the
// version-specific builds can read the MRO cache; the abi3 build has no
// such lookup. On 3.13+ the reference is owned as the lookup returns it,
// which stays correct without the GIL (nanobind looks __dlpack__ up the
// same way).
#ifndef Py_LIMITED_API
inline PyObject* type_lookup_ref(PyTypeObject* type, PyObject* name) noexcept {
#if PY_VERSION_HEX >= 0x030D0000
  return _PyType_LookupRef(type, name);
#else
  return Py_XNewRef(_PyType_Lookup(type, name));
#endif
}
#endif

// UTF-8 of a str, owned by the str; NULL with an exception set on failure.
inline const char* utf8(PyObject* text) noexcept { return PyUnicode_AsUTF8AndSize(text, nullptr); }

// callable(arg): new reference, or NULL with an exception set. A builtin
// function whose C entry takes its arguments as a vector (numpy.from_dlpack)
// is entered directly: PyObject_Vectorcall would add the dispatch through its
// vectorcall slot, a recursion check (the calls it makes check their own) and
// the check of its result, which is done here too. convert's hand-over to
// an importer is little more than this call, so what the dispatch adds is a
// visible part of it (bench/bench_convert.py).
inline PyObject* call_one_arg(PyObject* callable, PyObject* arg) noexcept {
#ifdef Py_LIMITED_API
  // The limited API has the vector call from 3.12 on (the abi3 floor): no
  // variadic argument list to count and copy first.
  return PyObject_Vectorcall(callable, &arg, 1, nullptr);
#else
  if (!PyCFunction_CheckExact(callable)) return PyObject_CallOneArg(callable, arg);
  const int convention = PyCFunction_GET_FLAGS(callable) &
                         (METH_VARARGS | METH_FASTCALL | METH_NOARGS | METH_O | METH_KEYWORDS | METH_METHOD);
  PyObject* self = PyCFunction_GET_SELF(callable);
  const auto entry = reinterpret_cast<void (*)()>(PyCFunction_GET_FUNCTION(callable));
  PyObject* out = nullptr;
  if (convention == (METH_FASTCALL | METH_KEYWORDS))
    out = reinterpret_cast<_PyCFunctionFastWithKeywords>(entry)(self, &arg, 1, nullptr);
  else if (convention == METH_FASTCALL)
    out = reinterpret_cast<_PyCFunctionFast>(entry)(self, &arg, 1);
  else if (convention == METH_O)
    out = reinterpret_cast<PyCFunction>(entry)(self, arg);
  else
    return PyObject_CallOneArg(callable, arg);
  if (out == nullptr && !PyErr_Occurred()) {
    PyErr_SetString(PyExc_SystemError, "a builtin function returned NULL without setting an exception");
  } else if (out != nullptr && PyErr_Occurred()) {
    // As CPython's own call does: a result beside a raised exception is a
    // SystemError, the exception its cause.
    Py_CLEAR(out);
    PyObject *type = nullptr, *value = nullptr, *traceback = nullptr;
    PyErr_Fetch(&type, &value, &traceback);
    PyErr_NormalizeException(&type, &value, &traceback);
    if (traceback != nullptr) PyException_SetTraceback(value, traceback);
    Py_XDECREF(type);
    Py_XDECREF(traceback);
    PyErr_SetString(PyExc_SystemError, "a builtin function returned a result with an exception set");
    PyObject *stype = nullptr, *svalue = nullptr, *straceback = nullptr;
    PyErr_Fetch(&stype, &svalue, &straceback);
    PyErr_NormalizeException(&stype, &svalue, &straceback);
    PyException_SetCause(svalue, value);  // steals value
    PyErr_Restore(stype, svalue, straceback);
  }
  return out;
#endif
}

// The dict's version (PEP 509): a number no other state of any dict has had,
// replaced on every change. 0 means "unknown": only the version-specific builds
// for Python 3.10 and 3.11 can read it (3.12 deprecates the field and the
// limited API never had it).
inline uint64_t dict_version([[maybe_unused]] PyObject* dict) noexcept {
#if !defined(Py_LIMITED_API) && PY_VERSION_HEX < 0x030C0000
  return reinterpret_cast<PyDictObject*>(dict)->ma_version_tag;
#else
  return 0;
#endif
}

// The type's __mro__ (new reference), or NULL with no exception set.
inline nanobind::object type_mro(PyTypeObject* type) {
#ifdef Py_LIMITED_API
  PyObject* mro = PyObject_GetAttrString(reinterpret_cast<PyObject*>(type), "__mro__");
  if (mro == nullptr) PyErr_Clear();
  return nanobind::steal(mro);
#else
  return nanobind::borrow(type->tp_mro);
#endif
}

#ifdef Py_LIMITED_API
// What _PyType_Lookup(type, name) finds, for the abi3 build, which has
// neither that call nor the version tag that would tell when an answer went
// stale: only for a type that cannot change, where it never does (the type
// and every class of its MRO immutable, Py_TPFLAGS_IMMUTABLETYPE: the static
// types of C extensions, NumPy's ndarray among them). Borrowed (the type's
// dict holds it as long as the type lives); NULL when the type may change or
// has no such attribute, with no exception set.
inline PyObject* lookup_in_immutable_type(PyTypeObject* type, PyObject* name) noexcept {
  nanobind::object mro = type_mro(type);
  if (!mro.is_valid() || !PyTuple_Check(mro.ptr())) return nullptr;
  const Py_ssize_t n = PyTuple_Size(mro.ptr());
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* base = PyTuple_GetItem(mro.ptr(), i);
    if (base == nullptr || !PyType_Check(base) ||
        !(PyType_GetFlags(reinterpret_cast<PyTypeObject*>(base)) & Py_TPFLAGS_IMMUTABLETYPE))
      return nullptr;
  }
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* dict = PyObject_GetAttrString(PyTuple_GetItem(mro.ptr(), i), "__dict__");
    if (dict == nullptr) {
      PyErr_Clear();
      return nullptr;
    }
    PyObject* found = PyObject_GetItem(dict, name);
    Py_DECREF(dict);
    if (found != nullptr) {
      Py_DECREF(found);  // the class's dict keeps it, and an immutable class keeps its dict's items
      return found;
    }
    PyErr_Clear();
  }
  return nullptr;
}
#endif

// Py_XSETREF, which the limited API lacks: stores value (a new reference) in
// slot, then releases the one slot held.
inline void replace(PyObject*& slot, PyObject* value) noexcept {
  PyObject* old = slot;
  slot = value;
  Py_XDECREF(old);
}

// Whether the interpreter is shutting down. The abi3 build asks nanobind, which
// notices when its internals are torn down during finalisation.
inline bool is_finalizing() noexcept {
#if defined(Py_LIMITED_API)
  return !nanobind::is_alive();
#elif PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

// pickle.PickleBuffer(exporter): new reference, or NULL with an exception set.
inline PyObject* pickle_buffer(PyObject* exporter) noexcept {
#ifdef Py_LIMITED_API
  PyObject* pickle = PyImport_ImportModule("pickle");
  if (pickle == nullptr) return nullptr;
  PyObject* type = PyObject_GetAttrString(pickle, "PickleBuffer");
  Py_DECREF(pickle);
  if (type == nullptr) return nullptr;
  PyObject* buffer = call_one_arg(type, exporter);
  Py_DECREF(type);
  return buffer;
#else
  return PyPickleBuffer_FromObject(exporter);
#endif
}

// The name of x's type as tp_name has it ("numpy.bool", "int"). The limited
// API has no tp_name: a static type's __module__ and __name__ are its two
// parts, builtins unnamed as tp_name leaves them.
inline std::string type_name_of(PyObject* x) {
#ifdef Py_LIMITED_API
  PyObject* type = reinterpret_cast<PyObject*>(Py_TYPE(x));
  nanobind::object name = nanobind::steal(PyType_GetName(Py_TYPE(x)));
  nanobind::object module = nanobind::steal(PyObject_GetAttrString(type, "__module__"));
  if (!name.is_valid() || !module.is_valid() || !PyUnicode_Check(module.ptr())) {
    PyErr_Clear();
    return name.is_valid() ? utf8(name.ptr()) : "<unknown type>";
  }
  const std::string prefix = utf8(module.ptr());
  return prefix == "builtins" ? std::string(utf8(name.ptr())) : prefix + "." + utf8(name.ptr());
#else
  return Py_TYPE(x)->tp_name;
#endif
}

// A new contextvars.ContextVar(name, default=default_value); NULL with an
// exception set on failure.
inline PyObject* context_var_new(const char* name, PyObject* default_value) noexcept {
#ifdef Py_LIMITED_API
  PyObject* module = PyImport_ImportModule("contextvars");
  if (module == nullptr) return nullptr;
  PyObject* type = PyObject_GetAttrString(module, "ContextVar");
  Py_DECREF(module);
  if (type == nullptr) return nullptr;
  PyObject* out = nullptr;
  PyObject* args[] = {PyUnicode_FromString(name), default_value};
  PyObject* kwnames = Py_BuildValue("(s)", "default");
  if (args[0] != nullptr && kwnames != nullptr) out = PyObject_Vectorcall(type, args, 1, kwnames);
  Py_XDECREF(args[0]);
  Py_XDECREF(kwnames);
  Py_DECREF(type);
  return out;
#else
  return PyContextVar_New(name, default_value);
#endif
}

// The context variable's value in the current context, or default_value
// where it has none: a new reference, or NULL with an exception set.
inline PyObject* context_var_get(PyObject* var, PyObject* default_value) noexcept {
#ifdef Py_LIMITED_API
  static PyObject* const get = PyUnicode_InternFromString("get");
  return PyObject_CallMethodObjArgs(var, get, default_value, nullptr);
#else
  PyObject* value = nullptr;
  return PyContextVar_Get(var, default_value, &value) < 0 ? nullptr : value;
#endif
}

}  // namespace dlbridge::python::py
