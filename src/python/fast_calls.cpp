// Raw METH_FASTCALL entry points for the calls users make per tensor:
// from_dlpack and convert (and Tensor.__dlpack_device__, below). Why not nanobind here: its overload dispatch with
// keyword-only defaults and its instance bookkeeping cost ~75 ns per call,
// a third of numpy.from_dlpack's whole time (bench/bench_exchange.py,
// bench/callgrind.py). Everything else is bound with nanobind; these
// functions only parse arguments and call the same C++ as the bindings did.
#include <nanobind/stl/string.h>

#include <string>

#include "bindings.hpp"
#include "fast_calls.hpp"

namespace dlbridge::python {

namespace {

int keyword_slot(const char* function, PyObject* const* names, int count, PyObject* key) {
  for (int k = 0; k < count; ++k)
    if (key == names[k]) return k;
  for (int k = 0; k < count; ++k)
    if (PyUnicode_Compare(key, names[k]) == 0) return k;
  if (PyErr_Occurred()) throw nb::python_error();
  throw nb::type_error((std::string(function) + "() got an unexpected keyword argument '" +
                        nb::cast<std::string>(nb::handle(key)) + "'.")
                           .c_str());
}

// The slots of the last kwnames tuple seen per names table. Callers in C
// (NumPy's from_dlpack among them) pass the same static tuple every time,
// and its names need not be interned; the tuple is held so that its address
// cannot be reused by another.
struct KeywordCache {
  PyObject* const* names = nullptr;
  PyObject* kwnames = nullptr;
  int slots[8] = {};
};
KeywordCache keyword_cache;

}  // namespace

void match_keywords(const char* function, PyObject* const* names, int count,
                    PyObject* const* kwvalues, PyObject* kwnames, PyObject** values) {
  const Py_ssize_t nkw = kwnames ? py::tuple_size(kwnames) : 0;
  if (kwnames == keyword_cache.kwnames && names == keyword_cache.names) {
    for (Py_ssize_t i = 0; i < nkw; ++i) values[keyword_cache.slots[i]] = kwvalues[i];
    return;
  }
  bool seen[8] = {};
  int slots[8] = {};
  for (Py_ssize_t i = 0; i < nkw; ++i) {
    const int slot = keyword_slot(function, names, count, py::tuple_item(kwnames, i));
    if (seen[slot])
      throw nb::type_error((std::string(function) + "() got multiple values for keyword argument '" +
                            nb::cast<std::string>(nb::handle(names[slot])) + "'.")
                               .c_str());
    seen[slot] = true;
    if (i < 8) slots[i] = slot;
    values[slot] = kwvalues[i];
  }
  if (nkw <= count && count <= 8) {  // every name known and none twice: the layout is reusable
    py::replace(keyword_cache.kwnames, nb::handle(kwnames).inc_ref().ptr());
    keyword_cache.names = names;
    for (Py_ssize_t i = 0; i < nkw; ++i) keyword_cache.slots[i] = slots[i];
  }
}

bool type_from_module(PyTypeObject* type, const char* top) {
  nb::object module = nb::steal(PyObject_GetAttrString(reinterpret_cast<PyObject*>(type), "__module__"));
  if (!module.is_valid() || !PyUnicode_Check(module.ptr())) {
    PyErr_Clear();
    return false;
  }
  const std::string name = nb::cast<std::string>(module);
  return name.substr(0, name.find('.')) == top;
}

namespace {

// dlbridge.adapters.importing.second_look(x, refusal, device, copy), installed by
// that module: pyarrow's __dlpack__ refuses nulls, booleans and chunked arrays,
// which it refuses with a code or takes. Asked only after such a refusal, so
// every other import costs nothing more.
PyObject* arrow_second_look = nullptr;

PyObject* ask_arrow_second_look(PyObject* x, PyObject* device, PyObject* copy) {
  set_python_error(std::current_exception());  // the refusal, as the Python exception it would raise
  PyObject *type = nullptr, *value = nullptr, *traceback = nullptr;
  PyErr_Fetch(&type, &value, &traceback);
  PyErr_NormalizeException(&type, &value, &traceback);
  if (traceback != nullptr) PyException_SetTraceback(value, traceback);
  Py_XDECREF(type);
  Py_XDECREF(traceback);
  PyObject* args[] = {x, value, device, copy};
  PyObject* out = PyObject_Vectorcall(arrow_second_look, args, 4, nullptr);
  Py_XDECREF(value);
  return out;
}

}  // namespace

PyObject* from_dlpack_after_refusal(PyObject* x, PyObject* device, PyObject* copy) {
  if (arrow_second_look == nullptr || !type_from_module(Py_TYPE(x), "pyarrow")) throw;
  return ask_arrow_second_look(x, device, copy);
}

namespace {

PyObject* interned(const char* text) {
  PyObject* s = PyUnicode_InternFromString(text);
  if (s == nullptr) throw nb::python_error();
  return s;
}

PyObject* from_dlpack_entry(PyObject*, PyObject* const* args, Py_ssize_t nargsf,
                            PyObject* kwnames) noexcept {
  return python_boundary<PyObject*>(nullptr, [&]() -> PyObject* {
    static PyObject* const names[] = {interned("device"), interned("copy")};
    const Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs != 1)
      throw nb::type_error(("from_dlpack() takes exactly one positional argument (" +
                            std::to_string(nargs) + " given).")
                               .c_str());
    PyObject* values[2] = {Py_None, Py_None};
    if (kwnames != nullptr) match_keywords("from_dlpack", names, 2, args + 1, kwnames, values);
    // Filled only where given: a std::optional returned and copied is
    // stored a byte at a time and read back whole, a store-forwarding stall
    // (~7 ns of an import, perf) that the common call need not pay.
    ExchangeRequest request;
    if (values[0] != Py_None) request.device = dl_device_from_python(values[0]);
    if (values[1] != Py_None) request.copy = copy_from_python(values[1]);
    try {
      return wrap_tensor(import_object(args[0], request)).release().ptr();
    } catch (...) {
      return from_dlpack_after_refusal(args[0], values[0], values[1]);
    }
  });
}

PyMethodDef from_dlpack_def = {
    "from_dlpack",
    reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(from_dlpack_entry)),
    METH_FASTCALL | METH_KEYWORDS,
    "from_dlpack(x, /, *, device=None, copy=None)\n--\n\n"
    "Import x (a DLPack producer, a DLPack capsule, or any object with the buffer "
    "protocol, __array_interface__ or __cuda_array_interface__) as a dlbridge.Tensor, "
    "zero-copy whenever the request allows. copy=True never aliases; copy=False never "
    "copies."};

// Tensor.__dlpack_device__ as a plain METH_NOARGS method: consumers
// (torch.from_dlpack, and convert through it) ask it before every
// __dlpack__, and nanobind's dispatch plus its enum conversion cost about
// 200 instructions a call (bench/callgrind.py). The (kDLCPU, 0) answer is one
// tuple, made once: tuples are immutable.
PyObject* tensor_dlpack_device(PyObject* self, PyObject*) noexcept {
  return python_boundary<PyObject*>(nullptr, [&]() -> PyObject* {
    const Tensor* t = as_tensor(nb::handle(self));
    if (t == nullptr) throw nb::type_error("__dlpack_device__ needs an initialised dlbridge.Tensor.");
    const Device device = t->view().device();
    if (device.type == abi::kDLCPU && device.id == 0) {
      static PyObject* const cpu = nb::make_tuple(device_type_to_python(abi::kDLCPU), 0).release().ptr();
      Py_INCREF(cpu);
      return cpu;
    }
    return nb::make_tuple(device_type_to_python(device.type), device.id).release().ptr();
  });
}

PyMethodDef tensor_dlpack_device_def = {
    "__dlpack_device__",
    reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(tensor_dlpack_device)), METH_NOARGS,
    "__dlpack_device__($self, /)\n--\n\n"
    "(device_type, device_id) of the data, as the DLPack protocol asks."};

}  // namespace

void add_function(nb::module_& m, PyMethodDef* def) {
  nb::object fn = nb::steal(PyCFunction_NewEx(def, nullptr, m.attr("__name__").ptr()));
  if (!fn.is_valid()) throw nb::python_error();
  m.attr(def->ml_name) = fn;
}

void bind_fast_calls(nb::module_& m) {
  add_function(m, &from_dlpack_def);
  nb::object tensor = m.attr("Tensor");
  nb::object device = nb::steal(
      PyDescr_NewMethod(reinterpret_cast<PyTypeObject*>(tensor.ptr()), &tensor_dlpack_device_def));
  if (!device.is_valid()) throw nb::python_error();
  tensor.attr("__dlpack_device__") = device;
  m.def("_install_arrow_second_look", [](nb::object fn) {
    py::replace(arrow_second_look, fn.release().ptr());
  });
}

}  // namespace dlbridge::python
