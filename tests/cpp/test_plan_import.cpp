// plan_import (exchange/plan_import.hpp) and carry_out on the receiving side: what
// from_dlpack does with the tensor a producer delivered, for each request;
// driven through a fake kDLExtDev backend that counts its availability
// checks.
#include <gtest/gtest.h>

#include "support/error_of.hpp"
#include "support/fake_device_test.hpp"

#include <dlbridge/exchange/carry_out.hpp>
#include <dlbridge/exchange/plan_import.hpp>

#include <memory>
#include <optional>
#include <vector>

namespace {

using dlbridge::Device;
using dlbridge::DType;
using dlbridge::Error;
using dlbridge::ErrorCode;
using dlbridge::ExchangePlan;
using dlbridge::ExchangeRequest;
using dlbridge::ManagedTensor;
using dlbridge::TensorView;
using test_support::error_of;
using test_support::FakeBackend;
using test_support::iota;
using test_support::read;
using test_support::ScopedBackend;
namespace dlabi = dlbridge::abi;

using test_support::cpu;
using test_support::ext0;
using test_support::ext1;
using test_support::f32;

struct Consumer : test_support::FakeDeviceTest {

  static ExchangeRequest request(std::optional<Device> device, std::optional<bool> copy = {}) {
    ExchangeRequest r;
    r.device = device;
    r.copy = copy;
    return r;
  }
};

TEST_F(Consumer, APlainRequestTakesTheTensorAsItIs) {
  ExchangePlan p = dlbridge::plan_import(host, request(std::nullopt));
  EXPECT_FALSE(p.copy);
  EXPECT_EQ(p.target, cpu);
  EXPECT_FALSE(dlbridge::carry_out(host, p));
  EXPECT_EQ(fake->availability_calls, 0);
  // Such a request is recognised, so hot paths may skip planning it.
  EXPECT_TRUE(dlbridge::asks_nothing(request(std::nullopt)));
  EXPECT_FALSE(dlbridge::asks_nothing(request(std::nullopt, false)));
  EXPECT_FALSE(dlbridge::asks_nothing(request(cpu)));
  ExchangeRequest aligned = request(std::nullopt);
  aligned.require.min_alignment = 64;
  EXPECT_FALSE(dlbridge::asks_nothing(aligned));
}

TEST_F(Consumer, AnotherDeviceIsACopyThatAsksTheDeviceOnce) {
  ExchangePlan p = dlbridge::plan_import(host, request(ext0));
  EXPECT_TRUE(p.copy);
  EXPECT_EQ(p.target, ext0);
  std::optional<ManagedTensor> out = dlbridge::carry_out(host, p);
  ASSERT_TRUE(out);
  EXPECT_EQ(out->view().device(), ext0);
  EXPECT_EQ(read(out->view()), data);
  EXPECT_EQ(fake->availability_calls, 1);
}

TEST_F(Consumer, AnAbsentDeviceIsUnavailableWithTheBackendsReason) {
  auto e = error_of([&] { dlbridge::plan_import(host, request(ext1)); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), ErrorCode::device_unavailable);
  EXPECT_NE(e->message().find("the fake has device 0 only."), std::string::npos);
}

TEST_F(Consumer, CopyFalseWithAMoveIsCopyRequiredBeforeAnyDeviceIsAsked) {
  auto e = error_of([&] { dlbridge::plan_import(host, request(ext1, false)); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), ErrorCode::copy_required);
  EXPECT_NE(e->message().find("The tensor is on cpu but device=ext_dev:1 was requested with "
                              "copy=False."),
            std::string::npos)
      << e->message();
  EXPECT_EQ(fake->availability_calls, 0);
}

TEST_F(Consumer, CopyFalseRefusesWhatTheProducerCouldOnlyCopy) {
  auto e = error_of([&] { dlbridge::plan_import(host, request(std::nullopt, false), true); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), ErrorCode::copy_required);
  EXPECT_NE(e->message().find("(it set IS_COPIED)"), std::string::npos);
}

TEST_F(Consumer, CopyTrueCopiesUnlessTheProducerAlreadyDid) {
  EXPECT_TRUE(dlbridge::plan_import(host, request(std::nullopt, true)).copy);
  EXPECT_FALSE(dlbridge::plan_import(host, request(std::nullopt, true), true).copy);
}

TEST_F(Consumer, HostAccessibleMemoryReachesTheCpuRelabelled) {
  for (auto type : {dlabi::kDLCUDAHost, dlabi::kDLCUDAManaged}) {
    ExchangePlan p = dlbridge::plan_import(host.with_device(Device{type, 0}), request(cpu, false));
    EXPECT_FALSE(p.copy);
    EXPECT_EQ(p.target, cpu);
  }
}

TEST_F(Consumer, DeviceDataToTheHostIsACopyOnTheSourcesBackend) {
  TensorView on_fake = host.with_device(ext0);
  ExchangePlan p = dlbridge::plan_import(on_fake, request(cpu));
  EXPECT_TRUE(p.copy);
  EXPECT_EQ(p.from, fake);
  std::optional<ManagedTensor> out = dlbridge::carry_out(on_fake, p);
  ASSERT_TRUE(out);
  EXPECT_EQ(read(out->view()), data);
  EXPECT_EQ(fake->availability_calls, 1);
  EXPECT_EQ(fake->synchronized.size(), 1u);  // the host waits for its copy
}

TEST_F(Consumer, AnUnmetRequirementIsMetByACopy) {
  ExchangeRequest writable = request(std::nullopt);
  writable.require.require_writable = true;
  TensorView readonly = host.with_flags(DLBRIDGE_FLAG_READ_ONLY);
  ExchangePlan p = dlbridge::plan_import(readonly, writable);
  EXPECT_TRUE(p.copy);
  std::optional<ManagedTensor> out = dlbridge::carry_out(readonly, p);
  ASSERT_TRUE(out);
  EXPECT_FALSE(out->view().readonly());
  EXPECT_EQ(read(out->view()), data);

  ExchangeRequest compact = request(std::nullopt);
  compact.require.require_c_contiguous = true;
  TensorView transposed = TensorView::from_data(data.data(), f32, {3, 2}, {1, 3});
  std::optional<ManagedTensor> t =
      dlbridge::carry_out(transposed, dlbridge::plan_import(transposed, compact));
  ASSERT_TRUE(t);
  EXPECT_TRUE(t->view().is_c_contiguous());
  EXPECT_EQ(read(t->view()), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  // A tensor that meets them is not copied.
  EXPECT_FALSE(dlbridge::plan_import(host, compact).copy);
}

TEST_F(Consumer, AnUnmetRequirementWithCopyFalseIsTheRequirementsError) {
  ExchangeRequest writable = request(std::nullopt, false);
  writable.require.require_writable = true;
  auto e = error_of([&] {
    dlbridge::plan_import(host.with_flags(DLBRIDGE_FLAG_READ_ONLY), writable);
  });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), ErrorCode::read_only);
}

TEST_F(Consumer, HostAccessIsMetByACopyToTheCpuUnlessADeviceIsNamed) {
  TensorView on_fake = host.with_device(ext0);
  ExchangeRequest r = request(std::nullopt);
  r.require.require_host_accessible = true;
  ExchangePlan p = dlbridge::plan_import(on_fake, r);
  EXPECT_TRUE(p.copy);
  EXPECT_EQ(p.target, cpu);
  for (ExchangeRequest refused : {request(std::nullopt, false), request(ext0)}) {
    refused.require.require_host_accessible = true;
    auto e = error_of([&] { dlbridge::plan_import(on_fake, refused); });
    ASSERT_TRUE(e);
    EXPECT_EQ(e->code(), ErrorCode::device_unavailable);
  }
}

// The caller's stream is ordered after a device tensor taken as it is
// through the backend of the registry plan_import was given.
TEST_F(Consumer, AZeroCopyImportWaitsThroughThePlansRegistry) {
  auto own_fake = std::make_shared<FakeBackend>();
  dlbridge::backend::Registry own;
  own.set(dlabi::kDLExtDev, own_fake);
  TensorView on_fake = host.with_device(ext0);
  ExchangeRequest r = request(std::nullopt);
  r.stream = dlbridge::StreamArg{true, 9};
  ExchangePlan p = dlbridge::plan_import(on_fake, r, false, own);
  EXPECT_FALSE(p.copy);
  EXPECT_EQ(p.from, own_fake);
  EXPECT_FALSE(dlbridge::carry_out(on_fake, p, r.stream));
  EXPECT_EQ(own_fake->waits.size(), 1u);
  EXPECT_EQ(own_fake->availability_calls, 1);
  EXPECT_TRUE(fake->waits.empty());
  EXPECT_EQ(fake->availability_calls, 0);
}

}  // namespace
