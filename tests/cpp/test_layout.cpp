// Layout arithmetic sees shapes and strides straight from foreign producers,
// so besides ordinary tensors these tests feed it values chosen to overflow
// int64 at every intermediate step; UBSan runs the same file and would flag
// any product or sum that wrapped instead of being reported.
#include <gtest/gtest.h>

#include <dlbridge/layout.hpp>

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace {

using dlbridge::byte_extent;
using dlbridge::compact_nbytes;
using dlbridge::compact_strides;
using dlbridge::DType;
using dlbridge::element_count;
using dlbridge::is_c_contiguous;
using dlbridge::is_f_contiguous;
namespace dlabi = dlbridge::abi;

constexpr int64_t two_62 = int64_t(1) << 62;
constexpr DType f32{dlabi::kDLFloat, 32, 1};
constexpr DType u8{dlabi::kDLUInt, 8, 1};
constexpr DType i4{dlabi::kDLInt, 4, 1};
constexpr DType fp4{dlabi::kDLFloat4_e2m1fn, 4, 1};
constexpr DType fp4x2{dlabi::kDLFloat4_e2m1fn, 4, 2};  // PyTorch's spelling
constexpr DType fp6{dlabi::kDLFloat6_e2m3fn, 6, 1};

int32_t rank(const std::vector<int64_t>& shape) { return int32_t(shape.size()); }

std::optional<int64_t> count(const std::vector<int64_t>& shape) {
  return element_count(rank(shape), shape.data());
}

std::optional<dlbridge::ByteExtent> extent(const std::vector<int64_t>& shape,
                                           const std::vector<int64_t>& strides,
                                           DType dtype, bool padded = false) {
  auto n = count(shape);
  EXPECT_TRUE(n.has_value());
  return byte_extent(rank(shape), shape.data(), strides.data(), dtype, padded,
                     n.value_or(0));
}

TEST(ElementCount, OrdinaryShapes) {
  EXPECT_EQ(count({}), 1);  // 0-d holds one element
  EXPECT_EQ(count({7}), 7);
  EXPECT_EQ(count({2, 3, 4}), 24);
  EXPECT_EQ(count({1, 1, 1}), 1);
}

TEST(ElementCount, ZeroDimWinsOverHugeDims) {
  // Multiplying left to right would overflow before reaching the zero.
  EXPECT_EQ(count({two_62, two_62, 0}), 0);
  EXPECT_EQ(count({0, INT64_MAX, INT64_MAX}), 0);
  EXPECT_EQ(count({INT64_MAX, 0}), 0);
}

TEST(ElementCount, OverflowIsReported) {
  EXPECT_EQ(count({two_62, 4}), std::nullopt);
  EXPECT_EQ(count({two_62, 2}), std::nullopt);
  // 2^32 * 2^32 wraps to exactly 0 in 64 bits: a wrapping multiply would
  // call this an empty tensor.
  EXPECT_EQ(count({int64_t(1) << 32, int64_t(1) << 32}), std::nullopt);
  // 3 * 3074457345618258603 wraps to 1.
  EXPECT_EQ(count({3, 3074457345618258603}), std::nullopt);
  EXPECT_EQ(count({INT64_MAX, INT64_MAX}), std::nullopt);
}

TEST(ElementCount, LargestRepresentableCount) {
  EXPECT_EQ(count({two_62, 1}), two_62);
  EXPECT_EQ(count({INT64_MAX}), INT64_MAX);
  EXPECT_EQ(count({two_62 / 2, 2, 1}), two_62);
}

// The one shape formatter writes dims as Python writes a tuple, so C++
// messages and Python reprs of one tensor read the same.
TEST(DimsText, WritesATupleAsPythonDoes) {
  const int64_t dims[] = {2, -3, INT64_MAX};
  EXPECT_EQ(dlbridge::dims_text(0, nullptr), "()");
  EXPECT_EQ(dlbridge::dims_text(1, dims), "(2,)");
  EXPECT_EQ(dlbridge::dims_text(3, dims), "(2, -3, 9223372036854775807)");
}

TEST(CompactStrides, RowMajor) {
  std::vector<int64_t> shape{2, 3, 4}, strides(3, -1);
  compact_strides(3, shape.data(), strides.data());
  EXPECT_EQ(strides, (std::vector<int64_t>{12, 4, 1}));
}

TEST(CompactStrides, SizeOneAndSizeZeroDims) {
  std::vector<int64_t> shape{5, 1, 0, 3}, strides(4, -1);
  compact_strides(4, shape.data(), strides.data());
  // Size-0 and size-1 dims do not scale the dims outside them.
  EXPECT_EQ(strides, (std::vector<int64_t>{3, 3, 3, 1}));
}

TEST(CompactStrides, ZeroDimWritesNothing) {
  int64_t sentinel = 42;
  compact_strides(0, nullptr, &sentinel);
  EXPECT_EQ(sentinel, 42);
}

TEST(CompactStrides, OverflowSaturatesInsteadOfWrapping) {
  std::vector<int64_t> shape{3, two_62, 4}, strides(3, 0);
  compact_strides(3, shape.data(), strides.data());
  EXPECT_EQ(strides[2], 1);
  EXPECT_EQ(strides[1], 4);
  EXPECT_EQ(strides[0], INT64_MAX);
}

TEST(Contiguity, CompactStridesAreCContiguous) {
  std::vector<int64_t> shape{2, 3, 4}, c{12, 4, 1}, f{1, 2, 6};
  EXPECT_TRUE(is_c_contiguous(3, shape.data(), c.data()));
  EXPECT_FALSE(is_f_contiguous(3, shape.data(), c.data()));
  EXPECT_TRUE(is_f_contiguous(3, shape.data(), f.data()));
  EXPECT_FALSE(is_c_contiguous(3, shape.data(), f.data()));
}

TEST(Contiguity, OneFunctionTakesTheOrder) {
  std::vector<int64_t> shape{2, 3, 4}, c{12, 4, 1}, f{1, 2, 6};
  using dlbridge::Order;
  EXPECT_TRUE(dlbridge::is_contiguous(3, shape.data(), c.data(), Order::c));
  EXPECT_FALSE(dlbridge::is_contiguous(3, shape.data(), c.data(), Order::f));
  EXPECT_TRUE(dlbridge::is_contiguous(3, shape.data(), f.data(), Order::f));
  EXPECT_FALSE(dlbridge::is_contiguous(3, shape.data(), f.data(), Order::c));
  // Both orders agree on what carries no layout: size 1 and size 0.
  std::vector<int64_t> vector_shape{1, 5, 1}, any{99, 1, -3}, empty_shape{2, 0}, junk{-5, 7};
  for (Order order : {Order::c, Order::f}) {
    EXPECT_TRUE(dlbridge::is_contiguous(3, vector_shape.data(), any.data(), order));
    EXPECT_TRUE(dlbridge::is_contiguous(2, empty_shape.data(), junk.data(), order));
  }
}

TEST(Contiguity, SizeOneDimsMayCarryAnyStride) {
  std::vector<int64_t> shape{1, 3, 1, 4}, strides{-7, 4, 999, 1};
  EXPECT_TRUE(is_c_contiguous(4, shape.data(), strides.data()));
  std::vector<int64_t> fshape{4, 1, 3}, fstrides{1, 0, 4};
  EXPECT_TRUE(is_f_contiguous(3, fshape.data(), fstrides.data()));
}

TEST(Contiguity, OneDimensionalIsBothOrders) {
  std::vector<int64_t> shape{5}, unit{1}, two{2};
  EXPECT_TRUE(is_c_contiguous(1, shape.data(), unit.data()));
  EXPECT_TRUE(is_f_contiguous(1, shape.data(), unit.data()));
  EXPECT_FALSE(is_c_contiguous(1, shape.data(), two.data()));
  EXPECT_FALSE(is_f_contiguous(1, shape.data(), two.data()));
}

TEST(Contiguity, SizeZeroIsContiguousWhateverTheStrides) {
  std::vector<int64_t> shape{3, 0, 5}, strides{-1, 77, 0};
  EXPECT_TRUE(is_c_contiguous(3, shape.data(), strides.data()));
  EXPECT_TRUE(is_f_contiguous(3, shape.data(), strides.data()));
}

TEST(Contiguity, ZeroDimensional) {
  EXPECT_TRUE(is_c_contiguous(0, nullptr, nullptr));
  EXPECT_TRUE(is_f_contiguous(0, nullptr, nullptr));
}

TEST(Contiguity, NegativeZeroAndPaddedStridesAreNot) {
  std::vector<int64_t> shape{2, 3};
  std::vector<int64_t> negative{-3, 1}, broadcast{0, 1}, padded{4, 1};
  EXPECT_FALSE(is_c_contiguous(2, shape.data(), negative.data()));
  EXPECT_FALSE(is_c_contiguous(2, shape.data(), broadcast.data()));
  EXPECT_FALSE(is_c_contiguous(2, shape.data(), padded.data()));
  EXPECT_FALSE(dlbridge::is_c_contiguous(2, shape.data(), padded.data()));
  std::vector<int64_t> odd_unit{1, 3}, oshape{2, 1};
  EXPECT_TRUE(dlbridge::is_c_contiguous(2, oshape.data(), odd_unit.data()));
}

TEST(ByteExtent, CompactFloat) {
  auto e = extent({2, 3}, {3, 1}, f32);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->low, 0);
  EXPECT_EQ(e->high, 24);
  EXPECT_EQ(e->bytes(), 24);
}

TEST(ByteExtent, PaddedRowsStopAtTheLastElement) {
  // Row stride 10 over rows of 3: the tail padding of the last row is not
  // touched and must not be required to exist.
  auto e = extent({2, 3}, {10, 1}, f32);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->low, 0);
  EXPECT_EQ(e->high, (10 + 2 + 1) * 4);
}

TEST(ByteExtent, NegativeStridesReachBelowElementZero) {
  auto e = extent({4}, {-1}, f32);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->low, -12);
  EXPECT_EQ(e->high, 4);
  auto mixed = extent({3, 2}, {-2, 1}, u8);
  ASSERT_TRUE(mixed);
  EXPECT_EQ(mixed->low, -4);
  EXPECT_EQ(mixed->high, 2);
}

TEST(ByteExtent, ZeroStridesTouchOneElement) {
  auto e = extent({1000, 1000}, {0, 0}, f32);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->low, 0);
  EXPECT_EQ(e->high, 4);
}

TEST(ByteExtent, SizeOneDimsIgnoreHugeStrides) {
  auto e = extent({1, 3}, {INT64_MAX, 1}, f32);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->high, 12);
  auto low = extent({1, 3}, {INT64_MIN, 1}, f32);
  ASSERT_TRUE(low);
  EXPECT_EQ(low->low, 0);
}

TEST(ByteExtent, SizeZeroTouchesNothing) {
  auto e = extent({0, 5}, {INT64_MAX, INT64_MIN}, f32);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->bytes(), 0);
}

TEST(ByteExtent, ZeroDimensionalIsOneElement) {
  auto e = byte_extent(0, nullptr, nullptr, f32, false, 1);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->low, 0);
  EXPECT_EQ(e->high, 4);
}

TEST(ByteExtent, PackedSubByteRoundsOutward) {
  // Five packed 4-bit elements occupy 20 bits: three bytes.
  auto e = extent({5}, {1}, i4);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->low, 0);
  EXPECT_EQ(e->high, 3);
  auto fp = extent({5}, {1}, fp4);
  ASSERT_TRUE(fp);
  EXPECT_EQ(fp->high, 3);
  // Backwards over three 4-bit elements: bits [-8, 4) -> bytes [-1, 1).
  auto back = extent({3}, {-1}, fp4);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->low, -1);
  EXPECT_EQ(back->high, 1);
  // Backwards over two: bits [-4, 4) -> the low byte is still a whole byte.
  auto half = extent({2}, {-1}, fp4);
  ASSERT_TRUE(half);
  EXPECT_EQ(half->low, -1);
  EXPECT_EQ(half->high, 1);
  // FP6: four elements are 24 bits, exactly three bytes.
  auto six = extent({4}, {1}, fp6);
  ASSERT_TRUE(six);
  EXPECT_EQ(six->high, 3);
}

TEST(ByteExtent, PaddedSubByteTakesAByteEach) {
  auto e = extent({5}, {1}, fp4, /*padded=*/true);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->high, 5);
  auto back = extent({3}, {-1}, i4, /*padded=*/true);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->low, -2);
  EXPECT_EQ(back->high, 1);
}

TEST(ByteExtent, TwoLaneFp4IsOneBytePerElement) {
  auto e = extent({17}, {1}, fp4x2);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->high, 17);
}

TEST(ByteExtent, OverflowIsNullopt) {
  // stride * (shape - 1) overflows.
  EXPECT_EQ(extent({3}, {INT64_MAX}, u8), std::nullopt);
  EXPECT_EQ(extent({3}, {INT64_MIN / 2 - 1}, u8), std::nullopt);
  // Each dim fits, the sum of reaches does not.
  EXPECT_EQ(extent({2, 2}, {INT64_MAX / 2 + 1, INT64_MAX / 2 + 1}, u8),
            std::nullopt);
  // The reach in elements fits, in bytes it does not.
  EXPECT_EQ(extent({2}, {two_62}, f32), std::nullopt);
  EXPECT_EQ(extent({2}, {-two_62}, f32), std::nullopt);
  // The last element's own bytes push high past INT64_MAX.
  EXPECT_EQ(extent({2}, {INT64_MAX / 4}, f32), std::nullopt);
}

TEST(ByteExtent, ExtentWiderThanInt64IsNullopt) {
  // low and high each fit, but bytes() = high - low would not, and
  // negating low (as address checks do) would be undefined.
  EXPECT_EQ(extent({2}, {INT64_MIN}, u8), std::nullopt);
  EXPECT_EQ(extent({2, 2}, {INT64_MIN, INT64_MAX - 1}, u8), std::nullopt);
}

TEST(ByteExtent, PackedRoundingNearTheInt64Limits) {
  // In bits, high ends 4 below 2^63 and low 4 above -2^63: rounding either
  // to whole bytes must not overflow on the way.
  const int64_t two_61 = int64_t(1) << 61;
  auto e = extent({2}, {two_61 - 2}, i4);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->low, 0);
  EXPECT_EQ(e->high, int64_t(1) << 60);
  auto low = extent({2}, {-(two_61 - 1)}, i4);
  ASSERT_TRUE(low);
  EXPECT_EQ(low->low, -(int64_t(1) << 60));
  EXPECT_EQ(low->high, 1);
}

TEST(CompactNbytes, WholeByteTypes) {
  EXPECT_EQ(compact_nbytes(0, f32, false), 0);
  EXPECT_EQ(compact_nbytes(6, f32, false), 24);
  EXPECT_EQ(compact_nbytes(3, DType{dlabi::kDLComplex, 128, 1}, false), 48);
  EXPECT_EQ(compact_nbytes(3, DType{dlabi::kDLFloat, 32, 4}, false), 48);
  // A padded sub-byte tensor stores one byte per element.
  EXPECT_EQ(compact_nbytes(7, fp4, true), 7);
}

TEST(CompactNbytes, PackedSubByteRoundsUp) {
  EXPECT_EQ(compact_nbytes(1, fp4, false), 1);
  EXPECT_EQ(compact_nbytes(2, fp4, false), 1);
  EXPECT_EQ(compact_nbytes(3, fp4, false), 2);
  EXPECT_EQ(compact_nbytes(17, fp4, false), 9);
  EXPECT_EQ(compact_nbytes(17, i4, false), 9);
  EXPECT_EQ(compact_nbytes(3, fp6, false), 3);  // 18 bits
  EXPECT_EQ(compact_nbytes(4, fp6, false), 3);  // 24 bits
  EXPECT_EQ(compact_nbytes(0, fp4, false), 0);
}

TEST(CompactNbytes, TwoLaneFp4CountsLanes) {
  // (17, 4, 2): 17 elements of two packed nibbles each = 17 bytes, the same
  // storage PyTorch's lanes form and JAX's 34 single-lane elements describe.
  EXPECT_EQ(compact_nbytes(17, fp4x2, false), 17);
  EXPECT_EQ(compact_nbytes(34, fp4, false), 17);
}

TEST(CompactNbytes, OverflowIsNullopt) {
  EXPECT_EQ(compact_nbytes(two_62, f32, false), std::nullopt);
  EXPECT_EQ(compact_nbytes(INT64_MAX, DType{dlabi::kDLFloat, 16, 1}, false),
            std::nullopt);
  EXPECT_EQ(compact_nbytes(INT64_MAX, fp4, false), std::nullopt);
  EXPECT_EQ(compact_nbytes(INT64_MAX, u8, false), INT64_MAX);
}

}  // namespace

// The per-target layout rules of dlbridge.convert, decided in the core.
TEST(StridesFit, EachRule) {
  using dlbridge::StrideRule;
  using dlbridge::strides_fit;
  const std::vector<int64_t> shape{3, 4};
  const std::vector<int64_t> c{4, 1}, f{1, 3}, gaps{8, 2}, reversed{4, -1}, broadcast{0, 1};
  EXPECT_TRUE(strides_fit(2, shape.data(), c.data(), StrideRule::row_major));
  EXPECT_FALSE(strides_fit(2, shape.data(), f.data(), StrideRule::row_major));
  EXPECT_TRUE(strides_fit(2, shape.data(), f.data(), StrideRule::permuted_compact));
  EXPECT_FALSE(strides_fit(2, shape.data(), gaps.data(), StrideRule::permuted_compact));
  EXPECT_FALSE(strides_fit(2, shape.data(), broadcast.data(), StrideRule::permuted_compact));
  EXPECT_FALSE(strides_fit(2, shape.data(), reversed.data(), StrideRule::permuted_compact));
  EXPECT_FALSE(strides_fit(2, shape.data(), reversed.data(), StrideRule::nonnegative));
  EXPECT_TRUE(strides_fit(2, shape.data(), gaps.data(), StrideRule::nonnegative));
  EXPECT_TRUE(strides_fit(2, shape.data(), reversed.data(), StrideRule::any));
  // Size-1 dims take any stride; size-0 tensors address nothing.
  const std::vector<int64_t> column{3, 1}, odd{1, -7}, empty{0, 4};
  EXPECT_TRUE(strides_fit(2, column.data(), odd.data(), StrideRule::nonnegative));
  EXPECT_TRUE(strides_fit(2, empty.data(), reversed.data(), StrideRule::row_major));
  EXPECT_TRUE(strides_fit(0, nullptr, nullptr, StrideRule::permuted_compact));
  // A hostile ndim is refused rather than read past.
  EXPECT_FALSE(strides_fit(65, shape.data(), c.data(), StrideRule::permuted_compact));
  EXPECT_FALSE(strides_fit(-1, shape.data(), c.data(), StrideRule::any));
}

namespace {

using dlbridge::detail::SmallDims;

// SmallDims keeps up to inline_capacity dims inline and more on the heap;
// a move copies the inline buffer whole (a fixed size) or takes the heap
// block, and either way the values survive and the source is left empty.
TEST(SmallDims, MovesKeepInlineAndHeapValues) {
  for (int32_t n : {0, 1, SmallDims::inline_capacity, SmallDims::inline_capacity + 1, 64}) {
    SCOPED_TRACE(n);
    std::vector<int64_t> values(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i) values[size_t(i)] = int64_t(i) * 7 - 3;
    SmallDims source(values.data(), n);
    const int64_t* heap_block = source.data();
    SmallDims moved(std::move(source));
    ASSERT_EQ(moved.size(), n);
    for (int32_t i = 0; i < n; ++i) EXPECT_EQ(moved[i], values[size_t(i)]);
    EXPECT_EQ(moved.data() == heap_block, n > SmallDims::inline_capacity);
    EXPECT_EQ(source.size(), 0);
    const int64_t three[] = {4, 5, 6};
    SmallDims assigned(three, 3);
    assigned = std::move(moved);
    ASSERT_EQ(assigned.size(), n);
    for (int32_t i = 0; i < n; ++i) EXPECT_EQ(assigned[i], values[size_t(i)]);
  }
}

// assign_inline drops a heap block and hands out the inline buffer.
TEST(SmallDims, AssignInlineReusesTheInlineBuffer) {
  std::vector<int64_t> many(20, 5);
  SmallDims dims(many.data(), 20);
  int64_t* out = dims.assign_inline(2);
  out[0] = 8;
  out[1] = 9;
  EXPECT_EQ(dims.size(), 2);
  EXPECT_EQ(dims.data(), out);
  EXPECT_EQ(dims[0], 8);
  EXPECT_EQ(dims[1], 9);
}

}  // namespace
