// view_in_buffer is what a receiver trusts after a tensor's bytes and its
// description arrived separately (a pickle, a shared-memory segment). Every
// description that would reach outside the buffer must be refused before a
// byte is read; dense_extent decides which views can travel without a copy.
#include <gtest/gtest.h>

#include "support/error_of.hpp"

#include <dlbridge/buffer_view.hpp>

#include <cstdint>
#include <vector>

namespace {

using dlbridge::BufferLayout;
using dlbridge::DType;
using dlbridge::ErrorCode;
using dlbridge::TensorView;
using dlbridge::view_in_buffer;
using test_support::error_of;
namespace dlabi = dlbridge::abi;

constexpr DType f32{dlabi::kDLFloat, 32, 1};
constexpr DType int4{dlabi::kDLInt, 4, 1};

BufferLayout layout(DType dtype, std::vector<int64_t> shape, std::vector<int64_t> strides,
                    int64_t offset = 0, uint64_t flags = 0) {
  return BufferLayout{dtype, std::move(shape), std::move(strides), offset, flags};
}

ErrorCode code_of(const BufferLayout& l, int64_t length) {
  static std::vector<unsigned char> bytes(256);
  auto e = error_of([&] { view_in_buffer(bytes.data(), length, l); });
  EXPECT_TRUE(e.has_value()) << "accepted";
  return e ? e->code() : ErrorCode::invalid_argument;
}

TEST(ViewInBuffer, AcceptsALayoutThatFitsExactly) {
  std::vector<float> data(6);
  TensorView v = view_in_buffer(data.data(), 24, layout(f32, {2, 3}, {3, 1}));
  EXPECT_EQ(v.data(), data.data());
  EXPECT_EQ(v.size(), 6);
  EXPECT_FALSE(v.readonly());
}

TEST(ViewInBuffer, NegativeStridesReachBackFromTheOffset) {
  std::vector<float> data(6);
  // Element 0 is the last float; the row runs backwards to the first.
  TensorView v = view_in_buffer(data.data(), 24, layout(f32, {6}, {-1}, 20));
  EXPECT_EQ(v.data(), &data[5]);
}

TEST(ViewInBuffer, RefusesMoreBytesThanTheBufferHolds) {
  EXPECT_EQ(code_of(layout(f32, {2, 4}, {4, 1}), 24), ErrorCode::invalid_tensor);
}

TEST(ViewInBuffer, RefusesANegativeStrideOutOfTheBuffer) {
  EXPECT_EQ(code_of(layout(f32, {6}, {-1}, 16), 24), ErrorCode::invalid_tensor);
}

TEST(ViewInBuffer, RefusesAnOffsetOutsideTheBuffer) {
  EXPECT_EQ(code_of(layout(f32, {1}, {1}, 25), 24), ErrorCode::invalid_tensor);
  EXPECT_EQ(code_of(layout(f32, {1}, {1}, -4), 24), ErrorCode::invalid_tensor);
}

TEST(ViewInBuffer, RefusesAnUnknownDTypeCode) {
  EXPECT_EQ(code_of(layout(DType{200, 32, 1}, {1}, {1}), 24), ErrorCode::unsupported_dtype);
}

TEST(ViewInBuffer, RefusesMismatchedStridesAndHostileDims) {
  EXPECT_EQ(code_of(layout(f32, {2, 3}, {1}), 24), ErrorCode::invalid_tensor);
  EXPECT_EQ(code_of(layout(f32, {-1}, {1}), 24), ErrorCode::invalid_tensor);
  EXPECT_EQ(code_of(layout(f32, {INT64_MAX, 2}, {1, 1}), 24), ErrorCode::invalid_tensor);
  EXPECT_EQ(code_of(layout(f32, {2}, {INT64_MAX / 2}), 24), ErrorCode::invalid_tensor);
}

TEST(ViewInBuffer, RefusesFlagsThatDoNotDescribeData) {
  EXPECT_EQ(code_of(layout(f32, {1}, {1}, 0, DLBRIDGE_FLAG_IS_COPIED), 24),
            ErrorCode::invalid_tensor);
}

TEST(ViewInBuffer, PackedSubByteCountsBits) {
  std::vector<unsigned char> data(3);
  // Five int4 values take three bytes; six would too, seven would not.
  EXPECT_NO_THROW(view_in_buffer(data.data(), 3, layout(int4, {6}, {1})));
  auto e = error_of([&] { view_in_buffer(data.data(), 3, layout(int4, {7}, {1})); });
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->code(), ErrorCode::invalid_tensor);
}

TEST(ViewInBuffer, EmptyTensorsFitAnyBuffer) {
  EXPECT_NO_THROW(view_in_buffer(nullptr, 0, layout(f32, {0, 5}, {5, 1})));
}

TEST(DenseExtent, CoversDenseLayoutsInAnyOrder) {
  std::vector<float> data(12);
  auto c = TensorView::from_data(data.data(), f32, {3, 4});
  auto f = TensorView::from_data(data.data(), f32, {3, 4}, {1, 3});
  auto reversed = TensorView::from_data(&data[11], f32, {3, 4}, {-4, -1});
  for (const TensorView& v : {c, f, reversed}) {
    auto extent = dlbridge::dense_extent(v);
    ASSERT_TRUE(extent.has_value());
    EXPECT_EQ(extent->bytes(), 48);
  }
  EXPECT_EQ(dlbridge::dense_extent(reversed)->low, -44);
}

TEST(DenseExtent, RefusesGapsAndOverlaps) {
  std::vector<float> data(24);
  auto every_other = TensorView::from_data(data.data(), f32, {12}, {2});
  auto broadcast = TensorView::from_data(data.data(), f32, {3, 4}, {0, 1});
  // Strides (1, 1, 5) touch exactly 8 elements' bytes for 8 elements, but
  // two of them share an address and two addresses are skipped.
  auto overlapping = TensorView::from_data(data.data(), f32, {2, 2, 2}, {1, 1, 5});
  ASSERT_EQ(overlapping.extent().bytes(), overlapping.nbytes());
  EXPECT_FALSE(dlbridge::dense_extent(every_other));
  EXPECT_FALSE(dlbridge::dense_extent(broadcast));
  EXPECT_FALSE(dlbridge::dense_extent(overlapping));
}

TEST(DenseExtent, PackedSubByteOnlyInCOrder) {
  std::vector<unsigned char> data(8);
  auto c = TensorView::from_data(data.data(), int4, {2, 8});
  auto f = TensorView::from_data(data.data(), int4, {2, 8}, {1, 2});
  EXPECT_TRUE(dlbridge::dense_extent(c));
  EXPECT_FALSE(dlbridge::dense_extent(f));
}

TEST(BufferLayoutOf, KeepsStridesAndOnlyTheDataFlags) {
  std::vector<float> data(6);
  auto v = TensorView::from_data(&data[5], f32, {2, 3}, {-3, -1}, {},
                                 DLBRIDGE_FLAG_READ_ONLY | DLBRIDGE_FLAG_IS_COPIED);
  auto l = dlbridge::buffer_layout_of(v, *dlbridge::dense_extent(v));
  EXPECT_EQ(l.byte_offset, 20);
  EXPECT_EQ(l.strides, (std::vector<int64_t>{-3, -1}));
  EXPECT_EQ(l.flags, uint64_t(DLBRIDGE_FLAG_READ_ONLY));
  EXPECT_EQ(view_in_buffer(data.data(), 24, l).data(), &data[5]);
}

}  // namespace
