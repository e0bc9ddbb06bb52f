// The device side of the extension: importing __cuda_array_interface__
// through the CUDA backend. (The backends themselves are in
// include/dlbridge/backend/.)
#pragma once

#include "bindings.hpp"

namespace dlbridge::python {

// x.__cuda_array_interface__ (version 2 or 3) as a zero-copy Tensor on the
// device the runtime says owns the pointer, with the producer's "stream"
// ordered before the legacy default stream that dlbridge tensors are ready
// on. DeviceUnavailableError when no CUDA runtime or device is here.
Tensor tensor_from_cuda_array_interface(nb::handle x, nb::handle interface);

}  // namespace dlbridge::python
