// The hand-off of structures to the package's walker (structures.hpp).
#include "structures.hpp"

#include "entry_points.hpp"
#include "py_compat.hpp"
#include "state_lock.hpp"

namespace dlbridge::python {

namespace {

// structures.convert_structure, plan_structure and is_structure.
Installed installed_convert;
Installed installed_plan;
Installed installed_is_structure;

PyObject* walker_of(Walker walker) noexcept {
  return walker == Walker::convert ? installed_convert.get() : installed_plan.get();
}

bool names_keep_non_arrays(PyObject* kwnames) noexcept {
  static PyObject* const keep = interned("keep_non_arrays");
  const Py_ssize_t count = py::tuple_size(kwnames);
  for (Py_ssize_t i = 0; i < count; ++i) {
    PyObject* name = py::tuple_item(kwnames, i);
    if (name == keep) return true;
    if (PyUnicode_Check(name) && PyUnicode_Compare(name, keep) == 0) return true;
  }
  return false;
}

}  // namespace

bool walks_first(PyObject* const* args, Py_ssize_t nargsf, PyObject* kwnames) noexcept {
  // Any other count of positional arguments is refused by the single-array path's own message.
  if (PyVectorcall_NARGS(nargsf) != 2 || installed_convert.get() == nullptr) return false;
  PyObject* x = args[0];
  if (PyDict_Check(x) || PyList_Check(x) || PyTuple_Check(x)) return true;
  return kwnames != nullptr && names_keep_non_arrays(kwnames);
}

PyObject* walk_structure(Walker walker, PyObject* const* args, Py_ssize_t nargsf, PyObject* kwnames) noexcept {
  return PyObject_Vectorcall(walker_of(walker), args, nargsf, kwnames);
}

PyObject* walk_after_refusal(Walker walker, PyObject* const* args, Py_ssize_t nargsf, PyObject* kwnames) noexcept {
  PyObject* is_structure = installed_is_structure.get();
  // Only a TypeError says "not an array"; every other refusal is about the array.
  if (is_structure == nullptr || PyVectorcall_NARGS(nargsf) != 2 || !PyErr_ExceptionMatches(PyExc_TypeError))
    return nullptr;
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  PyObject* answer = py::call_one_arg(is_structure, args[0]);
  const int yes = answer == nullptr ? -1 : PyObject_IsTrue(answer);
  Py_XDECREF(answer);
  if (yes == 1) {
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(traceback);
    return walk_structure(walker, args, nargsf, kwnames);
  }
  if (yes < 0) {
    // The question failed: the original refusal is what the user sees.
    PyErr_Clear();
  }
  PyErr_Restore(type, value, traceback);
  return nullptr;
}

void bind_structures(nb::module_& m) {
  m.def("_install_structures",
        [](nb::object convert_structure, nb::object plan_structure, nb::object is_structure) {
          installed_convert.install(std::move(convert_structure));
          installed_plan.install(std::move(plan_structure));
          installed_is_structure.install(std::move(is_structure));
        },
        nb::arg("convert_structure"), nb::arg("plan_structure"), nb::arg("is_structure"),
        "Set the walker convert and plan_convert hand structures to (dlbridge does, once).");
}

}  // namespace dlbridge::python
