// Host memory: aligned buffers that are never NULL. Below the tensor model
// and the device backends, which both allocate with it (the CPU backend is
// a thin layer over these functions).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "platform.hpp"
#include "../error.hpp"

namespace dlbridge {

// Cache-line alignment: what SIMD copies and most consumers prefer, and more
// than any element type needs.
inline constexpr size_t host_alignment = 64;

namespace detail {

inline constexpr size_t huge_page_size = size_t(2) << 20;

// The alignment of a host buffer of `bytes`. Large buffers are aligned to a
// huge page and advised to use them: a fresh 64 MiB copy otherwise takes ~16k
// page faults (4 KiB each), which cost more than the copy itself.
inline size_t host_buffer_alignment(int64_t bytes) noexcept {
  return size_t(bytes) >= 4 * huge_page_size ? huge_page_size : host_alignment;
}

// The size of a host buffer of `bytes`: a whole number of its alignment (as
// aligned_alloc wants), at least one.
inline size_t rounded_host_size(int64_t bytes) noexcept {
  const size_t alignment = host_buffer_alignment(bytes);
  const size_t size = (size_t(bytes) + alignment - 1) / alignment * alignment;
  return size == 0 ? alignment : size;
}

// Host memory of `bytes`, aligned, never NULL so that even an empty tensor
// has a real, unique address. Release it with std::free.
inline void* allocate_host_raw(int64_t bytes) {
  const size_t alignment = host_buffer_alignment(bytes);
  const size_t size = rounded_host_size(bytes);
  void* data = std::aligned_alloc(alignment, size);
  if (data == nullptr)
    fail(ErrorCode::out_of_memory,
         "Could not allocate " + std::to_string(bytes) + " bytes of host memory.",
         "Free memory or work on a smaller tensor.");
  if (alignment == huge_page_size) platform::advise_huge_pages(data, size);
  return data;
}

// The last freed large buffer, kept for the next allocation of exactly its
// size. The first write to a new page makes the kernel zero it: for a fresh
// 64 MiB result that is a third of a one-thread transpose into it (perf:
// clear_page_erms), and a program that copies in a loop asks for the same
// size again. One buffer only, of 8 MiB up to kept_bytes_limit, so that what
// stays after the last tensor is gone is bounded; DLBRIDGE_KEEP_FREED=0 keeps
// none. Locks are only tried: a thread that finds the slot busy allocates or
// frees as usual, so nothing here can wait, not even in a child forked while
// another thread held the lock.
class KeptBuffer {
 public:
  static constexpr size_t smallest = size_t(8) << 20;
  static constexpr size_t kept_bytes_limit = size_t(256) << 20;

  // Whether buffers of `size` (as allocate_host_raw rounds it) are kept.
  static bool keeps(size_t size) noexcept {
    return enabled() && size >= smallest && size <= kept_bytes_limit;
  }

  // The kept buffer if it has exactly `size` bytes, else NULL.
  void* take(size_t size) noexcept {
    std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
    if (!lock.owns_lock() || data_ == nullptr || size_ != size) return nullptr;
    size_ = 0;
    return std::exchange(data_, nullptr);
  }

  // Keeps `data` (from allocate_host_raw, of `size` bytes), freeing the
  // buffer it replaces; frees `data` where it cannot be kept.
  void give(void* data, size_t size) noexcept {
    void* dropped = data;
    {
      std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
      if (lock.owns_lock()) {
        dropped = std::exchange(data_, data);
        size_ = size;
      }
    }
    std::free(dropped);
  }

  // The process's one slot. Never destroyed: tensors are freed during
  // interpreter and static teardown too.
  static KeptBuffer& instance() noexcept {
    static KeptBuffer* slot = new KeptBuffer();
    return *slot;
  }

 private:
  static bool enabled() noexcept {
    static const bool on = [] {
      const char* env = std::getenv("DLBRIDGE_KEEP_FREED");
      return env == nullptr || std::string_view(env) != "0";
    }();
    return on;
  }

  std::mutex mutex_;
  void* data_ = nullptr;
  size_t size_ = 0;
};

// The same, freed when the last owner goes (or kept: KeptBuffer).
inline std::shared_ptr<void> allocate_host(int64_t bytes) {
  const size_t size = rounded_host_size(bytes);
  if (!KeptBuffer::keeps(size))
    return std::shared_ptr<void>(allocate_host_raw(bytes), [](void* p) { std::free(p); });
  void* data = KeptBuffer::instance().take(size);
  if (data == nullptr) data = allocate_host_raw(bytes);
  return std::shared_ptr<void>(data, [size](void* p) { KeptBuffer::instance().give(p, size); });
}

}  // namespace detail

}  // namespace dlbridge
