// <dlbridge/dlpack_compat.hpp> against the official dlpack.h found at
// configure time: official structs in, official structs out, no cast in
// sight, and every ownership rule of ManagedTensor kept across the hand-over.
#include <gtest/gtest.h>

#include <dlpack/dlpack.h>

#include <dlbridge/dlpack_compat.hpp>
#include <dlbridge/dlbridge.hpp>

#include <cstdint>
#include <memory>
#include <vector>

namespace {

// An official-typed producer: its deleter has the official signature and
// counts its calls, so "exactly once" is observable.
struct OfficialProducer {
  float data[6] = {0, 1, 2, 3, 4, 5};
  int64_t shape[2] = {2, 3};
  int64_t strides[2] = {3, 1};
  int deleted = 0;
  ::DLManagedTensorVersioned managed{};
  ::DLManagedTensor legacy{};

  static void delete_versioned(::DLManagedTensorVersioned* self) {
    ++static_cast<OfficialProducer*>(self->manager_ctx)->deleted;
  }
  static void delete_legacy(::DLManagedTensor* self) {
    ++static_cast<OfficialProducer*>(self->manager_ctx)->deleted;
  }

  ::DLTensor tensor() {
    ::DLTensor t{};
    t.data = data;
    t.device = ::DLDevice{kDLCPU, 0};
    t.ndim = 2;
    t.dtype = ::DLDataType{kDLFloat, 32, 1};
    t.shape = shape;
    t.strides = strides;
    return t;
  }

  ::DLManagedTensorVersioned* versioned(uint64_t flags = 0, uint32_t major = DLPACK_MAJOR_VERSION) {
    managed.version = ::DLPackVersion{major, DLPACK_MINOR_VERSION};
    managed.manager_ctx = this;
    managed.deleter = &delete_versioned;
    managed.flags = flags;
    managed.dl_tensor = tensor();
    return &managed;
  }

  ::DLManagedTensor* unversioned() {
    legacy.manager_ctx = this;
    legacy.deleter = &delete_legacy;
    legacy.dl_tensor = tensor();
    return &legacy;
  }
};

TEST(DlpackCompat, AdoptsAnOfficialVersionedTensorAndDeletesItOnce) {
  OfficialProducer producer;
  {
    dlbridge::ManagedTensor t = dlbridge::adopt(producer.versioned(DLPACK_FLAG_BITMASK_READ_ONLY));
    EXPECT_EQ(t.view().shape(1), 3);
    EXPECT_EQ(t.view().dtype(), dlbridge::dtype_of<float>());
    EXPECT_EQ(t.view().data(), producer.data);
    EXPECT_TRUE(t.view().readonly());
    EXPECT_EQ(producer.deleted, 0);
  }
  EXPECT_EQ(producer.deleted, 1);
}

TEST(DlpackCompat, AdoptRefusesAnotherMajorVersionAfterDeletingIt) {
  OfficialProducer producer;
  try {
    dlbridge::adopt(producer.versioned(0, DLPACK_MAJOR_VERSION + 1));
    FAIL() << "a major version from the future was adopted";
  } catch (const dlbridge::Error& e) {
    EXPECT_EQ(e.code(), dlbridge::ErrorCode::unsupported_version);
  }
  EXPECT_EQ(producer.deleted, 1);
}

TEST(DlpackCompat, AdoptAppliesTheImportPolicy) {
  OfficialProducer producer;
  dlbridge::ImportPolicy writable;
  writable.require_writable = true;
  try {
    dlbridge::adopt(producer.versioned(DLPACK_FLAG_BITMASK_READ_ONLY), writable);
    FAIL() << "read-only data was adopted as writable";
  } catch (const dlbridge::Error& e) {
    EXPECT_EQ(e.code(), dlbridge::ErrorCode::read_only);
  }
  EXPECT_EQ(producer.deleted, 1);
}

TEST(DlpackCompat, AdoptsAnOfficialLegacyTensorWithTheFlagsTheCallerKnows) {
  OfficialProducer producer;
  {
    dlbridge::ManagedTensor t = dlbridge::adopt(producer.unversioned(), DLPACK_FLAG_BITMASK_READ_ONLY);
    EXPECT_FALSE(t.is_versioned());
    EXPECT_TRUE(t.view().readonly());
  }
  EXPECT_EQ(producer.deleted, 1);
}

TEST(DlpackCompat, ReleasesAsAnOfficialVersionedTensor) {
  auto data = std::make_shared<std::vector<double>>(4, 2.5);
  auto view = dlbridge::TensorView::from_data(data->data(), dlbridge::dtype_of<double>(), {4});
  dlbridge::ManagedTensor t = dlbridge::ManagedTensor::adopt(
      dlbridge::export_tensor(view, data, DLBRIDGE_FLAG_READ_ONLY, dlbridge::ExportFormat::versioned)
          .release_versioned());

  ::DLManagedTensorVersioned* out = dlbridge::release_as<::DLManagedTensorVersioned>(t);
  ASSERT_NE(out, nullptr);
  EXPECT_FALSE(t);
  EXPECT_EQ(out->version.major, DLPACK_MAJOR_VERSION);
  EXPECT_EQ(out->flags & DLPACK_FLAG_BITMASK_READ_ONLY, DLPACK_FLAG_BITMASK_READ_ONLY);
  EXPECT_EQ(out->dl_tensor.dtype.code, kDLFloat);
  EXPECT_EQ(out->dl_tensor.dtype.bits, 64);
  EXPECT_EQ(out->dl_tensor.shape[0], 4);
  EXPECT_EQ(static_cast<double*>(out->dl_tensor.data)[3], 2.5);
  EXPECT_EQ(data.use_count(), 2);  // the export still holds the memory
  out->deleter(out);
  EXPECT_EQ(data.use_count(), 1);
}

TEST(DlpackCompat, ReleaseAsLegacyRefusesReadOnlyAndKeepsOwnership) {
  OfficialProducer producer;
  dlbridge::ManagedTensor t = dlbridge::adopt(producer.versioned(DLPACK_FLAG_BITMASK_READ_ONLY));
  try {
    dlbridge::release_as<::DLManagedTensor>(t);
    FAIL() << "read-only data left as a legacy struct";
  } catch (const dlbridge::Error& e) {
    EXPECT_EQ(e.code(), dlbridge::ErrorCode::read_only);
  }
  EXPECT_TRUE(t);
  EXPECT_EQ(producer.deleted, 0);
  t.reset();
  EXPECT_EQ(producer.deleted, 1);
}

TEST(DlpackCompat, ReleaseAsLegacyWrapsAWritableTensor) {
  OfficialProducer producer;
  dlbridge::ManagedTensor t = dlbridge::adopt(producer.versioned());
  ::DLManagedTensor* out = dlbridge::release_as<::DLManagedTensor>(t);
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(out->dl_tensor.data, producer.data);
  EXPECT_EQ(producer.deleted, 0);
  out->deleter(out);
  EXPECT_EQ(producer.deleted, 1);
}

TEST(DlpackCompat, ViewsAnOfficialDlTensorWithValidation) {
  OfficialProducer producer;
  ::DLTensor t = producer.tensor();
  dlbridge::TensorView view = dlbridge::view_of(t);
  EXPECT_EQ(view.size(), 6);
  EXPECT_TRUE(view.is_c_contiguous());

  t.ndim = -1;
  try {
    dlbridge::view_of(t);
    FAIL() << "a negative ndim was accepted";
  } catch (const dlbridge::Error& e) {
    EXPECT_EQ(e.code(), dlbridge::ErrorCode::invalid_tensor);
  }
}

TEST(DlpackCompat, ViewRoundTripsThroughAnOfficialDlTensor) {
  std::vector<int16_t> data(12);
  auto view = dlbridge::TensorView::from_data(data.data(), dlbridge::dtype_of<int16_t>(), {3, 4},
                                              {1, 3}, dlbridge::Device{dlbridge::abi::kDLCPU, 0});
  ::DLTensor official = dlbridge::to_official(view);
  EXPECT_EQ(official.device.device_type, kDLCPU);
  EXPECT_EQ(official.dtype.code, kDLInt);
  EXPECT_EQ(official.dtype.bits, 16);
  EXPECT_EQ(official.strides[0], 1);
  dlbridge::TensorView back = dlbridge::view_of(official);
  EXPECT_TRUE(back.is_f_contiguous());
  EXPECT_EQ(back.data(), view.data());
}

TEST(DlpackCompat, ValuesConvertBothWays) {
  const ::DLDevice device = dlbridge::to_official(dlbridge::abi::DLDevice{dlbridge::abi::kDLCUDA, 3});
  EXPECT_EQ(device.device_type, kDLCUDA);
  EXPECT_EQ(device.device_id, 3);
  EXPECT_EQ(dlbridge::from_official(::DLDevice{kDLCUDAHost, 0}).device_type, dlbridge::abi::kDLCUDAHost);
  const ::DLDataType bf16 = dlbridge::to_official(dlbridge::parse_dtype("bfloat16").to_dl());
  EXPECT_EQ(bf16.code, kDLBfloat);
  EXPECT_EQ(bf16.bits, 16);
  EXPECT_EQ(dlbridge::from_official(::DLPackVersion{1, 3}).minor, 3u);
}

TEST(DlpackCompat, PointersAreTheSameObject) {
  OfficialProducer producer;
  ::DLManagedTensorVersioned* official = producer.versioned();
  dlbridge::abi::DLManagedTensorVersioned* ours = dlbridge::from_official(official);
  EXPECT_EQ(static_cast<void*>(ours), static_cast<void*>(official));
  EXPECT_EQ(ours->dl_tensor.shape, producer.shape);
  EXPECT_EQ(dlbridge::to_official(ours), official);
}

TEST(DlpackCompat, ExchangeApiTableIsReadableThroughTheOfficialHeader) {
  struct Provider {
    static dlbridge::abi::DLManagedTensorVersioned* to_managed(void*) { return nullptr; }
    static void to_dltensor(void*, dlbridge::abi::DLTensor*) {}
    static void* from_managed(dlbridge::abi::DLManagedTensorVersioned*) { return nullptr; }
    static void* current_stream(dlbridge::Device) { return nullptr; }
    static void report_error(std::exception_ptr) noexcept {}
  };
  const dlbridge::abi::DLPackExchangeAPI* api = dlbridge::make_exchange_api<Provider>();
  const ::DLPackExchangeAPI* official = dlbridge::to_official(api);
  EXPECT_EQ(official->header.version.major, DLPACK_MAJOR_VERSION);
  EXPECT_EQ(official->header.version.minor, DLPACK_MINOR_VERSION);
  EXPECT_NE(official->managed_tensor_allocator, nullptr);
  EXPECT_EQ(dlbridge::from_official(official), api);
}

}  // namespace
