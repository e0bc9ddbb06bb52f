// Keyword matching and installation for the raw entry points
// (entry_points.hpp).
#include <nanobind/stl/string.h>

#include <string>

#include "entry_points.hpp"
#include "state_lock.hpp"

namespace dlbridge::python {

namespace {

int keyword_slot(const char* function, PyObject* const* names, int count, PyObject* key) {
  for (int k = 0; k < count; ++k)
    if (key == names[k]) return k;
  for (int k = 0; k < count; ++k)
    if (PyUnicode_Compare(key, names[k]) == 0) return k;
  if (PyErr_Occurred()) throw nb::python_error();
  throw nb::type_error((std::string(function) + "() got an unexpected keyword argument '" +
                        nb::cast<std::string>(nb::handle(key)) + "'.")
                           .c_str());
}

// The slots of the last kwnames tuple seen per names table. Callers in C
// (NumPy's from_dlpack among them) pass the same static tuple every time,
// and its names need not be interned; the tuple is held so that its address
// cannot be reused by another.
struct KeywordCache {
  PyObject* const* names = nullptr;
  PyObject* kwnames = nullptr;
  int slots[8] = {};
};
KeywordCache keyword_cache;
StateMutex keyword_cache_mutex;

// The cached slots of kwnames for names, copied into values; false when the
// cache holds another layout.
bool cached_layout(PyObject* const* names, PyObject* const* kwvalues, PyObject* kwnames, Py_ssize_t nkw,
                   PyObject** values) {
  StateLock lock(keyword_cache_mutex);
  if (kwnames != keyword_cache.kwnames || names != keyword_cache.names) return false;
  for (Py_ssize_t i = 0; i < nkw; ++i) values[keyword_cache.slots[i]] = kwvalues[i];
  return true;
}

void cache_layout(PyObject* const* names, PyObject* kwnames, Py_ssize_t nkw, const int* slots) {
  PyObject* replaced = nullptr;
  {
    StateLock lock(keyword_cache_mutex);
    replaced = keyword_cache.kwnames;
    keyword_cache.kwnames = nb::handle(kwnames).inc_ref().ptr();
    keyword_cache.names = names;
    for (Py_ssize_t i = 0; i < nkw; ++i) keyword_cache.slots[i] = slots[i];
  }
  Py_XDECREF(replaced);
}

}  // namespace

void match_keywords(const char* function, PyObject* const* names, int count,
                    PyObject* const* kwvalues, PyObject* kwnames, PyObject** values) {
  const Py_ssize_t nkw = kwnames ? py::tuple_size(kwnames) : 0;
  if (cached_layout(names, kwvalues, kwnames, nkw, values)) return;
  bool seen[8] = {};
  int slots[8] = {};
  for (Py_ssize_t i = 0; i < nkw; ++i) {
    const int slot = keyword_slot(function, names, count, py::tuple_item(kwnames, i));
    if (seen[slot])
      throw nb::type_error((std::string(function) + "() got multiple values for keyword argument '" +
                            nb::cast<std::string>(nb::handle(names[slot])) + "'.")
                               .c_str());
    seen[slot] = true;
    if (i < 8) slots[i] = slot;
    values[slot] = kwvalues[i];
  }
  // Every name known and none twice: the layout is reusable.
  if (nkw <= count && count <= 8) cache_layout(names, kwnames, nkw, slots);
}

PyObject* interned(const char* text) {
  PyObject* s = PyUnicode_InternFromString(text);
  if (s == nullptr) throw nb::python_error();
  return s;
}

void add_function(nb::module_& m, PyMethodDef* def) {
  nb::object fn = nb::steal(PyCFunction_NewEx(def, nullptr, m.attr("__name__").ptr()));
  if (!fn.is_valid()) throw nb::python_error();
  m.attr(def->ml_name) = fn;
}

}  // namespace dlbridge::python
