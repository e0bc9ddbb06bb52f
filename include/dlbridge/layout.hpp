// Layout arithmetic for strided tensors: element counts, the byte range a
// view touches, contiguity and canonical strides. Every product and sum is
// overflow-checked, because shapes and strides come from foreign code.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>

#include "compiler.hpp"
#include "dtype.hpp"
#include "error.hpp"

namespace dlbridge {

// NumPy's limit too; a bound keeps a hostile ndim from walking off a buffer.
inline constexpr int32_t max_ndim = 64;

namespace detail {

// Shape or strides of up to max_ndim dims, inline for the common small case
// so that a view costs no allocation.
class SmallDims {
 public:
  static constexpr int32_t inline_capacity = 6;

  SmallDims() = default;
  SmallDims(const int64_t* values, int32_t n) { assign(values, n); }
  SmallDims(const SmallDims& other) { assign(other.data(), other.size_); }
  SmallDims& operator=(const SmallDims& other) {
    if (this != &other) assign(other.data(), other.size_);
    return *this;
  }
  SmallDims(SmallDims&& other) noexcept { *this = std::move(other); }
  SmallDims& operator=(SmallDims&& other) noexcept {
    if (this == &other) return *this;
    size_ = other.size_;
    heap_ = std::move(other.heap_);
    // The whole inline buffer, a fixed size the compiler copies in a few
    // moves instead of a call to memcpy (every import moves a view once);
    // bytes past size_ are copied as bytes and never read.
    if (!heap_) std::memcpy(inline_, other.inline_, sizeof(inline_));
    other.size_ = 0;
    return *this;
  }

  // values may be NULL: the dims are then left for the caller to fill.
  void assign(const int64_t* values, int32_t n) {
    size_ = n;
    if (n > inline_capacity) {
      heap_.reset(new int64_t[size_t(n)]);
    } else {
      heap_.reset();
    }
    if (values != nullptr && n > 0)
      std::memcpy(data(), values, sizeof(int64_t) * size_t(n));
  }

  // n (at most inline_capacity) dims in the inline buffer, returned for the
  // caller to fill.
  int64_t* assign_inline(int32_t n) noexcept {
    size_ = n;
    heap_.reset();
    return inline_;
  }

  int32_t size() const noexcept { return size_; }
  int64_t* data() noexcept { return heap_ ? heap_.get() : inline_; }
  const int64_t* data() const noexcept { return heap_ ? heap_.get() : inline_; }
  int64_t& operator[](int32_t i) noexcept { return data()[i]; }
  int64_t operator[](int32_t i) const noexcept { return data()[i]; }

 private:
  int32_t size_ = 0;
  // Left uninitialised: only the first size_ entries are ever read.
  int64_t inline_[inline_capacity];
  std::unique_ptr<int64_t[]> heap_;
};

}  // namespace detail

// Shape or strides as Python writes a tuple of ints ("()", "(3,)", "(2, 3)"),
// so that a C++ message and a Python repr of the same tensor agree. The one
// formatter of dims; every message about a shape uses it.
inline std::string dims_text(int32_t ndim, const int64_t* dims) {
  std::string text = "(";
  for (int32_t d = 0; d < ndim; ++d) {
    if (d) text += ", ";
    text += std::to_string(dims[d]);
  }
  return text + (ndim == 1 ? ",)" : ")");
}

// Row-major (C order) strides in elements for shape; out has ndim slots.
inline void compact_strides(int32_t ndim, const int64_t* shape, int64_t* out) {
  int64_t step = 1;
  for (int32_t d = ndim - 1; d >= 0; --d) {
    out[d] = step;
    // Once a product would overflow the tensor cannot exist anyway; the
    // element count check reports it, so saturate instead of wrapping.
    if (shape[d] > 1 && detail::mul_overflow(step, shape[d], step))
      step = INT64_MAX;
  }
}

// The number of elements, or std::nullopt on overflow. Negative dims must be
// rejected before calling this.
inline std::optional<int64_t> element_count(int32_t ndim, const int64_t* shape) {
  for (int32_t d = 0; d < ndim; ++d)
    if (shape[d] == 0) return 0;  // a zero dim wins over overflowing others
  int64_t count = 1;
  for (int32_t d = 0; d < ndim; ++d)
    if (detail::mul_overflow(count, shape[d], count)) return std::nullopt;
  return count;
}

enum class Order {
  c,  // row-major: the last dimension varies fastest
  f,  // column-major (Fortran): the first dimension varies fastest
};

// Contiguous in `order`, in the sense that matters for aliasing: dims of
// size 1 may carry any stride, and a size-0 tensor is contiguous whatever
// its strides. The one definition; the two names below spell its orders.
inline bool is_contiguous(int32_t ndim, const int64_t* shape, const int64_t* strides,
                          Order order) {
  for (int32_t d = 0; d < ndim; ++d)
    if (shape[d] == 0) return true;
  int64_t expected = 1;
  for (int32_t k = 0; k < ndim; ++k) {
    const int32_t d = order == Order::c ? ndim - 1 - k : k;
    if (shape[d] == 1) continue;
    if (strides[d] != expected) return false;
    if (detail::mul_overflow(expected, shape[d], expected)) return false;
  }
  return true;
}

inline bool is_c_contiguous(int32_t ndim, const int64_t* shape, const int64_t* strides) {
  return is_contiguous(ndim, shape, strides, Order::c);
}

inline bool is_f_contiguous(int32_t ndim, const int64_t* shape, const int64_t* strides) {
  return is_contiguous(ndim, shape, strides, Order::f);
}

// What a consumer accepts of a layout, as data (dlbridge.convert keeps one
// per target library). Size-1 dims never decide: DLPack lets them carry
// any stride, and a size-0 tensor fits every rule.
enum class StrideRule {
  any,               // every valid layout
  nonnegative,       // no negative strides
  row_major,         // C-contiguous
  permuted_compact,  // dense: a permutation of the dims of a compact layout
};

inline bool strides_fit(int32_t ndim, const int64_t* shape, const int64_t* strides,
                        StrideRule rule) {
  if (ndim < 0 || ndim > max_ndim) return false;
  if (rule == StrideRule::any) return true;
  for (int32_t d = 0; d < ndim; ++d)
    if (shape[d] == 0) return true;
  if (rule == StrideRule::row_major) return is_c_contiguous(ndim, shape, strides);
  if (rule == StrideRule::nonnegative) {
    for (int32_t d = 0; d < ndim; ++d)
      if (shape[d] != 1 && strides[d] < 0) return false;
    return true;
  }
  // Dense: visiting dims from the largest stride down must give a compact layout.
  struct Dim {
    int64_t extent, stride;
  };
  Dim dims[max_ndim];
  int32_t n = 0;
  for (int32_t d = 0; d < ndim; ++d)
    if (shape[d] != 1) dims[n++] = {shape[d], strides[d]};
  std::sort(dims, dims + n, [](const Dim& a, const Dim& b) { return a.stride > b.stride; });
  int64_t expected = 1;
  for (int32_t i = n - 1; i >= 0; --i) {
    if (dims[i].stride != expected) return false;
    if (detail::mul_overflow(expected, dims[i].extent, expected)) return false;
  }
  return true;
}

// The bytes a view touches relative to the address of element 0: the
// half-open range [low, high). For packed sub-byte types, bit positions are
// rounded outward to whole bytes.
struct ByteExtent {
  int64_t low = 0;
  int64_t high = 0;
  int64_t bytes() const noexcept { return high - low; }
};

// std::nullopt when any intermediate overflows int64: such a view cannot be
// addressed and must be refused. size must be the element count.
inline std::optional<ByteExtent> byte_extent(int32_t ndim, const int64_t* shape,
                                             const int64_t* strides,
                                             DType dtype, bool subbyte_padded,
                                             int64_t size) {
  if (size == 0) return ByteExtent{0, 0};
  // In units of elements first; multiplied by the element width at the end.
  int64_t low = 0, high = 0;
  for (int32_t d = 0; d < ndim; ++d) {
    if (shape[d] == 1) continue;
    int64_t reach = 0;
    if (detail::mul_overflow(strides[d], shape[d] - 1, reach)) return std::nullopt;
    int64_t& side = reach < 0 ? low : high;
    if (detail::add_overflow(side, reach, side)) return std::nullopt;
  }
  const bool packed = dtype.is_subbyte() && !subbyte_padded;
  const int64_t unit = packed ? int64_t(dtype.element_bits())
                              : int64_t(dtype.element_bytes());
  int64_t lo = 0, hi = 0;
  if (detail::mul_overflow(low, unit, lo) ||
      detail::mul_overflow(high, unit, hi) ||
      detail::add_overflow(hi, unit, hi))
    return std::nullopt;
  if (packed) {
    // Bits to bytes, rounding low down and high up. Division first: adding
    // 7 (or negating low) could overflow within 8 of the int64 limits.
    lo = lo / 8 - (lo % 8 < 0 ? 1 : 0);
    hi = hi / 8 + (hi % 8 > 0 ? 1 : 0);
  }
  // bytes() and address checks compute high - low and -low; a range that
  // wide cannot be addressed anyway.
  int64_t width = 0;
  if (detail::sub_overflow(hi, lo, width)) return std::nullopt;
  return ByteExtent{lo, hi};
}

// Bytes of a compact tensor of count elements: count * element_bytes, or
// ceil(count * bits * lanes / 8) for packed sub-byte types.
inline std::optional<int64_t> compact_nbytes(int64_t count, DType dtype,
                                             bool subbyte_padded) {
  int64_t out = 0;
  if (dtype.is_subbyte() && !subbyte_padded) {
    if (detail::mul_overflow(count, int64_t(dtype.element_bits()), out) ||
        detail::add_overflow(out, int64_t(7), out))
      return std::nullopt;
    return out / 8;
  }
  if (detail::mul_overflow(count, int64_t(dtype.element_bytes()), out))
    return std::nullopt;
  return out;
}

}  // namespace dlbridge
