// The same one-line function bound twice with nanobind: once taking
// nb::ndarray<> and once taking dlbridge's caster types, so that
// bench_casters.py times only what each parameter type costs per call.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <dlbridge/python/nanobind.hpp>

#include <cstdint>

namespace nb = nanobind;
namespace req = dlbridge::require;

namespace {

// Written by every function so that none can be optimised away.
volatile uintptr_t sink = 0;

}  // namespace

// One source, two modules (bench/CMakeLists.txt): the name comes from the
// build, through a second macro so that it is expanded before NB_MODULE
// pastes it into PyInit_<name>.
#ifndef CASTERS_BENCH_MODULE
#define CASTERS_BENCH_MODULE casters_bench_nanobind
#endif
#define CASTERS_NB_MODULE(name, variable) NB_MODULE(name, variable)

CASTERS_NB_MODULE(CASTERS_BENCH_MODULE, m) {
  // Any dtype and layout, writable (nb::ndarray refuses read-only without nb::ro).
  m.def("ndarray_any", [](nb::ndarray<> a) { sink = reinterpret_cast<uintptr_t>(a.data()) + a.ndim(); });
  m.def("view_any", [](dlbridge::TensorView v) { sink = reinterpret_cast<uintptr_t>(v.data()) + v.ndim(); });
  m.def("arg_writable", [](dlbridge::TensorArg<req::writable> v) {
    sink = reinterpret_cast<uintptr_t>(v.data()) + v->ndim();
  });
  // What a typical kernel asks for: float32, C-contiguous, CPU, writable.
  m.def("ndarray_f32", [](nb::ndarray<float, nb::c_contig, nb::device::cpu> a) {
    sink = reinterpret_cast<uintptr_t>(a.data()) + a.size();
  });
  m.def("arg_f32", [](dlbridge::TensorArg<req::dtype<float>, req::c_contiguous, req::cpu, req::writable> v) {
    sink = reinterpret_cast<uintptr_t>(v.data()) + v->size();
  });
  m.def("owned", [](dlbridge::ManagedTensor t) { sink = reinterpret_cast<uintptr_t>(t.view().data()); });
}
