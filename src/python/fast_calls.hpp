// What the raw METH_FASTCALL entry points (fast_calls.cpp, convert.cpp,
// Tensor.__dlpack__) share: keyword parsing, where names are matched by
// interned pointer first, then by value, so that a caller with its own
// (non-interned) strings still works; and their installation as builtins.
#pragma once

#include "bindings.hpp"

namespace dlbridge::python {

// Fills values[k] with the argument passed as names[k]; unknown or doubled
// names raise TypeError naming `function`.
void match_keywords(const char* function, PyObject* const* names, int count,
                    PyObject* const* kwvalues, PyObject* kwnames, PyObject** values);

// m.<def->ml_name>: a builtin function made from def (which must outlive it),
// for entry points written against the C API instead of nanobind.
void add_function(nb::module_& m, PyMethodDef* def);

// Entry points defined in fast_calls.cpp (from_dlpack, Tensor.__dlpack_device__) and
// convert.cpp (convert, plan_convert).
void bind_fast_calls(nb::module_& m);
void bind_convert(nb::module_& m);

}  // namespace dlbridge::python
