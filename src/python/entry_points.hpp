// What the raw METH_FASTCALL entry points share: from_dlpack (import.cpp),
// convert and plan_convert (convert.cpp), Tensor.__dlpack__ (tensor.cpp).
// They are written against the C API instead of nanobind because they are
// the calls users make per tensor, and nanobind's overload dispatch with
// keyword-only defaults and its instance bookkeeping cost a large part of
// numpy.from_dlpack's whole time (bench/bench_exchange.py,
// bench/callgrind.py). They only parse arguments and call the same C++ as
// every other binding.
#pragma once

#include "bindings.hpp"

namespace dlbridge::python {

// Fills values[k] with the argument passed as names[k]; unknown or doubled
// names raise TypeError naming `function`. Names are matched by interned
// pointer first, then by value, so that a caller with its own (non-interned)
// strings still works.
void match_keywords(const char* function, PyObject* const* names, int count,
                    PyObject* const* kwvalues, PyObject* kwnames, PyObject** values);

// An interned str for a names table (a static of its entry point).
PyObject* interned(const char* text);

// m.<def->ml_name>: a builtin function made from def (which must outlive it).
void add_function(nb::module_& m, PyMethodDef* def);

}  // namespace dlbridge::python
