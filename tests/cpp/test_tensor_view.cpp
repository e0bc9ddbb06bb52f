// TensorView::from_dltensor is the only door through which a foreign DLTensor
// enters dlbridge. Each hostile field below must be refused with the code a
// caller can act on and a message naming the field, before anything it
// points to is read: ASan catches a read past a short shape array, UBSan any
// arithmetic on the hostile values.
#include <gtest/gtest.h>

#include "support/error_of.hpp"

#include <dlbridge/tensor_view.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace {

using dlbridge::DType;
using dlbridge::Error;
using dlbridge::ErrorCode;
using dlbridge::ImportPolicy;
using dlbridge::TensorView;
namespace dlabi = dlbridge::abi;

constexpr DType f32{dlabi::kDLFloat, 32, 1};

using test_support::error_of;

testing::AssertionResult refused(const std::function<void()>& f,
                                 ErrorCode code, const std::string& fragment) {
  auto e = error_of(f);
  if (!e) return testing::AssertionFailure() << "nothing was thrown";
  if (e->code() != code)
    return testing::AssertionFailure()
           << "code " << e->code_name() << ", expected "
           << dlbridge::error_code_name(code) << ": " << e->what();
  if (e->message().find(fragment) == std::string::npos)
    return testing::AssertionFailure()
           << "message lacks '" << fragment << "': " << e->message();
  if (e->hint().empty())
    return testing::AssertionFailure() << "no hint for: " << e->message();
  return testing::AssertionSuccess();
}

// A valid 2x3 float32 tensor over buffer that each test then breaks in one
// field. shape and strides live in the fixture so pointers stay valid.
class FromDLTensor : public testing::Test {
 protected:
  float buffer[64] = {};
  int64_t shape[2] = {2, 3};
  int64_t strides[2] = {3, 1};
  dlabi::DLTensor t{};

  void SetUp() override {
    t.data = buffer;
    t.device = {dlabi::kDLCPU, 0};
    t.ndim = 2;
    t.dtype = f32.to_dl();
    t.shape = shape;
    t.strides = strides;
    t.byte_offset = 0;
  }

  std::function<void()> import(uint64_t flags = 0, ImportPolicy policy = {}) {
    return [this, flags, policy] { TensorView::from_dltensor(t, flags, policy); };
  }
};

TEST_F(FromDLTensor, ValidTensorIsDescribedExactly) {
  TensorView v = TensorView::from_dltensor(t);
  EXPECT_EQ(v.ndim(), 2);
  EXPECT_EQ(v.shape(0), 2);
  EXPECT_EQ(v.shape(1), 3);
  EXPECT_EQ(v.stride(0), 3);
  EXPECT_EQ(v.stride(1), 1);
  EXPECT_EQ(v.size(), 6);
  EXPECT_EQ(v.nbytes(), 24);
  EXPECT_EQ(v.data(), static_cast<void*>(buffer));
  EXPECT_EQ(v.dtype(), f32);
  EXPECT_EQ(v.device(), (dlbridge::Device{dlabi::kDLCPU, 0}));
  EXPECT_FALSE(v.readonly());
  EXPECT_TRUE(v.is_c_contiguous());
  EXPECT_FALSE(v.is_f_contiguous());
  EXPECT_EQ(v.extent().low, 0);
  EXPECT_EQ(v.extent().high, 24);
  // The view keeps its own copies: the producer may reuse its arrays.
  shape[0] = 99;
  strides[0] = 99;
  EXPECT_EQ(v.shape(0), 2);
  EXPECT_EQ(v.stride(0), 3);
}

TEST_F(FromDLTensor, NdimOutOfRange) {
  // shape points at two entries; reading 65 would trip ASan.
  for (int32_t ndim : {-1, 65, INT32_MAX, INT32_MIN}) {
    t.ndim = ndim;
    EXPECT_TRUE(refused(import(), ErrorCode::invalid_tensor,
                        "ndim = " + std::to_string(ndim)))
        << ndim;
  }
}

TEST_F(FromDLTensor, SixtyFourDimsAreAccepted) {
  std::vector<int64_t> ones(64, 1);
  t.ndim = 64;
  t.shape = ones.data();
  t.strides = nullptr;
  TensorView v = TensorView::from_dltensor(t);
  EXPECT_EQ(v.ndim(), 64);
  EXPECT_EQ(v.size(), 1);
  EXPECT_EQ(v.stride(0), 1);
}

TEST_F(FromDLTensor, NullShapeWithDims) {
  t.shape = nullptr;
  EXPECT_TRUE(refused(import(), ErrorCode::invalid_tensor, "shape is NULL"));
}

TEST_F(FromDLTensor, ZeroDimWithNullShapeIsOneElement) {
  t.ndim = 0;
  t.shape = nullptr;
  t.strides = nullptr;
  TensorView v = TensorView::from_dltensor(t);
  EXPECT_EQ(v.ndim(), 0);
  EXPECT_EQ(v.size(), 1);
  EXPECT_EQ(v.nbytes(), 4);
  EXPECT_EQ(v.extent().high, 4);
  EXPECT_TRUE(v.is_c_contiguous());
}

TEST_F(FromDLTensor, NegativeDim) {
  shape[1] = -3;
  EXPECT_TRUE(refused(import(), ErrorCode::invalid_tensor, "shape[1] = -3"));
}

TEST_F(FromDLTensor, ElementCountOverflow) {
  shape[0] = int64_t(1) << 62;
  shape[1] = 4;
  EXPECT_TRUE(refused(import(), ErrorCode::invalid_tensor, "element count"));
  // 2^32 * 2^32 wraps to 0: it must not pass as an empty tensor.
  shape[0] = shape[1] = int64_t(1) << 32;
  EXPECT_TRUE(refused(import(), ErrorCode::invalid_tensor, "element count"));
}

TEST_F(FromDLTensor, ByteSizeOverflow) {
  // 2^62 elements fit in int64; 2^64 bytes of float32 do not.
  shape[0] = int64_t(1) << 62;
  shape[1] = 1;
  EXPECT_TRUE(refused(import(), ErrorCode::invalid_tensor, "byte size"));
}

TEST_F(FromDLTensor, SizeZeroWithNullDataIsAccepted) {
  t.data = nullptr;
  shape[0] = 0;
  TensorView v = TensorView::from_dltensor(t);
  EXPECT_EQ(v.size(), 0);
  EXPECT_EQ(v.nbytes(), 0);
  EXPECT_EQ(v.extent().bytes(), 0);
}

TEST_F(FromDLTensor, SizeZeroWithNullDataAndOffset) {
  // Any byte_offset is legal; the view must not form NULL + offset as a
  // pointer expression (undefined, and flagged by UBSan).
  t.data = nullptr;
  shape[0] = 0;
  t.byte_offset = 64;
  TensorView v = TensorView::from_dltensor(t);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data()), 64u);
}

TEST_F(FromDLTensor, SizeZeroIgnoresHostileStrides) {
  shape[1] = 0;
  strides[0] = INT64_MIN;
  strides[1] = INT64_MAX;
  TensorView v = TensorView::from_dltensor(t);
  EXPECT_EQ(v.size(), 0);
}

TEST_F(FromDLTensor, NullDataWithElements) {
  t.data = nullptr;
  EXPECT_TRUE(refused(import(), ErrorCode::invalid_tensor, "data is NULL"));
}

TEST_F(FromDLTensor, NullStridesMeanRowMajor) {
  int64_t shape3[3] = {4, 1, 5};
  t.ndim = 3;
  t.shape = shape3;
  t.strides = nullptr;
  TensorView v = TensorView::from_dltensor(t);
  ASSERT_NE(v.strides(), nullptr);
  EXPECT_EQ(v.stride(0), 5);
  EXPECT_EQ(v.stride(1), 5);
  EXPECT_EQ(v.stride(2), 1);
  EXPECT_TRUE(v.is_c_contiguous());
  EXPECT_EQ(v.extent().high, 80);
}

TEST_F(FromDLTensor, NegativeStridesReachBackwards) {
  // Element 0 is the last float of the 2x3 block, walking backwards.
  t.data = &buffer[5];
  strides[0] = -3;
  strides[1] = -1;
  TensorView v = TensorView::from_dltensor(t);
  EXPECT_EQ(v.extent().low, -20);
  EXPECT_EQ(v.extent().high, 4);
  EXPECT_FALSE(v.is_c_contiguous());
}

TEST_F(FromDLTensor, ZeroStridesBroadcast) {
  strides[0] = 0;
  TensorView v = TensorView::from_dltensor(t);
  EXPECT_EQ(v.stride(0), 0);
  EXPECT_EQ(v.extent().high, 12);
  EXPECT_FALSE(v.is_c_contiguous());
}

TEST_F(FromDLTensor, SizeOneDimsWithOddStrides) {
  shape[0] = 1;
  strides[0] = 123456789;
  TensorView v = TensorView::from_dltensor(t);
  // Only one dim has extent, so the tensor is compact in either order.
  EXPECT_TRUE(v.is_c_contiguous());
  EXPECT_TRUE(v.is_f_contiguous());
  EXPECT_EQ(v.extent().high, 12);
}

TEST_F(FromDLTensor, ByteOffsetLocatesElementZero) {
  t.byte_offset = 8;
  TensorView v = TensorView::from_dltensor(t);
  EXPECT_EQ(v.data(), static_cast<void*>(&buffer[2]));
  EXPECT_EQ(v.base_data(), static_cast<void*>(buffer));
  EXPECT_EQ(v.byte_offset(), 8u);
}

TEST_F(FromDLTensor, ByteOffsetAboveInt64Max) {
  t.byte_offset = uint64_t(INT64_MAX) + 1;
  EXPECT_TRUE(refused(import(), ErrorCode::invalid_tensor, "byte_offset"));
  // Even with nothing to read the offset is checked: it is still arithmetic
  // that every consumer will do.
  shape[0] = 0;
  EXPECT_TRUE(refused(import(), ErrorCode::invalid_tensor, "byte_offset"));
}

TEST_F(FromDLTensor, StridesWhoseExtentOverflows) {
  strides[0] = INT64_MAX;
  EXPECT_TRUE(refused(import(), ErrorCode::invalid_tensor, "strides"));
  strides[0] = INT64_MIN;
  EXPECT_TRUE(refused(import(), ErrorCode::invalid_tensor, "strides"));
  // Within int64 as elements, beyond it as bytes.
  strides[0] = int64_t(1) << 62;
  EXPECT_TRUE(refused(import(), ErrorCode::invalid_tensor, "strides"));
}

TEST_F(FromDLTensor, AddressWrapAround) {
  t.data = reinterpret_cast<void*>(UINTPTR_MAX - 7);
  EXPECT_TRUE(refused(import(), ErrorCode::invalid_tensor, "wrap"));
  // The offset alone carries element 0 past the top.
  t.data = reinterpret_cast<void*>(UINTPTR_MAX - 100);
  shape[0] = shape[1] = 1;
  t.byte_offset = 200;
  EXPECT_TRUE(refused(import(), ErrorCode::invalid_tensor, "wrap"));
  // Negative strides reach below address 0.
  t.data = reinterpret_cast<void*>(uintptr_t(16));
  t.byte_offset = 0;
  shape[0] = 10;
  strides[0] = -1;
  EXPECT_TRUE(refused(import(), ErrorCode::invalid_tensor, "wrap"));
}

TEST_F(FromDLTensor, AnOpaqueHandleIsNotCheckedAsAnAddress) {
  // OpenCL's data is a cl_mem handle: its value says nothing about where
  // the bytes are, so what would wrap as an address is accepted...
  t.device = {dlabi::kDLOpenCL, 0};
  t.data = reinterpret_cast<void*>(UINTPTR_MAX - 7);
  EXPECT_NO_THROW(TensorView::from_dltensor(t));
  // ...and no alignment is asked of it...
  ImportPolicy aligned;
  aligned.min_alignment = 64;
  t.data = reinterpret_cast<void*>(uintptr_t(0x1001));
  EXPECT_TRUE(TensorView::from_dltensor(t).meets(aligned));
  EXPECT_NO_THROW(TensorView::from_dltensor(t, 0, aligned));
  // ...while the same values on an addressed device are refused.
  t.device = {dlabi::kDLCUDA, 0};
  EXPECT_TRUE(refused(import(0, aligned), ErrorCode::unsupported_layout, "aligned to 64"));
  t.data = reinterpret_cast<void*>(UINTPTR_MAX - 7);
  EXPECT_TRUE(refused(import(), ErrorCode::invalid_tensor, "wrap"));
  // A NULL handle is still no tensor.
  t.device = {dlabi::kDLOpenCL, 0};
  t.data = nullptr;
  EXPECT_TRUE(refused(import(), ErrorCode::invalid_tensor, "NULL"));
}

TEST_F(FromDLTensor, UnknownDeviceTypes) {
  for (int32_t type : {99, 5, 6, 0, -1, 19}) {
    t.device.device_type = static_cast<dlabi::DLDeviceType>(type);
    EXPECT_TRUE(refused(import(), ErrorCode::unsupported_device_type,
                        "DLDeviceType: " + std::to_string(type)))
        << type;
  }
}

TEST_F(FromDLTensor, NegativeDeviceId) {
  t.device.device_id = -1;
  EXPECT_TRUE(refused(import(), ErrorCode::invalid_tensor, "device_id = -1"));
}

TEST_F(FromDLTensor, InvalidDTypes) {
  t.dtype = {dlabi::kDLFloat4_e2m1fn, 8, 1};
  EXPECT_TRUE(refused(import(), ErrorCode::invalid_tensor, "bits=4"));
  t.dtype = {dlabi::kDLFloat6_e3m2fn, 8, 1};
  EXPECT_TRUE(refused(import(), ErrorCode::invalid_tensor, "bits=6"));
  t.dtype = {200, 32, 1};
  EXPECT_TRUE(refused(import(), ErrorCode::unsupported_dtype, "code 200"));
  t.dtype = {dlabi::kDLFloat, 32, 0};
  EXPECT_TRUE(refused(import(), ErrorCode::invalid_tensor, "lanes=0"));
  t.dtype = {dlabi::kDLInt, 0, 1};
  EXPECT_TRUE(refused(import(), ErrorCode::invalid_tensor, "bits=0"));
}

TEST_F(FromDLTensor, PackedFp4SizesRoundUp) {
  shape[0] = 3;
  shape[1] = 3;
  strides[0] = 3;
  t.dtype = {dlabi::kDLFloat4_e2m1fn, 4, 1};
  TensorView packed = TensorView::from_dltensor(t);
  EXPECT_TRUE(packed.packed());
  EXPECT_EQ(packed.nbytes(), 5);  // 9 nibbles
  EXPECT_EQ(packed.extent().high, 5);
  TensorView padded =
      TensorView::from_dltensor(t, DLBRIDGE_FLAG_IS_SUBBYTE_TYPE_PADDED);
  EXPECT_FALSE(padded.packed());
  EXPECT_EQ(padded.nbytes(), 9);
  t.dtype = {dlabi::kDLFloat4_e2m1fn, 4, 2};
  EXPECT_EQ(TensorView::from_dltensor(t).nbytes(), 9);
}

TEST_F(FromDLTensor, RequireCContiguous) {
  ImportPolicy policy;
  policy.require_c_contiguous = true;
  EXPECT_NO_THROW(TensorView::from_dltensor(t, 0, policy));
  strides[0] = 1;
  strides[1] = 2;
  EXPECT_TRUE(refused(import(0, policy), ErrorCode::unsupported_layout,
                      "strides (1, 2) for shape (2, 3)"));
}

TEST_F(FromDLTensor, RequireWritable) {
  ImportPolicy policy;
  policy.require_writable = true;
  EXPECT_NO_THROW(TensorView::from_dltensor(t, DLBRIDGE_FLAG_IS_COPIED, policy));
  EXPECT_TRUE(refused(import(DLBRIDGE_FLAG_READ_ONLY, policy),
                      ErrorCode::read_only, "read-only"));
  // Without the requirement, read-only data imports as a read-only view.
  EXPECT_TRUE(TensorView::from_dltensor(t, DLBRIDGE_FLAG_READ_ONLY).readonly());
}

TEST_F(FromDLTensor, RequireHostAccessible) {
  ImportPolicy policy;
  policy.require_host_accessible = true;
  t.device = {dlabi::kDLCUDA, 1};
  EXPECT_TRUE(refused(import(0, policy), ErrorCode::device_unavailable,
                      "cuda:1"));
  // The view itself never dereferences, so device memory is fine without it.
  EXPECT_EQ(TensorView::from_dltensor(t).device().type, dlabi::kDLCUDA);
  for (auto host : {dlabi::kDLCPU, dlabi::kDLCUDAHost, dlabi::kDLCUDAManaged,
                    dlabi::kDLROCMHost}) {
    t.device = {host, 0};
    EXPECT_NO_THROW(TensorView::from_dltensor(t, 0, policy)) << int(host);
  }
}

TEST_F(FromDLTensor, MinAlignment) {
  ImportPolicy policy;
  policy.min_alignment = 64;
  alignas(64) static float aligned[8];
  t.data = aligned;
  shape[0] = 1;
  EXPECT_NO_THROW(TensorView::from_dltensor(t, 0, policy));
  // The offset moves element 0 off the boundary: alignment is of data().
  t.byte_offset = 4;
  EXPECT_TRUE(refused(import(0, policy), ErrorCode::unsupported_layout,
                      "aligned to 64"));
}

TEST_F(FromDLTensor, PolicyIsCheckedAfterValidity) {
  // A malformed tensor is reported as malformed, not as a policy miss.
  ImportPolicy policy;
  policy.require_c_contiguous = true;
  policy.require_writable = true;
  shape[0] = -1;
  EXPECT_TRUE(refused(import(DLBRIDGE_FLAG_READ_ONLY, policy),
                      ErrorCode::invalid_tensor, "shape[0] = -1"));
}

TEST_F(FromDLTensor, DLTensorRoundTrip) {
  t.strides = nullptr;
  t.byte_offset = 4;
  t.device = {dlabi::kDLCUDA, 3};
  TensorView v = TensorView::from_dltensor(t, DLBRIDGE_FLAG_READ_ONLY);
  dlabi::DLTensor out = v.dltensor();
  EXPECT_EQ(out.data, t.data);
  EXPECT_EQ(out.byte_offset, 4u);
  EXPECT_EQ(out.device.device_type, dlabi::kDLCUDA);
  EXPECT_EQ(out.device.device_id, 3);
  EXPECT_EQ(out.ndim, 2);
  EXPECT_EQ(DType::from_dl(out.dtype), f32);
  ASSERT_NE(out.strides, nullptr);  // filled in, as DLPack 1.2+ requires
  EXPECT_EQ(out.strides[0], 3);
  EXPECT_EQ(out.strides[1], 1);
  TensorView again = TensorView::from_dltensor(out, v.flags());
  EXPECT_EQ(again.data(), v.data());
  EXPECT_EQ(again.shape(1), 3);
  EXPECT_TRUE(again.readonly());
}

TEST_F(FromDLTensor, ZeroDimRoundTripHasNullShape) {
  t.ndim = 0;
  TensorView v = TensorView::from_dltensor(t);
  dlabi::DLTensor out = v.dltensor();
  EXPECT_EQ(out.ndim, 0);
  EXPECT_EQ(out.shape, nullptr);
  EXPECT_EQ(out.strides, nullptr);
}

TEST_F(FromDLTensor, ManyDimsSurviveCopyAndMove) {
  // More dims than the view stores inline, so its heap storage is exercised.
  std::vector<int64_t> many(10, 1);
  many[9] = 3;
  t.ndim = 10;
  t.shape = many.data();
  t.strides = nullptr;
  TensorView v = TensorView::from_dltensor(t);
  TensorView copy = v;
  TensorView moved = std::move(v);
  copy = moved;
  EXPECT_EQ(moved.ndim(), 10);
  EXPECT_EQ(moved.shape(9), 3);
  EXPECT_EQ(copy.shape(9), 3);
  EXPECT_NE(copy.shape(), moved.shape());
}

TEST(TensorView, WithCompactStrides) {
  float buffer[6] = {};
  TensorView v = TensorView::from_data(buffer, f32, {2, 1, 3}, {3, 77, 1});
  ASSERT_TRUE(dlbridge::is_c_contiguous(v.ndim(), v.shape(), v.strides()));
  TensorView c = v.with_compact_strides();
  EXPECT_EQ(c.stride(0), 3);
  EXPECT_EQ(c.stride(1), 3);
  EXPECT_EQ(c.stride(2), 1);
  EXPECT_EQ(c.data(), v.data());
  EXPECT_EQ(v.stride(1), 77);  // the original is untouched
}

TEST(TensorView, WithFlags) {
  float buffer[1] = {};
  TensorView v = TensorView::from_data(buffer, f32, {1});
  EXPECT_TRUE(v.with_flags(DLBRIDGE_FLAG_READ_ONLY).readonly());
  EXPECT_FALSE(v.readonly());
}

TEST(TensorView, FromData) {
  double buffer[12] = {};
  TensorView v = TensorView::from_data(buffer, dlbridge::dtype_of<double>(),
                                       {3, 4}, {}, {dlabi::kDLCPU, 0},
                                       DLBRIDGE_FLAG_READ_ONLY);
  EXPECT_EQ(v.stride(0), 4);
  EXPECT_EQ(v.nbytes(), 96);
  EXPECT_TRUE(v.readonly());
  TensorView scalar = TensorView::from_data(buffer, f32, {});
  EXPECT_EQ(scalar.ndim(), 0);
  EXPECT_EQ(scalar.size(), 1);
}

TEST(TensorView, FromDataArgumentErrors) {
  float buffer[6] = {};
  EXPECT_TRUE(refused([&] { TensorView::from_data(buffer, f32, {2, 3}, {1}); },
                      ErrorCode::invalid_argument, "strides has 1 entries"));
  EXPECT_TRUE(refused(
      [&] { TensorView::from_data(buffer, f32, std::vector<int64_t>(65, 1)); },
      ErrorCode::invalid_tensor, "ndim 65"));
  EXPECT_TRUE(refused([&] { TensorView::from_data(buffer, f32, {2, -1}); },
                      ErrorCode::invalid_tensor, "shape[1] = -1"));
  EXPECT_TRUE(refused([&] { TensorView::from_data(nullptr, f32, {2}); },
                      ErrorCode::invalid_tensor, "data is NULL"));
  EXPECT_TRUE(refused(
      [&] {
        TensorView::from_data(buffer, f32, {2}, {}, {dlabi::kDLCPU, -2});
      },
      ErrorCode::invalid_tensor, "device_id = -2"));
}

TEST(TensorView, DefaultIsAnEmptyScalarDescription) {
  TensorView v;
  EXPECT_EQ(v.ndim(), 0);
  EXPECT_EQ(v.data(), nullptr);
}

}  // namespace

// assign() reuses a view: nothing of the tensor it described before may
// survive, including the extent that a size-0 tensor never computes.
TEST(TensorView, AssignLeavesNothingOfThePreviousTensor) {
  std::vector<float> data(12);
  std::vector<int64_t> shape{3, 4}, empty_shape{0, 5};
  TensorView v = TensorView::from_data(data.data(), f32, shape);
  ASSERT_EQ(v.extent().bytes(), 48);
  dlabi::DLTensor t{};
  t.device = {dlabi::kDLCPU, 0};
  t.ndim = 2;
  t.dtype = {dlabi::kDLFloat, 32, 1};
  t.shape = empty_shape.data();
  v.assign(t, DLBRIDGE_FLAG_READ_ONLY);
  EXPECT_EQ(v.size(), 0);
  EXPECT_EQ(v.extent().bytes(), 0);
  EXPECT_EQ(v.shape(0), 0);
  EXPECT_TRUE(v.readonly());
}
