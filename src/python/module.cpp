// The dlbridge._core extension: the Python face of the C++ core.
#include <nanobind/nanobind.h>

#include <dlbridge/dlbridge.hpp>

namespace nb = nanobind;

NB_MODULE(_core, m) {
  m.attr("__version__") = DLBRIDGE_VERSION_STRING;
  m.attr("DLPACK_VERSION") =
      nb::make_tuple(DLBRIDGE_DLPACK_MAJOR, DLBRIDGE_DLPACK_MINOR);
}
