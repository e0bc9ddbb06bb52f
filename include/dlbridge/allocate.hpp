// New compact host tensors, owned by the ManagedTensor that describes them
// (the deleter frees the buffer). The raw host memory is platform/host_memory.hpp's.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "error.hpp"
#include "export.hpp"
#include "layout.hpp"
#include "platform/host_memory.hpp"
#include "tensor_view.hpp"

namespace dlbridge {

namespace detail {

// Bytes of a compact tensor of dtype and shape, or the invalid_argument
// that allocating one raises (on any device: see empty_on).
inline int64_t checked_compact_nbytes(DType dtype, const std::vector<int64_t>& shape,
                                      uint64_t flags) {
  validate_dtype(dtype);
  if (shape.size() > size_t(max_ndim))
    detail::fail(ErrorCode::invalid_argument,
                 "ndim " + std::to_string(shape.size()) + " exceeds " +
                     std::to_string(max_ndim) + ".");
  for (int64_t extent : shape)
    if (extent < 0)
      detail::fail(ErrorCode::invalid_argument,
                   "shape entries must be >= 0, got " + std::to_string(extent) + ".");
  const bool padded = (flags & DLBRIDGE_FLAG_IS_SUBBYTE_TYPE_PADDED) != 0;
  auto count = element_count(int32_t(shape.size()), shape.data());
  std::optional<int64_t> bytes =
      count ? compact_nbytes(*count, dtype, padded) : std::nullopt;
  if (!bytes)
    detail::fail(ErrorCode::invalid_argument,
                 "The requested tensor is larger than the address space.");
  return *bytes;
}

}  // namespace detail

// A new, writable, compact (row-major) host tensor with uninitialised
// contents. Packed sub-byte dtypes stay packed. The CPU is the only device
// this allocates on; device backends allocate their own memory.
inline ManagedTensor allocate_compact(DType dtype, const std::vector<int64_t>& shape,
                                      uint64_t flags = 0) {
  const int64_t bytes = detail::checked_compact_nbytes(dtype, shape, flags);
  std::shared_ptr<void> owner = detail::allocate_host(bytes);
  TensorView view = TensorView::from_data(owner.get(), dtype, shape, {}, Device{}, flags);
  return ManagedTensor::adopt(make_versioned(view, std::move(owner), flags));
}

}  // namespace dlbridge
