// The dlbridge._core extension: the Python face of the C++ core.
#include "bindings.hpp"
#include "libraries/libraries.hpp"
#include "producer_types.hpp"
#include "sharing_seam.hpp"
#include "structures.hpp"

NB_MODULE(_core, m) {
  using namespace dlbridge::python;
  m.attr("__version__") = DLBRIDGE_VERSION_STRING;
  m.attr("DLPACK_VERSION") = nb::make_tuple(DLBRIDGE_DLPACK_MAJOR, DLBRIDGE_DLPACK_MINOR);
  m.attr("FLAG_READ_ONLY") = DLBRIDGE_FLAG_READ_ONLY;
  m.attr("FLAG_IS_COPIED") = DLBRIDGE_FLAG_IS_COPIED;
  m.attr("FLAG_IS_SUBBYTE_TYPE_PADDED") = DLBRIDGE_FLAG_IS_SUBBYTE_TYPE_PADDED;
  // A tensor that borrows a Python object's memory keeps that object alive
  // from C++, where the garbage collector cannot see it (NumPy's `base`
  // behaves the same). If the object references the module holding the
  // tensor -- any instance of a class defined there does -- the pair lives
  // until exit, and nanobind's audit would call it a leak though the OS
  // reclaims it like any other object alive at exit.
  nb::set_leak_warnings(false);
  register_error_translator(m);
  bind_types(m);
  bind_capsules(m);
  bind_tensor(m);
  bind_sharing_seam(m);
  bind_exchange_api(m);
  bind_import(m);
  bind_producer_types(m);
  second_look::bind(m);
  bind_convert(m);
  bind_structures(m);
  bind_caster_api(m);
  bind_testing(m);
}
