// Size-1 dimensions may carry any stride (DLPack and NumPy agree: such a
// dimension is never stepped along). Every copy must therefore work for
// strides up to INT64_MAX / INT64_MIN on them without overflowing: the
// ASan+UBSan build of this test is what catches an unchecked multiply.
#include <gtest/gtest.h>

#include <dlbridge/copy/copy.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

namespace {

using dlbridge::DType;
using dlbridge::TensorView;
namespace dlabi = dlbridge::abi;

const int64_t huge_strides[] = {int64_t(1) << 62, INT64_MAX, INT64_MAX - 1, INT64_MIN,
                                -(int64_t(1) << 62)};

std::vector<int32_t> iota_values(size_t n) {
  std::vector<int32_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = int32_t(i * 7 + 1);
  return v;
}

std::vector<int32_t> values_of(const dlbridge::ManagedTensor& t) {
  std::vector<int32_t> out(size_t(t.view().size()));
  std::memcpy(out.data(), t.view().data(), out.size() * sizeof(int32_t));
  return out;
}

TEST(BoundarySize1Strides, CopyUnpackedIgnoresAnyStrideOfASize1Dim) {
  const DType i32{dlabi::kDLInt, 32, 1};
  std::vector<int32_t> data = iota_values(6);
  for (int64_t huge : huge_strides) {
    SCOPED_TRACE(huge);
    // Shape (2, 1, 3): the middle dimension's stride is never used.
    TensorView view = TensorView::from_data(data.data(), i32, {2, 1, 3}, {3, huge, 1});
    EXPECT_EQ(values_of(dlbridge::copy_unpacked(view)), data);
    // A trailing size-1 dimension is the innermost step of the loop.
    TensorView trailing = TensorView::from_data(data.data(), i32, {6, 1}, {1, huge});
    EXPECT_EQ(values_of(dlbridge::copy_unpacked(trailing)), data);
  }
}

TEST(BoundarySize1Strides, CopyToCompactIgnoresAnyStrideOfASize1Dim) {
  const DType i32{dlabi::kDLInt, 32, 1};
  std::vector<int32_t> data = iota_values(6);
  for (int64_t huge : huge_strides) {
    SCOPED_TRACE(huge);
    TensorView view = TensorView::from_data(data.data(), i32, {2, 1, 3}, {3, huge, 1});
    EXPECT_EQ(values_of(dlbridge::copy_to_compact(view)), data);
    TensorView transposed = TensorView::from_data(data.data(), i32, {3, 1, 2}, {1, huge, 3});
    std::vector<int32_t> expected = {1, 22, 8, 29, 15, 36};
    EXPECT_EQ(values_of(dlbridge::copy_to_compact(transposed)), expected);
  }
}

TEST(BoundarySize1Strides, PackedSubbyteCopyIgnoresAnyStrideOfASize1Dim) {
  const DType u4{dlabi::kDLUInt, 4, 1};
  std::vector<unsigned char> packed = {0x21, 0x43, 0x65};
  for (int64_t huge : huge_strides) {
    SCOPED_TRACE(huge);
    TensorView view = TensorView::from_data(packed.data(), u4, {6, 1}, {1, huge});
    dlbridge::ManagedTensor out = dlbridge::copy_unpacked(view);
    const auto* bytes = static_cast<const unsigned char*>(out.view().data());
    EXPECT_EQ(std::vector<unsigned char>(bytes, bytes + 6),
              (std::vector<unsigned char>{1, 2, 3, 4, 5, 6}));
  }
}

}  // namespace
