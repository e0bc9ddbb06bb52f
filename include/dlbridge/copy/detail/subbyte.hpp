// Copies of packed sub-byte tensors (int4, FP4, FP6, ...): element i of a
// compact tensor is bits [i*bits, (i+1)*bits) of the buffer, little-bit-
// endian, and a strided view places element at offset o (in elements) at
// bit o*bits from element 0, which is bit 0 of data(). Bits outside the
// view are never changed, because another tensor may own the rest of a byte.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "parallel.hpp"
#include "plan.hpp"
#include "subbyte_kernels.hpp"

namespace dlbridge::detail {

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

// Values go through byte buffers of this many (on the stack) where a row
// cannot be moved as bits: a shifted or strided source.
constexpr int64_t subbyte_chunk = 1024;

// n values from src (value i at bit src_bit + i * src_step_bits) to a byte each.
inline void gather_values(unsigned char* out, const unsigned char* src, int64_t src_bit,
                          int64_t src_step_bits, int64_t n, unsigned bits) noexcept {
  for (int64_t i = 0; i < n; ++i, src_bit += src_step_bits)
    out[i] = (unsigned char)read_bits(src, src_bit, bits);
}

// One run of n elements with element strides src_step / dst_step starting
// at the given bit positions. A contiguous pair whose starts share their
// place in a byte moves as bytes; other rows into contiguous dst go through
// a byte buffer (unpacked, or gathered when src is strided) and are packed
// in vectors; anything else moves value by value.
inline void packed_row(unsigned char* dst, int64_t dst_bit, const unsigned char* src,
                       int64_t src_bit, int64_t n, int64_t dst_step,
                       int64_t src_step, unsigned bits) noexcept {
  if (src_step == 1 && dst_step == 1 && bit_pos(dst_bit).shift == bit_pos(src_bit).shift) {
    for (; n > 0 && bit_pos(dst_bit).shift != 0; --n, dst_bit += bits, src_bit += bits)
      write_bits(dst, dst_bit, bits, read_bits(src, src_bit, bits));
    if (n > 0) copy_aligned_bits(dst + bit_pos(dst_bit).byte, src + bit_pos(src_bit).byte, n * bits);
    return;
  }
  if (dst_step == 1) {
    unsigned char buffer[subbyte_chunk];
    for (int64_t done = 0; done < n; done += subbyte_chunk) {
      const int64_t m = std::min(subbyte_chunk, n - done);
      if (src_step == 1)
        unpack_run(buffer, src, src_bit + done * bits, m, bits, false);
      else
        gather_values(buffer, src, src_bit + done * src_step * bits, src_step * bits, m, bits);
      pack_run(dst, dst_bit + done * bits, buffer, m, bits);
    }
    return;
  }
  const int64_t ds = dst_step * bits, ss = src_step * bits;
  for (int64_t i = 0; i < n; ++i, dst_bit += ds, src_bit += ss)
    write_bits(dst, dst_bit, bits, read_bits(src, src_bit, bits));
}

// The side of the byte tiles that transposed sub-byte copies go through.
constexpr int64_t subbyte_tile = 64;

// out[i][j] = in[j][i] for a tile of rows x cols bytes; `in` has rows of
// subbyte_tile bytes, out rows `out_stride` apart.
inline void transpose_byte_tile(unsigned char* out, int64_t out_stride, const unsigned char* in,
                                int64_t rows, int64_t cols) noexcept {
  for (int64_t i = 0; i < cols; ++i)
    for (int64_t j = 0; j < rows; ++j) out[i * out_stride + j] = in[j * subbyte_tile + i];
}

// A transposed pair of inner dims: `across` (src stride 1, dst stride
// across.dst) outside `inner` (dst stride 1, src stride inner.src). Tiles
// of 64 x 64 values: each src row segment is unpacked in vectors, the
// bytes are transposed, and each dst row segment packed in vectors.
inline void packed_transpose(unsigned char* dst, int64_t dst_bit, const unsigned char* src,
                             int64_t src_bit, const CopyDim& across, const CopyDim& inner,
                             unsigned bits) noexcept {
  unsigned char rows[subbyte_tile * subbyte_tile], cols[subbyte_tile * subbyte_tile];
  for (int64_t j0 = 0; j0 < across.size; j0 += subbyte_tile)
    for (int64_t i0 = 0; i0 < inner.size; i0 += subbyte_tile) {
      const int64_t nj = std::min(subbyte_tile, across.size - j0);
      const int64_t ni = std::min(subbyte_tile, inner.size - i0);
      // rows[i][j]: value (j0 + j, i0 + i), read along j (contiguous in src).
      for (int64_t i = 0; i < ni; ++i)
        unpack_run(rows + i * subbyte_tile, src, src_bit + (j0 + (i0 + i) * inner.src) * bits,
                   nj, bits, false);
      transpose_byte_tile(cols, subbyte_tile, rows, ni, nj);
      for (int64_t j = 0; j < nj; ++j)
        pack_run(dst, dst_bit + ((j0 + j) * across.dst + i0) * bits, cols + j * subbyte_tile,
                 ni, bits);
    }
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
  const CopyDim inner = dims.inner();
  if (dims.ndim >= 2 && inner.dst == 1 && inner.src != 1 && dims.dim[dims.ndim - 2].src == 1 &&
      dims.dim[dims.ndim - 2].dst > 0) {
    const int32_t outer = dims.ndim - 2;
    const CopyDim across = dims.dim[outer];
    StridedIndex at;
    do {
      packed_transpose(dst, at.dst * bits, src, at.src * bits, across, inner, bits);
    } while (at.next(dims.dim, outer));
    return;
  }
  const int32_t outer = dims.ndim - 1;
  StridedIndex at;  // over the outer dims, in elements
  do {
    packed_row(dst, at.dst * bits, src, at.src * bits, inner.size, inner.dst, inner.src, bits);
  } while (at.next(dims.dim, outer));
}

// Unpacks every value of a sub-byte tensor to a byte, in row-major index
// order with lanes innermost: what copy_unpacked writes. dims are those of
// the source in index order (strides in elements) with dst strides of the
// compact result in elements; element e starts at bit e * step_bits of
// src and its lane l at bits l * bits after that. Rows whose elements abut
// unpack in vectors, transposed ones through byte tiles; others (strided,
// or padded elements of several lanes) value by value.
inline void unpack_elements(unsigned char* out, const unsigned char* src, CopyDims dims,
                            int64_t step_bits, unsigned bits, unsigned lanes,
                            bool sign) noexcept {
  merge_dims(dims);
  const bool abutting = step_bits == int64_t(bits) * lanes;
  if (dims.ndim == 0) {
    unpack_reference(out, src, 0, lanes, bits, sign);
    return;
  }
  const CopyDim inner = dims.inner();
  if (dims.ndim >= 2 && lanes == 1 && abutting && inner.src != 1 &&
      dims.dim[dims.ndim - 2].src == 1) {
    const int32_t outer = dims.ndim - 2;
    const CopyDim across = dims.dim[outer];
    unsigned char rows[subbyte_tile * subbyte_tile];
    StridedIndex at;
    do {
      for (int64_t j0 = 0; j0 < across.size; j0 += subbyte_tile)
        for (int64_t i0 = 0; i0 < inner.size; i0 += subbyte_tile) {
          const int64_t nj = std::min(subbyte_tile, across.size - j0);
          const int64_t ni = std::min(subbyte_tile, inner.size - i0);
          for (int64_t i = 0; i < ni; ++i)
            unpack_run(rows + i * subbyte_tile, src,
                       (at.src + j0 + (i0 + i) * inner.src) * step_bits, nj, bits, sign);
          transpose_byte_tile(out + at.dst + j0 * across.dst + i0, across.dst, rows, ni, nj);
        }
    } while (at.next(dims.dim, outer));
    return;
  }
  const int32_t outer = dims.ndim - 1;
  StridedIndex at;
  do {
    unsigned char* row = out + at.dst * lanes;
    if (inner.src == 1 && abutting) {
      unpack_run(row, src, at.src * step_bits, inner.size * lanes, bits, sign);
    } else {
      for (int64_t i = 0; i < inner.size; ++i)
        unpack_reference(row + i * lanes, src, (at.src + i * inner.src) * step_bits, lanes,
                         bits, sign);
    }
  } while (at.next(dims.dim, outer));
}

}  // namespace dlbridge::detail
