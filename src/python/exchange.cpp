// dlbridge.Tensor.__dlpack_c_exchange_api__: the DLPack 1.3 C exchange API
// over dlbridge tensors, and the lookup of other types' tables for import.
#include <cstring>

#include "bindings.hpp"

namespace dlbridge::python {

namespace {

const Tensor* as_tensor(void* object) { return python::as_tensor(nb::handle(static_cast<PyObject*>(object))); }

struct PythonProvider {
  static abi::DLManagedTensorVersioned* to_managed(void* object) {
    if (const Tensor* t = as_tensor(object)) return export_versioned(*t, 0);
    // Any other array-like: imported zero-copy first, like from_dlpack.
    return export_versioned(import_object(nb::handle(static_cast<PyObject*>(object)), ExchangeRequest{}), 0);
  }
  static void to_dltensor(void* object, abi::DLTensor* out) {
    const Tensor* t = as_tensor(object);
    if (t == nullptr)
      throw nb::type_error("dltensor_from_py_object_no_sync expects a dlbridge.Tensor.");
    *out = t->view().dltensor();
  }
  static void* from_managed(abi::DLManagedTensorVersioned* tensor) {
    return wrap_tensor(tensor_adopting(tensor)).release().ptr();
  }
  // dlbridge queues no work of its own, so it has no current stream: NULL is
  // the device's default stream, and what the spec asks for on the CPU.
  static void* current_stream(Device) { return nullptr; }
  static void report_error(std::exception_ptr error) noexcept { set_python_error(error); }
};

}  // namespace

const abi::DLPackExchangeAPI* dlbridge_exchange_api() noexcept {
  return make_exchange_api<PythonProvider>();
}

const abi::DLPackExchangeAPI* find_exchange_api(PyTypeObject* type) {
  PyObject* attr = PyObject_GetAttrString(reinterpret_cast<PyObject*>(type), "__dlpack_c_exchange_api__");
  const abi::DLPackExchangeAPIHeader* header = nullptr;
  if (attr != nullptr && PyCapsule_IsValid(attr, "dlpack_exchange_api")) {
    header = static_cast<const abi::DLPackExchangeAPIHeader*>(PyCapsule_GetPointer(attr, "dlpack_exchange_api"));
  } else {
    PyErr_Clear();
    Py_XDECREF(attr);
    // DLPack 1.2 published the table's address as an int attribute.
    attr = PyObject_GetAttrString(reinterpret_cast<PyObject*>(type), "__c_dlpack_exchange_api__");
    if (attr != nullptr && PyLong_Check(attr))
      header = static_cast<const abi::DLPackExchangeAPIHeader*>(PyLong_AsVoidPtr(attr));
  }
  PyErr_Clear();
  Py_XDECREF(attr);
  return usable_exchange_api(header);
}

void bind_exchange_api(nb::module_& m) {
  nb::object cls = m.attr("Tensor");
  nb::object capsule = nb::steal(PyCapsule_New(const_cast<abi::DLPackExchangeAPI*>(dlbridge_exchange_api()),
                                               "dlpack_exchange_api", nullptr));
  cls.attr("__dlpack_c_exchange_api__") = capsule;
  m.attr("_exchange_api_address") = reinterpret_cast<uintptr_t>(dlbridge_exchange_api());
}

}  // namespace dlbridge::python
