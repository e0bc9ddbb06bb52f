// The one registry of producer types: everything dlbridge learns about a type
// whose objects have __dlpack__, learnt once per type and read on every
// import of its objects, by from_dlpack, convert and the C++ casters alike
// (they all read through import_object). Nothing else keeps facts about
// producer types.
#pragma once

#include <atomic>

#include "bindings.hpp"

namespace dlbridge::python {

// How much of the DLPack keyword protocol a producer type accepts, learnt
// from its first call: probing by TypeError on every call would raise and
// catch an exception each time (dlpack_protocol.cpp).
enum class ProtocolLevel : uint8_t { unknown, max_version_only, no_keywords };

// Whose C++-side rules apply to a producer type (src/python/libraries/).
enum class ProducerFamily : uint8_t { generic, torch };

struct ProducerType {
  // What the package's library modules state of the type when it is learnt
  // (libraries.producer_facts, which decides by the real class objects,
  // never by names); fixed from then on.
  ProducerFamily family = ProducerFamily::generic;
  // Its library states that its legacy capsules carry writable memory
  // (LEGACY_EXPORT_WRITABLE in python/dlbridge/libraries/<name>.py).
  bool legacy_writable = false;
  // Its library states that the memory of its capsules lives only as long
  // as the array (mlx 0.29): it is read through the buffer protocol, whose
  // view holds the array (export_keeps_memory() in libraries/<name>.py).
  bool export_keeps_memory = true;
  // Its C exchange API where dlbridge trusts it (libraries/torch.cpp), else
  // NULL: __dlpack__ is asked.
  const abi::DLPackExchangeAPI* exchange_api = nullptr;

  // What its calls taught, written by whichever thread made them: each is
  // one value that moves one way (unknown to a level, false to true), so
  // relaxed atomics suffice, and with the GIL they cost a plain load.
  std::atomic<ProtocolLevel> level{ProtocolLevel::unknown};
  // Has delivered device memory: from then on __dlpack_device__ is asked
  // first so that a stream can be passed. CPU-only types never pay for it.
  std::atomic<bool> serves_devices{false};

  // __dlpack__ as the type's MRO holds it, and the version tag it was read
  // at (dlpack_protocol.cpp: dlpack_method; the abi3 build, which cannot
  // read version tags, stores 1 once it decided, for an immutable type).
  // Borrowed, which only the GIL keeps valid: a free-threaded build never
  // fills it.
  PyObject* method = nullptr;
  unsigned int method_tag = 0;

  // A weak reference whose callback drops this entry when the type dies, so
  // the registry keeps no class alive and a later type at the same address
  // starts afresh.
  nb::object type_watch;
};

// What dlbridge knows of x's type, learnt now if new; NULL when x has no
// __dlpack__ at all. The entry lives as long as the type, so as long as x.
ProducerType* find_producer(nb::handle x);
// The entry of `type` when it is the type find_producer answered last; else
// NULL. import_object asks it first: such a type is neither a
// dlbridge.Tensor nor a capsule (those never reach find_producer), so the
// checks for them can be skipped.
ProducerType* recent_producer(PyTypeObject* type) noexcept;

// dlbridge._core._install_producer_facts.
void bind_producer_types(nb::module_& m);

}  // namespace dlbridge::python
