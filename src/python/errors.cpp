// dlbridge::Error -> the Python exception class of its code (dlbridge.errors).
#include <exception>
#include <string>

#include "bindings.hpp"

namespace dlbridge::python {

namespace {

// Looked up on first use and kept for the process: the classes live in a
// pure-Python module so that users can import them without the extension.
PyObject* error_class(ErrorCode code) {
  switch (code) {
    case ErrorCode::invalid_argument: return PyExc_ValueError;
    case ErrorCode::out_of_memory: return PyExc_MemoryError;
    default: break;
  }
  static PyObject* classes = nullptr;
  if (classes == nullptr) {
    nb::object module = nb::module_::import_("dlbridge.errors");
    classes = nb::object(module.attr("ERROR_CLASSES")).release().ptr();
  }
  std::string name(error_code_name(code));
  PyObject* cls = PyDict_GetItemString(classes, name.c_str());
  return cls != nullptr ? cls : PyExc_BufferError;
}

void raise_error(const Error& e) {
  PyObject* cls = error_class(e.code());
  if (cls == PyExc_ValueError || cls == PyExc_MemoryError) {
    PyErr_SetString(cls, e.what());
    return;
  }
  PyObject* value = PyObject_CallFunction(cls, "ss", e.message().c_str(),
                                          e.hint().c_str());
  if (value != nullptr) {
    PyErr_SetObject(cls, value);
    Py_DECREF(value);
  }
}

constexpr const char* cast_error_message =
    "dlbridge: an argument (or a value a producer returned) has a type or value that cannot be "
    "converted.";

void translate(const std::exception_ptr& error, void*) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    raise_error(e);
  } catch (const nb::cast_error&) {
    // A conversion the binding did not check first; nanobind would say
    // only "std::bad_cast".
    PyErr_SetString(PyExc_TypeError, cast_error_message);
  }
}

PyObject* builtin_type(nb::exception_type type) {
  switch (type) {
    case nb::exception_type::type_error: return PyExc_TypeError;
    case nb::exception_type::value_error: return PyExc_ValueError;
    case nb::exception_type::index_error: return PyExc_IndexError;
    case nb::exception_type::key_error: return PyExc_KeyError;
    case nb::exception_type::buffer_error: return PyExc_BufferError;
    case nb::exception_type::attribute_error: return PyExc_AttributeError;
    default: return PyExc_RuntimeError;
  }
}

}  // namespace

void set_python_error(std::exception_ptr error) noexcept {
  try {
    std::rethrow_exception(error);
  } catch (nb::python_error& e) {
    e.restore();
  } catch (const Error& e) {
    raise_error(e);
  } catch (const nb::builtin_exception& e) {
    PyErr_SetString(builtin_type(e.type()), e.what());
  } catch (const nb::cast_error&) {
    PyErr_SetString(PyExc_TypeError, cast_error_message);
  } catch (const std::bad_alloc&) {
    PyErr_NoMemory();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  } catch (...) {
    PyErr_SetString(PyExc_RuntimeError, "dlbridge: unknown C++ exception");
  }
}

nb::object attribute_or_none(nb::handle x, const char* name) {
  PyObject* value = PyObject_GetAttrString(x.ptr(), name);
  if (value != nullptr) return nb::steal(value);
  if (!PyErr_ExceptionMatches(PyExc_AttributeError)) throw nb::python_error();
  PyErr_Clear();
  return nb::none();
}

bool is_dlpack_error(const nb::python_error& error) {
  static PyObject* base =
      nb::object(nb::module_::import_("dlbridge.errors").attr("DLPackError")).release().ptr();
  return PyObject_IsInstance(error.value().ptr(), base) == 1;
}

std::string utf8_of(nb::handle text) {
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(text.ptr(), &size);
  if (data == nullptr) throw nb::python_error();
  return std::string(data, size_t(size));
}

void register_error_translator(nb::module_&) {
  nb::register_exception_translator(&translate);
}

bool python_is_finalizing() noexcept { return py::is_finalizing(); }

}  // namespace dlbridge::python
