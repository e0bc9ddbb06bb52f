// Asking a producer for its tensor the way its type understands: its C
// exchange API where dlbridge trusts it, else __dlpack__ with the keywords
// the type was found to take, and a stream for device memory. What is learnt
// on the way is kept in the producer-type registry (producer_types.hpp).
#pragma once

#include "bindings.hpp"
#include "producer_types.hpp"

namespace dlbridge::python {

// The struct x exports for request, taken and owned by the caller, not yet
// validated (the caller adopts it). A type known to serve device memory is
// passed its family's default stream. Device memory after all: a producer
// asked without a stream that hands over device memory, whose writes may
// still be queued, has that tensor validated and dropped, its type marked as
// serving devices, and is asked once more with the device's default stream.
TakenStruct ask_producer(nb::handle x, ProducerType& known, const ExchangeRequest& request);

}  // namespace dlbridge::python
