// Keyword parsing for the raw METH_FASTCALL entry points (fast_calls.cpp,
// Tensor.__dlpack__): names are matched by interned pointer first, then by
// value, so that a caller with its own (non-interned) strings still works.
#pragma once

#include "bindings.hpp"

namespace dlbridge::python {

// Fills values[k] with the argument passed as names[k]; unknown or doubled
// names raise TypeError naming `function`.
void match_keywords(const char* function, PyObject* const* names, int count,
                    PyObject* const* kwvalues, PyObject* kwnames, PyObject** values);

// Entry points defined in fast_calls.cpp (from_dlpack, Tensor.__dlpack_device__) and
// convert_route.cpp (convert).
void bind_fast_calls(nb::module_& m);
void bind_convert(nb::module_& m);

}  // namespace dlbridge::python
