// Host memory: aligned buffers that are never NULL. Below the tensor model
// and the device backends, which both allocate with it (the CPU backend is
// a thin layer over these functions).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "platform.hpp"
#include "../error.hpp"

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
  if (alignment == huge_page) platform::advise_huge_pages(data, size);
  return data;
}

// The same, freed when the last owner goes.
inline std::shared_ptr<void> allocate_host(int64_t bytes) {
  return std::shared_ptr<void>(allocate_host_raw(bytes), [](void* p) { std::free(p); });
}

}  // namespace detail

}  // namespace dlbridge
