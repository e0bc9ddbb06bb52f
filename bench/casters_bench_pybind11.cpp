// The pybind11 side of bench_casters.py: py::array_t (NumPy's C API and the
// buffer protocol; pybind11 has no DLPack) against dlbridge's pybind11 caster.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <dlbridge/python/pybind11.hpp>

#include <cstdint>

namespace py = pybind11;
namespace req = dlbridge::require;

namespace {

volatile uintptr_t sink = 0;

}  // namespace

PYBIND11_MODULE(casters_bench_pybind11, m) {
  // array_t converts what is not float32 C-contiguous; the bench passes
  // inputs that need no conversion, so only the check is timed.
  m.def("array_t_f32", [](py::array_t<float, py::array::c_style> a) {
    sink = reinterpret_cast<uintptr_t>(a.data()) + a.size();
  });
  m.def("view_any", [](dlbridge::TensorView v) { sink = reinterpret_cast<uintptr_t>(v.data()) + v.ndim(); });
  m.def("arg_f32", [](dlbridge::TensorArg<req::dtype<float>, req::c_contiguous, req::cpu, req::writable> v) {
    sink = reinterpret_cast<uintptr_t>(v.data()) + v->size();
  });
}
