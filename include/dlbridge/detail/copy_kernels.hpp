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

// Elements per tile side: a tile's src lines (one per i) and dst rows stay in
// L1 together. Found by measurement (bench/copy_bench.cpp, "transpose").
constexpr int64_t tile_side(int64_t elem) noexcept {
  return elem <= 4 ? 64 : elem <= 8 ? 32 : 16;
}

// dst[j*dj + i*di] = src[j*sj + i*si] over a tile, scalar.
template <typename Move>
void tile_scalar(char* dst, const char* src, int64_t nj, int64_t ni,
                 int64_t dj, int64_t di, int64_t sj, int64_t si,
                 Move move) noexcept {
  for (int64_t j = 0; j < nj; ++j)
    strided_row(dst + j * dj, src + j * sj, ni, di, si, move);
}

#if defined(__SSE2__)
// 4x4 transposes in registers for 4-byte elements when j reads and i writes
// contiguously: four 16-byte loads and four 16-byte stores per 16 elements
// instead of 32 scalar moves.
inline void tile_sse_4(char* dst, const char* src, int64_t nj, int64_t ni,
                       int64_t dj, int64_t si) noexcept {
  const int64_t nj4 = nj & ~int64_t(3), ni4 = ni & ~int64_t(3);
  for (int64_t j = 0; j < nj4; j += 4) {
    for (int64_t i = 0; i < ni4; i += 4) {
      const char* s = src + j * 4 + i * si;
      __m128 r0 = _mm_castsi128_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s)));
      __m128 r1 = _mm_castsi128_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + si)));
      __m128 r2 = _mm_castsi128_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 2 * si)));
      __m128 r3 = _mm_castsi128_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 3 * si)));
      _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
      char* d = dst + j * dj + i * 4;
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d), _mm_castps_si128(r0));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + dj), _mm_castps_si128(r1));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 2 * dj), _mm_castps_si128(r2));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 3 * dj), _mm_castps_si128(r3));
    }
  }
  FixedMove<4> move;
  // The ragged right and bottom edges.
  if (ni4 < ni)
    tile_scalar(dst + ni4 * 4, src + ni4 * si, nj4, ni - ni4, dj, 4, 4, si, move);
  if (nj4 < nj)
    tile_scalar(dst + nj4 * dj, src + nj4 * 4, nj - nj4, ni, dj, 4, 4, si, move);
}

// The same for 8-byte elements, 2x2 per step.
inline void tile_sse_8(char* dst, const char* src, int64_t nj, int64_t ni,
                       int64_t dj, int64_t si) noexcept {
  const int64_t nj2 = nj & ~int64_t(1), ni2 = ni & ~int64_t(1);
  for (int64_t j = 0; j < nj2; j += 2) {
    for (int64_t i = 0; i < ni2; i += 2) {
      const char* s = src + j * 8 + i * si;
      const __m128i r0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
      const __m128i r1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + si));
      char* d = dst + j * dj + i * 8;
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d), _mm_unpacklo_epi64(r0, r1));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + dj), _mm_unpackhi_epi64(r0, r1));
    }
  }
  FixedMove<8> move;
  if (ni2 < ni)
    tile_scalar(dst + ni2 * 8, src + ni2 * si, nj2, ni - ni2, dj, 8, 8, si, move);
  if (nj2 < nj)
    tile_scalar(dst + nj2 * dj, src + nj2 * 8, nj - nj2, ni, dj, 8, 8, si, move);
}
#endif

template <typename Move>
void tile(char* dst, const char* src, int64_t nj, int64_t ni, int64_t dj,
          int64_t di, int64_t sj, int64_t si, Move move) noexcept {
#if defined(__SSE2__)
  if (sj == move.size() && di == move.size()) {
    if (move.size() == 4) return tile_sse_4(dst, src, nj, ni, dj, si);
    if (move.size() == 8) return tile_sse_8(dst, src, nj, ni, dj, si);
  }
#endif
  tile_scalar(dst, src, nj, ni, dj, di, sj, si, move);
}

// The innermost two dims in tiles: j outer (reads close together), i inner
// (writes close together).
template <typename Move>
void blocked_2d(char* dst, const char* src, int64_t nj, int64_t ni,
                const CopyDim& j, const CopyDim& i, Move move) noexcept {
  const int64_t side = tile_side(move.size());
  for (int64_t j0 = 0; j0 < nj; j0 += side) {
    const int64_t tj = std::min(side, nj - j0);
    for (int64_t i0 = 0; i0 < ni; i0 += side)
      tile(dst + j0 * j.dst + i0 * i.dst, src + j0 * j.src + i0 * i.src, tj,
           std::min(side, ni - i0), j.dst, i.dst, j.src, i.src, move);
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
