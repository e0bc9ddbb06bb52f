// Calling a producer's __dlpack__ (or its C exchange API) the way it
// understands, learnt once per producer type.
#pragma once

#include "bindings.hpp"
#include "producer_policy.hpp"

namespace dlbridge::python {

struct ProducerType;

// What dlbridge knows of x's type, learnt now if new; NULL when x has no
// __dlpack__ at all.
ProducerType* find_producer(nb::handle x);
// What find_producer returned for the last type it answered, while `type`
// is that type, unchanged; else NULL. import_object asks it first: such a
// type is neither a dlbridge.Tensor nor a capsule (those never reach
// find_producer), so the checks for them can be skipped.
ProducerType* recent_producer(PyTypeObject* type) noexcept;

// The per-producer rules decided for x's type when it was learnt.
const ProducerPolicy& policy_of(const ProducerType& known) noexcept;

// The tensor x exports for request, owned and validated. Producers of
// device memory are given their family's default stream.
ManagedTensor import_dlpack(nb::handle x, ProducerType& known, ExchangeRequest request);

// tensor_from_managed(import_dlpack(x, known, request)), with a versioned
// tensor from a plain producer adopted in its storage (no move of its view).
Tensor import_dlpack_tensor(nb::handle x, ProducerType& known, const ExchangeRequest& request);

}  // namespace dlbridge::python
