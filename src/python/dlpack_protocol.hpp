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

// import_object's answer once x's producer raised `refusal` (import.cpp;
// called while it is the exception being handled): a fallback import (extension dtypes), or
// the refusal raised again as the coded error it stands for (any Exception
// of the producer; KeyboardInterrupt and SystemExit pass as they are).
Tensor after_producer_refusal(nb::handle x, ProducerType& known, const ExchangeRequest& request,
                              nb::python_error& refusal);

// import_object's answer once reading x failed, called while that failure
// is the exception being handled: pyarrow's second look for an Arrow
// object, else the failure rethrown. The C++ casters read arguments through
// it too.
Tensor after_import_failure(nb::handle x, const ExchangeRequest& request);

// The per-producer rules decided for x's type when it was learnt.
const ProducerPolicy& policy_of(const ProducerType& known) noexcept;

// The tensor x exports for request, owned and validated. Producers of
// device memory are given their family's default stream.
ManagedTensor import_dlpack(nb::handle x, ProducerType& known, ExchangeRequest request);

// tensor_from_managed(import_dlpack(x, known, request)), with a versioned
// tensor from a plain producer adopted in its storage (no move of its view).
Tensor import_dlpack_tensor(nb::handle x, ProducerType& known, const ExchangeRequest& request);

// The capsule of a plain producer (no C exchange API, asked with
// max_version alone, no device memory served so far) for a request that
// asks nothing of it; an invalid object when x's type is not asked that way.
// import_dlpack_tensor adopts it; the C++ casters validate its struct in
// place (caster_api.cpp). Device memory in it must be dropped and asked for
// with ask_again_with_stream.
nb::object plain_capsule(nb::handle x, ProducerType& known, const ExchangeRequest& request);
// Device memory after all: the type is marked as serving devices, and x is
// asked again with that device's default stream.
ManagedTensor ask_again_with_stream(nb::handle x, ProducerType& known, const ExchangeRequest& request,
                                    StreamArg stream);

}  // namespace dlbridge::python
