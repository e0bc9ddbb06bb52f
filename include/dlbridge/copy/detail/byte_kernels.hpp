// The loops that move bytes for a BytePlan. Loads and stores go through
// memcpy of a fixed size: that compiles to one (unaligned) move and, unlike
// a cast to uint32_t*, is defined for any address DLPack allows.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "../../platform/platform.hpp"
#include "parallel.hpp"
#include "plan.hpp"

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
// same L1 set, so taller tiles (64 rows) thrash and lose, while wider ones
// (256-1024 bytes) gain nothing.
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

// A region in small tiles stored straight to dst: all of a copy that stays
// cached, and the edges of one that whole lines (below) do not cover.
template <int E>
void tiles_sse(char* dst, const char* src, int64_t nj, int64_t ni, int64_t dj,
               int64_t si) noexcept {
  const int64_t side_j = tile_side(E), side_i = tile_rows(E);
  for (int64_t j0 = 0; j0 < nj; j0 += side_j)
    for (int64_t i0 = 0; i0 < ni; i0 += side_i)
      tile_sse<E>(dst + j0 * dj + i0 * E, src + j0 * E + i0 * si,
                  std::min(side_j, nj - j0), std::min(side_i, ni - i0), dj, si);
}

// A line tile: two src lines along j by one dst line along i. Transposed
// into an L1 buffer first, then written out a whole dst line at a time.
// Stored directly, the tile's dst lines (one per j, a power-of-two stride
// apart in the usual case) compete for one L1 set and are evicted before
// they are complete; whole lines also allow non-temporal stores, which
// skip reading dst into the cache only to overwrite it. Register
// blocks of 1- and 2-byte elements read 16 or 8 src rows, more lines than
// one set holds, so their rows are first staged contiguously as well.
constexpr int64_t line_bytes = 64;

template <int E>
inline void line_tile_sse(char* dst, const char* src, int64_t dj, int64_t si) noexcept {
  constexpr int64_t N = 16 / E, ti = line_bytes / E, tj = 2 * line_bytes / E;
  alignas(line_bytes) char buf[tj][line_bytes];
  for (int64_t i = 0; i < ti; i += N) {
    if constexpr (N > 4) {
      alignas(line_bytes) char stage[N][tj * E];
      for (int64_t r = 0; r < N; ++r)
        for (int64_t k = 0; k < tj * E; k += 16)
          _mm_store_si128(reinterpret_cast<__m128i*>(&stage[r][k]),
                          _mm_loadu_si128(reinterpret_cast<const __m128i*>(
                              src + (i + r) * si + k)));
      for (int64_t j = 0; j < tj; j += N)
        block_sse<E>(&buf[j][i * E], &stage[0][j * E], line_bytes, tj * E);
    } else {
      for (int64_t j = 0; j < tj; j += N)
        block_sse<E>(&buf[j][i * E], src + j * E + i * si, line_bytes, si);
    }
  }
  for (int64_t j = 0; j < tj; ++j) {
    char* out = dst + j * dj;
    for (int64_t k = 0; k < line_bytes; k += 16)
      _mm_stream_si128(reinterpret_cast<__m128i*>(out + k),
                       _mm_load_si128(reinterpret_cast<const __m128i*>(&buf[j][k])));
  }
}

#if defined(DLBRIDGE_AVX512_KERNELS)
// Whether large transposes may use the AVX-512 line blocks: the CPU runs
// them and no test has switched them off to cover the SSE path.
inline std::atomic<bool>& avx512_allowed() noexcept {
  static std::atomic<bool> allowed{platform::cpu_has_avx512f()};
  return allowed;
}

// GCC 12's own AVX-512 header trips -Wuninitialized and, at -O2,
// -Wmaybe-uninitialized (its GCC bug 105593) wherever an intrinsic that
// leaves lanes undefined is inlined.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// The lane rounds of an N x N block (N = 4M), once lane L of x[g * M + c]
// is column L * M + c of rows g * M .. g * M + M - 1, an M x M block
// transposed in each 128-bit lane. Two rounds move whole lanes: 0x88
// takes lanes 0 and 2 of each operand, 0xdd lanes 1 and 3. The first
// gathers rows in pairs of lane blocks (lanes: column c, column 2M + c,
// then the same of the second block's rows); the second joins those pairs
// into whole columns, leaving column c in x[c].
template <int N, int M>
DLBRIDGE_TARGET_AVX512 inline void lane_rounds_avx512(__m512i (&x)[N], __m512i (&y)[N]) noexcept {
  static_assert(N == 4 * M);
  for (int k = 0; k < N; k += 2 * M)
    for (int c = 0; c < M; ++c) {
      y[k + c] = _mm512_shuffle_i64x2(x[k + c], x[k + M + c], 0x88);
      y[k + M + c] = _mm512_shuffle_i64x2(x[k + c], x[k + M + c], 0xdd);
    }
  for (int c = 0; c < 2 * M; ++c) {
    x[c] = _mm512_shuffle_i64x2(y[c], y[2 * M + c], 0x88);
    x[2 * M + c] = _mm512_shuffle_i64x2(y[c], y[2 * M + c], 0xdd);
  }
}

// An N x N block of E-byte elements, N = 64 / E: N whole src lines in, N
// whole dst lines out, streamed. A line is read by one load and written by
// one store, so no line has to stay cached between blocks (their rows, a
// power of two apart, would share one L1 set) and no L1 buffer is needed.
// On a large transpose of 4- and 8-byte elements this comes close to a
// memcpy of the same bytes, well ahead of the SSE line tiles
// (bench/copy_bench).
template <int E>
DLBRIDGE_TARGET_AVX512 inline void line_block_avx512(char* dst, const char* src,
                                                     int64_t dj, int64_t si) noexcept {
  static_assert(E == 4 || E == 8);
  constexpr int N = 64 / E, M = 16 / E;  // rows of a block; of a 128-bit lane's block
  __m512i x[N], y[N];
  for (int r = 0; r < N; ++r) x[r] = _mm512_loadu_si512(src + r * si);
  // Transpose the M x M block in each 128-bit lane, as block_sse does.
  if constexpr (E == 4) {
    for (int k = 0; k < N; k += 2) {
      y[k] = _mm512_unpacklo_epi32(x[k], x[k + 1]);
      y[k + 1] = _mm512_unpackhi_epi32(x[k], x[k + 1]);
    }
    for (int k = 0; k < N; k += 4)
      for (int h = 0; h < 2; ++h) {
        x[k + 2 * h] = _mm512_unpacklo_epi64(y[k + h], y[k + h + 2]);
        x[k + 2 * h + 1] = _mm512_unpackhi_epi64(y[k + h], y[k + h + 2]);
      }
  } else {
    for (int k = 0; k < N; k += 2) {
      y[k] = _mm512_unpacklo_epi64(x[k], x[k + 1]);
      y[k + 1] = _mm512_unpackhi_epi64(x[k], x[k + 1]);
    }
    for (int k = 0; k < N; ++k) x[k] = y[k];
  }
  lane_rounds_avx512<N, M>(x, y);
  for (int c = 0; c < N; ++c) _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + c * dj), x[c]);
}

// The same for 1- and 2-byte elements (AVX-512BW): the M x M block in each
// 128-bit lane goes in the rounds of block_sse, then the lanes as above.
// A 1-byte block is 64 rows, more registers than there are: the compiler
// keeps half of them on the stack, which stays in L1.
template <int W>
DLBRIDGE_TARGET_AVX512BW inline __m512i unpack_512(__m512i a, __m512i b, bool high) noexcept {
  if constexpr (W == 1) {
    return high ? _mm512_unpackhi_epi8(a, b) : _mm512_unpacklo_epi8(a, b);
  } else if constexpr (W == 2) {
    return high ? _mm512_unpackhi_epi16(a, b) : _mm512_unpacklo_epi16(a, b);
  } else if constexpr (W == 4) {
    return high ? _mm512_unpackhi_epi32(a, b) : _mm512_unpacklo_epi32(a, b);
  } else {
    return high ? _mm512_unpackhi_epi64(a, b) : _mm512_unpacklo_epi64(a, b);
  }
}

template <int N, int W, int Groups, int Blocks>
DLBRIDGE_TARGET_AVX512BW inline void transpose_round_512(__m512i* x) noexcept {
  if constexpr (Groups > 1) {
    __m512i y[N];
    for (int g = 0; g < Groups / 2; ++g)
      for (int c = 0; c < Blocks; ++c) {
        const __m512i a = x[2 * g * Blocks + c], b = x[(2 * g + 1) * Blocks + c];
        y[g * 2 * Blocks + 2 * c] = unpack_512<W>(a, b, false);
        y[g * 2 * Blocks + 2 * c + 1] = unpack_512<W>(a, b, true);
      }
    for (int k = 0; k < N; ++k) x[k] = y[k];
    transpose_round_512<N, W * 2, Groups / 2, Blocks * 2>(x);
  }
}

template <int E>
DLBRIDGE_TARGET_AVX512BW inline void line_block_avx512bw(char* dst, const char* src, int64_t dj,
                                                         int64_t si) noexcept {
  static_assert(E == 1 || E == 2);
  constexpr int N = 64 / E, M = 16 / E;
  __m512i x[N], y[N];
  for (int r = 0; r < N; ++r) x[r] = _mm512_loadu_si512(src + r * si);
  for (int g = 0; g < N; g += M) transpose_round_512<M, E, M, 1>(x + g);
  lane_rounds_avx512<N, M>(x, y);
  for (int c = 0; c < N; ++c) _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + c * dj), x[c]);
}
#pragma GCC diagnostic pop

// Whole-line blocks over [0, fj) x [0, fi), in groups of 2 KiB of src row
// by 64 src rows: strips of N rows inside a group, each read front to
// back. Measured on large transposes of 4- and 8-byte elements, this was
// clearly faster than strips across whole rows; 4 KiB groups or 32 rows
// came between, larger groups and rows inner lost. A group's dst lines
// then get their neighbours soon after, not a whole strip later.
constexpr int64_t block_group_bytes = 2048, block_group_rows = 64;

template <int E>
DLBRIDGE_TARGET_AVX512 void line_blocks_avx512(char* dst, const char* src, int64_t fj,
                                               int64_t fi, int64_t dj, int64_t si) noexcept {
  constexpr int64_t N = 64 / E, group_j = block_group_bytes / E;
  for (int64_t bj = 0; bj < fj; bj += group_j)
    for (int64_t bi = 0; bi < fi; bi += block_group_rows)
      for (int64_t i = bi; i < std::min(bi + block_group_rows, fi); i += N)
        for (int64_t j = bj; j < std::min(bj + group_j, fj); j += N)
          line_block_avx512<E>(dst + j * dj + i * E, src + j * E + i * si, dj, si);
}

template <int E>
DLBRIDGE_TARGET_AVX512BW void line_blocks_avx512bw(char* dst, const char* src, int64_t fj,
                                                   int64_t fi, int64_t dj, int64_t si) noexcept {
  constexpr int64_t N = 64 / E, group_j = block_group_bytes / E;
  for (int64_t bj = 0; bj < fj; bj += group_j)
    for (int64_t bi = 0; bi < fi; bi += block_group_rows)
      for (int64_t i = bi; i < std::min(bi + block_group_rows, fi); i += N)
        for (int64_t j = bj; j < std::min(bj + group_j, fj); j += N)
          line_block_avx512bw<E>(dst + j * dj + i * E, src + j * E + i * si, dj, si);
}
#endif

// Line tiles over [0, fj) x [0, fi), in groups of 4 KiB of src row by
// `rows` src rows: a group reads each of its rows front to back (tiles along
// j inner), which the hardware prefetcher follows, and its pages (one per
// src row, one per dst row reached) stay in the TLB. Measured on large
// transposes, faster for every element size than tiles along i inner in
// 128 x 128 groups (bench/copy_bench).
template <int E>
void line_tiles_sse(char* dst, const char* src, int64_t fj, int64_t fi, int64_t dj,
                    int64_t si) noexcept {
  constexpr int64_t ti = line_bytes / E, tj = 2 * line_bytes / E;
  constexpr int64_t group_j = 4096 / E, rows = std::max<int64_t>(32, ti);
  static_assert(group_j % tj == 0 && rows % ti == 0);
  for (int64_t bj = 0; bj < fj; bj += group_j)
    for (int64_t bi = 0; bi < fi; bi += rows)
      for (int64_t i = bi; i < std::min(bi + rows, fi); i += ti)
        for (int64_t j = bj; j < std::min(bj + group_j, fj); j += tj)
          line_tile_sse<E>(dst + j * dj + i * E, src + j * E + i * si, dj, si);
}

// A copy too large for a core's caches, whose dst rows all start at one
// offset within a line, goes in whole lines (the i before the first whole
// line go to small tiles): AVX-512 blocks where the CPU has them, else SSE
// line tiles. Anything else goes in small tiles: measured faster while
// everything stays cached (up to 2 MiB), and when rows are not line
// multiples apart (their lines then rarely share a set) and so cannot be
// streamed.
template <int E>
void blocked_sse(char* dst, const char* src, int64_t nj, int64_t ni, int64_t dj,
                 int64_t si, bool large) noexcept {
  const auto misalign = int64_t(reinterpret_cast<uintptr_t>(dst) % line_bytes);
  if (!large || dj % line_bytes != 0 || misalign % E != 0)
    return tiles_sse<E>(dst, src, nj, ni, dj, si);
  const int64_t head = std::min(ni, (line_bytes - misalign) % line_bytes / E);
  tiles_sse<E>(dst, src, nj, head, dj, si);
  dst += head * E;
  src += head * si;
  ni -= head;
  // [0, fj) x [0, fi) goes in whole lines: the multiples of a block's sides.
  int64_t fj = nj / (2 * line_bytes / E) * (2 * line_bytes / E);
  int64_t fi = ni / (line_bytes / E) * (line_bytes / E);
  bool done = false;
#if defined(DLBRIDGE_AVX512_KERNELS)
  if (avx512_allowed().load(std::memory_order_relaxed)) {
    if constexpr (E == 4 || E == 8) {
      fj = nj / (line_bytes / E) * (line_bytes / E);
      line_blocks_avx512<E>(dst, src, fj, fi, dj, si);
      done = true;
    } else {
      static const bool bw = platform::cpu_has_avx512bw();
      if (bw) {
        fj = nj / (line_bytes / E) * (line_bytes / E);
        line_blocks_avx512bw<E>(dst, src, fj, fi, dj, si);
        done = true;
      }
    }
  }
#endif
  if (!done) line_tiles_sse<E>(dst, src, fj, fi, dj, si);
  // Streamed stores are weakly ordered: fence them before the caller (or
  // another thread, after the join) reads dst.
  _mm_sfence();
  tiles_sse<E>(dst + fi * E, src + fi * si, fj, ni - fi, dj, si);
  tiles_sse<E>(dst + fj * dj, src + fj * E, nj - fj, ni, dj, si);
}

// Rows into a compact destination whose source is the reverse (step -E) or
// every other element (step 2E), in 16-byte vectors: a reversed array or an
// a[..., ::2] slice, which element by element ran no faster than NumPy's own
// loop (bench_copy_numpy.py) and in vectors approaches a memcpy. Every
// load stays within the bytes of elements the row reads (its first and last
// included), so no byte past the source's reach is touched.
template <int E>
inline __m128i reverse_elements(__m128i x) noexcept {
  static_assert(E == 1 || E == 2 || E == 4 || E == 8);
  if constexpr (E == 1)  // swap the bytes of each 16-bit lane, then reverse those
    x = _mm_or_si128(_mm_slli_epi16(x, 8), _mm_srli_epi16(x, 8));
  if constexpr (E <= 2) {
    x = _mm_shufflelo_epi16(x, _MM_SHUFFLE(0, 1, 2, 3));
    x = _mm_shufflehi_epi16(x, _MM_SHUFFLE(0, 1, 2, 3));
    return _mm_shuffle_epi32(x, _MM_SHUFFLE(1, 0, 3, 2));
  } else if constexpr (E == 4) {
    return _mm_shuffle_epi32(x, _MM_SHUFFLE(0, 1, 2, 3));
  } else {
    return _mm_shuffle_epi32(x, _MM_SHUFFLE(1, 0, 3, 2));
  }
}

// The even E-byte elements of a then b, in order.
template <int E>
inline __m128i even_elements(__m128i a, __m128i b) noexcept {
  static_assert(E == 1 || E == 2 || E == 4 || E == 8);
  if constexpr (E == 1) {  // the low byte of each 16-bit lane; packing is exact below 256
    const __m128i low = _mm_set1_epi16(0x00FF);
    return _mm_packus_epi16(_mm_and_si128(a, low), _mm_and_si128(b, low));
  } else if constexpr (E == 2) {  // sign-extended low halves pack back exactly
    return _mm_packs_epi32(_mm_srai_epi32(_mm_slli_epi32(a, 16), 16),
                           _mm_srai_epi32(_mm_slli_epi32(b, 16), 16));
  } else if constexpr (E == 4) {
    return _mm_castps_si128(
        _mm_shuffle_ps(_mm_castsi128_ps(a), _mm_castsi128_ps(b), _MM_SHUFFLE(2, 0, 2, 0)));
  } else {
    return _mm_unpacklo_epi64(a, b);
  }
}

template <int E>
inline void reversed_row_sse(char* dst, const char* src, int64_t n) noexcept {
  constexpr int64_t N = 16 / E;
  int64_t i = 0;
  // Elements i .. i+N-1 lie at src - (i+N-1)*E .. src - i*E, lowest first.
  for (; i + N <= n; i += N) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src - (i + N - 1) * E));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i * E), reverse_elements<E>(x));
  }
  strided_row(dst + i * E, src - i * E, n - i, E, -E, FixedMove<E>{});
}

template <int E>
inline void every_other_row_sse(char* dst, const char* src, int64_t n) noexcept {
  constexpr int64_t N = 16 / E;
  int64_t i = 0;
  // The two loads cover source elements 2i .. 2i+2N-1; the last is read
  // only while element 2(i+N) still is (i + N < n).
  for (; i + N < n; i += N) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i * E));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i * E + 16));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i * E), even_elements<E>(a, b));
  }
  strided_row(dst + i * E, src + 2 * i * E, n - i, E, 2 * E, FixedMove<E>{});
}
#endif

// One row of a strided copy (the innermost dim; outer dims loop around it).
template <typename Move>
void copy_row(char* dst, const char* src, int64_t n, int64_t dst_step, int64_t src_step,
              Move move) noexcept {
  strided_row(dst, src, n, dst_step, src_step, move);
}

template <int64_t E>
void copy_row(char* dst, const char* src, int64_t n, int64_t dst_step, int64_t src_step,
              FixedMove<E> move) noexcept {
#if defined(__SSE2__)
  if constexpr (E == 1 || E == 2 || E == 4 || E == 8) {
    if (dst_step == E && src_step == -E) return reversed_row_sse<int(E)>(dst, src, n);
    if (dst_step == E && src_step == 2 * E) return every_other_row_sse<int(E)>(dst, src, n);
  }
#endif
  strided_row(dst, src, n, dst_step, src_step, move);
}

// The innermost two dims in tiles: j outer (reads close together), i inner
// (writes close together). Large: the copy does not fit a core's caches.
template <typename Move>
void blocked_2d(char* dst, const char* src, int64_t nj, int64_t ni,
                const CopyDim& j, const CopyDim& i, bool large, Move move) noexcept {
#if defined(__SSE2__)
  if (j.src == move.size() && i.dst == move.size()) {
    switch (move.size()) {
      case 1: return blocked_sse<1>(dst, src, nj, ni, j.dst, i.src, large);
      case 2: return blocked_sse<2>(dst, src, nj, ni, j.dst, i.src, large);
      case 4: return blocked_sse<4>(dst, src, nj, ni, j.dst, i.src, large);
      case 8: return blocked_sse<8>(dst, src, nj, ni, j.dst, i.src, large);
    }
  }
#else
  (void)large;
#endif
  const int64_t side_j = tile_side(move.size()), side_i = tile_rows(move.size());
  for (int64_t j0 = 0; j0 < nj; j0 += side_j) {
    const int64_t tj = std::min(side_j, nj - j0);
    for (int64_t i0 = 0; i0 < ni; i0 += side_i)
      tile_scalar(dst + j0 * j.dst + i0 * i.dst, src + j0 * j.src + i0 * i.src, tj,
                  std::min(side_i, ni - i0), j.dst, i.dst, j.src, i.src, move);
  }
}

// Runs the plan's kernel over items [begin, end). An item is one chunk of
// the first kernel dim at one index of the outer dims; chunks exist only
// so that a copy with few outer iterations can still be shared by threads.
template <typename Move>
void run_items(const BytePlan& plan, int32_t kernel_dims, int64_t chunks,
               int64_t begin, int64_t end, bool large, Move move) noexcept {
  const CopyDims& dims = plan.dims;
  const int32_t outer = dims.ndim - kernel_dims;
  const CopyDim& split = dims.dim[outer];
  StridedIndex at;  // over the outer dims, in bytes
  int64_t chunk = begin % chunks;
  at.seek(dims.dim, outer, begin / chunks);
  for (int64_t item = begin; item < end; ++item) {
    const int64_t lo = split.size / chunks * chunk + std::min(chunk, split.size % chunks);
    const int64_t hi = lo + split.size / chunks + (chunk < split.size % chunks ? 1 : 0);
    const char* s = plan.src + at.src + lo * split.src;
    char* d = plan.dst + at.dst + lo * split.dst;
    if (kernel_dims == 1) {
      copy_row(d, s, hi - lo, split.dst, split.src, move);
    } else {
      const CopyDim& inner = dims.dim[outer + 1];
      blocked_2d(d, s, hi - lo, inner.size, split, inner, large, move);
    }
    if (++chunk < chunks) continue;
    chunk = 0;
    at.next(dims.dim, outer);
  }
}

// From this size up a transpose no longer fits in what a core keeps close
// (measured: 2 MiB is still faster in small tiles, 4 MiB in line tiles).
constexpr int64_t large_min_bytes = int64_t(4) << 20;

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
  const bool large = plan.bytes >= large_min_bytes;
  parallel_ranges(rows * chunks, threads, [&](int64_t begin, int64_t end) {
    run_items(plan, kernel_dims, chunks, begin, end, large, move);
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
