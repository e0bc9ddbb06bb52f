// What dlbridge knows about particular producers beyond the DLPack protocol:
// whose C exchange API it trusts, which lazy state it must resolve itself,
// and how their refusals map to dlbridge's error codes. The rules and the
// reasons are in docs/boundary.md.
#pragma once

#include "bindings.hpp"

namespace dlbridge::python {

enum class ProducerFamily : uint8_t { generic, torch };

struct ProducerPolicy {
  ProducerFamily family = ProducerFamily::generic;
  // The C exchange API skips whatever the producer's __dlpack__ checks in
  // Python, so it is used only where dlbridge makes those checks itself,
  // and only the table of the library's real class (never one a subclass
  // or a look-alike class sets).
  const abi::DLPackExchangeAPI* exchange_api = nullptr;
  // The library states that its legacy capsules carry writable memory
  // (python/dlbridge/libraries/<name>.py: LEGACY_EXPORT_WRITABLE).
  bool legacy_writable = false;
};

// Decided once per type, from what the package's library modules say the
// type is (libraries.producer_facts: the real class objects, never names):
// torch.Tensor and subclasses that keep its __dlpack__ are the torch
// family; everything else is generic.
ProducerPolicy policy_for_type(PyTypeObject* type);
// libraries.producer_facts(type) -> (library name, real class, legacy
// writable) | None, installed by the package; before that every type is
// generic.
void install_producer_facts(nb::object facts);

// What to import instead of a torch tensor whose meaning is not its plain
// memory: its conjugate and negative bits mark a view whose memory holds the
// unconjugated (or unnegated) values, which neither __dlpack__ (neg) nor the
// C exchange API (both) says, so a resolved copy is imported (copy=False is
// refused with CopyRequiredError); a tensor that requires grad is imported
// as its detached, read-only view (torch's __dlpack__ refuses it, since a
// write would change a tensor autograd tracks; docs/boundary.md).
struct LazyState {
  nb::object replacement;  // invalid: import x itself
  bool copied = false;     // replacement is a new buffer
  bool read_only = false;  // the import must refuse writes
};
LazyState resolve_lazy_state(nb::handle x, const ProducerPolicy& policy, const ExchangeRequest& request);

// A producer's own BufferError that is not a DLPackError, raised again as
// the coded dlbridge error it stands for (ProducerError when dlbridge
// cannot tell), with the producer's exception as __cause__.
[[noreturn]] void raise_producer_refusal(nb::handle x, const ProducerPolicy& policy,
                                         nb::python_error& refusal);

}  // namespace dlbridge::python
