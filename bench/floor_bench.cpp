// The floors of dlbridge.from_dlpack (bench/callgrind.py): the least a correct
// import can do, written against the Python C API alone, so that what
// dlbridge spends above it is visible.
//
//   numpy(a)        a versioned capsule from a.__dlpack__(max_version=(1, 3)),
//                   taken into the smallest object that owns it.
//   torch(t)        torch's C exchange API (managed_tensor_from_py_object_no_sync)
//                   into the same object, after the checks a correct import of a
//                   torch tensor needs: requires_grad and is_neg (the negative bit
//                   exists on every dtype), and is_conj where the dtype is
//                   complex (the only dtypes with a conjugate bit). It refuses
//                   what it would have to resolve; the floor is the plain case.
//   torch_unchecked(t)  the exchange API alone (what tvm-ffi's import does).
#include <Python.h>

#include <dlbridge/abi.hpp>

namespace abi = dlbridge::abi;

namespace {

struct Owner {
  PyObject_HEAD
  abi::DLManagedTensorVersioned* managed;
};

void owner_dealloc(PyObject* self) {
  abi::DLManagedTensorVersioned* m = reinterpret_cast<Owner*>(self)->managed;
  if (m != nullptr && m->deleter != nullptr) m->deleter(m);
  PyTypeObject* type = Py_TYPE(self);
  PyObject_Free(self);
  Py_DECREF(type);  // a heap type: each instance holds a reference
}

PyTypeObject* owner_type = nullptr;

PyObject* own(abi::DLManagedTensorVersioned* m) {
  Owner* o = PyObject_New(Owner, owner_type);
  if (o == nullptr) {
    if (m->deleter != nullptr) m->deleter(m);
    return nullptr;
  }
  o->managed = m;
  return reinterpret_cast<PyObject*>(o);
}

PyObject* numpy_floor(PyObject*, PyObject* a) {
  static PyObject* name = PyUnicode_InternFromString("__dlpack__");
  static PyObject* kwnames = Py_BuildValue("(s)", "max_version");
  static PyObject* version = Py_BuildValue("(ii)", 1, 3);
  PyObject* args[] = {a, version};
  PyObject* capsule = PyObject_VectorcallMethod(name, args, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, kwnames);
  if (capsule == nullptr) return nullptr;
  auto* m = static_cast<abi::DLManagedTensorVersioned*>(PyCapsule_GetPointer(capsule, "dltensor_versioned"));
  if (m == nullptr) {
    Py_DECREF(capsule);
    return nullptr;
  }
  PyCapsule_SetName(capsule, "used_dltensor_versioned");
  Py_DECREF(capsule);
  return own(m);
}

const abi::DLPackExchangeAPI* torch_api(PyObject* t) {
  static const abi::DLPackExchangeAPI* api = [t]() -> const abi::DLPackExchangeAPI* {
    PyObject* cap = PyObject_GetAttrString(reinterpret_cast<PyObject*>(Py_TYPE(t)), "__dlpack_c_exchange_api__");
    if (cap == nullptr) return nullptr;
    auto* p = static_cast<const abi::DLPackExchangeAPI*>(PyCapsule_GetPointer(cap, "dlpack_exchange_api"));
    Py_DECREF(cap);
    return p;
  }();
  if (api == nullptr && !PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "no C exchange API");
  return api;
}

PyObject* export_torch(PyObject* t, abi::DLManagedTensorVersioned** out) {
  const abi::DLPackExchangeAPI* api = torch_api(t);
  if (api == nullptr) return nullptr;
  if (api->managed_tensor_from_py_object_no_sync(t, out) != 0) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_BufferError, "export failed");
    return nullptr;
  }
  return Py_None;
}

// -1: error; 0: false; 1: true.
int method_truth(PyObject* t, PyObject* name) {
  PyObject* value = PyObject_VectorcallMethod(name, &t, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr);
  if (value == nullptr) return -1;
  const int r = PyObject_IsTrue(value);
  Py_DECREF(value);
  return r;
}

PyObject* torch_floor(PyObject*, PyObject* t) {
  static PyObject* requires_grad = PyUnicode_InternFromString("requires_grad");
  static PyObject* is_neg = PyUnicode_InternFromString("is_neg");
  static PyObject* is_conj = PyUnicode_InternFromString("is_conj");
  PyObject* grad = PyObject_GetAttr(t, requires_grad);
  if (grad == nullptr) return nullptr;
  const int g = PyObject_IsTrue(grad);
  Py_DECREF(grad);
  const int n = g == 0 ? method_truth(t, is_neg) : g;
  if (n != 0) {
    if (n > 0) PyErr_SetString(PyExc_BufferError, "a lazy view: the floor measures plain tensors");
    return nullptr;
  }
  abi::DLManagedTensorVersioned* m = nullptr;
  if (export_torch(t, &m) == nullptr) return nullptr;
  if (m->dl_tensor.dtype.code == abi::kDLComplex) {
    const int c = method_truth(t, is_conj);
    if (c != 0) {
      m->deleter(m);
      if (c > 0) PyErr_SetString(PyExc_BufferError, "a lazy view: the floor measures plain tensors");
      return nullptr;
    }
  }
  return own(m);
}

PyObject* torch_unchecked(PyObject*, PyObject* t) {
  abi::DLManagedTensorVersioned* m = nullptr;
  if (export_torch(t, &m) == nullptr) return nullptr;
  return own(m);
}

PyMethodDef methods[] = {
    {"numpy", numpy_floor, METH_O, "numpy's versioned capsule, owned"},
    {"torch", torch_floor, METH_O, "torch's C exchange API with the lazy-view checks, owned"},
    {"torch_unchecked", torch_unchecked, METH_O, "torch's C exchange API alone, owned"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "floor_bench", nullptr, -1, methods,
                      nullptr, nullptr, nullptr, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit_floor_bench() {
  static PyType_Slot slots[] = {{Py_tp_dealloc, reinterpret_cast<void*>(owner_dealloc)}, {0, nullptr}};
  static PyType_Spec spec = {"floor_bench.Owner", sizeof(Owner), 0, Py_TPFLAGS_DEFAULT, slots};
  owner_type = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&spec));
  if (owner_type == nullptr) return nullptr;
  return PyModule_Create(&module);
}
