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
  // Python, so it is used only where dlbridge makes those checks itself.
  bool trust_exchange_api = false;
};

// Decided once per type: torch.Tensor and subclasses that keep its
// __dlpack__ are the torch family; everything else is generic.
ProducerPolicy policy_for_type(PyTypeObject* type);

// torch's conjugate and negative bits mark a view whose memory holds the
// unconjugated (or unnegated) values; neither __dlpack__ (neg) nor the C
// exchange API (both) says so. Returns the object to import instead (a
// resolved copy) or none when nothing is lazy; copy=False is refused with
// CopyRequiredError.
nb::object resolve_lazy_state(nb::handle x, const ProducerPolicy& policy,
                              const ExchangeRequest& request);

// A producer's own BufferError that is not a DLPackError, raised again as
// the coded dlbridge error it stands for (ProducerError when dlbridge
// cannot tell), with the producer's exception as __cause__.
[[noreturn]] void raise_producer_refusal(nb::handle x, const ProducerPolicy& policy,
                                         nb::python_error& refusal);

}  // namespace dlbridge::python
