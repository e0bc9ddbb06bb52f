// The loops that move bytes for a BytePlan. Loads and stores go through
// memcpy of a fixed size: that compiles to one (unaligned) move and, unlike
// a cast to uint32_t*, is defined for any address DLPack allows.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "copy_parallel.hpp"
#include "copy_plan.hpp"

namespace dlbridge::detail {

// Moves one element whose width is known at compile time.
template <int64_t Bytes>
struct FixedMove {
  int64_t size() const noexcept { return Bytes; }
  void operator()(char* dst, const char* src) const noexcept {
    std::memcpy(dst, src, size_t(Bytes));
  }
};

// Any other width (int24, float16x3, or a whole merged row).
struct RuntimeMove {
  int64_t bytes;
  int64_t size() const noexcept { return bytes; }
  void operator()(char* dst, const char* src) const noexcept {
    std::memcpy(dst, src, size_t(bytes));
  }
};

template <typename Move>
void strided_row(char* dst, const char* src, int64_t n, int64_t dst_step,
                 int64_t src_step, Move move) noexcept {
  for (int64_t i = 0; i < n; ++i, dst += dst_step, src += src_step) move(dst, src);
}

// A tile is tile_side elements along j (one cache line of src per row, at
// least 16 elements so register blocks fill it) by tile_rows along i.
// Chosen by a sweep on 4096x4096 and 1000x1000 transposes of 1- to 8-byte
// elements: with power-of-two strides every src row of a tile maps to the
// same L1 set, so taller tiles (64 rows) thrash and lose up to 2x, while
// wider ones (256-1024 bytes) gain nothing.
constexpr int64_t tile_side(int64_t elem) noexcept {
  return std::max<int64_t>(16, 64 / elem);
}
constexpr int64_t tile_rows(int64_t) noexcept { return 16; }

// dst[j*dj + i*di] = src[j*sj + i*si] over a tile, scalar.
template <typename Move>
void tile_scalar(char* dst, const char* src, int64_t nj, int64_t ni,
                 int64_t dj, int64_t di, int64_t sj, int64_t si,
                 Move move) noexcept {
  for (int64_t j = 0; j < nj; ++j)
    strided_row(dst + j * dj, src + j * sj, ni, di, si, move);
}

#if defined(__SSE2__)
// Interleaves a and b in units of W bytes: the low or high halves.
template <int W>
inline __m128i unpack(__m128i a, __m128i b, bool high) noexcept {
  static_assert(W == 1 || W == 2 || W == 4 || W == 8);
  if constexpr (W == 1) {
    return high ? _mm_unpackhi_epi8(a, b) : _mm_unpacklo_epi8(a, b);
  } else if constexpr (W == 2) {
    return high ? _mm_unpackhi_epi16(a, b) : _mm_unpacklo_epi16(a, b);
  } else if constexpr (W == 4) {
    return high ? _mm_unpackhi_epi32(a, b) : _mm_unpacklo_epi32(a, b);
  } else {
    return high ? _mm_unpackhi_epi64(a, b) : _mm_unpacklo_epi64(a, b);
  }
}

// One round of a register transpose. Before it, x holds `Groups` groups of
// rows, each split into `Blocks` column blocks whose columns are W bytes
// (W / E rows) wide; pairing neighbouring groups doubles W.
template <int N, int W, int Groups, int Blocks>
inline void transpose_round(__m128i (&x)[N]) noexcept {
  if constexpr (Groups > 1) {
    __m128i y[N];
    for (int g = 0; g < Groups / 2; ++g)
      for (int c = 0; c < Blocks; ++c) {
        const __m128i a = x[2 * g * Blocks + c], b = x[(2 * g + 1) * Blocks + c];
        y[g * 2 * Blocks + 2 * c] = unpack<W>(a, b, false);
        y[g * 2 * Blocks + 2 * c + 1] = unpack<W>(a, b, true);
      }
    for (int k = 0; k < N; ++k) x[k] = y[k];
    transpose_round<N, W * 2, Groups / 2, Blocks * 2>(x);
  }
}

// An N x N block of E-byte elements (N = 16 / E) transposed in registers:
// N 16-byte loads along j, N 16-byte stores along i.
template <int E>
inline void block_sse(char* dst, const char* src, int64_t dj, int64_t si) noexcept {
  constexpr int N = 16 / E;
  __m128i x[N];
  for (int r = 0; r < N; ++r)
    x[r] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + r * si));
  transpose_round<N, E, N, 1>(x);
  for (int c = 0; c < N; ++c)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + c * dj), x[c]);
}

// A tile whose j reads and i writes are contiguous, in register blocks; the
// ragged right and bottom edges go element by element.
template <int E>
inline void tile_sse(char* dst, const char* src, int64_t nj, int64_t ni,
                     int64_t dj, int64_t si) noexcept {
  constexpr int64_t N = 16 / E;
  const int64_t njb = nj / N * N, nib = ni / N * N;
  for (int64_t j = 0; j < njb; j += N)
    for (int64_t i = 0; i < nib; i += N)
      block_sse<E>(dst + j * dj + i * E, src + j * E + i * si, dj, si);
  FixedMove<E> move;
  if (nib < ni)
    tile_scalar(dst + nib * E, src + nib * si, njb, ni - nib, dj, E, E, si, move);
  if (njb < nj)
    tile_scalar(dst + njb * dj, src + njb * E, nj - njb, ni, dj, E, E, si, move);
}
#endif

template <typename Move>
void tile(char* dst, const char* src, int64_t nj, int64_t ni, int64_t dj,
          int64_t di, int64_t sj, int64_t si, Move move) noexcept {
#if defined(__SSE2__)
  if (sj == move.size() && di == move.size()) {
    switch (move.size()) {
      case 1: return tile_sse<1>(dst, src, nj, ni, dj, si);
      case 2: return tile_sse<2>(dst, src, nj, ni, dj, si);
      case 4: return tile_sse<4>(dst, src, nj, ni, dj, si);
      case 8: return tile_sse<8>(dst, src, nj, ni, dj, si);
    }
  }
#endif
  tile_scalar(dst, src, nj, ni, dj, di, sj, si, move);
}

// The innermost two dims in tiles: j outer (reads close together), i inner
// (writes close together).
template <typename Move>
void blocked_2d(char* dst, const char* src, int64_t nj, int64_t ni,
                const CopyDim& j, const CopyDim& i, Move move) noexcept {
  const int64_t side_j = tile_side(move.size()), side_i = tile_rows(move.size());
  for (int64_t j0 = 0; j0 < nj; j0 += side_j) {
    const int64_t tj = std::min(side_j, nj - j0);
    for (int64_t i0 = 0; i0 < ni; i0 += side_i)
      tile(dst + j0 * j.dst + i0 * i.dst, src + j0 * j.src + i0 * i.src, tj,
           std::min(side_i, ni - i0), j.dst, i.dst, j.src, i.src, move);
  }
}

// Runs the plan's kernel over items [begin, end). An item is one chunk of
// the first kernel dim at one index of the outer dims; chunks exist only
// so that a copy with few outer iterations can still be shared by threads.
template <typename Move>
void run_items(const BytePlan& plan, int32_t kernel_dims, int64_t chunks,
               int64_t begin, int64_t end, Move move) noexcept {
  const CopyDims& dims = plan.dims;
  const int32_t outer = dims.ndim - kernel_dims;
  const CopyDim& split = dims.dim[outer];
  int64_t index[max_ndim];
  int64_t row = begin / chunks, chunk = begin % chunks;
  const char* src = plan.src;
  char* dst = plan.dst;
  for (int32_t d = outer - 1; d >= 0; --d) {
    index[d] = row % dims.dim[d].size;
    row /= dims.dim[d].size;
    src += index[d] * dims.dim[d].src;
    dst += index[d] * dims.dim[d].dst;
  }
  for (int64_t item = begin; item < end; ++item) {
    const int64_t lo = split.size / chunks * chunk + std::min(chunk, split.size % chunks);
    const int64_t hi = lo + split.size / chunks + (chunk < split.size % chunks ? 1 : 0);
    const char* s = src + lo * split.src;
    char* d = dst + lo * split.dst;
    if (kernel_dims == 1) {
      strided_row(d, s, hi - lo, split.dst, split.src, move);
    } else {
      const CopyDim& inner = dims.dim[outer + 1];
      blocked_2d(d, s, hi - lo, inner.size, split, inner, move);
    }
    if (++chunk < chunks) continue;
    chunk = 0;
    // Odometer over the outer dims, pointers updated incrementally.
    for (int32_t dim = outer - 1; dim >= 0; --dim) {
      src += dims.dim[dim].src;
      dst += dims.dim[dim].dst;
      if (++index[dim] < dims.dim[dim].size) break;
      src -= dims.dim[dim].src * dims.dim[dim].size;
      dst -= dims.dim[dim].dst * dims.dim[dim].size;
      index[dim] = 0;
    }
  }
}

template <typename Move>
void run_loops(const BytePlan& plan, unsigned threads, Move move) {
  const int32_t kernel_dims = plan.kernel == ByteKernel::blocked ? 2 : 1;
  const int32_t outer = plan.dims.ndim - kernel_dims;
  int64_t rows = 1;
  for (int32_t d = 0; d < outer; ++d) rows *= plan.dims.dim[d].size;
  // Enough items for every thread to get a few (load balance), in chunks
  // no smaller than a tile so that blocking still pays.
  int64_t chunks = 1;
  if (threads > 1 && rows < int64_t(threads) * 4) {
    const int64_t granule = kernel_dims == 2 ? tile_side(move.size()) : 4096;
    const int64_t want = (int64_t(threads) * 4 + rows - 1) / rows;
    chunks = std::max<int64_t>(1, std::min(want, plan.dims.dim[outer].size / granule));
  }
  parallel_ranges(rows * chunks, threads, [&](int64_t begin, int64_t end) {
    run_items(plan, kernel_dims, chunks, begin, end, move);
  });
}

// One memcpy, split into page-aligned pieces when threads are given.
inline void run_contiguous(const BytePlan& plan, unsigned threads) {
  constexpr int64_t page = 4096;
  if (threads <= 1) {
    std::memcpy(plan.dst, plan.src, size_t(plan.elem));
    return;
  }
  const int64_t pages = (plan.elem + page - 1) / page;
  parallel_ranges(pages, threads, [&](int64_t begin, int64_t end) {
    const int64_t lo = begin * page, hi = std::min(end * page, plan.elem);
    std::memcpy(plan.dst + lo, plan.src + lo, size_t(hi - lo));
  });
}

inline void run_byte_plan(const BytePlan& plan, unsigned threads) {
  if (plan.kernel == ByteKernel::contiguous) return run_contiguous(plan, threads);
  switch (plan.elem) {
    case 1: return run_loops(plan, threads, FixedMove<1>{});
    case 2: return run_loops(plan, threads, FixedMove<2>{});
    case 4: return run_loops(plan, threads, FixedMove<4>{});
    case 8: return run_loops(plan, threads, FixedMove<8>{});
    case 16: return run_loops(plan, threads, FixedMove<16>{});
    default: return run_loops(plan, threads, RuntimeMove{plan.elem});
  }
}

}  // namespace dlbridge::detail
