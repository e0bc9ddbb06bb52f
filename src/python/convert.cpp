// dlbridge.convert and dlbridge.plan_convert: hand x to a target library
// with the least work it accepts. The decision is the core's plan_convert
// (include/dlbridge/exchange/plan_convert.hpp); this file learns each target's
// description from its library module (python/dlbridge/libraries/), imports
// x, asks the plan, and carries it out. plan_convert returns the same plan
// without handing anything over.
//
// A raw entry point (entry_points.hpp): convert is the call users make per
// tensor, and the direct call it is measured against (lib.from_dlpack) costs
// 200-300 ns (bench/bench_convert.py).
#include <nanobind/stl/string.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <dlbridge/exchange/byte_order.hpp>
#include <dlbridge/exchange/plan_convert.hpp>

#include "bindings.hpp"
#include "entry_points.hpp"
#include "gil.hpp"
#include "hand_over.hpp"
#include "libraries/libraries.hpp"
#include "state_lock.hpp"
#include "structures.hpp"

namespace dlbridge::python {

namespace {

// How a learnt target receives a tensor once the plan is made.
struct HandOver {
  bool capsule = false;       // the importer wants a legacy capsule, not an array
  bool copy_keyword = true;   // the importer takes copy= (passed as copy=False only)
  nb::object adapter;         // Target.hand_over(tensor, copy), or invalid
  // When the importer itself may still be called instead of the adapter.
  bool entry_takes = false;
  DTypeSet entry_dtypes;  // empty: every dtype
  StrideRule entry_strides = StrideRule::any;
  nb::object extension_hand_over;                      // Extension.hand_over(tensor, dtype)
  std::vector<std::pair<DType, nb::object>> extension_types;  // single-lane DType -> the package's dtype
  // The C exchange API that builds the target's arrays, used while the
  // importer is still the function it stands for.
  const abi::DLPackExchangeAPI* api = nullptr;
  nb::object api_function;
};

// One target as learnt from its description (libraries/_spec.Target).
struct LearntTarget {
  nb::object name;          // what the user passed (a str for cached entries)
  nb::object table_entry;   // TARGETS[name] when learnt (NULL if none): checked per call
  // targets_generation when table_entry was last found there: while it
  // stands, the entry is still the one. Under targets_mutex, as are stamps
  // and found_importer.
  mutable uint64_t table_generation = 0;
  bool to_dlbridge = false;
  ConvertTarget plan_target;
  HandOver hand;
  std::vector<nb::object> own_types;  // the library's own array classes
  // Other libraries' array classes whose instances (exactly those classes)
  // the importer reads as they are
  // (Target.direct_from), and the modules of those not imported when the
  // target was learnt: once one is, the target is learnt again.
  std::vector<nb::object> direct_types;
  std::vector<nb::object> direct_missing;
  // The importer: module_name's attribute path `entry`, looked up per call
  // (see current_importer), or a fixed callable for targets given as objects.
  nb::object module_name;
  nb::object module;
  std::vector<nb::object> entry;
  nb::object fixed_importer;
  // The dicts the last lookup read and their versions (3.10/3.11): while
  // each stands, the importer found then is still the one.
  mutable std::vector<std::pair<nb::object, uint64_t>> stamps;
  mutable nb::object found_importer;
  // The dtype objects of direct_types' arrays seen so far (held, so never
  // reused), and whether each is one of plan_target.setting_dtypes. Under
  // targets_mutex.
  mutable std::vector<std::pair<nb::object, bool>> direct_dtypes;
};

using TargetRef = std::shared_ptr<const LearntTarget>;

// What convert.py installed: libraries.TARGETS (name -> Target), and
// convert._target_of (learn_target).
Installed installed_targets;
Installed installed_target_of;

// Bumped by every change of the installed table (libraries.TargetTable calls
// _targets_changed), so a learnt target rereads its entry only after one.
// Starts above 0, the generation no learnt target has checked.
std::atomic<uint64_t> targets_generation{1};

// Learnt str targets, kept for the process (one per name ever used). Held
// by shared_ptr: a call keeps its entry alive even if a re-entrant call
// (a producer's __dlpack__ converting), or another thread, replaces it.
std::vector<TargetRef>& known_targets() {
  static auto* table = new std::vector<TargetRef>();
  return *table;
}
StateMutex targets_mutex;

// dict[key], borrowed: only compared with a reference held elsewhere, whose
// object therefore cannot be freed and its address reused meanwhile.
PyObject* dict_item(PyObject* dict, PyObject* key) {
  PyObject* found = PyDict_GetItemWithError(dict, key);
  if (found == nullptr && PyErr_Occurred()) throw nb::python_error();
  return found;
}

nb::object interned_str(nb::handle value) {
  PyObject* s = nb::str(value).release().ptr();
  PyUnicode_InternInPlace(&s);
  return nb::steal(s);
}

StrideRule stride_rule_of(nb::handle name) {
  const std::string text = utf8_of(nb::str(name));
  if (text == "any") return StrideRule::any;
  if (text == "nonnegative") return StrideRule::nonnegative;
  if (text == "row_major") return StrideRule::row_major;
  if (text == "permuted_compact") return StrideRule::permuted_compact;
  throw nb::value_error(("convert: unknown stride rule '" + text + "'.").c_str());
}

ReadOnlyRule read_only_rule_of(nb::handle name) {
  const std::string text = utf8_of(nb::str(name));
  if (text == "honoured") return ReadOnlyRule::honoured;
  if (text == "immutable") return ReadOnlyRule::immutable;
  if (text == "ignored") return ReadOnlyRule::ignored;
  throw nb::value_error(("convert: unknown read_only rule '" + text + "'.").c_str());
}

// Names of dtypes (a frozenset of str) as DTypes, sorted by name so that
// messages list them the same way every run; names this dlbridge cannot
// parse are left out (the target cannot be handed them).
std::vector<DType> dtypes_of(nb::handle names) {
  std::vector<std::string> sorted;
  for (nb::handle n : names) sorted.push_back(utf8_of(nb::str(n)));
  std::sort(sorted.begin(), sorted.end());
  std::vector<DType> out;
  for (const std::string& n : sorted) {
    try {
      out.push_back(parse_dtype(n));
    } catch (const Error&) {
    }
  }
  return out;
}

void learn_extension(LearntTarget& t, nb::handle extension) {
  nb::object package;
  const std::string module = utf8_of(extension.attr("module"));
  t.plan_target.extension = module;
  t.plan_target.extension_one_per_byte = nb::cast<bool>(extension.attr("one_per_byte"));
  t.hand.extension_hand_over = extension.attr("hand_over");
  try {
    package = nb::module_::import_(module.c_str());
  } catch (nb::python_error& e) {
    if (!e.matches(PyExc_ImportError)) throw;
    return;  // not installed: the target holds none of these dtypes
  }
  for (const DType d : dtypes_of(extension.attr("dtypes"))) {
    nb::object found = attribute_or_none(package, dtype_name(d).c_str());
    if (found.is_none()) continue;
    t.plan_target.extension_dtypes.insert(d);
    t.hand.extension_types.emplace_back(d, std::move(found));
  }
}

void learn_exchange_api(LearntTarget& t, nb::handle type_path);

// Target.dtype_setting: its dtypes, and where the setting's value is read
// on each plan for one of them (getattr(holder, attribute): a setting can
// change at run time, and per thread).
void learn_setting(ConvertTarget& p, nb::handle setting) {
  p.setting_dtypes = DTypeSet(dtypes_of(setting.attr("dtypes")));
  p.setting_hint = utf8_of(nb::str(setting.attr("hint")));
  nb::tuple where = nb::borrow<nb::tuple>(setting.attr("state")());
  if (where.size() != 2) throw nb::type_error("convert: DTypeSetting.state() must give (object, attribute).");
  auto holder = std::make_shared<nb::object>(nb::borrow(where[0]));
  auto attribute = std::make_shared<nb::object>(interned_str(where[1]));
  p.setting_on = [holder, attribute]() -> bool {
    PyObject* value = PyObject_GetAttr(holder->ptr(), attribute->ptr());
    if (value == nullptr) throw nb::python_error();
    const int on = PyObject_IsTrue(value);
    Py_DECREF(value);
    if (on < 0) throw nb::python_error();
    return on == 1;
  };
}
PyObject* current_importer(const LearntTarget& t);

// A Target (libraries/_spec.py) as the planner's ConvertTarget and how to hand over.
void learn_description(LearntTarget& t, nb::handle spec) {
  ConvertTarget& p = t.plan_target;
  p.name = utf8_of(nb::str(t.name));
  p.read_only = read_only_rule_of(spec.attr("read_only"));
  p.strides = stride_rule_of(spec.attr("strides"));
  nb::object devices = spec.attr("devices");
  if (!devices.is_none())
    for (nb::handle d : devices) p.devices.push_back(nb::cast<int32_t>(d));
  std::sort(p.devices.begin(), p.devices.end());
  nb::object dtypes = spec.attr("dtypes");
  if (!dtypes.is_none()) p.dtypes = DTypeSet(dtypes_of(dtypes));
  nb::object extension = spec.attr("extension");
  if (!extension.is_none()) learn_extension(t, extension);
  p.copied_dtypes = DTypeSet(dtypes_of(spec.attr("copied_dtypes")));
  p.copies_on_import = nb::cast<bool>(spec.attr("copies_on_import"));
  p.alignment = nb::cast<uint32_t>(spec.attr("alignment"));
  p.zero_dim = nb::cast<bool>(spec.attr("zero_dim"));
  p.legacy_capsules_only = nb::cast<bool>(spec.attr("legacy_capsules_only"));
  nb::object setting = spec.attr("dtype_setting");
  if (!setting.is_none()) learn_setting(p, setting);
  nb::object max_extent = spec.attr("max_extent");
  if (!max_extent.is_none()) p.max_extent = nb::cast<int64_t>(max_extent);

  HandOver& h = t.hand;
  h.capsule = utf8_of(spec.attr("takes")) == "capsule";
  p.legacy_capsules_only = p.legacy_capsules_only || h.capsule;  // dlbridge hands it a legacy capsule
  h.copy_keyword = nb::cast<bool>(spec.attr("copy_keyword"));
  nb::object adapter = spec.attr("hand_over");
  if (!adapter.is_none()) h.adapter = adapter;
  nb::object takes = spec.attr("entry_takes");
  if (!takes.is_none()) {
    h.entry_takes = true;
    nb::object listed = takes.attr("dtypes");
    if (!listed.is_none()) h.entry_dtypes = DTypeSet(dtypes_of(listed));
    h.entry_strides = stride_rule_of(takes.attr("strides"));
  }
}

// convert._target_of(to) -> (name, Target | None, importer | None, array
// classes, (direct classes, modules not imported)): None as Target means
// "dlbridge"; an importer is given for targets passed as objects, otherwise
// it is looked up as Target.module / Target.entry; the array classes are the
// library's own, the direct ones Target.direct_from's as far as imported.
TargetRef learn_target(PyObject* to) {
  PyObject* args[] = {to};
  nb::object resolved = nb::steal(PyObject_Vectorcall(installed_target_of.get(), args, 1, nullptr));
  if (!resolved.is_valid()) throw nb::python_error();
  nb::tuple r = nb::borrow<nb::tuple>(resolved);
  auto t = std::make_shared<LearntTarget>();
  t->name = PyUnicode_Check(to) ? interned_str(nb::handle(to)) : nb::borrow(to);
  if (PyUnicode_Check(to)) t->table_entry = py::dict_get_ref(installed_targets.get(), to);
  nb::handle spec = r[1];
  if (spec.is_none()) {
    t->to_dlbridge = true;
    t->plan_target.name = "dlbridge";
    t->plan_target.read_only = ReadOnlyRule::honoured;
    t->plan_target.host_memory_as_cpu = false;  // dlbridge's tensors say where they live
    return t;
  }
  t->name = PyUnicode_Check(to) ? t->name : nb::borrow(r[0]);
  learn_description(*t, spec);
  t->plan_target.name = utf8_of(nb::str(r[0]));
  const std::string entry = utf8_of(nb::str(spec.attr("entry")));
  if (!r[2].is_none()) {
    t->fixed_importer = nb::borrow(r[2]);
  } else if (entry.empty()) {
    t->fixed_importer = nb::none();  // every hand-over goes through Target.hand_over
  } else {
    t->module_name = interned_str(spec.attr("module"));
    for (nb::handle part : nb::str(spec.attr("entry")).attr("split")(".")) t->entry.push_back(interned_str(part));
    t->module = py::dict_get_ref(PyImport_GetModuleDict(), t->module_name.ptr());
    if (!t->module.is_valid())
      throw nb::import_error(("convert: " + utf8_of(spec.attr("module")) + " is not imported.").c_str());
  }
  for (nb::handle cls : r[3])
    if (PyType_Check(cls.ptr())) t->own_types.push_back(nb::borrow(cls));
  nb::tuple direct = nb::borrow<nb::tuple>(r[4]);
  for (nb::handle cls : direct[0])
    if (PyType_Check(cls.ptr())) t->direct_types.push_back(nb::borrow(cls));
  for (nb::handle module : direct[1]) t->direct_missing.push_back(interned_str(module));
  const std::string api_path = utf8_of(spec.attr("exchange_api"));
  if (!api_path.empty() && !t->fixed_importer.is_valid()) learn_exchange_api(*t, spec.attr("exchange_api"));
  return t;
}

void learn_exchange_api(LearntTarget& t, nb::handle type_path) {
  // A path the installed library lacks means no table: the importer is called.
  nb::object type = t.module;
  for (nb::handle part : nb::str(type_path).attr("split")(".")) {
    type = attribute_or_none(type, utf8_of(part).c_str());
    if (type.is_none()) return;
  }
  if (!PyType_Check(type.ptr())) return;
  const abi::DLPackExchangeAPI* api = find_exchange_api(reinterpret_cast<PyTypeObject*>(type.ptr()));
  if (api == nullptr || api->managed_tensor_to_py_object_no_sync == nullptr) return;
  nb::object fn = nb::steal(current_importer(t));
  if (!fn.is_valid()) return;
  t.hand.api = api;
  t.hand.api_function = std::move(fn);
}

// The importer the last lookup found, while every dict it read still has
// its version (3.10/3.11 builds; elsewhere there are no stamps): a new
// reference, or NULL.
PyObject* unchanged_importer(const LearntTarget& t) {
  StateLock lock(targets_mutex);
  if (t.stamps.empty() || t.stamps[0].first.ptr() != PyImport_GetModuleDict()) return nullptr;
  for (const auto& [dict, version] : t.stamps)
    if (py::dict_version(dict.ptr()) != version) return nullptr;
  return nb::object(t.found_importer).release().ptr();
}

// The importer as it is now; NULL (no error) when the module in sys.modules
// was replaced since the target was learnt (the caller learns it again).
PyObject* current_importer(const LearntTarget& t) {
  if (t.fixed_importer.is_valid()) return nb::object(t.fixed_importer).release().ptr();
  if (PyObject* found = unchanged_importer(t)) return found;
  std::vector<std::pair<nb::object, uint64_t>> stamps;
  bool stampable = true;
  const auto stamp = [&](PyObject* dict) {
    const uint64_t version = py::dict_version(dict);
    stampable = stampable && version != 0;
    if (stampable) stamps.emplace_back(nb::borrow(dict), version);
  };
  PyObject* modules = PyImport_GetModuleDict();
  stamp(modules);
  if (dict_item(modules, t.module_name.ptr()) != t.module.ptr()) return nullptr;
  nb::object fn = t.module;
  for (const nb::object& part : t.entry) {
    nb::object next;
    if (PyModule_CheckExact(fn.ptr())) {
      PyObject* dict = PyModule_GetDict(fn.ptr());
      stamp(dict);
      next = py::dict_get_ref(dict, part.ptr());
    }
    // Not from a module's dict (a class attribute, a module __getattr__'s
    // answer): no dict version stands for it.
    stampable = stampable && next.is_valid();
    fn = next.is_valid() ? std::move(next) : nb::steal(PyObject_GetAttr(fn.ptr(), part.ptr()));
    if (!fn.is_valid()) throw nb::python_error();
  }
  // What this lookup read replaces what the last one read; the references
  // replaced are released after unlocking.
  nb::object found = stampable ? fn : nb::object();
  if (!stampable) stamps.clear();
  if (stampable || !t.stamps.empty()) {
    StateLock lock(targets_mutex);
    t.stamps.swap(stamps);
    std::swap(t.found_importer, found);
  }
  return fn.release().ptr();
}

// Drops a learnt target (stale, or its module replaced).
void forget(const LearntTarget* stale) {
  TargetRef gone;  // released after unlocking
  StateLock lock(targets_mutex);
  auto& table = known_targets();
  for (auto it = table.begin(); it != table.end(); ++it)
    if (it->get() == stale) {
      gone = std::move(*it);
      table.erase(it);
      return;
    }
}

// The learnt entry of a str target, found by pointer (the interned names
// users pass) and then by value; empty when there is none.
TargetRef known_target(PyObject* to) {
  StateLock lock(targets_mutex);
  const auto& table = known_targets();
  for (const TargetRef& t : table)
    if (t->name.ptr() == to) return t;
  for (const TargetRef& t : table)
    if (PyUnicode_Compare(t->name.ptr(), to) == 0) return t;
  return TargetRef();
}

// Whether a module of Target.direct_from that was not imported when the
// target was learnt is imported now (its classes can be found).
bool direct_module_arrived(const LearntTarget& t) {
  PyObject* modules = PyImport_GetModuleDict();
  for (const nb::object& name : t.direct_missing)
    if (dict_item(modules, name.ptr()) != nullptr) return true;
  return false;
}

// The learnt entry for a str target, learnt now if new or stale. A module
// of Target.direct_from that arrived matters only for x of another
// library's class: a dlbridge.Tensor is never one of direct_types.
TargetRef find_target(PyObject* x, PyObject* to) {
  TargetRef found = known_target(to);
  if (PyErr_Occurred()) throw nb::python_error();
  PyObject* targets = installed_targets.get();
  const uint64_t generation = targets_generation.load(std::memory_order_acquire);
  if (found && Py_TYPE(x) != tensor_type() && direct_module_arrived(*found)) {
    forget(found.get());
    found.reset();
  }
  if (found) {
    {
      StateLock lock(targets_mutex);
      if (generation == found->table_generation) return found;
    }
    if (dict_item(targets, to) == found->table_entry.ptr()) {
      StateLock lock(targets_mutex);
      found->table_generation = generation;
      return found;
    }
    forget(found.get());
  }
  TargetRef learnt = learn_target(to);
  StateLock lock(targets_mutex);
  known_targets().push_back(learnt);
  return learnt;
}

// What a request asks of convert, parsed.
struct ConvertRequest {
  PyObject* device = Py_None;
  std::optional<bool> copy;
  std::optional<bool> alias_readonly;  // absent: the scope's (dlbridge.alias_readonly())
};

// The scope of dlbridge.alias_readonly(): a context variable, so each thread
// and task has its own; read only where a plan would copy protected data.
PyObject* alias_scope_var = nullptr;

bool alias_scope_on() {
  if (alias_scope_var == nullptr) return false;
  nb::object value = nb::steal(py::context_var_get(alias_scope_var, Py_False));
  if (!value.is_valid()) throw nb::python_error();
  return value.ptr() == Py_True;
}

bool is_instance_of_any(PyObject* x, const std::vector<nb::object>& types) {
  for (const nb::object& type : types)
    if (PyObject_TypeCheck(x, reinterpret_cast<PyTypeObject*>(type.ptr()))) return true;
  return false;
}

bool is_own_array(PyObject* x, const LearntTarget& t) { return is_instance_of_any(x, t.own_types); }

// Target.direct_from: x goes to the importer as it is, before any import of
// its own, for a plain request only. The target library reads such arrays
// exactly as dlbridge would hand them over, and each side refuses what it
// cannot take; a refusal sends convert to its plan (carry_out_decision).
// Exactly those classes: a subclass may override __dlpack__ (with one that
// converts itself again, say), and only dlbridge's own import guards that.
// Whether x, an array of one of direct_types, may hold a dtype that its
// target takes only under a setting: its dtype object (x.dtype) parsed once
// per distinct object; anything unreadable counts as "may" (the plan decides).
bool may_hold_setting_dtype(PyObject* x, const LearntTarget& t) {
  static PyObject* const dtype_name_attr = PyUnicode_InternFromString("dtype");
  nb::object dtype = nb::steal(PyObject_GetAttr(x, dtype_name_attr));
  if (!dtype.is_valid()) {
    PyErr_Clear();
    return true;
  }
  {
    StateLock lock(targets_mutex);
    for (const auto& [seen, held] : t.direct_dtypes)
      if (seen.ptr() == dtype.ptr()) return held;
  }
  bool held = true;
  try {
    held = t.plan_target.setting_dtypes.contains(dtype_from_python(dtype));
  } catch (const nb::python_error&) {
  } catch (const Error&) {
  }
  StateLock lock(targets_mutex);
  if (t.direct_dtypes.size() < 64) t.direct_dtypes.emplace_back(std::move(dtype), held);
  return held;
}

// A dtype its target holds only under a setting goes directly only while
// the setting is on: its importer would narrow it silently otherwise.
bool hands_directly(PyObject* x, const LearntTarget& t, const ConvertRequest& request) {
  if (request.device != Py_None || request.copy || t.direct_types.empty()) return false;
  for (const nb::object& type : t.direct_types)
    if (Py_TYPE(x) == reinterpret_cast<PyTypeObject*>(type.ptr()))
      return !t.plan_target.setting_on || !may_hold_setting_dtype(x, t) || t.plan_target.setting_on();
  return false;
}

// x imported, and what the plan must know of the import: the copy it
// made (a move to device=, a producer's copy, a resolved lazy view), or
// that the memory holds NumPy data in the other byte order, read as it is.
// Writability is what the source said.
struct Imported {
  const Tensor* source = nullptr;  // x's own tensor: x is a dlbridge.Tensor, taken as it is
  std::optional<Tensor> owned;     // otherwise what was imported from x
  ConvertSource facts;

  const Tensor& tensor() const noexcept { return source != nullptr ? *source : *owned; }
};

// Imports x into out: a dlbridge.Tensor with no device asked is read in place
// (from_dlpack would return it as it is).
void import_source(PyObject* x, const ConvertRequest& request, Imported& out) {
  if (request.device == Py_None) {
    out.source = as_tensor(x);
    if (out.source != nullptr) {
      out.facts.writability = out.source->writability();
      return;
    }
  }
  ExchangeRequest exchange;
  if (request.device != Py_None) exchange.device = dl_device_from_python(request.device);
  // copy=True is made by the plan (unpacking or compact, once); only a
  // refusal to copy reaches the import.
  if (request.copy == false) exchange.copy = false;
  try {
    out.owned = import_object(x, exchange, "dlbridge.convert");
  } catch (const Error& refusal) {
    // The import's refusal of NumPy data in the other byte order (DLPack
    // has none): its memory is read as it is, and the plan decides the one
    // byte-swapped copy (or refuses it under copy=False).
    // (NumPy's memory is the host's: device= may name only the CPU.)
    if (refusal.code() != ErrorCode::unsupported_dtype || (exchange.device && *exchange.device != Device{})) throw;
    std::optional<Tensor> raw = numpy::other_byte_order_tensor(x);
    if (!raw) throw;
    out.owned = std::move(*raw);
    out.facts.other_byte_order = true;
  }
  const Tensor& t = *out.owned;
  out.facts.writability = t.writability();
  // The view's flags, not the storage's: a copy an import marks on its view
  // (a library's second look joining Arrow's chunks) is a copy all the same.
  if (t.lazy_view_resolved())
    out.facts.copied |= copy_for_lazy_view;
  else if (t.view().flags() & DLBRIDGE_FLAG_IS_COPIED)
    out.facts.copied |= exchange.device ? copy_for_device : copy_by_producer;
}


enum class Via : uint8_t { input, direct, dlbridge, importer, exchange_api, adapter, capsule, extension };

const char* via_name(Via via) {
  switch (via) {
    case Via::input: return "input";
    case Via::direct: return "direct";
    case Via::dlbridge: return "dlbridge";
    case Via::importer: return "importer";
    case Via::exchange_api: return "exchange_api";
    case Via::adapter: return "hand_over";
    case Via::capsule: return "capsule";
    case Via::extension: return "extension";
  }
  return "?";
}

// The whole decision for one call: the plan, and the hand-over it leads to.
struct Decision {
  bool return_input = false;
  std::optional<Imported> imported;
  ConvertPlan plan;
  Via via = Via::importer;
};

bool entry_takes_view(const HandOver& h, const TensorView& v) {
  if (!h.entry_takes) return false;
  if (!h.entry_dtypes.empty() && !h.entry_dtypes.contains(v.dtype())) return false;
  return strides_fit(v.ndim(), v.shape(), v.strides(), h.entry_strides);
}

// The entry does no stream synchronisation: host memory only.
Via choose_hand_over(const LearntTarget& t, const ConvertPlan& plan, const TensorView& v, PyObject* importer) {
  if (plan.action == ConvertAction::hand_over_extension) return Via::extension;
  if (t.hand.adapter.is_valid() && !entry_takes_view(t.hand, v)) return Via::adapter;
  if (t.hand.capsule) return Via::capsule;
  const bool on_host = plan.host_alias || v.device() == Device{};
  if (on_host && t.hand.api != nullptr && importer == t.hand.api_function.ptr())
    return Via::exchange_api;
  return Via::importer;
}

// try_direct: x may go to the importer as it is (hands_directly); the plan
// is made only if the importer refuses it.
Decision decide(PyObject* x, const LearntTarget& t, const ConvertRequest& request, PyObject* importer,
                bool try_direct) {
  Decision d;
  if (t.to_dlbridge) {
    d.via = Via::dlbridge;
  } else if (request.device == Py_None && request.copy != true && is_own_array(x, t)) {
    d.return_input = true;
    d.via = Via::input;
    return d;
  } else if (try_direct && hands_directly(x, t, request)) {
    d.via = Via::direct;
    return d;
  }
  import_source(x, request, d.imported.emplace());
  const Tensor& tensor = d.imported->tensor();
  ConvertOptions options;
  options.copy = request.copy;
  options.alias_readonly = request.alias_readonly;
  options.alias_scope = alias_scope_on;
  d.plan = plan_convert(tensor.view(), d.imported->facts, t.plan_target, options);
  if (!t.to_dlbridge) d.via = choose_hand_over(t, d.plan, tensor.view(), importer);
  return d;
}

nb::object extension_dtype(const LearntTarget& t, DType dtype) {
  const DType scalar{dtype.code, dtype.bits, 1};
  for (const auto& [d, found] : t.hand.extension_types)
    if (d == scalar) return found;
  throw nb::type_error("convert: the extension dtype vanished.");
}

// Whether the plan hands over the imported tensor itself (no copy, no relabelling).
bool hands_imported_tensor(const ConvertPlan& plan) noexcept {
  return plan.copy != CopyBy::dlbridge && !plan.host_alias && !plan.legacy_capsule_ok && !plan.alias_readonly;
}

// The tensor the plan hands over where it is not the imported one:
// dlbridge's copy, or a relabelled view.
Tensor planned_tensor(Tensor tensor, const ConvertPlan& plan) {
  if (plan.host_alias) tensor = tensor.with_view(tensor.view().with_device(Device{}));
  if (plan.copy == CopyBy::dlbridge) {
    if (plan.swap_bytes) {
      // Into dlbridge's own (aligned) buffer, swapped there: the one copy.
      Tensor out = copy_tensor(tensor, tensor.view().device());
      {
        GilReleased unlocked;  // touches only dlbridge's new buffer
        swap_byte_order(out.view());
      }
      return out;
    }
    if (plan.unpack) {
      ManagedTensor out;
      {
        GilReleased unlocked;
        out = copy_unpacked(tensor.view());
      }
      return tensor_from_managed(std::move(out));
    }
    return copy_tensor(tensor, tensor.view().device());
  }
  if (plan.alias_readonly) return tensor.known_writable();  // as the target's own from_dlpack takes it
  if (plan.legacy_capsule_ok) {
    // The target never writes through it: it may leave as a legacy capsule.
    Tensor out = tensor.with_view(tensor.view());
    out.set_writability_unknown();
    return out;
  }
  return tensor;
}

PyObject* call_importer(PyObject* importer, PyObject* arg, bool copy_false) {
  if (!copy_false) return py::call_one_arg(importer, arg);
  static PyObject* names = nb::make_tuple(nb::steal(PyUnicode_InternFromString("copy"))).release().ptr();
  PyObject* args[] = {arg, Py_False};
  return PyObject_Vectorcall(importer, args, 1, names);
}

// The Python object for the tensor handed over: x itself where it is the
// unchanged dlbridge.Tensor (no second object for the same tensor).
nb::object tensor_object(PyObject* x, const Tensor& tensor, bool unchanged) {
  return unchanged ? nb::borrow(x) : wrap_tensor(tensor);
}

PyObject* carry_out_decision(PyObject* x, const LearntTarget& t, const ConvertRequest& request, Decision& d,
                             PyObject* importer) {
  if (d.return_input) return Py_NewRef(x);
  if (d.via == Via::direct) {
    if (PyObject* out = call_importer(importer, x, false)) return out;
    if (!PyErr_ExceptionMatches(PyExc_Exception)) return nullptr;
    PyErr_Clear();
    d = decide(x, t, request, importer, false);
  }
  const ConvertPlan& p = d.plan;
  const bool as_imported = hands_imported_tensor(p);
  const bool unchanged = as_imported && d.imported->source != nullptr;
  std::optional<Tensor> planned;
  if (!as_imported) planned = planned_tensor(d.imported->tensor(), p);
  const Tensor& tensor = planned ? *planned : d.imported->tensor();
  const bool copy_false = request.copy == false && t.hand.copy_keyword;
  switch (d.via) {
    case Via::dlbridge:
      return tensor_object(x, tensor, unchanged).release().ptr();
    case Via::exchange_api:
      if (PyObject* out = hand_over(t.hand.api, tensor)) return out;
      // The table refused what the importer may take: the importer decides.
      if (!PyErr_ExceptionMatches(PyExc_Exception)) return nullptr;
      PyErr_Clear();
      break;
    case Via::extension: {
      nb::object dtype = extension_dtype(t, tensor.view().dtype());
      return t.hand.extension_hand_over(tensor_object(x, tensor, unchanged), dtype).release().ptr();
    }
    case Via::adapter: {
      nb::object copy_arg = request.copy ? nb::object(nb::bool_(*request.copy)) : nb::object(nb::none());
      return t.hand.adapter(tensor_object(x, tensor, unchanged), copy_arg).release().ptr();
    }
    case Via::capsule: {
      nb::object capsule = make_capsule(tensor, ExportFormat::legacy, 0);
      return call_importer(importer, capsule.ptr(), false);
    }
    case Via::importer:
    case Via::input:
    case Via::direct:  // re-decided above when the importer refused x itself
      break;
  }
  nb::object arg = tensor_object(x, tensor, unchanged);
  return call_importer(importer, arg.ptr(), copy_false);
}

// One call of convert or plan_convert: the target learnt, the importer
// current, the decision made; carried out when `run`.
template <typename Finish>
PyObject* convert_call(PyObject* x, PyObject* to, const ConvertRequest& request, Finish&& finish) {
  if (installed_targets.get() == nullptr) throw nb::type_error("convert: dlbridge.convert is not set up.");
  TargetRef target = PyUnicode_CheckExact(to) ? find_target(x, to) : learn_target(to);
  nb::object importer;
  if (!target->to_dlbridge) {
    importer = nb::steal(current_importer(*target));
    if (!importer.is_valid()) {
      // The module in sys.modules was replaced: learn the target afresh.
      if (PyErr_Occurred()) throw nb::python_error();
      if (PyUnicode_CheckExact(to)) forget(target.get());
      target = learn_target(to);
      importer = nb::steal(current_importer(*target));
      if (!importer.is_valid()) throw nb::python_error();
    }
  }
  Decision d = decide(x, *target, request, importer.ptr(), true);
  return finish(x, *target, d, importer.ptr());
}

std::optional<bool> alias_from_python(PyObject* value) {
  if (!PyBool_Check(value))
    throw nb::type_error(("alias_readonly must be True, False or None, got " +
                          py::type_name_of(value) + ".")
                             .c_str());
  return value == Py_True;
}

ConvertRequest parse_request(const char* function, PyObject* const* args, Py_ssize_t nargsf, PyObject* kwnames,
                             int positional) {
  static PyObject* const names[] = {interned("device"), interned("copy"), interned("alias_readonly")};
  const Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  if (nargs != positional)
    throw nb::type_error((std::string(function) + "() takes exactly two positional arguments (" +
                          std::to_string(nargs) + " given).")
                             .c_str());
  PyObject* values[3] = {Py_None, Py_None, Py_None};
  if (kwnames != nullptr) match_keywords(function, names, 3, args + positional, kwnames, values);
  ConvertRequest request;
  request.device = values[0];
  if (values[1] != Py_None) request.copy = copy_from_python(values[1]);
  if (values[2] != Py_None) request.alias_readonly = alias_from_python(values[2]);
  if (values[0] != Py_None) (void)dl_device_from_python(values[0]);  // a bad device is refused first
  return request;
}

// convert of one array; the walker calls it for each leaf (_convert_leaf).
PyObject* convert_leaf_entry(PyObject*, PyObject* const* args, Py_ssize_t nargsf, PyObject* kwnames) noexcept {
  return python_boundary<PyObject*>(nullptr, [&]() -> PyObject* {
    const ConvertRequest request = parse_request("convert", args, nargsf, kwnames, 2);
    return convert_call(args[0], args[1], request,
                        [&](PyObject* x, const LearntTarget& t, Decision& d, PyObject* importer) {
                          return carry_out_decision(x, t, request, d, importer);
                        });
  });
}

PyObject* convert_entry(PyObject* self, PyObject* const* args, Py_ssize_t nargsf, PyObject* kwnames) noexcept {
  // Structures of arrays go to the package's walker (structures.hpp).
  if (walks_first(args, nargsf, kwnames)) return walk_structure(Walker::convert, args, nargsf, kwnames);
  PyObject* out = convert_leaf_entry(self, args, nargsf, kwnames);
  return out != nullptr ? out : walk_after_refusal(Walker::convert, args, nargsf, kwnames);
}

PyMethodDef convert_leaf_def = {
    "_convert_leaf", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(convert_leaf_entry)),
    METH_FASTCALL | METH_KEYWORDS, "convert of one array, never walked as a structure (dlbridge.structures)."};

PyMethodDef convert_def = {
    "convert", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(convert_entry)),
    METH_FASTCALL | METH_KEYWORDS,
    "convert(x, to, /, *, device=None, copy=None, alias_readonly=None, keep_non_arrays=False)\n--\n\n"
    "Hand x to `to` (a library name of dlbridge.libraries.TARGETS, \"dlbridge\", or a module or "
    "callable with from_dlpack) with the least work the target accepts: x itself when it is "
    "already the target's array, zero-copy where nothing can be written through the result into "
    "memory that must not change, otherwise exactly one copy (copy=None); copy=True always hands "
    "over one private, writable copy; copy=False never copies and refuses with a coded error. "
    "A torch tensor that requires grad is handed over as its detached, read-only view (no "
    "warning; docs/convert.md). "
    "alias_readonly=True (or, when None, an enclosing `with dlbridge.alias_readonly():`) accepts that "
    "read-only or writability-unknown memory reaches a target that cannot see READ_ONLY zero-copy, "
    "exactly as the target's own from_dlpack would hand it over: never write through such a result. "
    "dlbridge.plan_convert(x, to) says what convert would do and why. x may also be a structure: "
    "nested dicts, lists, tuples and named tuples of arrays, an Arrow Table or RecordBatch (a dict of "
    "columns), or a JAX pytree node where JAX is imported; each array is converted as a call of its own, "
    "and a leaf that is not an array is refused (NotAnArrayError, a TypeError too, naming its path) unless "
    "keep_non_arrays=True."};

// What plan_convert returns: the plan in words.
struct PlanSummary {
  std::string target;
  std::string action;  // "return_input" | "hand_over" | "hand_over_extension"
  std::string copy;    // "none" | "dlbridge" | "target"
  std::vector<std::string> reasons;
  std::string why;
  std::string via;
  bool unpack = false;
  bool host_alias = false;
  bool alias_readonly = false;
};

PlanSummary summarise(const LearntTarget& t, const Decision& d) {
  PlanSummary s;
  s.target = t.plan_target.name;
  s.via = via_name(d.via);
  if (d.return_input) {
    s.action = "return_input";
    s.copy = "none";
    return s;
  }
  const ConvertPlan& p = d.plan;
  s.action = p.action == ConvertAction::hand_over_extension ? "hand_over_extension" : "hand_over";
  s.unpack = p.unpack;
  s.host_alias = p.host_alias;
  s.alias_readonly = p.alias_readonly;
  const Tensor& tensor = d.imported->tensor();
  // A copy the import made counts as dlbridge's: it was made for this call.
  s.copy = p.copy == CopyBy::dlbridge || (p.copy == CopyBy::none && (p.reasons & copies_by_import)) ? "dlbridge"
           : p.copy == CopyBy::target                                                               ? "target"
                                                                                                     : "none";
  const std::pair<uint32_t, const char*> names[] = {
      {copy_for_device, "device"},          {copy_by_producer, "producer"},
      {copy_for_lazy_view, "lazy_view"},    {copy_for_byte_order, "byte_order"},
      {copy_requested, "requested"},        {copy_for_read_only, "read_only"},
      {copy_for_layout, "layout"},          {copy_for_unpacking, "unpacking"},
      {copy_by_target_import, "target_import"}, {copy_for_alignment, "alignment"}};
  for (const auto& [bit, name] : names)
    if (p.reasons & bit) s.reasons.push_back(name);
  s.why = convert_plan_why(p, tensor.view(), d.imported->facts.writability, t.plan_target);
  return s;
}

// plan_convert of one array; the walker calls it for each leaf (_plan_convert_leaf).
PyObject* plan_convert_leaf_entry(PyObject*, PyObject* const* args, Py_ssize_t nargsf, PyObject* kwnames) noexcept {
  return python_boundary<PyObject*>(nullptr, [&]() -> PyObject* {
    const ConvertRequest request = parse_request("plan_convert", args, nargsf, kwnames, 2);
    return convert_call(args[0], args[1], request,
                        [&](PyObject* x, const LearntTarget& t, Decision& d, PyObject* importer) {
                          if (d.via != Via::direct) return nb::cast(summarise(t, d)).release().ptr();
                          // What the importer does with x is its own; the plan
                          // says what convert does where it refuses.
                          PlanSummary s = summarise(t, decide(x, t, request, importer, false));
                          s.via = via_name(Via::direct);
                          s.why = "handed to the importer as it is (Target.direct_from); if it refuses: " +
                                  (s.why.empty() ? std::string("no copy") : s.why);
                          return nb::cast(std::move(s)).release().ptr();
                        });
  });
}

PyObject* plan_convert_entry(PyObject* self, PyObject* const* args, Py_ssize_t nargsf, PyObject* kwnames) noexcept {
  // Structures of arrays go to the package's walker (structures.hpp).
  if (walks_first(args, nargsf, kwnames)) return walk_structure(Walker::plan, args, nargsf, kwnames);
  PyObject* out = plan_convert_leaf_entry(self, args, nargsf, kwnames);
  return out != nullptr ? out : walk_after_refusal(Walker::plan, args, nargsf, kwnames);
}

PyMethodDef plan_convert_leaf_def = {
    "_plan_convert_leaf", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(plan_convert_leaf_entry)),
    METH_FASTCALL | METH_KEYWORDS, "plan_convert of one array, never walked as a structure (dlbridge.structures)."};

PyMethodDef plan_convert_def = {
    "plan_convert", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(plan_convert_entry)),
    METH_FASTCALL | METH_KEYWORDS,
    "plan_convert(x, to, /, *, device=None, copy=None, alias_readonly=None, keep_non_arrays=False)\n--\n\n"
    "What dlbridge.convert(x, to, device=device, copy=copy, alias_readonly=alias_readonly) would do, and why, without handing "
    "anything over: the same decision convert carries out (x is imported to see it). Raises the "
    "coded error convert would raise. For a structure: the same structure of plans."};

}  // namespace

void bind_convert(nb::module_& m) {
  nb::class_<PlanSummary>(m, "ConversionPlan",
                          "What dlbridge.convert does with one input for one target (dlbridge.plan_convert).")
      .def_ro("target", &PlanSummary::target, "The target library's name.")
      .def_ro("action", &PlanSummary::action,
              "'return_input' (x is already the target's array), 'hand_over', or 'hand_over_extension' "
              "(through the extension package's dtype, e.g. ml_dtypes for NumPy).")
      .def_ro("copy", &PlanSummary::copy,
              "Who makes the one copy: 'none' (zero-copy), 'dlbridge', or 'target' (its own import copies).")
      .def_prop_ro("reasons",
                   [](const PlanSummary& s) {
                     nb::list out;
                     for (const std::string& r : s.reasons) out.append(nb::str(r.c_str()));
                     return nb::tuple(out);
                   },
                   "Why a copy is made: any of 'device', 'producer', 'lazy_view', 'byte_order', 'requested', "
                   "'read_only', 'layout', 'unpacking', 'target_import', 'alignment'.")
      .def_ro("why", &PlanSummary::why, "The reasons in words; empty without a copy.")
      .def_ro("via", &PlanSummary::via,
              "How the target receives it: 'input', 'direct' (x itself, to its from_dlpack), 'dlbridge', 'importer' (its from_dlpack), 'exchange_api' "
              "(its DLPack C exchange API), 'hand_over' (dlbridge's hand-over for that library), 'capsule' "
              "(a legacy capsule), 'extension'.")
      .def_ro("unpack", &PlanSummary::unpack, "dlbridge's copy stores one value per byte.")
      .def_ro("host_alias", &PlanSummary::host_alias,
              "Host-accessible memory (pinned, managed) is handed over as kDLCPU.")
      .def_ro("alias_readonly", &PlanSummary::alias_readonly,
              "Read-only (or writability-unknown) data is handed over zero-copy to a target that cannot see "
              "READ_ONLY, because the caller accepted it (alias_readonly=True or dlbridge.alias_readonly()).")
      .def_prop_ro("zero_copy", [](const PlanSummary& s) { return s.copy == "none"; },
                   "Whether the result shares x's memory.")
      .def("__repr__", [](const PlanSummary& s) {
        std::string text = "ConversionPlan(target='" + s.target + "', action='" + s.action + "', copy='" +
                           s.copy + "', via='" + s.via + "'";
        if (!s.why.empty()) text += ", why='" + s.why + "'";
        return text + ")";
      });
  add_function(m, &convert_def);
  add_function(m, &plan_convert_def);
  add_function(m, &convert_leaf_def);
  add_function(m, &plan_convert_leaf_def);
  alias_scope_var = py::context_var_new("dlbridge.alias_readonly", Py_False);
  if (alias_scope_var == nullptr) throw nb::python_error();
  m.attr("_alias_readonly_scope") = nb::borrow(alias_scope_var);
  m.def("_install_convert",
        [](nb::object targets, nb::object target_of) {
          if (!PyDict_Check(targets.ptr())) throw nb::type_error("targets must be a dict.");
          installed_targets.install(std::move(targets));
          installed_target_of.install(std::move(target_of));
          std::vector<TargetRef> learnt;  // released after unlocking
          StateLock lock(targets_mutex);
          learnt.swap(known_targets());
        },
        nb::arg("targets"), nb::arg("target_of"), "Set convert's target table (dlbridge.convert does, once).");
  m.def("_targets_changed", []() { targets_generation.fetch_add(1, std::memory_order_acq_rel); },
        "Say that convert's target table changed (libraries.TargetTable does, on every change).");
}

}  // namespace dlbridge::python
