// convert and plan_convert of a structure of arrays (nested dicts, lists,
// tuples, Arrow tables, JAX pytree nodes): the package walks it
// (python/dlbridge/structures.py) and converts each leaf through the same
// entry point, so each leaf follows the plan of a call of its own.
//
// convert.cpp asks two things. Before the single-array path: walks_first, a
// few type-flag tests (and, only when keywords are passed, a look for the
// walker's own keyword), so that a single array pays next to nothing. After a
// refusal: walk_after_refusal, which asks the package whether the refused
// object is a structure after all (an Arrow table, a JAX node); only a failed
// call pays for that.
#pragma once

#include "bindings.hpp"

namespace dlbridge::python {

enum class Walker { convert, plan };

// Whether the call goes to the walker before any import: it has two
// positional arguments, and x is a dict, list or tuple (or a subclass), or
// keep_non_arrays= is passed.
bool walks_first(PyObject* const* args, Py_ssize_t nargsf, PyObject* kwnames) noexcept;

// The walker's result for the call (NULL with an exception set).
PyObject* walk_structure(Walker walker, PyObject* const* args, Py_ssize_t nargsf, PyObject* kwnames) noexcept;

// Called with the single-array path's exception set: the walker's result where
// x is a structure it knows, else NULL with that exception still set.
PyObject* walk_after_refusal(Walker walker, PyObject* const* args, Py_ssize_t nargsf, PyObject* kwnames) noexcept;

// dlbridge._core._install_structures(convert_structure, plan_structure, is_structure).
void bind_structures(nb::module_& m);

}  // namespace dlbridge::python
