// Copies between any two layouts of one shape and dtype in host-accessible
// memory, and compact host copies of any tensor.
//
// Overlap: when the bytes src reads and the bytes dst writes intersect, the
// copy goes through a compact temporary, so the result is always as if src
// had been read completely before dst was written. (An exact alias, same
// address and strides, needs no copy at all.) dst itself must not write
// two elements to one address: that is refused, not guessed.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "../allocate.hpp"
#include "../error.hpp"
#include "../export.hpp"
#include "../managed_tensor.hpp"
#include "../platform/platform.hpp"
#include "../tensor_view.hpp"
#include "detail/byte_kernels.hpp"
#include "detail/plan.hpp"
#include "detail/subbyte.hpp"

namespace dlbridge {

struct CopyOptions {
  // Most threads one copy may use; 0 means the CPUs this thread may run on
  // (its affinity mask, so a process pinned to one CPU copies on one thread).
  unsigned max_threads = 0;
  // Each thread of a strided or transposing copy gets at least this many
  // bytes, so smaller copies stay on the calling thread. bench/copy_bench's
  // "threshold" rows on the 2-core reference machine (shared, so noisy): a
  // second thread won from ~256 KiB when the other core was idle and lost
  // below several MiB when it was busy; 4 MiB is the safe middle.
  int64_t min_bytes_per_thread = int64_t(4) << 20;
  // The same for copies that are one contiguous block. memcpy on one core
  // already runs near memory bandwidth on small machines (threads measured
  // no faster up to 64 MiB there), so only very large blocks are split; on
  // machines with many memory channels lowering this pays.
  int64_t min_contiguous_bytes_per_thread = int64_t(32) << 20;
};

namespace detail {

[[noreturn]] inline void copy_mismatch(const std::string& what) {
  fail(ErrorCode::invalid_argument, "copy_into: " + what,
       "src and dst must have the same shape, dtype and sub-byte packing.");
}

inline void check_copy_args(const TensorView& src, const TensorView& dst) {
  if (src.dtype() != dst.dtype())
    copy_mismatch("src has dtype " + dtype_name(src.dtype()) + " but dst has " +
                  dtype_name(dst.dtype()) + ".");
  bool same_shape = src.ndim() == dst.ndim();
  for (int32_t d = 0; same_shape && d < src.ndim(); ++d)
    same_shape = src.shape(d) == dst.shape(d);
  if (!same_shape)
    copy_mismatch("src has shape " + dims_text(src.ndim(), src.shape()) + " but dst has " +
                  dims_text(dst.ndim(), dst.shape()) + ".");
  if (src.packed() != dst.packed())
    copy_mismatch(std::string("src is ") + (src.packed() ? "packed" : "padded") +
                  " and dst is " + (dst.packed() ? "packed" : "padded") +
                  "; what padding bits hold is not specified, so dlbridge "
                  "does not convert between the two.");
  for (const TensorView* v : {&src, &dst})
    if (!is_host_accessible(v->device().type))
      fail(ErrorCode::device_unavailable,
           std::string("copy_into: ") + (v == &src ? "src" : "dst") +
               " lives on " + to_string(v->device()) +
               ", which the host cannot read or write directly.",
           "Copy between host-accessible tensors (cpu, cuda_host, rocm_host, "
           "cuda_managed), or use a device backend for device memory.");
  if (dst.readonly())
    fail(ErrorCode::read_only, "copy_into: dst is read-only.",
         "Copy into a writable tensor.");
  const std::string overlap = dst_overlap_problem(dst.ndim(), dst.shape(), dst.strides());
  if (!overlap.empty())
    fail(ErrorCode::unsupported_layout, "copy_into: " + overlap,
         "Copy into a tensor whose elements each have their own address.");
}

inline bool ranges_intersect(const TensorView& a, const TensorView& b) noexcept {
  const auto base_a = reinterpret_cast<uintptr_t>(a.data());
  const auto base_b = reinterpret_cast<uintptr_t>(b.data());
  const uintptr_t a_lo = base_a + uintptr_t(a.extent().low);
  const uintptr_t a_hi = base_a + uintptr_t(a.extent().high);
  const uintptr_t b_lo = base_b + uintptr_t(b.extent().low);
  const uintptr_t b_hi = base_b + uintptr_t(b.extent().high);
  return a_lo < b_hi && b_lo < a_hi;
}

inline bool same_elements(const TensorView& a, const TensorView& b) noexcept {
  if (a.data() != b.data()) return false;
  for (int32_t d = 0; d < a.ndim(); ++d)
    if (a.shape(d) > 1 && a.stride(d) != b.stride(d)) return false;
  return true;
}

// The copy most callers make, answered with one memcpy: one dtype of whole
// bytes, one shape, both compact row-major in host memory, a writable dst,
// ranges that do not meet, and too few bytes for a second thread. Every
// check of check_copy_args holds then (a compact dst writes each element to
// its own address), so none is skipped; false sends the caller to the
// general path, which raises or handles the rest. Why a separate path: the
// general checks and plan cost as much as the memcpy of a few KiB itself,
// so through them alone a small copy runs well below memcpy's speed
// (bench/copy_bench).
inline bool copy_compact_pair(const TensorView& src, const TensorView& dst,
                              const CopyOptions& options) {
  const int32_t ndim = src.ndim();
  const auto host = [](const TensorView& v) {
    return v.device().type == abi::kDLCPU || is_host_accessible(v.device().type);
  };
  if (src.dtype() != dst.dtype() || src.dtype().is_subbyte() || ndim != dst.ndim() ||
      dst.readonly() || !host(src) || !host(dst))
    return false;
  const int64_t* shape = src.shape();
  const int64_t* dst_shape = dst.shape();
  for (int32_t d = 0; d < ndim; ++d)
    if (shape[d] != dst_shape[d]) return false;
  if (src.size() == 0) return true;
  // Both compact row-major. No shape is 0 here, so the running product never
  // exceeds size(), which validation proved fits int64.
  const int64_t* src_strides = src.strides();
  const int64_t* dst_strides = dst.strides();
  int64_t expected = 1;
  for (int32_t d = ndim - 1; d >= 0; --d) {
    if (shape[d] == 1) continue;  // a size-1 dim may carry any stride
    if (src_strides[d] != expected || dst_strides[d] != expected) return false;
    expected *= shape[d];
  }
  // Equal compact layouts at one address are the same elements: nothing to do.
  if (src.data() == dst.data()) return true;
  const int64_t bytes = src.size() * int64_t(src.dtype().element_bytes());
  if (ranges_intersect(src, dst) ||
      threads_for(bytes, options.max_threads, options.min_contiguous_bytes_per_thread) > 1)
    return false;
  std::memcpy(dst.data(), src.data(), size_t(bytes));
  return true;
}

// The copy itself, on checked arguments that do not overlap.
inline void copy_checked(const TensorView& src, const TensorView& dst,
                         const CopyOptions& options) {
  if (src.packed()) {
    // Only contiguous packed copies are ever split (see copy_packed).
    copy_packed(static_cast<const unsigned char*>(src.data()),
                static_cast<unsigned char*>(dst.data()), src.dtype().element_bits(),
                gather_dims(src.ndim(), src.shape(), src.strides(), dst.strides(), 1),
                threads_for(dst.nbytes(), options.max_threads,
                            options.min_contiguous_bytes_per_thread));
    return;
  }
  // Both compact row-major and small enough for one thread: one memcpy.
  // Building the plan cost a third of a 4 KiB copy's time (bench/copy_bench).
  if (src.is_c_contiguous() && dst.is_c_contiguous()) {
    const int64_t bytes = src.size() * int64_t(src.dtype().element_bytes());
    if (threads_for(bytes, options.max_threads, options.min_contiguous_bytes_per_thread) <= 1) {
      std::memcpy(dst.data(), src.data(), size_t(bytes));
      return;
    }
  }
  const BytePlan plan = plan_byte_copy(
      static_cast<const char*>(src.data()), static_cast<char*>(dst.data()),
      int64_t(src.dtype().element_bytes()), src.ndim(), src.shape(),
      src.strides(), dst.strides(), src.size());
  const int64_t per_thread = plan.kernel == ByteKernel::contiguous
                                 ? options.min_contiguous_bytes_per_thread
                                 : options.min_bytes_per_thread;
  run_byte_plan(plan, threads_for(plan.bytes, options.max_threads, per_thread));
}

// copy_into for every pair copy_compact_pair does not take: a function of
// its own, kept out of line, so that the common case does not pay for its
// frame on every call.
DLBRIDGE_NOINLINE inline void copy_into_general(const TensorView& src, const TensorView& dst,
                              const CopyOptions& options) {
  check_copy_args(src, dst);
  if (src.size() == 0 || same_elements(src, dst)) return;
  if (!ranges_intersect(src, dst)) {
    copy_checked(src, dst, options);
    return;
  }
  const ManagedTensor temp = allocate_compact(
      src.dtype(), std::vector<int64_t>(src.shape(), src.shape() + src.ndim()),
      src.flags() & DLBRIDGE_FLAG_IS_SUBBYTE_TYPE_PADDED);
  copy_checked(src, temp.view(), options);
  copy_checked(temp.view(), dst, options);
}

}  // namespace detail

// Writes every element of src to the same index of dst. Both must be in
// host-accessible memory with equal shape, dtype and packing; src may
// broadcast (stride 0) and use any strides, dst must give every element its
// own address. Overlapping src and dst are handled (see the top of this
// file). Errors: invalid_argument (shape, dtype or packing differ),
// device_unavailable, read_only (dst), unsupported_layout (dst overlaps
// itself), out_of_memory (the temporary for an overlapping copy).
inline void copy_into(const TensorView& src, const TensorView& dst,
                      const CopyOptions& options = {}) {
  if (detail::copy_compact_pair(src, dst, options)) return;
  detail::copy_into_general(src, dst, options);
}

// A new, writable, compact row-major copy of src in 64-byte-aligned host
// memory, owned by the returned tensor (its deleter frees it). Packed
// sub-byte data stays packed; padded stays padded (the flag is carried).
// extra_flags are added to the result's flags.
inline ManagedTensor copy_to_compact(const TensorView& src,
                                     uint64_t extra_flags = DLBRIDGE_FLAG_IS_COPIED,
                                     const CopyOptions& options = {}) {
  const uint64_t flags =
      extra_flags | (src.flags() & DLBRIDGE_FLAG_IS_SUBBYTE_TYPE_PADDED);
  ManagedTensor out = allocate_compact(
      src.dtype(), std::vector<int64_t>(src.shape(), src.shape() + src.ndim()), flags);
  copy_into(src, out.view().with_flags(flags & ~uint64_t(DLBRIDGE_FLAG_READ_ONLY)), options);
  return out;
}

// How copy_unpacked widens sub-byte values to a byte.
struct UnpackOptions {
  // false: the bits above the value are zero (how ml_dtypes stores int4,
  // and what it reads back). true: signed integer types (int1 to int7)
  // copy their sign bit into them, so each byte also reads as the same
  // value as an int8; unsigned and floating-point types stay zero-extended.
  bool sign_extend = false;
};

// A new, writable, compact row-major host copy of src with one element per
// byte or more, the layout that consumers which address elements one by one
// need (NumPy with ml_dtypes stores int4 and float4_e2m1fn a byte each):
// sub-byte values each get a byte (see UnpackOptions), and
// IS_SUBBYTE_TYPE_PADDED is set; vector lanes (lanes > 1, e.g. PyTorch's FP4
// as (17, 4, 2)) become a trailing axis of that length, lane 0 first, as
// DLPack packs them from bit 0. Padded or packed sources are both read
// correctly; a padded source's padding bits are ignored. One thread.
// Errors: device_unavailable (src not host-accessible), unsupported_dtype (a
// lane wider than a byte that is not a whole number of bytes, e.g. int12).
inline ManagedTensor copy_unpacked(const TensorView& src,
                                   uint64_t extra_flags = DLBRIDGE_FLAG_IS_COPIED,
                                   const UnpackOptions& options = {}) {
  if (!is_host_accessible(src.device().type))
    detail::fail(ErrorCode::device_unavailable,
                 "copy_unpacked: src lives on " + to_string(src.device()) +
                     ", which is not available to the host.",
                 "Copy it to the host first.");
  const DType from = src.dtype();
  const unsigned bits = from.bits, lanes = from.lanes;
  if (bits > 8 && bits % 8 != 0)
    detail::fail(ErrorCode::unsupported_dtype,
                 "copy_unpacked: " + dtype_name(from) + " has lanes of " +
                     std::to_string(bits) + " bits, which neither share nor fill whole bytes.",
                 "Cast it to a standard dtype in the producer.");
  const DType to{from.code, from.bits, 1};
  std::vector<int64_t> shape(src.shape(), src.shape() + src.ndim());
  if (lanes > 1) shape.push_back(lanes);
  const uint64_t flags =
      extra_flags | (bits < 8 ? uint64_t(DLBRIDGE_FLAG_IS_SUBBYTE_TYPE_PADDED) : 0);
  ManagedTensor out = allocate_compact(to, shape, flags);
  if (src.size() == 0) return out;
  const auto* in = static_cast<const unsigned char*>(src.data());
  auto* dst = static_cast<unsigned char*>(out.view().data());
  // The result's strides in src's elements: compact, row-major. Every
  // product fits: the result's size was checked when it was allocated.
  std::vector<int64_t> dst_strides(size_t(src.ndim()), 1);
  for (int32_t d = src.ndim() - 1; d > 0; --d)
    dst_strides[size_t(d - 1)] = dst_strides[size_t(d)] * src.shape(d);
  const bool sign = options.sign_extend && from.code == abi::kDLInt;
  if (bits >= 8 || (lanes == 1 && !src.packed())) {
    // Whole-byte elements, or padded values a byte each: the byte kernels
    // move them (transposes included), and padded values are then masked
    // or sign-extended in place.
    const int64_t elem = int64_t(from.element_bytes());
    detail::run_byte_plan(
        detail::plan_byte_copy(static_cast<const char*>(src.data()), reinterpret_cast<char*>(dst),
                               elem, src.ndim(), src.shape(), src.strides(),
                               dst_strides.data(), src.size()),
        1);
    if (bits < 8) detail::extend_run(dst, dst, src.size(), bits, sign);
    return out;
  }
  // Where element 0 of src starts and how far one element step moves, in
  // bits: packed elements abut, anything else starts on its own byte.
  const int64_t step_bits =
      src.packed() ? int64_t(from.element_bits()) : int64_t(from.element_bytes()) * 8;
  detail::unpack_elements(dst, in,
                          detail::gather_dims(src.ndim(), src.shape(), src.strides(),
                                              dst_strides.data(), 1),
                          step_bits, bits, lanes, sign);
  return out;
}

// A new, writable, compact row-major host copy of src with sub-byte
// elements packed several to a byte (DLPack's default; IS_SUBBYTE_TYPE_PADDED
// clear): the reverse of copy_unpacked for one-lane types. A padded
// source's values are taken from the low bits of each element, whatever its
// padding bits hold. Packed sources and whole-byte types are copied as
// copy_to_compact copies them. Errors: device_unavailable (src not
// host-accessible), out_of_memory.
inline ManagedTensor copy_packed(const TensorView& src,
                                 uint64_t extra_flags = DLBRIDGE_FLAG_IS_COPIED) {
  if (!is_host_accessible(src.device().type))
    detail::fail(ErrorCode::device_unavailable,
                 "copy_packed: src lives on " + to_string(src.device()) +
                     ", which is not available to the host.",
                 "Copy it to the host first.");
  if (!src.dtype().is_subbyte() || src.packed())
    return copy_to_compact(src, extra_flags & ~uint64_t(DLBRIDGE_FLAG_IS_SUBBYTE_TYPE_PADDED));
  const std::vector<int64_t> shape(src.shape(), src.shape() + src.ndim());
  const uint64_t flags = extra_flags & ~uint64_t(DLBRIDGE_FLAG_IS_SUBBYTE_TYPE_PADDED);
  ManagedTensor out = allocate_compact(src.dtype(), shape, flags);
  if (src.size() == 0) return out;
  // Padded elements are a byte each: a strided source is first made compact.
  ManagedTensor compact;
  const unsigned char* values = static_cast<const unsigned char*>(src.data());
  if (!src.is_c_contiguous()) {
    compact = copy_to_compact(src, 0);
    values = static_cast<const unsigned char*>(compact.view().data());
  }
  detail::pack_run(static_cast<unsigned char*>(out.view().data()), 0, values, src.size(),
                   src.dtype().element_bits());
  return out;
}

}  // namespace dlbridge
