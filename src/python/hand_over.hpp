// hand_over.cpp: a dlbridge tensor as another library's array, built by
// that library's C exchange API.
#pragma once

#include "bindings.hpp"

namespace dlbridge::python {

// api's managed_tensor_to_py_object_no_sync over a new export of tensor: a
// new reference, or NULL with the library's Python error set. The export
// is freed exactly once whether the library ran its deleter or not. Host
// tensors only: the entry does no stream synchronisation.
PyObject* hand_over(const abi::DLPackExchangeAPI* api, const Tensor& tensor);

}  // namespace dlbridge::python
