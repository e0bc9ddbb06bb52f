// Readers for objects that describe their memory without DLPack: the buffer
// protocol, __array_interface__ and __cuda_array_interface__.
#pragma once

#include <optional>
#include <vector>

#include "bindings.hpp"

namespace dlbridge::python {

// What every array interface (host or CUDA, version 3) says, read and
// checked; strides are in elements, empty for C order.
struct ArrayInterface {
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  uintptr_t address = 0;
  bool readonly = false;
  uint64_t flags = 0;  // IS_SUBBYTE_TYPE_PADDED for one-per-byte sub-byte types
};

// name is the attribute, for messages. dtype_override replaces the typestr
// for extension dtypes that it can only call opaque bytes ("<V2").
ArrayInterface read_array_interface(nb::handle interface, const char* name,
                                    std::optional<DType> dtype_override = std::nullopt);

// A tensor over memory that x owns, on device; x stays alive while any
// view or export of the tensor does. Interface readers pass (object, dict):
// the dict an interface property returns may be what owns the memory.
Tensor tensor_over_object(nb::handle x, const ArrayInterface& fields, Device device);

// DLPack has no byte order. UnsupportedDTypeError naming the fix for data
// in the non-native one (dlbridge's hosts are little-endian).
[[noreturn]] void fail_byte_order(const std::string& what);

// The memory x describes through the buffer protocol, or through the
// __array_interface__ dict it returned, as a Tensor owned by x.
Tensor tensor_from_buffer(nb::handle x);
Tensor tensor_from_array_interface(nb::handle x, nb::handle interface);

}  // namespace dlbridge::python
