// dlbridge::Error -> the Python exception class of its code, as the error
// table (error.hpp) names it and the package registers it.
#include <atomic>
#include <exception>
#include <memory>
#include <string>
#include <string_view>

#include "bindings.hpp"

namespace dlbridge::python {

namespace {

// The Python class of each code of the error table (error.hpp), registered
// by the package when it is imported (dlbridge/__init__.py calls
// _register_error_classes): the extension never imports the package, so
// there is no hidden import cycle. Before registration a coded error is a
// plain BufferError. A registration publishes a whole new set at once (one
// pointer, state_lock.hpp's reasoning): the set it replaces stays alive,
// since another thread may be raising from it.
struct ErrorClasses {
  PyObject* by_code[error_code_count] = {};
  PyObject* base = nullptr;
};
std::atomic<const ErrorClasses*> registered{nullptr};

PyObject* builtin_class(std::string_view name) {
  if (name == "ValueError") return PyExc_ValueError;
  if (name == "MemoryError") return PyExc_MemoryError;
  return PyExc_BufferError;
}

PyObject* error_class(ErrorCode code) {
  if (is_builtin_python_error(code)) return builtin_class(error_code_info(code).python_class);
  const ErrorClasses* classes = registered.load(std::memory_order_acquire);
  PyObject* cls = classes != nullptr ? classes->by_code[static_cast<size_t>(code)] : nullptr;
  return cls != nullptr ? cls : PyExc_BufferError;
}

void raise_error(const Error& e) {
  PyObject* cls = error_class(e.code());
  if (is_builtin_python_error(e.code()) || cls == PyExc_BufferError) {
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

// The table as Python reads it: (code, class name, (base names...), meaning).
nb::tuple error_code_rows() {
  nb::list rows;
  for (const ErrorCodeInfo& row : error_code_table) {
    nb::list bases;
    std::string_view rest = row.python_bases;
    while (!rest.empty()) {
      const size_t space = rest.find(' ');
      bases.append(nb::str(rest.data(), rest.substr(0, space).size()));
      rest = space == std::string_view::npos ? std::string_view{} : rest.substr(space + 1);
    }
    rows.append(nb::make_tuple(nb::str(row.name.data(), row.name.size()),
                               nb::str(row.python_class.data(), row.python_class.size()),
                               nb::tuple(bases),
                               nb::str(row.meaning.data(), row.meaning.size())));
  }
  return nb::tuple(rows);
}

// Checks the package's classes against the table before keeping them: one
// class per coded row, of the table's name, subclassing `base`, whose
// `code` is the row's.
void register_error_classes(nb::dict classes_dict, nb::handle base) {
  if (!PyType_Check(base.ptr()) ||
      !PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(base.ptr()),
                        reinterpret_cast<PyTypeObject*>(PyExc_BufferError)))
    throw nb::type_error("the base error class must be a BufferError subclass.");
  nb::object found[error_code_count];
  size_t coded = 0;
  for (const ErrorCodeInfo& row : error_code_table) {
    if (is_builtin_python_error(row.code)) continue;
    ++coded;
    const std::string code(row.name);
    nb::object cls = py::dict_item_ref(classes_dict.ptr(), code.c_str());
    if (!cls.is_valid() || !PyType_Check(cls.ptr()) ||
        !PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(cls.ptr()),
                          reinterpret_cast<PyTypeObject*>(base.ptr())))
      throw nb::value_error(("no error class subclassing the base for code " + code).c_str());
    if (nb::cast<std::string>(cls.attr("__name__")) != row.python_class ||
        nb::cast<std::string>(cls.attr("code")) != code)
      throw nb::value_error(("the class for code " + code + " is not " +
                             std::string(row.python_class) + " with that code")
                                .c_str());
    found[static_cast<size_t>(row.code)] = std::move(cls);
  }
  if (size_t(nb::len(classes_dict)) != coded)
    throw nb::value_error("error classes for codes the table does not have.");
  auto classes = std::make_unique<ErrorClasses>();
  for (size_t k = 0; k < error_code_count; ++k) classes->by_code[k] = found[k].release().ptr();
  classes->base = nb::borrow(base).release().ptr();
  registered.store(classes.release(), std::memory_order_release);
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
  const ErrorClasses* classes = registered.load(std::memory_order_acquire);
  return classes != nullptr && PyObject_IsInstance(error.value().ptr(), classes->base) == 1;
}

void raise_caused_by(const Error& error, nb::python_error& cause) {
  raise_error(error);
  if (!PyErr_Occurred()) PyErr_SetString(PyExc_SystemError, "dlbridge: a coded error could not be raised");
  nb::python_error raised;  // takes the error just set
  PyException_SetCause(raised.value().ptr(), Py_NewRef(cause.value().ptr()));
  throw raised;
}

std::string utf8_of(nb::handle text) {
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(text.ptr(), &size);
  if (data == nullptr) throw nb::python_error();
  return std::string(data, size_t(size));
}

void register_error_translator(nb::module_& m) {
  nb::register_exception_translator(&translate);
  m.def("_error_codes", &error_code_rows,
        "The error table of the C++ core: (code, class name, base names, meaning) per code.");
  m.def("_register_error_classes", &register_error_classes, nb::arg("classes"), nb::arg("base"),
        "Called by the dlbridge package: the Python class of each coded error.");
}

bool python_is_finalizing() noexcept { return py::is_finalizing(); }

}  // namespace dlbridge::python
