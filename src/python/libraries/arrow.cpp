// pyarrow's C++-side rule (libraries.hpp): its own __dlpack__ refuses nulls,
// booleans and chunked arrays, which dlbridge.libraries.arrow.second_look
// refuses with a code or reads. Asked only after a failure, so every other
// import costs nothing more.
#include <nanobind/stl/string.h>

#include <string>

#include "../state_lock.hpp"
#include "libraries.hpp"

namespace dlbridge::python::arrow {

namespace {

// second_look(x, refusal, device, copy) and the module its classes come
// from (libraries/arrow.py: MODULE), installed together by the package.
Installed second_look;
Installed module_name;

// Whether x's type comes from the module `top` or one below it. A cheap
// filter only: which objects second_look reads, it decides by their class.
bool type_from_module(PyTypeObject* type, PyObject* top) {
  nb::object module = nb::steal(PyObject_GetAttrString(reinterpret_cast<PyObject*>(type), "__module__"));
  if (!module.is_valid() || !PyUnicode_Check(module.ptr())) {
    PyErr_Clear();
    return false;
  }
  const std::string name = nb::cast<std::string>(module);
  return name.substr(0, name.find('.')) == utf8_of(top);
}

}  // namespace

Tensor after_failure(nb::handle x, const ExchangeRequest& request) {
  PyObject* look = second_look.get();
  PyObject* top = module_name.get();
  if (look == nullptr || top == nullptr || !type_from_module(Py_TYPE(x.ptr()), top)) throw;
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
  nb::object out = nb::borrow(look)(x, refusal, device, copy);
  // (tensor, copied): a copy made there says so, as every copy an import makes does.
  if (!PyTuple_Check(out.ptr()) || PyTuple_GET_SIZE(out.ptr()) != 2)
    throw nb::type_error("Arrow's second look returned no (dlbridge.Tensor, copied) pair.");
  const Tensor* t = as_tensor(nb::handle(PyTuple_GET_ITEM(out.ptr(), 0)));
  if (t == nullptr) throw nb::type_error("Arrow's second look returned no dlbridge.Tensor.");
  if (PyTuple_GET_ITEM(out.ptr(), 1) != Py_True) return *t;
  return t->with_view(t->view().with_flags(t->view().flags() | DLBRIDGE_FLAG_IS_COPIED));
}

void bind(nb::module_& m) {
  m.def("_install_arrow_second_look",
        [](nb::str module, nb::object look) {
          module_name.install(std::move(module));
          second_look.install(std::move(look));
        },
        nb::arg("module"), nb::arg("second_look"),
        "Set pyarrow's second look and the module of its classes (dlbridge/__init__.py does, once).");
}

}  // namespace dlbridge::python::arrow
