// Runs of packed sub-byte values (1 to 7 bits: int4, uint2, FP4, FP6, ...)
// unpacked to one value per byte and packed back. Value i of a run is bits
// [bit + i*bits, bit + (i+1)*bits) of its buffer, little-bit-endian (DLPack's
// packing). The functions here depend only on the width in bits, so every
// format of one width (int4, uint4, float4_e2m1fn; the FP6 pair) shares them.
//
// Each run goes: values one at a time up to the first byte boundary, then
// vector blocks (AVX-512BW or AVX2, chosen at run time), then groups of 8
// values in 64-bit words (8 values always fill `bits` whole bytes), then the
// last values one at a time. The one-at-a-time functions are also the
// reference the others are tested against. No function reads or writes a
// byte outside the run: a run's first and last byte may be shared with
// another tensor, whose bits are left as they were.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "../../platform/platform.hpp"

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

// Reads only the bytes the value occupies: the next byte may be outside
// the view's memory when the value ends on a byte boundary.
inline unsigned read_bits(const unsigned char* base, int64_t bit, unsigned bits) noexcept {
  const BitPos p = bit_pos(bit);
  unsigned word = base[p.byte];
  if (p.shift + bits > 8) word |= unsigned(base[p.byte + 1]) << 8;
  return (word >> p.shift) & ((1u << bits) - 1);
}

inline void write_bits(unsigned char* base, int64_t bit, unsigned bits, unsigned value) noexcept {
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

// A value of `bits` bits in a byte: its high bits zero, or copies of its
// top bit (sign = true: a signed integer then reads right as int8).
inline unsigned char extend_value(unsigned value, unsigned bits, bool sign) noexcept {
  if (sign && bits < 8 && ((value >> (bits - 1)) & 1u)) value |= ~0u << bits;
  return (unsigned char)value;
}

// The reference: n values from bit `bit` of src, a byte each.
inline void unpack_reference(unsigned char* dst, const unsigned char* src, int64_t bit,
                             int64_t n, unsigned bits, bool sign) noexcept {
  for (int64_t i = 0; i < n; ++i, bit += bits)
    dst[i] = extend_value(read_bits(src, bit, bits), bits, sign);
}

// The reference: the low `bits` bits of n bytes to bit `bit` of dst.
inline void pack_reference(unsigned char* dst, int64_t bit, const unsigned char* src,
                           int64_t n, unsigned bits) noexcept {
  for (int64_t i = 0; i < n; ++i, bit += bits) write_bits(dst, bit, bits, src[i]);
}

// The vector sets the kernels below may use, widest last.
enum class VectorIsa : int { portable = 0, avx2 = 1, avx512 = 2 };

inline VectorIsa best_vector_isa() noexcept {
#if defined(DLBRIDGE_AVX512_KERNELS)
  if (platform::cpu_has_avx512bw()) return VectorIsa::avx512;
#endif
#if defined(DLBRIDGE_AVX2_KERNELS)
  if (platform::cpu_has_avx2()) return VectorIsa::avx2;
#endif
  return VectorIsa::portable;
}

// The widest set the sub-byte kernels use: the CPU's best, which tests and
// benchmarks lower (never raise) to run the narrower ones.
inline std::atomic<VectorIsa>& subbyte_isa() noexcept {
  static std::atomic<VectorIsa> isa{best_vector_isa()};
  return isa;
}

namespace subbyte {

// `pattern` repeated every `period` bits across 64.
constexpr uint64_t repeat(uint64_t pattern, unsigned period) noexcept {
  uint64_t out = 0;
  for (unsigned at = 0; at < 64; at += period) out |= pattern << at;
  return out;
}
constexpr uint64_t low_bits(unsigned n) noexcept {
  return n >= 64 ? ~uint64_t(0) : (uint64_t(1) << n) - 1;
}

// Spreading 8 values of B bits (the low 8B bits of a 64-bit word) to 8
// bytes halves the values per slot three times: slots of 64, 32, 16 bits
// become slots of 32, 16, 8. One step, for slots of `Slot` bits out:
// each keeps `keep` bits, and the upper half of its parent moves up by
// `shift`. With B <= 4 a slot's content never reaches the bits the other
// half lands on, so one mask after an OR keeps both; wider values need two.
template <unsigned B, unsigned Slot>
struct SpreadStep {
  static constexpr unsigned keep = Slot / 8 * B, shift = Slot - keep;
  static constexpr uint64_t low = repeat(low_bits(keep), 2 * Slot), high = low << Slot;
};
// The reverse, for slots of `Slot` bits in (pairs joined into 2 * Slot).
template <unsigned B, unsigned Slot>
struct GatherStep {
  static constexpr unsigned keep = Slot / 8 * B, shift = Slot - keep;
  static constexpr uint64_t low = repeat(low_bits(keep), 2 * Slot), high = low << keep;
};

template <unsigned B, unsigned Slot>
inline uint64_t spread_step(uint64_t x) noexcept {
  using S = SpreadStep<B, Slot>;
  if constexpr (B <= 4) return (x | (x << S::shift)) & (S::low | S::high);
  return (x & S::low) | ((x << S::shift) & S::high);
}
template <unsigned B, unsigned Slot>
inline uint64_t gather_step(uint64_t x) noexcept {
  using S = GatherStep<B, Slot>;
  if constexpr (B <= 4) return (x | (x >> S::shift)) & (S::low | S::high);
  return (x & S::low) | ((x >> S::shift) & S::high);
}

// Sets bits [B, 8) of each byte whose bit B-1 is set: the byte's sign bit
// moved up one place times 2^(8-B) - 1 fills exactly those bits, and no
// byte's product carries into the next.
template <unsigned B>
inline uint64_t sign_extend_bytes(uint64_t x) noexcept {
  constexpr uint64_t top = repeat(uint64_t(1) << (B - 1), 8);
  return x | (((x & top) << 1) * ((uint64_t(1) << (8 - B)) - 1));
}

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
constexpr bool little_endian = true;
#else
constexpr bool little_endian = false;
#endif

// Groups of 8 values in 64-bit words; returns the values done.
template <unsigned B>
inline int64_t unpack_words(unsigned char* dst, const unsigned char* src, int64_t n,
                            bool sign) noexcept {
  if constexpr (!little_endian) return 0;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8, src += B, dst += 8) {
    uint64_t x = 0;
    std::memcpy(&x, src, B);
    x = spread_step<B, 8>(spread_step<B, 16>(spread_step<B, 32>(x)));
    if (sign) x = sign_extend_bytes<B>(x);
    std::memcpy(dst, &x, 8);
  }
  return i;
}

template <unsigned B>
inline int64_t pack_words(unsigned char* dst, const unsigned char* src, int64_t n) noexcept {
  if constexpr (!little_endian) return 0;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8, src += 8, dst += B) {
    uint64_t x;
    std::memcpy(&x, src, 8);
    x &= repeat(low_bits(B), 8);
    x = gather_step<B, 32>(gather_step<B, 16>(gather_step<B, 8>(x)));
    std::memcpy(dst, &x, B);
  }
  return i;
}

template <unsigned B>
inline int64_t extend_words(unsigned char* dst, const unsigned char* src, int64_t n,
                            bool sign) noexcept {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t x;
    std::memcpy(&x, src + i, 8);
    x &= repeat(low_bits(B), 8);
    if (sign) x = sign_extend_bytes<B>(x);
    std::memcpy(dst + i, &x, 8);
  }
  return i;
}

#if defined(DLBRIDGE_AVX2_KERNELS)
// GCC 12's own AVX-512 header trips -Wuninitialized and, at -O2,
// -Wmaybe-uninitialized (its GCC bug 105593) wherever an intrinsic that
// leaves lanes undefined is inlined.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// The steps above on 256-bit vectors (four words at once).
template <unsigned B, unsigned Slot>
DLBRIDGE_TARGET_AVX2 inline __m256i spread_step(__m256i x) noexcept {
  using S = SpreadStep<B, Slot>;
  const __m256i moved = _mm256_slli_epi64(x, int(S::shift));
  if constexpr (B <= 4)
    return _mm256_and_si256(_mm256_or_si256(x, moved),
                            _mm256_set1_epi64x(int64_t(S::low | S::high)));
  return _mm256_or_si256(_mm256_and_si256(x, _mm256_set1_epi64x(int64_t(S::low))),
                         _mm256_and_si256(moved, _mm256_set1_epi64x(int64_t(S::high))));
}
template <unsigned B, unsigned Slot>
DLBRIDGE_TARGET_AVX2 inline __m256i gather_step(__m256i x) noexcept {
  using S = GatherStep<B, Slot>;
  const __m256i moved = _mm256_srli_epi64(x, int(S::shift));
  if constexpr (B <= 4)
    return _mm256_and_si256(_mm256_or_si256(x, moved),
                            _mm256_set1_epi64x(int64_t(S::low | S::high)));
  return _mm256_or_si256(_mm256_and_si256(x, _mm256_set1_epi64x(int64_t(S::low))),
                         _mm256_and_si256(moved, _mm256_set1_epi64x(int64_t(S::high))));
}

template <unsigned B>
DLBRIDGE_TARGET_AVX2 inline __m256i sign_extend(__m256i x) noexcept {
  const __m256i top = _mm256_set1_epi8(char(1u << (B - 1)));
  return _mm256_sub_epi8(_mm256_xor_si256(x, top), top);
}

// The byte shuffles of the kernels below, per 128-bit lane. Unpacking:
// bytes [0, B) to word 0 and [B, 2B) to word 1. Packing, after the steps
// left each slot's result in its low bytes: bytes 0, 2, ... (B = 4), 0, 4,
// ... (B = 2), or [0, B) and [8, 8 + B) to the front. 0x80 zeroes a byte.
template <unsigned B, bool Pack>
struct ShuffleOrder {
  struct Bytes {
    alignas(32) char at[32];
  };
  static constexpr Bytes make() noexcept {
    Bytes out{};
    for (int k = 0; k < 32; ++k) {
      const int i = k % 16;
      int from = 0x80;
      if (!Pack) from = i % 8 < int(B) ? i / 8 * int(B) + i % 8 : 0x80;
      else if (B == 4) from = i < 8 ? 2 * i : 0x80;
      else if (B == 2) from = i < 4 ? 4 * i : 0x80;
      else from = i < int(B) ? i : i < 2 * int(B) ? 8 + i - int(B) : 0x80;
      out.at[k] = char(from);
    }
    return out;
  }
  static constexpr Bytes value = make();
};

// 32 values (4B bytes from src) to 32 bytes. Widths 1, 2 and 4 start from
// a zero-extending load that puts each source byte in its own 64-, 32- or
// 16-bit slot, which does the first steps for free; other widths place B
// bytes in each 64-bit word with a byte shuffle.
template <unsigned B>
DLBRIDGE_TARGET_AVX2 inline int64_t unpack_avx2(unsigned char* dst, const unsigned char* src,
                                                int64_t n, bool sign) noexcept {
  // Bytes each block may read: the zero-extending loads read exactly
  // theirs; the shuffled ones read 16 bytes at src + 2B.
  constexpr int64_t reads = (B == 1 || B == 2 || B == 4) ? 4 * B : 2 * B + 16;
  const int64_t src_bytes = (n * B + 7) / 8;
  const __m256i control = _mm256_load_si256(reinterpret_cast<const __m256i*>(
      ShuffleOrder<B, false>::value.at));
  int64_t i = 0;
  for (; i + 32 <= n && i / 8 * B + reads <= src_bytes; i += 32, src += 4 * B, dst += 32) {
    __m256i x;
    if constexpr (B == 4) {
      x = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src)));
      x = spread_step<B, 8>(x);
    } else if constexpr (B == 2) {
      x = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(src)));
      x = spread_step<B, 8>(spread_step<B, 16>(x));
    } else if constexpr (B == 1) {
      int32_t word;
      std::memcpy(&word, src, 4);
      x = _mm256_cvtepu8_epi64(_mm_cvtsi32_si128(word));
      x = spread_step<B, 8>(spread_step<B, 16>(spread_step<B, 32>(x)));
    } else {
      const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
      const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * B));
      x = _mm256_shuffle_epi8(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1),
                              control);
      x = spread_step<B, 8>(spread_step<B, 16>(spread_step<B, 32>(x)));
    }
    if (sign) x = sign_extend<B>(x);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), x);
  }
  return i;
}

// 32 bytes to 32 values (4B bytes of dst). The reverse steps leave each
// slot's result in its low bytes; a byte shuffle and a dword permute put
// them together. Width 1 takes bit 0 of each byte with one movemask.
template <unsigned B>
DLBRIDGE_TARGET_AVX2 inline int64_t pack_avx2(unsigned char* dst, const unsigned char* src,
                                              int64_t n) noexcept {
  // Bytes each block may write: exactly its own, or 16 at dst + 2B.
  constexpr int64_t writes = (B == 1 || B == 2 || B == 4) ? 4 * B : 2 * B + 16;
  const int64_t dst_bytes = n * B / 8;  // the run's whole bytes
  const __m256i control = _mm256_load_si256(reinterpret_cast<const __m256i*>(
      ShuffleOrder<B, true>::value.at));
  int64_t i = 0;
  for (; i + 32 <= n && i / 8 * B + writes <= dst_bytes; i += 32, src += 32, dst += 4 * B) {
    __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src));
    if constexpr (B == 1) {
      const auto bits = uint32_t(_mm256_movemask_epi8(_mm256_slli_epi16(x, 7)));
      std::memcpy(dst, &bits, 4);
      continue;
    } else {
      x = _mm256_and_si256(x, _mm256_set1_epi8(char(low_bits(B))));
      x = gather_step<B, 8>(x);
      if constexpr (B != 4) x = gather_step<B, 16>(x);
      if constexpr (B != 4 && B != 2) x = gather_step<B, 32>(x);
      x = _mm256_shuffle_epi8(x, control);
      if constexpr (B == 4) {
        x = _mm256_permute4x64_epi64(x, 0x08);  // qwords 0 and 2
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm256_castsi256_si128(x));
      } else if constexpr (B == 2) {
        x = _mm256_permutevar8x32_epi32(x, _mm256_setr_epi32(0, 4, 0, 0, 0, 0, 0, 0));
        _mm_storel_epi64(reinterpret_cast<__m128i*>(dst), _mm256_castsi256_si128(x));
      } else {
        // 2B bytes of each lane, the second lane's overlapping the first's
        // unused tail; the block after this one overwrites what lies past 4B.
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm256_castsi256_si128(x));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 2 * B),
                         _mm256_extracti128_si256(x, 1));
      }
    }
  }
  return i;
}

template <unsigned B>
DLBRIDGE_TARGET_AVX2 inline int64_t extend_avx2(unsigned char* dst, const unsigned char* src,
                                                int64_t n, bool sign) noexcept {
  int64_t i = 0;
  const __m256i mask = _mm256_set1_epi8(char(low_bits(B)));
  for (; i + 32 <= n; i += 32) {
    __m256i x = _mm256_and_si256(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i)), mask);
    if (sign) x = sign_extend<B>(x);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), x);
  }
  return i;
}
#pragma GCC diagnostic pop
#endif  // DLBRIDGE_AVX2_KERNELS

#if defined(DLBRIDGE_AVX512_KERNELS)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

template <unsigned B, unsigned Slot>
DLBRIDGE_TARGET_AVX512BW inline __m512i spread_step(__m512i x) noexcept {
  static_assert(B <= 4);
  using S = SpreadStep<B, Slot>;
  return _mm512_and_si512(_mm512_or_si512(x, _mm512_slli_epi64(x, S::shift)),
                          _mm512_set1_epi64(int64_t(S::low | S::high)));
}
template <unsigned B, unsigned Slot>
DLBRIDGE_TARGET_AVX512BW inline __m512i gather_step(__m512i x) noexcept {
  static_assert(B <= 4);
  using S = GatherStep<B, Slot>;
  return _mm512_and_si512(_mm512_or_si512(x, _mm512_srli_epi64(x, S::shift)),
                          _mm512_set1_epi64(int64_t(S::low | S::high)));
}

// Widths 1, 2 and 4 only (the others take the AVX2 kernel): 64 values a
// block, from a zero-extending load and to a narrowing store.
template <unsigned B>
DLBRIDGE_TARGET_AVX512BW inline int64_t unpack_avx512(unsigned char* dst,
                                                      const unsigned char* src, int64_t n,
                                                      bool sign) noexcept {
  static_assert(B == 1 || B == 2 || B == 4);
  const __m512i top = _mm512_set1_epi8(char(1u << (B - 1)));
  int64_t i = 0;
  for (; i + 64 <= n; i += 64, src += 8 * B, dst += 64) {
    __m512i x;
    if constexpr (B == 4) {
      x = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src)));
      x = spread_step<B, 8>(x);
    } else if constexpr (B == 2) {
      x = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src)));
      x = spread_step<B, 8>(spread_step<B, 16>(x));
    } else {
      x = _mm512_cvtepu8_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(src)));
      x = spread_step<B, 8>(spread_step<B, 16>(spread_step<B, 32>(x)));
    }
    if (sign) x = _mm512_sub_epi8(_mm512_xor_si512(x, top), top);
    _mm512_storeu_si512(dst, x);
  }
  return i;
}

template <unsigned B>
DLBRIDGE_TARGET_AVX512BW inline int64_t pack_avx512(unsigned char* dst,
                                                    const unsigned char* src,
                                                    int64_t n) noexcept {
  static_assert(B == 1 || B == 2 || B == 4);
  const __m512i mask = _mm512_set1_epi8(char(low_bits(B)));
  int64_t i = 0;
  for (; i + 64 <= n; i += 64, src += 64, dst += 8 * B) {
    const __m512i in = _mm512_loadu_si512(src);
    if constexpr (B == 1) {
      const uint64_t bits = _mm512_test_epi8_mask(in, mask);
      std::memcpy(dst, &bits, 8);
    } else if constexpr (B == 2) {
      const __m512i x = gather_step<B, 16>(gather_step<B, 8>(_mm512_and_si512(in, mask)));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm512_cvtepi32_epi8(x));
    } else {
      const __m512i x = gather_step<B, 8>(_mm512_and_si512(in, mask));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), _mm512_cvtepi16_epi8(x));
    }
  }
  return i;
}
#pragma GCC diagnostic pop
#endif  // DLBRIDGE_AVX512_KERNELS

// The vector blocks, then the words, of a byte-aligned run of width B;
// returns the values done (a multiple of 8, so the run stays byte-aligned).
template <unsigned B>
inline int64_t unpack_aligned(unsigned char* dst, const unsigned char* src, int64_t n,
                              bool sign, VectorIsa isa) noexcept {
  int64_t done = 0;
#if defined(DLBRIDGE_AVX512_KERNELS)
  if constexpr (B == 1 || B == 2 || B == 4)
    if (isa == VectorIsa::avx512) done = unpack_avx512<B>(dst, src, n, sign);
#endif
#if defined(DLBRIDGE_AVX2_KERNELS)
  if (isa >= VectorIsa::avx2)
    done += unpack_avx2<B>(dst + done, src + done / 8 * B, n - done, sign);
#endif
  (void)isa;
  return done + unpack_words<B>(dst + done, src + done / 8 * B, n - done, sign);
}

template <unsigned B>
inline int64_t pack_aligned(unsigned char* dst, const unsigned char* src, int64_t n,
                            VectorIsa isa) noexcept {
  int64_t done = 0;
#if defined(DLBRIDGE_AVX512_KERNELS)
  if constexpr (B == 1 || B == 2 || B == 4)
    if (isa == VectorIsa::avx512) done = pack_avx512<B>(dst, src, n);
#endif
#if defined(DLBRIDGE_AVX2_KERNELS)
  if (isa >= VectorIsa::avx2) done += pack_avx2<B>(dst + done / 8 * B, src + done, n - done);
#endif
  (void)isa;
  return done + pack_words<B>(dst + done / 8 * B, src + done, n - done);
}

template <unsigned B>
inline int64_t extend_aligned(unsigned char* dst, const unsigned char* src, int64_t n,
                              bool sign, VectorIsa isa) noexcept {
  int64_t done = 0;
#if defined(DLBRIDGE_AVX2_KERNELS)
  if (isa >= VectorIsa::avx2) done = extend_avx2<B>(dst, src, n, sign);
#endif
  (void)isa;
  return done + extend_words<B>(dst + done, src + done, n - done, sign);
}

// kernel(std::integral_constant<unsigned, B>{}) for B = bits (1 to 7): each
// width's kernels are templates, instantiated once per width here. Another
// width does nothing and returns 0.
template <typename Kernel>
inline int64_t for_width(unsigned bits, Kernel&& kernel) noexcept {
  switch (bits) {
    case 1: return kernel(std::integral_constant<unsigned, 1>{});
    case 2: return kernel(std::integral_constant<unsigned, 2>{});
    case 3: return kernel(std::integral_constant<unsigned, 3>{});
    case 4: return kernel(std::integral_constant<unsigned, 4>{});
    case 5: return kernel(std::integral_constant<unsigned, 5>{});
    case 6: return kernel(std::integral_constant<unsigned, 6>{});
    case 7: return kernel(std::integral_constant<unsigned, 7>{});
  }
  return 0;
}

}  // namespace subbyte

// n values of `bits` bits (1 to 8) from bit `bit` of src, each to a byte of
// dst, zero- or sign-extended.
inline void unpack_run(unsigned char* dst, const unsigned char* src, int64_t bit, int64_t n,
                       unsigned bits, bool sign) noexcept {
  src += bit_pos(bit).byte;
  unsigned shift = bit_pos(bit).shift;
  for (; n > 0 && shift != 0; --n, ++dst) {
    *dst = extend_value(read_bits(src, shift, bits), bits, sign);
    shift += bits;
    src += shift / 8;
    shift %= 8;
  }
  if (bits == 8) {
    if (n > 0) std::memcpy(dst, src, size_t(n));
    return;
  }
  const VectorIsa isa = subbyte_isa().load(std::memory_order_relaxed);
  const int64_t done = subbyte::for_width(bits, [&](auto width) {
    return subbyte::unpack_aligned<decltype(width)::value>(dst, src, n, sign, isa);
  });
  unpack_reference(dst + done, src + done / 8 * bits, 0, n - done, bits, sign);
}

// The low `bits` bits (1 to 8) of n bytes of src packed from bit `bit` of
// dst; the bits of dst outside those n values keep their value.
inline void pack_run(unsigned char* dst, int64_t bit, const unsigned char* src, int64_t n,
                     unsigned bits) noexcept {
  dst += bit_pos(bit).byte;
  unsigned shift = bit_pos(bit).shift;
  for (; n > 0 && shift != 0; --n, ++src) {
    write_bits(dst, shift, bits, *src);
    shift += bits;
    dst += shift / 8;
    shift %= 8;
  }
  if (bits == 8) {
    if (n > 0) std::memcpy(dst, src, size_t(n));
    return;
  }
  const VectorIsa isa = subbyte_isa().load(std::memory_order_relaxed);
  const int64_t done = subbyte::for_width(bits, [&](auto width) {
    return subbyte::pack_aligned<decltype(width)::value>(dst, src, n, isa);
  });
  pack_reference(dst + done / 8 * bits, 0, src + done, n - done, bits);
}

// Padded values (one per byte, the value in the low `bits` bits, the rest
// unspecified) to bytes that are zero- or sign-extended; dst may be src.
inline void extend_run(unsigned char* dst, const unsigned char* src, int64_t n, unsigned bits,
                       bool sign) noexcept {
  if (bits >= 8) {
    if (dst != src && n > 0) std::memmove(dst, src, size_t(n));
    return;
  }
  const VectorIsa isa = subbyte_isa().load(std::memory_order_relaxed);
  const int64_t done = subbyte::for_width(bits, [&](auto width) {
    return subbyte::extend_aligned<decltype(width)::value>(dst, src, n, sign, isa);
  });
  for (int64_t i = done; i < n; ++i)
    dst[i] = extend_value(src[i] & ((1u << bits) - 1), bits, sign);
}

}  // namespace dlbridge::detail
