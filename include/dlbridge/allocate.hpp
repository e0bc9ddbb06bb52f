// Host allocation of new compact tensors, owned by the ManagedTensor that
// describes them (the deleter frees the buffer).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "error.hpp"
#include "export.hpp"
#include "layout.hpp"
#include "tensor_view.hpp"

namespace dlbridge {

// Cache-line alignment: what SIMD copies and most consumers prefer, and more
// than any element type needs.
inline constexpr size_t host_alignment = 64;

namespace detail {

// Host memory of `bytes`, aligned, never NULL so that even an empty tensor
// has a real, unique address. Release it with std::free.
inline void* allocate_host_raw(int64_t bytes) {
  // Large buffers are aligned to a huge page and advised to use them: a
  // fresh 64 MiB copy otherwise takes ~16k page faults (4 KiB each), which
  // cost more than the copy itself.
  constexpr size_t huge_page = size_t(2) << 20;
  const size_t alignment = size_t(bytes) >= 4 * huge_page ? huge_page : host_alignment;
  // aligned_alloc wants a multiple of the alignment.
  size_t size = (size_t(bytes) + alignment - 1) / alignment * alignment;
  void* data = std::aligned_alloc(alignment, size == 0 ? alignment : size);
  if (data == nullptr)
    fail(ErrorCode::out_of_memory,
         "Could not allocate " + std::to_string(bytes) + " bytes of host memory.",
         "Free memory or work on a smaller tensor.");
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (alignment == huge_page) ::madvise(data, size, MADV_HUGEPAGE);
#endif
  return data;
}

// The same, freed when the last owner goes.
inline std::shared_ptr<void> allocate_host(int64_t bytes) {
  return std::shared_ptr<void>(allocate_host_raw(bytes), [](void* p) { std::free(p); });
}

}  // namespace detail

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
