// copy_into and copy_to_compact against a naive element-by-element reference
// over random layouts (fixed seeds, so a failure reproduces), for every
// element width the planner treats differently, packed sub-byte types, the
// threaded paths, overlapping operands and every refusal.
#include <gtest/gtest.h>

#include <dlbridge/copy/copy.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace {

using dlbridge::CopyOptions;
using dlbridge::DType;
using dlbridge::ErrorCode;
using dlbridge::TensorView;
namespace dlabi = dlbridge::abi;

struct DTypeCase {
  const char* name;
  DType dtype;
  uint64_t flags;
};

// Byte widths 1, 2, 4, 8, 16 have kernels of their own; 3, 6 and 32 take
// the generic ones.
const DTypeCase byte_dtypes[] = {
    {"uint8", {dlabi::kDLUInt, 8, 1}, 0},
    {"bool", {dlabi::kDLBool, 8, 1}, 0},
    {"int16", {dlabi::kDLInt, 16, 1}, 0},
    {"float32", {dlabi::kDLFloat, 32, 1}, 0},
    {"float64", {dlabi::kDLFloat, 64, 1}, 0},
    {"complex128", {dlabi::kDLComplex, 128, 1}, 0},
    {"int24", {dlabi::kDLInt, 24, 1}, 0},
    {"float16x3", {dlabi::kDLFloat, 16, 3}, 0},
    {"complex64x4", {dlabi::kDLComplex, 64, 4}, 0},
    {"int4 padded", {dlabi::kDLInt, 4, 1}, DLBRIDGE_FLAG_IS_SUBBYTE_TYPE_PADDED},
};

const DTypeCase packed_dtypes[] = {
    {"uint1", {dlabi::kDLUInt, 1, 1}, 0},
    {"int2", {dlabi::kDLInt, 2, 1}, 0},
    {"int3", {dlabi::kDLInt, 3, 1}, 0},
    {"int4", {dlabi::kDLInt, 4, 1}, 0},
    {"float4_e2m1fn", {dlabi::kDLFloat4_e2m1fn, 4, 1}, 0},
    {"float6_e2m3fn", {dlabi::kDLFloat6_e2m3fn, 6, 1}, 0},
    {"int2x2", {dlabi::kDLInt, 2, 2}, 0},
    {"int7", {dlabi::kDLInt, 7, 1}, 0},
};

bool is_packed(const DTypeCase& t) {
  return t.dtype.is_subbyte() && !(t.flags & DLBRIDGE_FLAG_IS_SUBBYTE_TYPE_PADDED);
}

// A tensor inside its own byte buffer. Positions are in elements from the
// buffer start; `origin` is where element 0 lives.
struct Strided {
  std::vector<int64_t> shape, strides;
  int64_t origin = 0;
  std::vector<unsigned char> bytes;
};

int64_t count_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

// Sizes the buffer to exactly what the view reaches plus `pad` elements on
// each side, so that AddressSanitizer sees any read or write past it.
void place(Strided& t, const DTypeCase& type, int64_t pad) {
  int64_t low = 0, high = 0;
  if (count_of(t.shape) > 0)
    for (size_t d = 0; d < t.shape.size(); ++d) {
      const int64_t reach = t.strides[d] * (t.shape[d] - 1);
      (reach < 0 ? low : high) += reach;
    }
  t.origin = pad - low;
  const int64_t units = t.origin + high + 1 + pad;
  if (is_packed(type)) {
    // Element 0 must start a byte: DLPack addresses bytes.
    const int64_t bits = type.dtype.element_bits();
    while (t.origin * bits % 8 != 0) ++t.origin;
    t.bytes.assign(size_t((t.origin + high + 1 + pad) * bits + 7) / 8, 0);
  } else {
    t.bytes.assign(size_t(units * type.dtype.element_bytes()), 0);
  }
}

TensorView view_of(Strided& t, const DTypeCase& type, uint64_t extra_flags = 0,
                   dlbridge::Device device = {}) {
  const int64_t byte0 = is_packed(type)
                            ? t.origin * type.dtype.element_bits() / 8
                            : t.origin * int64_t(type.dtype.element_bytes());
  return TensorView::from_data(t.bytes.data() + byte0, type.dtype, t.shape,
                               t.strides, device, type.flags | extra_flags);
}

// Strides of a layout that stores the dims in the order `order` (innermost
// last), each with up to `max_gap` unused elements after it, and each
// reversed with probability 1/3. Never overlapping.
std::vector<int64_t> layout(const std::vector<int64_t>& shape,
                            const std::vector<size_t>& order, std::mt19937& rng,
                            int max_gap) {
  std::vector<int64_t> strides(shape.size());
  int64_t step = 1;
  for (size_t k = order.size(); k-- > 0;) {
    const size_t d = order[k];
    strides[d] = rng() % 3 == 0 ? -step : step;
    const int64_t gap = max_gap > 0 && rng() % 3 == 0 ? int64_t(rng() % (max_gap + 1)) : 0;
    step *= std::max<int64_t>(shape[d], 1) + gap;
  }
  // A size-1 dim may carry any stride; the copy must ignore it.
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] == 1 && rng() % 2) strides[d] = int64_t(rng() % 1000) - 500;
  return strides;
}

std::vector<int64_t> random_shape(std::mt19937& rng) {
  static const int64_t sizes[] = {1, 1, 2, 3, 4, 5, 7, 8, 9, 16, 31, 65, 70};
  std::vector<int64_t> shape(rng() % 6);
  for (auto& s : shape) s = sizes[rng() % std::size(sizes)];
  if (rng() % 20 == 0 && !shape.empty()) shape[rng() % shape.size()] = 0;
  // Keep each case small enough to run thousands.
  while (count_of(shape) > 40000)
    for (auto& s : shape) s = std::max<int64_t>(1, s / 2);
  return shape;
}

std::vector<size_t> random_order(size_t ndim, std::mt19937& rng) {
  std::vector<size_t> order(ndim);
  std::iota(order.begin(), order.end(), size_t(0));
  if (rng() % 4 != 0) std::shuffle(order.begin(), order.end(), rng);
  return order;
}

void fill_random(std::vector<unsigned char>& bytes, std::mt19937& rng) {
  for (auto& b : bytes) b = (unsigned char)(rng());
}

int get_bit(const std::vector<unsigned char>& bytes, int64_t bit) {
  return (bytes[size_t(bit / 8)] >> (bit % 8)) & 1;
}
void set_bit(std::vector<unsigned char>& bytes, int64_t bit, int value) {
  auto& b = bytes[size_t(bit / 8)];
  b = (unsigned char)(value ? b | (1u << (bit % 8)) : b & ~(1u << (bit % 8)));
}

// The definition of a copy, one element (one bit, for packed types) at a
// time over every index.
std::vector<unsigned char> reference(const Strided& src, const Strided& dst,
                                     const DTypeCase& type) {
  std::vector<unsigned char> out = dst.bytes;
  const int64_t n = count_of(src.shape);
  const size_t ndim = src.shape.size();
  for (int64_t flat = 0; flat < n; ++flat) {
    int64_t rest = flat, s = src.origin, d = dst.origin;
    for (size_t k = ndim; k-- > 0;) {
      const int64_t i = rest % src.shape[k];
      rest /= src.shape[k];
      s += i * src.strides[k];
      d += i * dst.strides[k];
    }
    if (is_packed(type)) {
      const int64_t bits = type.dtype.element_bits();
      for (int64_t b = 0; b < bits; ++b)
        set_bit(out, d * bits + b, get_bit(src.bytes, s * bits + b));
    } else {
      const size_t e = type.dtype.element_bytes();
      std::memcpy(out.data() + d * e, src.bytes.data() + s * e, e);
    }
  }
  return out;
}

const CopyOptions forced_threads{3, 1, 1};

// src (random bytes) and dst in buffers that reach `pad` elements past each
// view, src copied into dst and the whole dst buffer compared with the
// reference. Callers wrap it in ASSERT_NO_FATAL_FAILURE.
void copy_and_compare(Strided& src, Strided& dst, const DTypeCase& type, std::mt19937& rng,
                      const std::string& what, int64_t src_pad = 0, int64_t dst_pad = 0) {
  place(src, type, src_pad);
  place(dst, type, dst_pad);
  fill_random(src.bytes, rng);
  const auto expected = reference(src, dst, type);
  dlbridge::copy_into(view_of(src, type), view_of(dst, type));
  ASSERT_EQ(dst.bytes, expected) << type.name << " " << what;
}

// src and dst of one shape in independent random layouts; the whole dst
// buffer is compared, so bytes outside the view must be left alone too.
void check_random_case(const DTypeCase& type, uint32_t seed, bool broadcast) {
  std::mt19937 rng(seed);
  Strided src, dst;
  src.shape = dst.shape = random_shape(rng);
  src.strides = layout(src.shape, random_order(src.shape.size(), rng), rng, 3);
  dst.strides = layout(dst.shape, random_order(dst.shape.size(), rng), rng, 2);
  if (broadcast)
    for (size_t d = 0; d < src.shape.size(); ++d)
      if (rng() % 3 == 0) src.strides[d] = 0;
  place(src, type, int64_t(rng() % 3));
  place(dst, type, int64_t(rng() % 3));
  fill_random(src.bytes, rng);
  fill_random(dst.bytes, rng);
  const auto expected = reference(src, dst, type);
  const std::vector<unsigned char> dst_before = dst.bytes;
  for (const CopyOptions& options : {CopyOptions{}, forced_threads}) {
    dst.bytes = dst_before;
    dlbridge::copy_into(view_of(src, type), view_of(dst, type), options);
    ASSERT_EQ(dst.bytes, expected)
        << type.name << " seed " << seed << " ndim " << src.shape.size()
        << (broadcast ? " broadcast" : "") << " threads " << options.max_threads;
  }
}

TEST(CopyInto, RandomLayoutsEveryByteWidth) {
  for (const auto& type : byte_dtypes)
    for (uint32_t seed = 0; seed < 150; ++seed) check_random_case(type, seed, false);
}

TEST(CopyInto, RandomLayoutsPackedSubByte) {
  for (const auto& type : packed_dtypes)
    for (uint32_t seed = 0; seed < 150; ++seed) check_random_case(type, seed, false);
}

TEST(CopyInto, RandomBroadcastSources) {
  for (const auto& type : byte_dtypes)
    for (uint32_t seed = 1000; seed < 1040; ++seed) check_random_case(type, seed, true);
  for (const auto& type : packed_dtypes)
    for (uint32_t seed = 1000; seed < 1040; ++seed) check_random_case(type, seed, true);
}

// Rows x cols in row-major src into column-major dst (and back): the cache-
// blocked kernels, with sizes that leave ragged tiles and 4x4 / 2x2 remainders.
TEST(CopyInto, TransposesOfEveryShapeClass) {
  std::mt19937 rng(7);
  const int64_t sides[] = {1, 2, 3, 4, 5, 17, 63, 64, 65, 130};
  for (const auto& type : byte_dtypes)
    for (int64_t rows : sides)
      for (int64_t cols : sides) {
        Strided src, dst;
        src.shape = dst.shape = {rows, cols};
        src.strides = {cols, 1};
        dst.strides = {1, rows};
        ASSERT_NO_FATAL_FAILURE(copy_and_compare(
            src, dst, type, rng, std::to_string(rows) + "x" + std::to_string(cols)));
      }
}

// Transposes of 4 MiB and more whose dst rows are whole lines apart go in
// streamed whole lines: AVX-512 blocks for 4- and 8-byte elements where the
// CPU has them, SSE line tiles otherwise; both run here when it has them.
// Ragged sizes and a dst that starts off a line send the edges through the
// small tiles; rows that are not whole lines apart go in small tiles only.
TEST(CopyInto, LargeTransposesUseTheStreamingKernels) {
  struct Case {
    size_t type;
    int64_t rows, cols, pad;
  };
  const Case cases[] = {
      {3, 1030, 1024, 0},  // float32: 4096-byte dst rows
      {3, 1024, 1040, 3},  // float32, dst off a line boundary
      {3, 1030, 1100, 0},  // float32, dst rows not whole lines apart
      {4, 730, 744, 1},    // float64
      {4, 730, 740, 0},    // float64, small tiles
      {2, 1500, 1472, 0},  // int16
      {2, 1500, 1470, 0},  // int16, small tiles
      {0, 2100, 2048, 5},  // uint8
      {0, 2100, 2060, 1},  // uint8, small tiles
  };
  std::vector<bool> avx512_settings = {false};
#if defined(DLBRIDGE_AVX512_KERNELS)
  std::atomic<bool>& allowed = dlbridge::detail::avx512_allowed();
  const bool supported = allowed.load();
  if (supported) avx512_settings.push_back(true);
#endif
  for (const bool avx512 : avx512_settings) {
#if defined(DLBRIDGE_AVX512_KERNELS)
    allowed = avx512;
#endif
    std::mt19937 rng(23);
    for (const Case& c : cases) {
      const DTypeCase& type = byte_dtypes[c.type];
      Strided src, dst;
      src.shape = dst.shape = {c.rows, c.cols};
      src.strides = {1, c.rows};  // column-major source
      dst.strides = {c.cols, 1};
      copy_and_compare(src, dst, type, rng,
                       std::to_string(c.rows) + "x" + std::to_string(c.cols) +
                           (avx512 ? " avx512" : " sse"),
                       0, c.pad);
      if (HasFatalFailure()) break;
    }
  }
#if defined(DLBRIDGE_AVX512_KERNELS)
  allowed = supported;
#endif
}

// The inner two dims of a 4-D tensor swapped, with a reversed outer dim.
TEST(CopyInto, BatchedTransposeWithNegativeOuterStride) {
  const DTypeCase& type = byte_dtypes[3];  // float32, the SSE 4x4 kernel
  std::mt19937 rng(11);
  Strided src, dst;
  src.shape = dst.shape = {3, 2, 67, 70};
  src.strides = {-2 * 67 * 70, 67 * 70, 70, 1};
  dst.strides = {2 * 67 * 70, 67 * 70, 1, 67};
  copy_and_compare(src, dst, type, rng, "3x2x67x70", 1, 1);
}

// Reversing a vector in every width: negative strides on one side only.
TEST(CopyInto, ReversedVectors) {
  std::mt19937 rng(3);
  for (const auto& type : byte_dtypes) {
    Strided src, dst;
    src.shape = dst.shape = {1001};
    src.strides = {-1};
    dst.strides = {1};
    ASSERT_NO_FATAL_FAILURE(copy_and_compare(src, dst, type, rng, "1001 reversed"));
  }
}

// The vector row kernels (a reversed source, an every-other-element source,
// into a compact row) in each width they take, at every length around their
// vector and tail boundaries, in buffers that end at the last element read
// (AddressSanitizer sees a load past it), and inside a 2-D slice.
TEST(CopyInto, ReversedAndEveryOtherRowsOfEveryLength) {
  std::mt19937 rng(29);
  for (size_t t : {size_t(0), size_t(2), size_t(3), size_t(4)})  // 1, 2, 4, 8 bytes
    for (int64_t step : {int64_t(-1), int64_t(2)})
      for (int64_t n = 0; n <= 40; ++n) {
        const DTypeCase& type = byte_dtypes[t];
        Strided src, dst;
        src.shape = dst.shape = {n};
        src.strides = {step};
        dst.strides = {1};
        ASSERT_NO_FATAL_FAILURE(copy_and_compare(
            src, dst, type, rng, "step " + std::to_string(step) + " n " + std::to_string(n)));
      }
  for (size_t t : {size_t(0), size_t(2), size_t(3), size_t(4)}) {
    const DTypeCase& type = byte_dtypes[t];
    Strided src, dst;
    src.shape = dst.shape = {9, 37};
    src.strides = {-2 * 37 - 3, 2};  // a[::-1, ::2] of a 9 x 77 array
    dst.strides = {37, 1};
    ASSERT_NO_FATAL_FAILURE(copy_and_compare(src, dst, type, rng, "a[::-1, ::2]"));
  }
}

TEST(CopyInto, ZeroDimCopiesOneElement) {
  for (const auto& type : byte_dtypes) {
    std::vector<unsigned char> a(type.dtype.element_bytes(), 0xAB);
    std::vector<unsigned char> b(type.dtype.element_bytes(), 0x00);
    dlbridge::copy_into(TensorView::from_data(a.data(), type.dtype, {}, {}, {}, type.flags),
                        TensorView::from_data(b.data(), type.dtype, {}, {}, {}, type.flags));
    EXPECT_EQ(a, b) << type.name;
  }
  // A packed 0-d int4 writes its low 4 bits and keeps the high ones.
  const DType int4{dlabi::kDLInt, 4, 1};
  unsigned char src = 0x5A, dst = 0xF0;
  dlbridge::copy_into(TensorView::from_data(&src, int4, {}),
                      TensorView::from_data(&dst, int4, {}));
  EXPECT_EQ(dst, 0xFA);
}

TEST(CopyInto, SizeZeroTouchesNothing) {
  const DType f32 = dlbridge::dtype_of<float>();
  // NULL data is legal for size 0, on both sides.
  dlbridge::copy_into(TensorView::from_data(nullptr, f32, {3, 0, 2}),
                      TensorView::from_data(nullptr, f32, {3, 0, 2}, {1, 7, -5}));
  const DType int4{dlabi::kDLInt, 4, 1};
  dlbridge::copy_into(TensorView::from_data(nullptr, int4, {0}),
                      TensorView::from_data(nullptr, int4, {0}));
}

// Packed rows that start mid-byte on one side and byte-aligned on the
// other, with odd lengths, checked bit for bit including the neighbours.
TEST(CopyInto, PackedRowsWithOddStartsAndLengths) {
  std::mt19937 rng(5);
  for (const auto& type : packed_dtypes)
    for (int64_t rows : {1, 2, 5})
      for (int64_t cols : {1, 3, 8, 9, 33})
        for (int64_t row_stride : {cols, cols + 1, cols + 3}) {
          Strided src, dst;
          src.shape = dst.shape = {rows, cols};
          src.strides = {row_stride, 1};
          dst.strides = {cols + 2, 1};
          place(src, type, 0);
          place(dst, type, 0);
          fill_random(src.bytes, rng);
          fill_random(dst.bytes, rng);
          const auto expected = reference(src, dst, type);
          dlbridge::copy_into(view_of(src, type), view_of(dst, type), forced_threads);
          ASSERT_EQ(dst.bytes, expected)
              << type.name << " " << rows << "x" << cols << " stride " << row_stride;
        }
}

// Contiguous packed copies split across threads on byte boundaries; the
// last partial byte of dst keeps its foreign bits.
TEST(CopyInto, PackedContiguousThreaded) {
  std::mt19937 rng(9);
  for (const auto& type : packed_dtypes)
    for (int64_t n : {1, 7, 8, 9, 1001, 100003}) {
      Strided src, dst;
      src.shape = dst.shape = {n};
      src.strides = dst.strides = {1};
      place(src, type, 0);
      place(dst, type, 0);
      fill_random(src.bytes, rng);
      fill_random(dst.bytes, rng);
      const auto expected = reference(src, dst, type);
      dlbridge::copy_into(view_of(src, type), view_of(dst, type), forced_threads);
      ASSERT_EQ(dst.bytes, expected) << type.name << " n=" << n;
    }
}

// Large enough that every kernel is split across threads, including the
// chunked paths where there are fewer outer rows than threads.
TEST(CopyInto, ThreadedKernels) {
  std::mt19937 rng(13);
  const DTypeCase& f32 = byte_dtypes[3];
  const CopyOptions many{4, 1, 1};
  struct Case {
    std::vector<int64_t> shape, src_strides, dst_strides;
  };
  const Case cases[] = {
      {{1 << 20}, {1}, {1}},                   // one memcpy, page pieces
      {{1000, 777}, {777, 1}, {1, 1000}},       // blocked transpose
      {{2, 300, 500}, {1, 2, 600}, {150000, 500, 1}},  // blocked, 2 outer rows
      {{100001}, {3}, {1}},                     // strided, one row in chunks
      {{3, 50000}, {50000 * 2, 2}, {1, 3}},     // strided, 3 rows
  };
  for (const Case& c : cases) {
    Strided src, dst;
    src.shape = dst.shape = c.shape;
    src.strides = c.src_strides;
    dst.strides = c.dst_strides;
    place(src, f32, 0);
    place(dst, f32, 0);
    fill_random(src.bytes, rng);
    const auto expected = reference(src, dst, f32);
    for (const CopyOptions& options : {many, CopyOptions{1, 1, 1}}) {
      std::fill(dst.bytes.begin(), dst.bytes.end(), 0);
      dlbridge::copy_into(view_of(src, f32), view_of(dst, f32), options);
      ASSERT_EQ(dst.bytes, expected) << "shape[0] " << c.shape[0];
    }
  }
}

// src and dst in one buffer: the result must be what src held before the
// copy began, in every direction of overlap.
TEST(CopyInto, OverlappingOperandsGoThroughATemporary) {
  const DType f32 = dlbridge::dtype_of<float>();
  for (int64_t shift : {-5, -1, 1, 5}) {
    std::vector<float> buf(100);
    std::iota(buf.begin(), buf.end(), 0.0f);
    const std::vector<float> before = buf;
    float* src = buf.data() + 10;
    float* dst = src + shift;
    dlbridge::copy_into(TensorView::from_data(src, f32, {80}),
                        TensorView::from_data(dst, f32, {80}));
    for (int i = 0; i < 80; ++i) ASSERT_EQ(dst[i], before[10 + i]) << shift;
  }
  // A square matrix transposed onto itself.
  std::vector<double> m(37 * 37);
  std::iota(m.begin(), m.end(), 0.0);
  const std::vector<double> original = m;
  const DType f64 = dlbridge::dtype_of<double>();
  dlbridge::copy_into(TensorView::from_data(m.data(), f64, {37, 37}, {1, 37}),
                      TensorView::from_data(m.data(), f64, {37, 37}));
  for (int i = 0; i < 37; ++i)
    for (int j = 0; j < 37; ++j) ASSERT_EQ(m[i * 37 + j], original[j * 37 + i]);
  // Packed: shift an int4 run by one byte (two elements) within its buffer.
  const DType int4{dlabi::kDLInt, 4, 1};
  std::vector<unsigned char> packed(20);
  std::iota(packed.begin(), packed.end(), (unsigned char)1);
  const auto packed_before = packed;
  dlbridge::copy_into(TensorView::from_data(packed.data(), int4, {30}),
                      TensorView::from_data(packed.data() + 1, int4, {30}));
  for (int i = 0; i < 15; ++i) ASSERT_EQ(packed[1 + i], packed_before[i]);
  EXPECT_EQ(packed[16], packed_before[16]);
}

TEST(CopyInto, ExactAliasIsANoOp) {
  std::vector<int32_t> a(12);
  std::iota(a.begin(), a.end(), 0);
  const DType i32 = dlbridge::dtype_of<int32_t>();
  // Size-1 dims may differ in stride and still be the same elements.
  dlbridge::copy_into(TensorView::from_data(a.data(), i32, {3, 1, 4}, {4, 99, 1}),
                      TensorView::from_data(a.data(), i32, {3, 1, 4}, {4, 1, 1}));
  for (int i = 0; i < 12; ++i) EXPECT_EQ(a[i], i);
}

// Compact row-major pairs are one memcpy (copy_compact_pair); a size-1 dim
// may carry any stride in either and still be compact.
TEST(CopyInto, CompactPairsWithAnyStrideOnSize1Dims) {
  std::vector<int32_t> a(12), b(12, -1);
  std::iota(a.begin(), a.end(), 0);
  const DType i32 = dlbridge::dtype_of<int32_t>();
  dlbridge::copy_into(TensorView::from_data(a.data(), i32, {3, 1, 4}, {4, 99, 1}),
                      TensorView::from_data(b.data(), i32, {3, 1, 4}, {4, -7, 1}));
  EXPECT_EQ(a, b);
  // 0-d: one element, no dims to walk.
  int32_t x = 5, y = 0;
  dlbridge::copy_into(TensorView::from_data(&x, i32, {}), TensorView::from_data(&y, i32, {}));
  EXPECT_EQ(y, 5);
}

// The memory kinds a CPU may touch directly all take the same path.
TEST(CopyInto, AcceptsEveryHostAccessibleDevice) {
  const DType u8 = dlbridge::dtype_of<uint8_t>();
  for (auto type : {dlabi::kDLCPU, dlabi::kDLCUDAHost, dlabi::kDLROCMHost,
                    dlabi::kDLCUDAManaged}) {
    std::vector<uint8_t> a{1, 2, 3}, b(3);
    dlbridge::copy_into(TensorView::from_data(a.data(), u8, {3}, {}, {type, 0}),
                        TensorView::from_data(b.data(), u8, {3}, {}, {type, 0}));
    EXPECT_EQ(a, b);
  }
}

void expect_code(ErrorCode code, const TensorView& src, const TensorView& dst,
                 const char* needle) {
  try {
    dlbridge::copy_into(src, dst);
    ADD_FAILURE() << "no error, expected " << dlbridge::error_code_name(code);
  } catch (const dlbridge::Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(CopyIntoErrors, MismatchedArguments) {
  std::vector<float> a(12), b(12);
  const DType f32 = dlbridge::dtype_of<float>();
  const DType i32 = dlbridge::dtype_of<int32_t>();
  expect_code(ErrorCode::invalid_argument, TensorView::from_data(a.data(), f32, {12}),
              TensorView::from_data(b.data(), i32, {12}), "dtype float32");
  expect_code(ErrorCode::invalid_argument, TensorView::from_data(a.data(), f32, {3, 4}),
              TensorView::from_data(b.data(), f32, {4, 3}), "shape (3, 4)");
  expect_code(ErrorCode::invalid_argument, TensorView::from_data(a.data(), f32, {12}),
              TensorView::from_data(b.data(), f32, {12, 1}), "shape (12,)");
  const DType int4{dlabi::kDLInt, 4, 1};
  expect_code(ErrorCode::invalid_argument, TensorView::from_data(a.data(), int4, {8}),
              TensorView::from_data(b.data(), int4, {8}, {}, {},
                                    DLBRIDGE_FLAG_IS_SUBBYTE_TYPE_PADDED),
              "packed and dst is padded");
}

TEST(CopyIntoErrors, DeviceMemoryIsUnavailable) {
  std::vector<float> a(4), b(4);
  const DType f32 = dlbridge::dtype_of<float>();
  const dlbridge::Device cuda{dlabi::kDLCUDA, 0};
  expect_code(ErrorCode::device_unavailable,
              TensorView::from_data(a.data(), f32, {4}, {}, cuda),
              TensorView::from_data(b.data(), f32, {4}), "src lives on cuda:0");
  expect_code(ErrorCode::device_unavailable, TensorView::from_data(a.data(), f32, {4}),
              TensorView::from_data(b.data(), f32, {4}, {}, {dlabi::kDLROCM, 1}),
              "dst lives on rocm:1");
}

TEST(CopyIntoErrors, ReadOnlyDestination) {
  std::vector<float> a(4), b(4);
  const DType f32 = dlbridge::dtype_of<float>();
  expect_code(ErrorCode::read_only, TensorView::from_data(a.data(), f32, {4}),
              TensorView::from_data(b.data(), f32, {4}, {}, {}, DLBRIDGE_FLAG_READ_ONLY),
              "dst is read-only");
}

TEST(CopyIntoErrors, DestinationThatOverlapsItself) {
  std::vector<float> a(16), b(16);
  const DType f32 = dlbridge::dtype_of<float>();
  expect_code(ErrorCode::unsupported_layout, TensorView::from_data(a.data(), f32, {4, 4}),
              TensorView::from_data(b.data(), f32, {4, 4}, {0, 1}), "stride 0");
  expect_code(ErrorCode::unsupported_layout, TensorView::from_data(a.data(), f32, {3, 3}),
              TensorView::from_data(b.data(), f32, {3, 3}, {1, 1}), "share one address");
  // Stride 0 over a size-1 dim writes each element once and is fine.
  dlbridge::copy_into(TensorView::from_data(a.data(), f32, {1, 4}),
                      TensorView::from_data(b.data(), f32, {1, 4}, {0, 1}));
}

// (3, 2) with strides (2, 3) reaches offsets 0 2 4 3 5 7: interleaved but
// distinct, so the exact check must accept what the quick one cannot prove.
TEST(CopyIntoErrors, InterleavedButDistinctDestinationIsAccepted) {
  std::vector<int16_t> src{1, 2, 3, 4, 5, 6}, dst(8, -1);
  const DType i16 = dlbridge::dtype_of<int16_t>();
  dlbridge::copy_into(TensorView::from_data(src.data(), i16, {3, 2}),
                      TensorView::from_data(dst.data(), i16, {3, 2}, {2, 3}));
  EXPECT_EQ(dst, (std::vector<int16_t>{1, -1, 3, 2, 5, 4, -1, 6}));
}

TEST(CopyToCompact, OwnsAlignedWritableRowMajorCopy) {
  std::vector<double> m(6 * 5);
  std::iota(m.begin(), m.end(), 0.0);
  // A transposed, reversed, read-only view.
  const auto src = TensorView::from_data(m.data() + 4, dlbridge::dtype_of<double>(),
                                         {5, 6}, {-1, 5}, {}, DLBRIDGE_FLAG_READ_ONLY);
  dlbridge::ManagedTensor out = dlbridge::copy_to_compact(src);
  const TensorView& v = out.view();
  EXPECT_TRUE(out.is_versioned());
  EXPECT_EQ(out.flags(), uint64_t(DLBRIDGE_FLAG_IS_COPIED));
  EXPECT_TRUE(v.is_c_contiguous());
  EXPECT_EQ(v.device().type, dlabi::kDLCPU);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data()) % 64, 0u);
  const auto* data = static_cast<const double*>(v.data());
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 6; ++j) ASSERT_EQ(data[i * 6 + j], m[4 - i + 5 * j]);
}

TEST(CopyToCompact, KeepsPackedAndPaddedSubByteLayouts) {
  const DType fp4{dlabi::kDLFloat4_e2m1fn, 4, 1};
  std::vector<unsigned char> packed{0x21, 0x43, 0x65, 0x87};
  // Every other element of 8, reversed: elements 6, 4, 2, 0 -> 7, 5, 3, 1.
  auto out = dlbridge::copy_to_compact(
      TensorView::from_data(packed.data() + 3, fp4, {4}, {-2}), 0);
  EXPECT_EQ(out.flags(), 0u);
  EXPECT_EQ(out.view().nbytes(), 2);
  const auto* bytes = static_cast<const unsigned char*>(out.view().data());
  EXPECT_EQ(bytes[0], 0x57);
  EXPECT_EQ(bytes[1], 0x13);

  std::vector<unsigned char> padded{1, 2, 3};
  auto padded_out = dlbridge::copy_to_compact(
      TensorView::from_data(padded.data(), fp4, {3}, {}, {},
                            DLBRIDGE_FLAG_IS_SUBBYTE_TYPE_PADDED));
  EXPECT_EQ(padded_out.flags(),
            uint64_t(DLBRIDGE_FLAG_IS_COPIED | DLBRIDGE_FLAG_IS_SUBBYTE_TYPE_PADDED));
  EXPECT_EQ(padded_out.view().nbytes(), 3);
  EXPECT_EQ(std::memcmp(padded_out.view().data(), padded.data(), 3), 0);
}

TEST(CopyToCompact, SizeZeroAndExtraFlags) {
  auto out = dlbridge::copy_to_compact(
      TensorView::from_data(nullptr, dlbridge::dtype_of<float>(), {4, 0}),
      DLBRIDGE_FLAG_IS_COPIED | DLBRIDGE_FLAG_READ_ONLY);
  EXPECT_EQ(out.view().size(), 0);
  EXPECT_NE(out.view().data(), nullptr);
  EXPECT_TRUE(out.view().readonly());
}

// The planner's choices are what make copies fast; pin the main ones.
TEST(CopyPlan, ReducesLayoutsToTheCheapestKernel) {
  using dlbridge::detail::ByteKernel;
  using dlbridge::detail::plan_byte_copy;
  // Reversed strides move the base pointer back, so it sits mid-buffer.
  std::vector<char> storage(1024);
  char* buf = storage.data() + 512;
  const int64_t shape[] = {4, 5, 6};
  const int64_t c_order[] = {30, 6, 1};
  const int64_t reversed[] = {-30, -6, -1};
  const int64_t f_order[] = {1, 4, 20};
  // Contiguous, and contiguous reversed on both sides, is one block.
  auto plan = plan_byte_copy(buf, buf, 4, 3, shape, c_order, c_order, 120);
  EXPECT_EQ(plan.kernel, ByteKernel::contiguous);
  EXPECT_EQ(plan.elem, 480);
  plan = plan_byte_copy(buf, buf, 4, 3, shape, reversed, reversed, 120);
  EXPECT_EQ(plan.kernel, ByteKernel::contiguous);
  // C order into F order: a blocked transpose over all three dims.
  plan = plan_byte_copy(buf, buf, 4, 3, shape, c_order, f_order, 120);
  EXPECT_EQ(plan.kernel, ByteKernel::blocked);
  // Rows contiguous on both sides become single moves of 24 bytes.
  const int64_t padded_rows[] = {40, 8, 1};
  plan = plan_byte_copy(buf, buf, 4, 3, shape, padded_rows, c_order, 120);
  EXPECT_EQ(plan.kernel, ByteKernel::strided);
  EXPECT_EQ(plan.elem, 24);
}

}  // namespace

std::vector<unsigned char> bytes_of(const dlbridge::ManagedTensor& t) {
  const auto* b = static_cast<const unsigned char*>(t.view().data());
  return std::vector<unsigned char>(b, b + t.view().nbytes());
}

TEST(CopyUnpacked, GivesPackedSubByteValuesAByteEach) {
  // uint4 elements 0..5 are 1..6; strides {1, 2} read them transposed.
  std::vector<unsigned char> packed{0x21, 0x43, 0x65};
  const DType u4{dlabi::kDLUInt, 4, 1};
  auto out = dlbridge::copy_unpacked(TensorView::from_data(packed.data(), u4, {2, 3}, {1, 2}));
  EXPECT_EQ(out.view().dtype(), u4);
  EXPECT_TRUE(out.view().is_c_contiguous());
  EXPECT_EQ(out.flags(), uint64_t(DLBRIDGE_FLAG_IS_COPIED | DLBRIDGE_FLAG_IS_SUBBYTE_TYPE_PADDED));
  EXPECT_EQ(bytes_of(out), (std::vector<unsigned char>{1, 3, 5, 2, 4, 6}));
}

TEST(CopyUnpacked, ReadsFP6AcrossByteBoundariesAndPaddedSources) {
  const uint32_t word = 0x01u | 0x22u << 6 | 0x33u << 12 | 0x3fu << 18;
  std::vector<unsigned char> packed{uint8_t(word), uint8_t(word >> 8), uint8_t(word >> 16)};
  const DType fp6{dlabi::kDLFloat6_e2m3fn, 6, 1};
  EXPECT_EQ(bytes_of(dlbridge::copy_unpacked(TensorView::from_data(packed.data(), fp6, {4}))),
            (std::vector<unsigned char>{0x01, 0x22, 0x33, 0x3f}));
  // Every other element: 0x01, 0x33.
  EXPECT_EQ(bytes_of(dlbridge::copy_unpacked(TensorView::from_data(packed.data(), fp6, {2}, {2}))),
            (std::vector<unsigned char>{0x01, 0x33}));

  std::vector<unsigned char> padded{9, 8, 7};
  EXPECT_EQ(bytes_of(dlbridge::copy_unpacked(TensorView::from_data(
                padded.data() + 2, fp6, {3}, {-1}, {}, DLBRIDGE_FLAG_IS_SUBBYTE_TYPE_PADDED))),
            (std::vector<unsigned char>{7, 8, 9}));
}

TEST(CopyUnpacked, SplitsLanesIntoATrailingAxis) {
  // PyTorch's float4_e2m1fn_x2: two lanes per byte, lane 0 in the low bits.
  std::vector<unsigned char> x2{0x21, 0x43};
  auto out = dlbridge::copy_unpacked(
      TensorView::from_data(x2.data(), DType{dlabi::kDLFloat4_e2m1fn, 4, 2}, {2}));
  ASSERT_EQ(out.view().ndim(), 2);
  EXPECT_EQ(out.view().shape(0), 2);
  EXPECT_EQ(out.view().shape(1), 2);
  EXPECT_EQ(out.view().dtype(), (DType{dlabi::kDLFloat4_e2m1fn, 4, 1}));
  EXPECT_EQ(bytes_of(out), (std::vector<unsigned char>{1, 2, 3, 4}));

  // Whole-byte lanes: int16x2, read in reverse.
  std::vector<int16_t> wide{1, 2, 3, 4, 5, 6};
  auto lanes = dlbridge::copy_unpacked(
      TensorView::from_data(wide.data() + 4, DType{dlabi::kDLInt, 16, 2}, {3}, {-1}), 0);
  EXPECT_EQ(lanes.flags(), 0u);
  const auto* w = static_cast<const int16_t*>(lanes.view().data());
  EXPECT_EQ(std::vector<int16_t>(w, w + 6), (std::vector<int16_t>{5, 6, 3, 4, 1, 2}));
}

void expect_unpack_code(ErrorCode code, const TensorView& src) {
  try {
    dlbridge::copy_unpacked(src);
    ADD_FAILURE() << "no error, expected " << dlbridge::error_code_name(code);
  } catch (const dlbridge::Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
  }
}

TEST(CopyUnpacked, Refusals) {
  std::vector<unsigned char> data(8);
  // 12-bit lanes neither share bytes nor fill whole ones.
  expect_unpack_code(ErrorCode::unsupported_dtype,
                     TensorView::from_data(data.data(), DType{dlabi::kDLInt, 12, 1}, {2}));
  const dlbridge::Device cuda{dlabi::kDLCUDA, 0};
  expect_unpack_code(ErrorCode::device_unavailable,
                     TensorView::from_data(data.data(), DType{dlabi::kDLUInt, 4, 1}, {2}, {}, cuda));
}
