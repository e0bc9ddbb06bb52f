// The producer-type registry (producer_types.hpp): a map from type to what
// is known of it, weak per type, plus the entry of the type answered last.
#include <nanobind/stl/string.h>

#include <memory>
#include <unordered_map>

#include "libraries/libraries.hpp"
#include "producer_types.hpp"
#include "state_lock.hpp"

namespace dlbridge::python {

namespace {

// libraries.producer_facts(type) -> (library name, real class, legacy
// writable, export keeps memory) | None, installed by the package; before that every type is
// generic.
Installed producer_facts;

// Only types with __dlpack__ are entered, so a hit also answers "is this a
// DLPack producer" without an attribute lookup. Entries are held by pointer:
// one stays where it is while the map grows, and a caller keeps using it
// after the lock is released (its type, held by the object being read,
// cannot die meanwhile).
struct Registry {
  std::unordered_map<PyTypeObject*, std::unique_ptr<ProducerType>> types;
  // The type find_producer answered last: a program converts the same kind
  // of array over and over. Cleared when that type dies, before another
  // type can take its address.
  PyTypeObject* last_type = nullptr;
  ProducerType* last_known = nullptr;
};
// Made when the extension loads and never destroyed: types die during
// shutdown too.
Registry* const registry_state = new Registry();
Registry& registry() { return *registry_state; }
StateMutex registry_mutex;

void forget_producer(PyTypeObject* type) noexcept {
  std::unique_ptr<ProducerType> gone;  // released after unlocking: it holds a Python reference
  {
    StateLock lock(registry_mutex);
    Registry& r = registry();
    auto found = r.types.find(type);
    if (found != r.types.end()) {
      gone = std::move(found->second);
      r.types.erase(found);
    }
    if (r.last_type == type) {
      r.last_type = nullptr;
      r.last_known = nullptr;
    }
  }
}

// What the package's library modules state of the type.
void learn_library_facts(ProducerType& known, PyTypeObject* type) {
  PyObject* facts_of = producer_facts.get();
  if (facts_of == nullptr) return;
  PyObject* args[] = {reinterpret_cast<PyObject*>(type)};
  nb::object facts = nb::steal(PyObject_Vectorcall(facts_of, args, 1, nullptr));
  if (!facts.is_valid()) throw nb::python_error();
  if (facts.is_none()) return;  // generic: __dlpack__ only
  nb::tuple f = nb::borrow<nb::tuple>(facts);
  known.legacy_writable = nb::cast<bool>(f[2]);
  known.export_keeps_memory = nb::cast<bool>(f[3]);
  if (utf8_of(f[0]) == torch::name) {
    known.family = ProducerFamily::torch;
    known.exchange_api = torch::trusted_exchange_api(f[1]);
  }
}

// A new entry for type, learnt outside the lock (learning calls into
// Python); a thread that entered the type meanwhile wins.
ProducerType* learn_producer(PyTypeObject* type) {
  auto entry = std::make_unique<ProducerType>();
  learn_library_facts(*entry, type);
  nb::object forget = nb::cpp_function([type](nb::handle) { forget_producer(type); });
  PyObject* watch = PyWeakref_NewRef(reinterpret_cast<PyObject*>(type), forget.ptr());
  if (watch == nullptr) throw nb::python_error();
  entry->type_watch = nb::steal(watch);
  std::unique_ptr<ProducerType> loser;  // released after unlocking
  StateLock lock(registry_mutex);
  Registry& r = registry();
  auto [slot, inserted] = r.types.try_emplace(type);
  if (inserted)
    slot->second = std::move(entry);
  else
    loser = std::move(entry);
  r.last_type = type;
  r.last_known = slot->second.get();
  return r.last_known;
}

}  // namespace

ProducerType* recent_producer(PyTypeObject* type) noexcept {
  StateLock lock(registry_mutex);
  const Registry& r = registry();
  return r.last_type == type ? r.last_known : nullptr;
}

ProducerType* find_producer(nb::handle x) {
  PyTypeObject* type = Py_TYPE(x.ptr());
  {
    StateLock lock(registry_mutex);
    Registry& r = registry();
    if (r.last_type == type) return r.last_known;
    auto found = r.types.find(type);
    if (found != r.types.end()) {
      r.last_type = type;
      r.last_known = found->second.get();
      return r.last_known;
    }
  }
  if (attribute_or_none(x, "__dlpack__").is_none()) return nullptr;
  return learn_producer(type);
}

void bind_producer_types(nb::module_& m) {
  m.def("_install_producer_facts", [](nb::object facts) { producer_facts.install(std::move(facts)); },
        nb::arg("facts"),
        "Set what the package's library modules say about a producer type (dlbridge/__init__.py does, once).");
}

}  // namespace dlbridge::python
