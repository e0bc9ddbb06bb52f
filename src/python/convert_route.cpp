// dlbridge.convert's fast route, a raw METH_FASTCALL entry point. Why raw
// CPython here: convert is the call users make per tensor, and the Python
// version spent ~5 µs deciding what to do (module import, a dataclass per
// call, layout checks through tuples) around a direct call of 0.25 µs
// (bench/bench_convert.py). The rules stay in Python (convert.py): this file
// only takes the requests whose outcome it can see without them --
//
//   * x comes from a library whose own export the target reads exactly
//     (Target.native and Target.direct_from: NumPy's arrays for NumPy and
//     JAX; not torch's, whose export drops the negative bit): the target's
//     from_dlpack gets x itself, as the user would have called it. If that
//     raises, the general route decides (it raises a coded error or repairs
//     the case).
//   * otherwise x is imported by dlbridge and handed over as it is, or as one
//     compact copy when only its strides are outside the target's rule --
//     exactly what convert.plan() decides when device, dtype and READ_ONLY
//     raise nothing. A host tensor for a target with a C exchange API
//     (Target.exchange_api: torch) is built by that table (hand_over.cpp)
//     when the target's from_dlpack is still the one the table belongs to.
//
// Everything else (device= or copy= passed, a target that is not a known
// name, an extension dtype, read-only data for a target that cannot see the
// flag, a device the target does not import) goes to the general route in
// Python, which keeps every rule.
#include <nanobind/stl/string.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "fast_calls.hpp"
#include "hand_over.hpp"

namespace dlbridge::python {

namespace {

// One target name, as convert.py's _fast_spec describes it.
enum class RouteKind { general, to_dlbridge, fast };

struct ConvertTarget {
  RouteKind kind = RouteKind::general;
  nb::object name;     // the str users pass
  nb::object target;   // convert.TARGETS[name] when it was read (checked per call)
  nb::object module;   // sys.modules[...] entry the function came from (checked per call)
  nb::object module_name;
  std::vector<nb::object> entry;  // attribute path of the import function in module
  bool any_device = true;
  std::vector<int32_t> devices;
  bool any_dtype = true;
  std::vector<DType> dtypes;
  StrideRule strides = StrideRule::any;
  bool read_only_ok = false;      // READ_ONLY reaches it, or it never writes
  // Top-level modules of the producers handed over directly (native and direct_from).
  std::vector<std::string> direct_modules;
  // The C exchange API that builds the target's arrays, and the import
  // function it stands for: used only while that function is current.
  const abi::DLPackExchangeAPI* api = nullptr;
  nb::object api_function;
  // The dicts the last lookup of the import function read (convert.TARGETS,
  // sys.modules, the module dicts along the entry path), their versions, and
  // what it found: while every version stands, the function is the same.
  // Empty where a version cannot be read (see LookupStamps).
  mutable std::vector<std::pair<nb::object, uint64_t>> stamps;
  mutable nb::object found_function;
};

// What convert.py installed: the general route and the spec reader.
struct Hooks {
  PyObject* general = nullptr;    // convert._convert_general(x, to, device, copy)
  PyObject* spec = nullptr;       // convert._fast_spec(name) -> tuple | None
  PyObject* targets = nullptr;    // convert.TARGETS
};

Hooks hooks;

// Kept for the process: entries are few (one per target name ever used).
std::vector<ConvertTarget*>& known_targets() {
  static auto* table = new std::vector<ConvertTarget*>();
  return *table;
}

// The route of one (producer type, target). The entry holds a reference to
// the type, so its address cannot be reused by another type while it is
// listed (at most route_slots classes are kept alive that way), and the
// version tag, where the build can read it, notices a modified class. The
// abi3 build cannot (py_compat.hpp): there a class whose __module__ is
// reassigned keeps its first route until the entry is evicted. Without the
// cache the abi3 build asked for __module__ on every call (convert(numpy,
// numpy) on 3.12: 5,354 instructions against 2,765 direct).
struct RouteEntry {
  PyTypeObject* type = nullptr;  // a strong reference, or NULL
  unsigned int version_tag = 0;
  const ConvertTarget* target = nullptr;
  bool direct = false;
};

constexpr int route_slots = 16;
// Plain pointers, never destroyed: the references are dropped by
// clear_route and not at process exit, after the interpreter is gone.
RouteEntry routes[route_slots];
int next_route_slot = 0;

void clear_route(RouteEntry& r) {
  PyTypeObject* type = std::exchange(r.type, nullptr);
  r = RouteEntry{};
  Py_XDECREF(reinterpret_cast<PyObject*>(type));
}

// call_general, try_import and through_dlbridge stay out of line (also under
// LTO): inlined, they made convert_entry's frame large enough that its direct
// route, which needs none of them, took ~18 ns longer (286 vs 268 ns).
DLBRIDGE_NOINLINE PyObject* call_general(PyObject* x, PyObject* to, PyObject* device, PyObject* copy) {
  PyObject* args[] = {x, to, device, copy};
  return PyObject_Vectorcall(hooks.general, args, 4, nullptr);
}

StrideRule rule_named(const std::string& name) {
  if (name == "nonnegative") return StrideRule::nonnegative;
  if (name == "row_major") return StrideRule::row_major;
  if (name == "permuted_compact") return StrideRule::permuted_compact;
  if (name == "any") return StrideRule::any;
  throw nb::value_error(("convert: unknown stride rule '" + name + "'.").c_str());
}

nb::object interned_str(nb::handle value) {
  PyObject* s = nb::str(value).release().ptr();
  PyUnicode_InternInPlace(&s);
  return nb::steal(s);
}

PyObject* module_dict_item(PyObject* modules, PyObject* name) {
  PyObject* found = PyDict_GetItemWithError(modules, name);
  if (found == nullptr && PyErr_Occurred()) throw nb::python_error();
  return found;
}

PyObject* current_function(const ConvertTarget& t, bool unchanged = false);
void learn_exchange_api(ConvertTarget& entry, nb::handle type_path);

// The spec tuple (see convert._fast_spec) -> a table entry; names with no
// fast route are remembered too, so that they cost no spec call each time.
ConvertTarget* learn_target(PyObject* name) {
  nb::object spec = nb::steal(py::call_one_arg(hooks.spec, name));
  if (!spec.is_valid()) throw nb::python_error();
  auto entry = std::make_unique<ConvertTarget>();
  entry->name = nb::borrow(name);
  entry->target = nb::borrow(module_dict_item(hooks.targets, name));
  if (spec.is_none()) {
    entry->kind = RouteKind::general;
  } else if (nb::cast<std::string>(nb::borrow<nb::tuple>(spec)[0]) == "dlbridge") {
    entry->kind = RouteKind::to_dlbridge;
  } else {
    // ("fast", module name, entry path, devices, dtypes, strides, read_only_ok,
    //  direct modules, exchange API type path | None)
    nb::tuple t = nb::borrow<nb::tuple>(spec);
    entry->kind = RouteKind::fast;
    entry->module_name = interned_str(t[1]);
    for (nb::handle part : nb::borrow<nb::tuple>(t[2])) entry->entry.push_back(interned_str(part));
    entry->module = nb::borrow(module_dict_item(PyImport_GetModuleDict(), entry->module_name.ptr()));
    if (!entry->module.is_valid()) entry->kind = RouteKind::general;
    entry->any_device = t[3].is_none();
    if (!entry->any_device)
      for (nb::handle d : t[3]) entry->devices.push_back(nb::cast<int32_t>(d));
    entry->any_dtype = t[4].is_none();
    if (!entry->any_dtype)
      for (nb::handle d : t[4]) entry->dtypes.push_back(dtype_from_python(d));
    entry->strides = rule_named(nb::cast<std::string>(t[5]));
    entry->read_only_ok = nb::cast<bool>(t[6]);
    for (nb::handle m : t[7]) entry->direct_modules.push_back(nb::cast<std::string>(m));
    if (entry->kind == RouteKind::fast && !t[8].is_none()) learn_exchange_api(*entry, t[8]);
  }
  known_targets().push_back(entry.get());
  return entry.release();
}

// The target type's C exchange API, when it has one that can build arrays.
void learn_exchange_api(ConvertTarget& entry, nb::handle type_path) {
  // A path the installed library does not have means no table: the
  // target's from_dlpack is called, as for any library without one.
  nb::object type = entry.module;
  for (nb::handle part : type_path) {
    type = attribute_or_none(type, nb::str(part).c_str());
    if (type.is_none()) return;
  }
  if (!PyType_Check(type.ptr())) return;
  const abi::DLPackExchangeAPI* api = find_exchange_api(reinterpret_cast<PyTypeObject*>(type.ptr()));
  if (api == nullptr || api->managed_tensor_to_py_object_no_sync == nullptr) return;
  nb::object fn = nb::steal(current_function(entry));
  if (!fn.is_valid()) return;
  entry.api = api;
  entry.api_function = std::move(fn);
}

// Whether the table entry behind a learnt name is still the one in
// convert.TARGETS (a test or a plugin may replace it).
bool still_current(const ConvertTarget& t) {
  return module_dict_item(hooks.targets, t.name.ptr()) == t.target.ptr();
}

// Whether no dict the target's last lookup read has changed since (Python
// 3.10 and 3.11 builds; elsewhere there are no stamps and this is false).
// convert then skips three dict lookups per call (~30 ns of its ~70 ns over
// the direct call, bench/bench_convert.py): convert.TARGETS, sys.modules and
// the target module's dict. Versions are never reused, so an unchanged one
// means an unchanged dict, and the dicts are held, so none is another at a
// freed one's address. sys.modules is compared by identity too.
bool lookup_unchanged(const ConvertTarget& t) noexcept {
  if (t.stamps.empty() || t.stamps[1].first.ptr() != PyImport_GetModuleDict()) return false;
  for (const auto& [dict, version] : t.stamps)
    if (py::dict_version(dict.ptr()) != version) return false;
  return true;
}

void forget(const ConvertTarget* stale) {
  auto& table = known_targets();
  for (auto it = table.begin(); it != table.end(); ++it)
    if (*it == stale) {
      table.erase(it);
      break;
    }
  for (RouteEntry& r : routes)
    if (r.target == stale) clear_route(r);
  delete stale;
}

// Not a str: the general route resolves modules and callables. `unchanged`
// tells current_function that lookup_unchanged held just now.
const ConvertTarget& find_target(PyObject* to, bool& unchanged) {
  const ConvertTarget* found = nullptr;
  for (const ConvertTarget* t : known_targets())
    if (t->name.ptr() == to) found = t;
  if (found == nullptr)
    for (const ConvertTarget* t : known_targets())
      if (PyUnicode_Compare(t->name.ptr(), to) == 0) found = t;
  unchanged = found != nullptr && lookup_unchanged(*found);
  if (found != nullptr && (unchanged || still_current(*found))) return *found;
  if (found != nullptr) forget(found);
  return *learn_target(to);
}

// The target's import function as it is now, or NULL when the table entry
// module was replaced since it was learnt (the general route then
// reads everything afresh).
PyObject* current_function(const ConvertTarget& t, bool unchanged) {
  if (unchanged || lookup_unchanged(t)) return nb::object(t.found_function).release().ptr();
  t.stamps.clear();
  t.found_function = nb::object();
  // Stamped only if every dict read has a version: convert.TARGETS (which
  // find_target has just read), sys.modules, then each module on the path.
  std::vector<std::pair<nb::object, uint64_t>> stamps;
  bool stampable = true;
  const auto stamp = [&](PyObject* dict) {
    const uint64_t version = py::dict_version(dict);
    stampable = stampable && version != 0;
    if (stampable) stamps.emplace_back(nb::borrow(dict), version);
  };
  stamp(hooks.targets);
  PyObject* modules = PyImport_GetModuleDict();
  stamp(modules);
  PyObject* module = module_dict_item(modules, t.module_name.ptr());
  if (module != t.module.ptr()) return nullptr;
  nb::object fn = nb::borrow(module);
  for (const nb::object& part : t.entry) {
    PyObject* next = nullptr;
    if (PyModule_CheckExact(fn.ptr())) {
      PyObject* dict = PyModule_GetDict(fn.ptr());
      stamp(dict);
      next = module_dict_item(dict, part.ptr());
    }
    // Not from a module's dict (a class's attribute, or a module __getattr__'s
    // answer): there is no dict whose version stands for it.
    stampable = stampable && next != nullptr;
    fn = next != nullptr ? nb::borrow(next) : nb::steal(PyObject_GetAttr(fn.ptr(), part.ptr()));
    if (!fn.is_valid()) {
      PyErr_Clear();
      return nullptr;
    }
  }
  if (stampable) {
    t.stamps = std::move(stamps);
    t.found_function = fn;
  }
  return fn.release().ptr();
}

// Whether objects of `type` go to the target directly (direct_modules).
bool hands_directly(PyTypeObject* type, const ConvertTarget& t) {
  if (t.direct_modules.empty()) return false;
  nb::object module = nb::steal(PyObject_GetAttrString(reinterpret_cast<PyObject*>(type), "__module__"));
  if (!module.is_valid() || !PyUnicode_Check(module.ptr())) {
    PyErr_Clear();
    return false;
  }
  std::string name = nb::cast<std::string>(module);
  std::string top = name.substr(0, name.find('.'));
  for (const std::string& m : t.direct_modules)
    if (m == top) return true;
  return false;
}

bool route_is_direct(PyTypeObject* type, const ConvertTarget& t) {
  const unsigned int tag = py::type_version_tag(type);
#ifndef Py_LIMITED_API
  // Tag 0: the class was modified and not yet looked up again.
  const bool cacheable = tag != 0;
#else
  constexpr bool cacheable = true;
#endif
  if (cacheable)
    for (const RouteEntry& r : routes)
      if (r.type == type && r.target == &t && r.version_tag == tag) return r.direct;
  const bool direct = hands_directly(type, t);
  if (cacheable) {
    RouteEntry& slot = routes[next_route_slot];
    next_route_slot = (next_route_slot + 1) % route_slots;
    clear_route(slot);
    Py_INCREF(reinterpret_cast<PyObject*>(type));
    slot = RouteEntry{type, tag, &t, direct};
  }
  return direct;
}

bool device_fits(const ConvertTarget& t, Device device) {
  if (t.any_device) return true;
  for (int32_t d : t.devices)
    if (d == int32_t(device.type)) return true;
  return false;
}

bool dtype_fits(const ConvertTarget& t, DType dtype) {
  if (t.any_dtype) return true;
  for (DType d : t.dtypes)
    if (d == dtype) return true;
  return false;
}

// Through a dlbridge.Tensor: NULL with no error set means "the general
// route decides", given the imported tensor.
// x as dlbridge imports it, or nothing when it cannot be imported as it is:
// the general route has repairs for some (NumPy data in the other byte
// order), and raises the coded error for the rest.
DLBRIDGE_NOINLINE std::optional<Tensor> try_import(PyObject* x) {
  try {
    return import_object(x, ExchangeRequest{});
  } catch (nb::python_error& e) {
    if (!e.matches(PyExc_Exception)) throw;  // KeyboardInterrupt and the like
  } catch (const Error&) {
  } catch (const nb::builtin_exception&) {
  }
  return std::nullopt;
}

// An x that try_import refuses leaves `imported` unset.
DLBRIDGE_NOINLINE PyObject* through_dlbridge(PyObject* x, const ConvertTarget& t, PyObject* fn, nb::object& imported) {
  std::optional<Tensor> found = try_import(x);
  if (!found) return nullptr;
  Tensor& tensor = *found;
  const TensorView& v = tensor.view();
  const bool fits = strides_fit(v.ndim(), v.shape(), v.strides(), t.strides);
  if (!device_fits(t, v.device()) || !dtype_fits(t, v.dtype()) ||
      (fits && v.readonly() && !t.read_only_ok)) {
    imported = wrap_tensor(std::move(tensor));
    return nullptr;
  }
  // One compact copy on the same device: private memory, so READ_ONLY no
  // longer applies (convert.plan decides the same).
  Tensor handed = fits ? std::move(tensor) : copy_tensor(tensor, v.device());
  if (t.api != nullptr && fn == t.api_function.ptr() && handed.view().device() == Device{}) {
    if (PyObject* out = hand_over(t.api, handed)) return out;
    // The table refused what from_dlpack may take: from_dlpack decides.
    if (!PyErr_ExceptionMatches(PyExc_Exception)) return nullptr;
    PyErr_Clear();
  }
  nb::object out = wrap_tensor(std::move(handed));
  return py::call_one_arg(fn, out.ptr());
}

PyObject* convert_entry(PyObject*, PyObject* const* args, Py_ssize_t nargsf,
                        PyObject* kwnames) noexcept {
  return python_boundary<PyObject*>(nullptr, [&]() -> PyObject* {
    static PyObject* const names[] = {PyUnicode_InternFromString("device"),
                                      PyUnicode_InternFromString("copy")};
    const Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs != 2)
      throw nb::type_error(("convert() takes exactly two positional arguments (" +
                            std::to_string(nargs) + " given).")
                               .c_str());
    if (hooks.general == nullptr) throw nb::type_error("convert: dlbridge.convert is not set up.");
    PyObject* values[2] = {Py_None, Py_None};
    if (kwnames != nullptr) match_keywords("convert", names, 2, args + 2, kwnames, values);
    PyObject* x = args[0];
    PyObject* to = args[1];
    if (values[0] != Py_None || values[1] != Py_None) return call_general(x, to, values[0], values[1]);
    if (!PyUnicode_CheckExact(to)) return call_general(x, to, Py_None, Py_None);
    bool unchanged = false;
    const ConvertTarget& target = find_target(to, unchanged);
    if (target.kind == RouteKind::general) return call_general(x, to, Py_None, Py_None);
    if (target.kind == RouteKind::to_dlbridge) {
      if (std::optional<Tensor> tensor = try_import(x)) return wrap_tensor(std::move(*tensor)).release().ptr();
      return call_general(x, to, Py_None, Py_None);
    }
    nb::object fn = nb::steal(current_function(target, unchanged));
    if (!fn.is_valid()) return call_general(x, to, Py_None, Py_None);
    if (route_is_direct(Py_TYPE(x), target)) {
      if (PyObject* out = py::call_one_arg(fn.ptr(), x)) return out;
      // The library refused its own array (a conj bit, a byte order...):
      // the general route gives the coded error or the repair.
      if (!PyErr_ExceptionMatches(PyExc_Exception)) return nullptr;
      PyErr_Clear();
      return call_general(x, to, Py_None, Py_None);
    }
    nb::object imported;
    PyObject* out = nullptr;
    try {
      out = through_dlbridge(x, target, fn.ptr(), imported);
    } catch (...) {
      // pyarrow's __dlpack__ refuses nulls, booleans and chunked arrays, which
      // dlbridge.from_dlpack (adapters/importing.py) refuses with a code or takes.
      if (imported.is_valid() || !type_from_module(Py_TYPE(x), "pyarrow")) throw;
      return call_general(x, to, Py_None, Py_None);
    }
    if (out != nullptr) return out;
    if (PyErr_Occurred()) return nullptr;
    return call_general(imported.is_valid() ? imported.ptr() : x, to, Py_None, Py_None);
  });
}

PyMethodDef convert_def = {
    "convert", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(convert_entry)),
    METH_FASTCALL | METH_KEYWORDS,
    "convert(x, to, /, *, device=None, copy=None)\n--\n\n"
    "Hand x to `to` (\"numpy\", \"torch\", \"jax\", \"cupy\", \"tensorflow\", \"tvm_ffi\", "
    "\"dlbridge\", or a module/callable with from_dlpack), zero-copy where the target allows, "
    "with the one smallest copy where it must, and an error rather than a silently wrong "
    "result."};

}  // namespace

void bind_convert(nb::module_& m) {
  add_function(m, &convert_def);
  m.def("_install_convert",
        [](nb::object general, nb::object spec, nb::object targets) {
          if (!PyDict_Check(targets.ptr())) throw nb::type_error("targets must be a dict.");
          // Held for the process, as the module holding them is.
          hooks = Hooks{general.release().ptr(), spec.release().ptr(), targets.release().ptr()};
          for (ConvertTarget* t : known_targets()) delete t;
          known_targets().clear();
          for (RouteEntry& r : routes) clear_route(r);
        },
        nb::arg("general"), nb::arg("spec"), nb::arg("targets"),
        "Set convert's general route and target table (dlbridge.convert does, once).");
}

}  // namespace dlbridge::python
