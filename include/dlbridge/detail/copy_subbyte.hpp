// Copies of packed sub-byte tensors (int4, FP4, FP6, ...): element i of a
// compact tensor is bits [i*bits, (i+1)*bits) of the buffer, little-bit-
// endian, and a strided view places element at offset o (in elements) at
// bit o*bits from element 0, which is bit 0 of data(). Bits outside the
// view are never changed, because another tensor may own the rest of a byte.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "copy_parallel.hpp"
#include "copy_plan.hpp"

namespace dlbridge::detail {

// Byte index and bit shift of a bit position that may be negative.
struct BitPos {
  int64_t byte;
  unsigned shift;
};
inline BitPos bit_pos(int64_t bit) noexcept {
  const int64_t byte = bit >= 0 ? bit / 8 : -((-bit + 7) / 8);
  return {byte, unsigned(bit - byte * 8)};
}

// Reads only the bytes the element occupies: the next byte may be outside
// the view's memory when the element ends on a byte boundary.
inline unsigned read_bits(const unsigned char* base, int64_t bit,
                          unsigned bits) noexcept {
  const BitPos p = bit_pos(bit);
  unsigned word = base[p.byte];
  if (p.shift + bits > 8) word |= unsigned(base[p.byte + 1]) << 8;
  return (word >> p.shift) & ((1u << bits) - 1);
}

inline void write_bits(unsigned char* base, int64_t bit, unsigned bits,
                       unsigned value) noexcept {
  const BitPos p = bit_pos(bit);
  const unsigned mask = ((1u << bits) - 1) << p.shift;
  const unsigned shifted = value << p.shift;
  base[p.byte] = (unsigned char)((base[p.byte] & ~mask) | (shifted & mask));
  if (p.shift + bits > 8) {
    const unsigned high_mask = mask >> 8;
    base[p.byte + 1] =
        (unsigned char)((base[p.byte + 1] & ~high_mask) | ((shifted >> 8) & high_mask));
  }
}

// nbits from byte-aligned src to byte-aligned dst; the bits of dst's last
// byte beyond nbits keep their value.
inline void copy_aligned_bits(unsigned char* dst, const unsigned char* src,
                              int64_t nbits) noexcept {
  std::memcpy(dst, src, size_t(nbits / 8));
  if (const unsigned rest = unsigned(nbits % 8)) {
    const unsigned mask = (1u << rest) - 1;
    const int64_t last = nbits / 8;
    dst[last] = (unsigned char)((dst[last] & ~mask) | (src[last] & mask));
  }
}

// One run of n elements with element strides src_step / dst_step starting
// at the given bit positions.
inline void packed_row(unsigned char* dst, int64_t dst_bit, const unsigned char* src,
                       int64_t src_bit, int64_t n, int64_t dst_step,
                       int64_t src_step, unsigned bits) noexcept {
  if (src_step == 1 && dst_step == 1 && dst_bit % 8 == 0 && src_bit % 8 == 0) {
    copy_aligned_bits(dst + bit_pos(dst_bit).byte, src + bit_pos(src_bit).byte,
                      n * bits);
    return;
  }
  const int64_t ds = dst_step * bits, ss = src_step * bits;
  for (int64_t i = 0; i < n; ++i, dst_bit += ds, src_bit += ss)
    write_bits(dst, dst_bit, bits, read_bits(src, src_bit, bits));
}

// dims are in elements. Threads are used only when both sides are one
// contiguous run: there the split points can be put on byte boundaries,
// while strided rows may share a dst byte and two threads would race on it.
inline void copy_packed(const unsigned char* src, unsigned char* dst,
                        unsigned bits, CopyDims dims, unsigned threads) {
  sort_dims(dims);
  merge_dims(dims);
  if (dims.ndim == 0) {
    write_bits(dst, 0, bits, read_bits(src, 0, bits));
    return;
  }
  if (dims.ndim == 1 && dims.dim[0].src == 1 && dims.dim[0].dst == 1) {
    // 8 elements always end on a byte boundary, whatever bits is.
    const int64_t n = dims.dim[0].size, groups = (n + 7) / 8;
    parallel_ranges(groups, threads, [&](int64_t begin, int64_t end) {
      const int64_t lo = begin * 8, hi = std::min(end * 8, n);
      copy_aligned_bits(dst + lo * bits / 8, src + lo * bits / 8, (hi - lo) * bits);
    });
    return;
  }
  const int32_t outer = dims.ndim - 1;
  const CopyDim inner = dims.dim[outer];
  StridedIndex at;  // over the outer dims, in elements
  do {
    packed_row(dst, at.dst * bits, src, at.src * bits, inner.size, inner.dst, inner.src, bits);
  } while (at.next(dims.dim, outer));
}

}  // namespace dlbridge::detail
