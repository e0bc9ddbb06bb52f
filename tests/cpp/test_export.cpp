// Export hands C++-owned memory to a consumer that frees it whenever it
// likes. The owner must live exactly until the consumer's deleter runs, and
// the exported struct must not point into anything the producer may reuse.
#include <gtest/gtest.h>

#include "support/error_of.hpp"

#include <dlbridge/exchange/plan_export.hpp>
#include <dlbridge/export.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace {

using dlbridge::DType;
using dlbridge::Error;
using dlbridge::ErrorCode;
using dlbridge::ExportFormat;
using dlbridge::ManagedTensor;
using dlbridge::negotiate_format;
using dlbridge::TensorView;
namespace dlabi = dlbridge::abi;

using Version = std::optional<dlabi::DLPackVersion>;

constexpr DType f32{dlabi::kDLFloat, 32, 1};

// The negotiation rule is constexpr so producers can fold it.
static_assert(negotiate_format(std::nullopt) == ExportFormat::legacy);
static_assert(negotiate_format(dlabi::DLPackVersion{1, 0}) ==
              ExportFormat::versioned);

using test_support::error_of;

// Six floats whose release is counted: a stand-in for any C++ container
// that owns exported memory.
struct CountedBuffer {
  int frees = 0;
  std::shared_ptr<std::vector<float>> make() {
    return std::shared_ptr<std::vector<float>>(
        new std::vector<float>{1, 2, 3, 4, 5, 6}, [this](std::vector<float>* v) {
          ++frees;
          delete v;
        });
  }
};

TEST(Negotiate, ProducerRule) {
  EXPECT_EQ(negotiate_format(Version{}), ExportFormat::legacy);
  EXPECT_EQ(negotiate_format(Version{{0, 9}}), ExportFormat::legacy);
  EXPECT_EQ(negotiate_format(Version{{0, 0}}), ExportFormat::legacy);
  EXPECT_EQ(negotiate_format(Version{{1, 0}}), ExportFormat::versioned);
  EXPECT_EQ(negotiate_format(Version{{1, 3}}), ExportFormat::versioned);
  EXPECT_EQ(negotiate_format(Version{{1, 99}}), ExportFormat::versioned);
  EXPECT_EQ(negotiate_format(Version{{2, 0}}), ExportFormat::versioned);
  EXPECT_EQ(negotiate_format(Version{{99, 0}}), ExportFormat::versioned);
}

TEST(MakeVersioned, OwnerLivesUntilTheConsumerDeletes) {
  CountedBuffer counted;
  auto owner = counted.make();
  TensorView view = TensorView::from_data(owner->data(), f32, {2, 3});
  dlabi::DLManagedTensorVersioned* m = dlbridge::make_versioned(view, owner, 0);
  owner.reset();  // the producer lets go; the export keeps the memory alive
  EXPECT_EQ(counted.frees, 0);
  EXPECT_EQ(static_cast<float*>(m->dl_tensor.data)[5], 6.0f);
  m->deleter(m);
  EXPECT_EQ(counted.frees, 1);
}

TEST(MakeVersioned, CarriesVersionFlagsAndTheView) {
  float data[8] = {};
  TensorView view = TensorView::from_data(data, f32, {2, 2}, {-2, 1},
                                          {dlabi::kDLCUDAHost, 0});
  const uint64_t flags = DLBRIDGE_FLAG_READ_ONLY | DLBRIDGE_FLAG_IS_COPIED;
  dlabi::DLManagedTensorVersioned* m = dlbridge::make_versioned(view, nullptr, flags);
  EXPECT_EQ(m->version.major, 1u);
  EXPECT_EQ(m->version.minor, 3u);
  EXPECT_EQ(m->flags, flags);
  EXPECT_EQ(m->dl_tensor.data, static_cast<void*>(data));
  EXPECT_EQ(m->dl_tensor.device.device_type, dlabi::kDLCUDAHost);
  EXPECT_EQ(m->dl_tensor.ndim, 2);
  EXPECT_EQ(m->dl_tensor.strides[0], -2);
  EXPECT_EQ(m->dl_tensor.strides[1], 1);
  EXPECT_EQ(DType::from_dl(m->dl_tensor.dtype), f32);
  m->deleter(m);
}

TEST(MakeVersioned, ShapeAndStridesAreCopies) {
  std::vector<float> data(12);
  std::vector<int64_t> shape{3, 4}, strides{4, 1};
  dlabi::DLManagedTensorVersioned* m = nullptr;
  {
    TensorView view = TensorView::from_data(data.data(), f32, shape, strides);
    m = dlbridge::make_versioned(view, nullptr, 0);
    EXPECT_NE(m->dl_tensor.shape, view.shape());
    EXPECT_NE(m->dl_tensor.strides, view.strides());
  }  // the view is gone: ASan would catch the export pointing into it
  shape.assign({7, 7});
  strides.assign({9, 9});
  EXPECT_EQ(m->dl_tensor.shape[0], 3);
  EXPECT_EQ(m->dl_tensor.shape[1], 4);
  EXPECT_EQ(m->dl_tensor.strides[0], 4);
  EXPECT_EQ(m->dl_tensor.strides[1], 1);
  m->deleter(m);
}

// The owner is the ManagedTensor that holds the view, so the export may
// point at that view's dims; they must stay valid after every other
// reference to the ManagedTensor is gone.
TEST(MakeVersioned, BorrowedDimsLiveAsLongAsTheOwner) {
  auto data = std::make_shared<std::vector<float>>(12);
  auto storage = std::make_shared<ManagedTensor>(dlbridge::export_tensor(
      TensorView::from_data(data->data(), f32, {3, 4}, {1, 3}), data, 0));
  const int64_t* owner_shape = storage->view().shape();
  dlabi::DLManagedTensorVersioned* m = dlbridge::make_versioned(
      storage->view(), storage, 0, dlbridge::ExportDims::borrow_from_owner);
  EXPECT_EQ(m->dl_tensor.shape, owner_shape);
  EXPECT_EQ(m->dl_tensor.strides, storage->view().strides());
  storage.reset();
  data.reset();
  EXPECT_EQ(m->dl_tensor.shape[1], 4);  // ASan: still owned by the export
  EXPECT_EQ(m->dl_tensor.strides[1], 3);
  m->deleter(m);
}

TEST(MakeVersioned, NullStridesAreFilledIn) {
  float data[6] = {};
  dlabi::DLTensor t{};
  int64_t shape[2] = {2, 3};
  t.data = data;
  t.device = {dlabi::kDLCPU, 0};
  t.ndim = 2;
  t.dtype = f32.to_dl();
  t.shape = shape;
  TensorView view = TensorView::from_dltensor(t);
  dlabi::DLManagedTensorVersioned* m = dlbridge::make_versioned(view, nullptr, 0);
  ASSERT_NE(m->dl_tensor.strides, nullptr);
  EXPECT_EQ(m->dl_tensor.strides[0], 3);
  m->deleter(m);
}

TEST(MakeVersioned, ByteOffsetIsKept) {
  float data[4] = {};
  dlabi::DLTensor t{};
  int64_t shape[1] = {2};
  t.data = data;
  t.device = {dlabi::kDLCPU, 0};
  t.ndim = 1;
  t.dtype = f32.to_dl();
  t.shape = shape;
  t.byte_offset = 8;
  TensorView view = TensorView::from_dltensor(t);
  dlabi::DLManagedTensorVersioned* m = dlbridge::make_versioned(view, nullptr, 0);
  EXPECT_EQ(m->dl_tensor.data, static_cast<void*>(data));
  EXPECT_EQ(m->dl_tensor.byte_offset, 8u);
  m->deleter(m);
}

TEST(MakeVersioned, ZeroDimHasNullShapeAndStrides) {
  float scalar = 3.5f;
  TensorView view = TensorView::from_data(&scalar, f32, {});
  dlabi::DLManagedTensorVersioned* m = dlbridge::make_versioned(view, nullptr, 0);
  EXPECT_EQ(m->dl_tensor.ndim, 0);
  EXPECT_EQ(m->dl_tensor.shape, nullptr);
  EXPECT_EQ(m->dl_tensor.strides, nullptr);
  m->deleter(m);
}

TEST(MakeVersioned, ManyDims) {
  float data[3] = {};
  std::vector<int64_t> shape(9, 1);
  shape[4] = 3;
  TensorView view = TensorView::from_data(data, f32, shape);
  dlabi::DLManagedTensorVersioned* m = dlbridge::make_versioned(view, nullptr, 0);
  EXPECT_EQ(m->dl_tensor.ndim, 9);
  EXPECT_EQ(m->dl_tensor.shape[4], 3);
  EXPECT_EQ(m->dl_tensor.strides[3], 3);
  m->deleter(m);
}

TEST(MakeLegacy, OwnerLivesUntilTheConsumerDeletes) {
  CountedBuffer counted;
  auto owner = counted.make();
  TensorView view = TensorView::from_data(owner->data(), f32, {6});
  dlabi::DLManagedTensor* m = dlbridge::make_legacy(view, std::move(owner), 0);
  EXPECT_EQ(counted.frees, 0);
  EXPECT_EQ(m->dl_tensor.shape[0], 6);
  EXPECT_EQ(m->dl_tensor.strides[0], 1);
  m->deleter(m);
  EXPECT_EQ(counted.frees, 1);
}

// Legacy structs have no flags: padded sub-byte elements would be read as
// packed, so every route to a legacy struct refuses them, copies included.
TEST(MakeLegacy, PaddedSubByteIsRefusedOnEveryRoute) {
  std::vector<uint8_t> data{1, 2, 3, 4};
  constexpr DType uint4{dlabi::kDLUInt, 4, 1};
  const uint64_t padded = DLBRIDGE_FLAG_IS_SUBBYTE_TYPE_PADDED;
  TensorView view = TensorView::from_data(data.data(), uint4, {4}, {}, {}, padded);
  auto direct = error_of([&] { dlbridge::make_legacy(view, nullptr, padded); });
  ASSERT_TRUE(direct);
  EXPECT_EQ(direct->code(), ErrorCode::unsupported_layout);
  EXPECT_NE(direct->hint().find("max_version=(1, 3)"), std::string::npos);

  ManagedTensor owned = ManagedTensor::adopt(dlbridge::make_versioned(view, nullptr, padded));
  auto wrapped = error_of([&] { owned.release_legacy(); });
  ASSERT_TRUE(wrapped);
  EXPECT_EQ(wrapped->code(), ErrorCode::unsupported_layout);
  EXPECT_TRUE(owned);  // still owned after the refusal

  dlbridge::ExchangeRequest request;  // no max_version: legacy
  request.copy = true;
  auto planned = error_of([&] { dlbridge::plan_export(view, request); });
  ASSERT_TRUE(planned);
  EXPECT_EQ(planned->code(), ErrorCode::unsupported_layout);
  request.max_version = dlabi::DLPackVersion{1, 3};
  EXPECT_FALSE(error_of([&] { dlbridge::plan_export(view, request); }));
}

TEST(MakeLegacy, ReadOnlyIsRefused) {
  CountedBuffer counted;
  auto owner = counted.make();
  TensorView view = TensorView::from_data(owner->data(), f32, {6});
  auto e = error_of([&] {
    dlbridge::make_legacy(view, owner, DLBRIDGE_FLAG_READ_ONLY);
  });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), ErrorCode::read_only);
  EXPECT_NE(e->message().find("legacy"), std::string::npos) << e->message();
  EXPECT_NE(e->hint().find("copy=True"), std::string::npos) << e->hint();
  // The refusal took no share of the owner.
  EXPECT_EQ(owner.use_count(), 1);
  owner.reset();
  EXPECT_EQ(counted.frees, 1);
}

TEST(ExportTensor, VersionedRoundTripToAConsumer) {
  CountedBuffer counted;
  auto owner = counted.make();
  TensorView view = TensorView::from_data(owner->data(), f32, {2, 3});
  ManagedTensor exported =
      dlbridge::export_tensor(view, std::move(owner), DLBRIDGE_FLAG_READ_ONLY);
  EXPECT_TRUE(exported.is_versioned());
  EXPECT_TRUE(exported.view().readonly());
  EXPECT_EQ(exported.version().minor, 3u);
  // The consumer takes it over the C ABI and frees it on its own schedule.
  dlabi::DLManagedTensorVersioned* handed = exported.release_versioned();
  exported.reset();
  EXPECT_EQ(counted.frees, 0);
  ManagedTensor consumer = ManagedTensor::adopt(handed);
  EXPECT_EQ(consumer.view().shape(1), 3);
  EXPECT_EQ(static_cast<float*>(consumer.view().data())[4], 5.0f);
  EXPECT_EQ(counted.frees, 0);
  consumer.reset();
  EXPECT_EQ(counted.frees, 1);
}

TEST(ExportTensor, LegacyFormat) {
  CountedBuffer counted;
  auto owner = counted.make();
  TensorView view = TensorView::from_data(owner->data(), f32, {3, 2});
  {
    ManagedTensor exported = dlbridge::export_tensor(
        view, owner, DLBRIDGE_FLAG_IS_COPIED, ExportFormat::legacy);
    EXPECT_FALSE(exported.is_versioned());
    EXPECT_EQ(exported.flags(), DLBRIDGE_FLAG_IS_COPIED);
    dlabi::DLManagedTensor* handed = exported.release_legacy();
    ASSERT_NE(handed, nullptr);
    owner.reset();
    EXPECT_EQ(counted.frees, 0);
    handed->deleter(handed);
  }
  EXPECT_EQ(counted.frees, 1);
}

TEST(ExportTensor, LegacyReadOnlyIsRefused) {
  CountedBuffer counted;
  auto owner = counted.make();
  TensorView view = TensorView::from_data(owner->data(), f32, {6});
  auto e = error_of([&] {
    dlbridge::export_tensor(view, owner, DLBRIDGE_FLAG_READ_ONLY,
                            ExportFormat::legacy);
  });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), ErrorCode::read_only);
  EXPECT_EQ(counted.frees, 0);
  owner.reset();
  EXPECT_EQ(counted.frees, 1);
}

TEST(ExportTensor, UnknownFlagsAreRefusedAndFreed) {
  // The export is built before adopt checks it: the refusal must still run
  // its deleter, releasing the owner's share exactly once.
  CountedBuffer counted;
  auto owner = counted.make();
  TensorView view = TensorView::from_data(owner->data(), f32, {6});
  auto e = error_of([&] { dlbridge::export_tensor(view, owner, 0x8); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), ErrorCode::invalid_tensor);
  EXPECT_EQ(owner.use_count(), 1);
  owner.reset();
  EXPECT_EQ(counted.frees, 1);
}

TEST(ExportTensor, NegotiatedFormatEndToEnd) {
  float data[4] = {1, 2, 3, 4};
  TensorView view = TensorView::from_data(data, f32, {4});
  for (auto [request, versioned] :
       {std::pair{Version{}, false}, std::pair{Version{{0, 9}}, false},
        std::pair{Version{{1, 3}}, true}, std::pair{Version{{2, 0}}, true}}) {
    ManagedTensor t =
        dlbridge::export_tensor(view, nullptr, 0, negotiate_format(request));
    EXPECT_EQ(t.is_versioned(), versioned);
    // Even a consumer asking for 2.0 gets the producer's own (1, 3); a
    // legacy struct reports (0, 0).
    EXPECT_EQ(t.version().major, versioned ? 1u : 0u);
    EXPECT_EQ(t.version().minor, versioned ? 3u : 0u);
  }
}

}  // namespace
