// Libraries whose objects dlbridge reads another way after the usual one
// failed (libraries.hpp): pyarrow's own __dlpack__ refuses nulls, booleans
// and chunked arrays; TensorFlow before 2.20 has no __dlpack__, and its
// buffer protocol cannot describe bfloat16. Each library's second_look
// (dlbridge.libraries.<name>.second_look) refuses with a code or reads, and
// says whether what it read is a copy of its own. Asked
// only after a failure, so every other import costs nothing more.
#include <nanobind/stl/string.h>

#include <string>

#include "../py_compat.hpp"
#include "../state_lock.hpp"
#include "libraries.hpp"

namespace dlbridge::python::second_look {

namespace {

// {top-level module name: second_look(x, refusal, device, copy)}, installed
// once by the package (dlbridge/__init__.py) from the library modules.
Installed looks;

// The second look for x's class, by the top-level module the class comes
// from; NULL when none. A cheap filter only: which objects a second look
// reads, it decides by their class.
PyObject* look_for(PyTypeObject* type) {
  PyObject* table = looks.get();
  if (table == nullptr) return nullptr;
  nb::object module = nb::steal(PyObject_GetAttrString(reinterpret_cast<PyObject*>(type), "__module__"));
  if (!module.is_valid() || !PyUnicode_Check(module.ptr())) {
    PyErr_Clear();
    return nullptr;
  }
  const std::string name = nb::cast<std::string>(module);
  nb::object top = nb::str(name.substr(0, name.find('.')).c_str());
  PyObject* look = PyDict_GetItemWithError(table, top.ptr());
  if (look == nullptr) PyErr_Clear();
  return look;
}

}  // namespace

Tensor after_failure(nb::handle x, const ExchangeRequest& request) {
  PyObject* look = look_for(Py_TYPE(x.ptr()));
  if (look == nullptr) throw;
  nb::object keep_look = nb::borrow(look);
  set_python_error(std::current_exception());  // the failure, as the Python exception it would raise
  PyObject *type = nullptr, *value = nullptr, *traceback = nullptr;
  PyErr_Fetch(&type, &value, &traceback);
  PyErr_NormalizeException(&type, &value, &traceback);
  if (!PyErr_GivenExceptionMatches(value, PyExc_Exception)) {  // KeyboardInterrupt and the like go on
    PyErr_Restore(type, value, traceback);
    throw nb::python_error();
  }
  if (traceback != nullptr) PyException_SetTraceback(value, traceback);
  Py_XDECREF(type);
  Py_XDECREF(traceback);
  nb::object refusal = nb::steal(value);
  nb::object device = request.device ? nb::object(nb::make_tuple(int32_t(request.device->type), request.device->id))
                                     : nb::object(nb::none());
  nb::object copy = request.copy ? nb::object(nb::bool_(*request.copy)) : nb::object(nb::none());
  nb::object out = keep_look(x, refusal, device, copy);
  // (tensor, copied): a copy made there says so, as every copy an import makes does.
  if (!PyTuple_Check(out.ptr()) || py::tuple_size(out.ptr()) != 2)
    throw nb::type_error("A library's second look returned no (dlbridge.Tensor, copied) pair.");
  const Tensor* t = as_tensor(nb::handle(py::tuple_item(out.ptr(), 0)));
  if (t == nullptr) throw nb::type_error("A library's second look returned no dlbridge.Tensor.");
  if (py::tuple_item(out.ptr(), 1) != Py_True) return *t;
  return t->with_view(t->view().with_flags(t->view().flags() | DLBRIDGE_FLAG_IS_COPIED));
}

void bind(nb::module_& m) {
  m.def("_install_second_looks", [](nb::dict table) { looks.install(std::move(table)); }, nb::arg("looks"),
        "Set each library's second look, by the top-level module its classes come from (dlbridge/__init__.py "
        "does, once).");
}

}  // namespace dlbridge::python::second_look
