// copy_to_device (transfer.hpp): how bytes move between the host and a
// device, on which streams, and what is refused; driven through a fake
// kDLExtDev backend that records every call.
#include <gtest/gtest.h>

#include "support/error_of.hpp"
#include "support/fake_device_test.hpp"

#include <dlbridge/copy/transfer.hpp>

#include <memory>
#include <vector>

namespace {

using dlbridge::Device;
using dlbridge::DType;
using dlbridge::Error;
using dlbridge::ErrorCode;
using dlbridge::ManagedTensor;
using dlbridge::StreamArg;
using dlbridge::TensorView;
using test_support::error_of;
using test_support::FakeBackend;
using test_support::iota;
using test_support::read;
using test_support::ScopedBackend;
namespace backend = dlbridge::backend;
namespace dlabi = dlbridge::abi;

using test_support::cpu;
using test_support::ext0;
using test_support::ext1;
using test_support::f32;

using Transfer = test_support::FakeDeviceTest;

TEST_F(Transfer, HostToDeviceIsOneTransferOnTheConsumersStream) {
  dlbridge::TransferOptions options;
  options.stream = StreamArg{true, 77};
  {
    ManagedTensor t = dlbridge::copy_to_device(host.with_flags(DLBRIDGE_FLAG_READ_ONLY), ext0,
                                               options);
    EXPECT_EQ(t.view().device(), ext0);
    EXPECT_EQ(t.flags(), uint64_t(DLBRIDGE_FLAG_IS_COPIED));  // writable, marked copied
    EXPECT_TRUE(t.view().is_c_contiguous());
    EXPECT_EQ(read(t.view()), data);
    ASSERT_EQ(fake->copies.size(), 1u);
    EXPECT_EQ(fake->copies[0].src, cpu);
    EXPECT_EQ(fake->copies[0].rows.row_bytes * fake->copies[0].rows.rows, 24);
    EXPECT_EQ(fake->copies[0].stream, (backend::Stream{backend::StreamKind::handle, 77}));
    // Pageable host memory is read before the call returns: no host wait.
    EXPECT_TRUE(fake->synchronized.empty());
  }
  EXPECT_EQ(fake->allocations, 1);
  EXPECT_EQ(fake->frees, 1);
  EXPECT_EQ(fake->availability_calls, 1);  // the target, asked once
}

TEST_F(Transfer, StridedHostSourcesAreCompactedOnTheHostFirst) {
  // The transpose of host: shape (3, 2), strides (1, 3).
  TensorView t = TensorView::from_data(data.data(), f32, {3, 2}, {1, 3});
  ManagedTensor out = dlbridge::copy_to_device(t, ext0);
  EXPECT_EQ(read(out.view()), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  ASSERT_EQ(fake->copies.size(), 1u);
  EXPECT_EQ(fake->copies[0].rows.rows, 1);
}

TEST_F(Transfer, DeviceToHostWaitsForTheCopyAndUsesPitchedRows) {
  // Columns 1..2 of a 3x4 matrix on the fake: three rows of two floats,
  // four floats apart.
  std::vector<float> matrix = iota(12);
  TensorView slice = TensorView::from_data(matrix.data() + 1, f32, {3, 2}, {4, 1}, ext0);
  ManagedTensor out = dlbridge::copy_to_device(slice, cpu);
  EXPECT_EQ(out.view().device(), cpu);
  EXPECT_EQ(read(out.view()), (std::vector<float>{1, 2, 5, 6, 9, 10}));
  ASSERT_EQ(fake->copies.size(), 1u);
  const backend::Rows& rows = fake->copies[0].rows;
  EXPECT_EQ(rows.rows, 3);
  EXPECT_EQ(rows.row_bytes, 8);
  EXPECT_EQ(rows.src_pitch, 16);
  EXPECT_EQ(rows.dst_pitch, 8);
  // The target is the host: blocking there is the only way to be done.
  EXPECT_EQ(fake->synchronized.size(), 1u);
}

TEST_F(Transfer, DeviceLayoutsThatAreNotRowsAreStagedThroughTheHost) {
  // Negative strides: the last row first, each row reversed.
  std::vector<float> matrix = iota(6);
  TensorView reversed = TensorView::from_data(matrix.data() + 5, f32, {2, 3}, {-3, -1}, ext0);
  ManagedTensor out = dlbridge::copy_to_device(reversed, cpu);
  EXPECT_EQ(read(out.view()), (std::vector<float>{5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(fake->availability_calls, 1);  // staging through the host asks no one again
  ASSERT_EQ(fake->copies.size(), 1u);
  EXPECT_EQ(fake->copies[0].rows.row_bytes, 24);  // the whole span, once
}

TEST_F(Transfer, DeviceToDeviceOrdersStreamsWithoutBlockingTheHost) {
  TensorView on_fake = host.with_device(ext0);
  dlbridge::TransferOptions options;
  options.stream = StreamArg{true, 9};
  options.source_stream = StreamArg{true, 5};
  ManagedTensor out = dlbridge::copy_to_device(on_fake, ext0, options);
  EXPECT_EQ(read(out.view()), data);
  ASSERT_EQ(fake->waits.size(), 1u);
  EXPECT_EQ(fake->waits[0].first.handle, 5u);
  EXPECT_EQ(fake->waits[0].second.handle, 9u);
  ASSERT_EQ(fake->copies.size(), 1u);
  EXPECT_EQ(fake->copies[0].stream.handle, 9u);
  EXPECT_TRUE(fake->synchronized.empty());
}

TEST_F(Transfer, CopyToAnAbsentOrUnsupportedDeviceFails) {
  auto absent = error_of([&] { dlbridge::copy_to_device(host, ext1); });
  ASSERT_TRUE(absent);
  EXPECT_EQ(absent->code(), ErrorCode::device_unavailable);
  auto unsupported = error_of([&] { dlbridge::copy_to_device(host, Device{dlabi::kDLMetal, 0}); });
  ASSERT_TRUE(unsupported);
  EXPECT_EQ(unsupported->code(), ErrorCode::unsupported_device_type);
  auto bad_stream = error_of([&] {
    dlbridge::TransferOptions options;
    options.stream = StreamArg{true, 3};
    dlbridge::copy_to_device(host, cpu, options);
  });
  ASSERT_TRUE(bad_stream);
  EXPECT_EQ(bad_stream->code(), ErrorCode::invalid_stream);
  EXPECT_EQ(fake->allocations, fake->frees);
}

TEST_F(Transfer, EmptyTensorsMoveNoBytes) {
  TensorView empty = TensorView::from_data(nullptr, f32, {0, 3});
  ManagedTensor out = dlbridge::copy_to_device(empty, ext0);
  EXPECT_EQ(out.view().size(), 0);
  EXPECT_TRUE(fake->copies.empty());
}

TEST_F(Transfer, PackedSubByteDataStaysPacked) {
  const DType int4{dlabi::kDLInt, 4, 1};
  std::vector<unsigned char> bytes = {0x21, 0x43, 0x65};
  TensorView packed = TensorView::from_data(bytes.data(), int4, {6});
  ManagedTensor on_fake = dlbridge::copy_to_device(packed, ext0);
  EXPECT_EQ(on_fake.view().nbytes(), 3);
  ManagedTensor back = dlbridge::copy_to_device(on_fake.view(), cpu);
  const auto* out = static_cast<const unsigned char*>(back.view().data());
  EXPECT_EQ(std::vector<unsigned char>(out, out + 3), bytes);
}

}  // namespace
