// A pybind11 extension that scales float32 tensors from any library that
// dlbridge reads (NumPy, PyTorch, JAX, CuPy on the host, any buffer). The
// requirements are in the parameter types: a tensor that misses one raises
// dlbridge's coded error (ReadOnlyError for read-only input) before any write.
#include <pybind11/pybind11.h>

#include <dlbridge/allocate.hpp>
#include <dlbridge/python/pybind11.hpp>

#include <vector>

namespace py = pybind11;
namespace req = dlbridge::require;

using Floats = dlbridge::TensorArg<req::dtype<float>, req::cpu, req::c_contiguous>;
using WritableFloats = dlbridge::TensorArg<req::dtype<float>, req::cpu, req::c_contiguous, req::writable>;

PYBIND11_MODULE(scale_pybind11, m) {
  // The casters read tensors through the installed dlbridge package: without
  // it, importing this module says how to install it.
  dlbridge::python::require_dlbridge(m);

  m.def("scale", [](WritableFloats x, float factor) {
    float* data = x.data();
    for (int64_t i = 0; i < x->size(); ++i) data[i] *= factor;
  }, py::arg("x"), py::arg("factor"), "Multiply x by factor, in place.");

  // Immutable inputs (a JAX array) get a new tensor, returned as a
  // dlbridge.Tensor that every DLPack consumer can take.
  m.def("scaled", [](Floats x, float factor) {
    dlbridge::ManagedTensor out =
        dlbridge::allocate_compact(x->dtype(), std::vector<int64_t>(x->shape(), x->shape() + x->ndim()));
    float* data = static_cast<float*>(out.view().data());
    for (int64_t i = 0; i < x->size(); ++i) data[i] = x.data()[i] * factor;
    return out;
  }, py::arg("x"), py::arg("factor"), "A new tensor: x times factor.");
}
