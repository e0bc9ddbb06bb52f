// caster_functions.hpp bound with nanobind and <dlbridge/python/nanobind.hpp>.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <dlbridge/python/nanobind.hpp>

#include "caster_functions.hpp"

NB_MODULE(casters_nanobind, m) {
  using namespace caster_test;
  m.def("view", &view);
  m.def("snapshot", &snapshot);
  m.def("pick", &pick_int);
  m.def("pick", &pick_text);
  m.def("owned_snapshot", [](dlbridge::ManagedTensor t) { return snapshot(t.view()); });
  m.def("float_matrix", &float_matrix);
  m.def("on_cuda", &on_cuda);
  m.def("compact", &compact);
  m.def("writable", &writable);
  m.def("scalar_flag", &scalar_flag);
  m.def("pinned_row", &pinned_row);
  m.def("address", &address);
  m.def("keep", &keep);
  m.def("kept_sum", &kept_sum);
  m.def("drop_kept", &drop_kept);
  m.def("pass_through", &pass_through);
  m.def("arange", &arange);
  // Overloads: an object that is no tensor falls through to the next one.
  m.def("which", [](dlbridge::TensorView) { return std::string("tensor"); });
  m.def("which", [](const std::string&) { return std::string("string"); });
}
