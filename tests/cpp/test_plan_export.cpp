// plan_export (exchange/plan_export.hpp): which device, copy or no copy, and which
// refusal, for each request; driven through a fake kDLExtDev backend.
#include <gtest/gtest.h>

#include "support/error_of.hpp"
#include "support/fake_device_test.hpp"

#include <dlbridge/exchange/carry_out.hpp>
#include <dlbridge/exchange/plan_export.hpp>

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

struct Negotiation : test_support::FakeDeviceTest {

  ExchangePlan plan(const TensorView& v, std::optional<Device> device,
                    std::optional<bool> copy = std::nullopt) {
    ExchangeRequest r;
    r.max_version = dlabi::DLPackVersion{1, 3};
    r.device = device;
    r.copy = copy;
    return dlbridge::plan_export(v, r);
  }
  std::optional<Error> plan_error(const TensorView& v, Device device,
                                  std::optional<bool> copy = std::nullopt) {
    return error_of([&] { plan(v, device, copy); });
  }
};

TEST_F(Negotiation, AnotherAvailableDeviceIsACopy) {
  EXPECT_EQ(dlbridge::served_backend(ext0), fake);
  for (std::optional<bool> copy : {std::optional<bool>{}, std::optional<bool>{true}}) {
    auto p = plan(host, ext0, copy);
    EXPECT_TRUE(p.copy);
    EXPECT_EQ(p.target, ext0);
  }
}

TEST_F(Negotiation, CopyFalseAcrossDevicesIsCopyRequired) {
  auto e = plan_error(host, ext0, false);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), ErrorCode::copy_required);
  EXPECT_NE(e->message().find("from cpu to ext_dev"), std::string::npos) << e->message();
}

TEST_F(Negotiation, SameDeviceCopiesOnlyWhenAsked) {
  EXPECT_FALSE(plan(host, std::nullopt).copy);
  EXPECT_FALSE(plan(host, cpu, false).copy);
  EXPECT_TRUE(plan(host, cpu, true).copy);
}

TEST_F(Negotiation, AnAbsentDeviceIdCarriesTheBackendsReason) {
  auto e = plan_error(host, ext1);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), ErrorCode::device_unavailable);
  EXPECT_NE(e->message().find("the fake has device 0 only."), std::string::npos);
}

TEST_F(Negotiation, ATypeWithoutABackendIsUnsupportedWithTheExactMessage) {
  auto e = plan_error(host, Device{dlabi::kDLVulkan, 0});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), ErrorCode::unsupported_device_type);
  EXPECT_NE(e->message().find("The device specification passed to to_dlpack contains an "
                              "unsupported device type (DLDeviceType: kDLVulkan)"),
            std::string::npos);
  auto unknown = plan_error(host, Device{dlbridge::DeviceType(42), 0});
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->code(), ErrorCode::unsupported_device_type);
}

TEST_F(Negotiation, TheRefusalListsWhatTheRegistryServes) {
  // The fixture installed a backend for kDLExtDev: the message says so.
  auto e = plan_error(host, Device{dlabi::kDLVulkan, 0});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->hint().find("dlbridge serves kDLCPU, kDLCUDA, kDLCUDAHost, kDLExtDev, "
                           "kDLCUDAManaged."),
            0u)
      << e->hint();
  // A registry of its own answers for itself.
  dlbridge::backend::Registry only_fake;
  only_fake.set(dlabi::kDLExtDev, fake);
  EXPECT_EQ(dlbridge::served_device_list(only_fake), "kDLExtDev");
  ExchangeRequest r;
  r.device = Device{dlabi::kDLCPU, 0};
  auto refused = error_of([&] { dlbridge::plan_export(host.with_device(ext0), r, only_fake); });
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->code(), ErrorCode::unsupported_device_type);
  EXPECT_NE(refused->hint().find("dlbridge serves kDLExtDev."), std::string::npos)
      << refused->hint();
}

TEST_F(Negotiation, HostAccessibleMemoryReachesTheCpuWithoutACopy) {
  for (auto type : {dlabi::kDLCUDAHost, dlabi::kDLCUDAManaged}) {
    TensorView pinned = host.with_device(Device{type, 0});
    // No runtime is needed to relabel: the bytes do not move.
    auto p = plan(pinned, cpu, false);
    EXPECT_FALSE(p.copy);
    EXPECT_EQ(p.target, cpu);
  }
}

// One rule, applied by plan_export, plan_import and plan_convert alike.
TEST(HostAlias, MemoryTheHostReadsReachesTheCpuRelabelled) {
  for (auto type : {dlabi::kDLCPU, dlabi::kDLCUDAHost, dlabi::kDLCUDAManaged, dlabi::kDLROCMHost})
    EXPECT_TRUE(dlbridge::is_host_alias(Device{type, 0}, cpu)) << type;
  EXPECT_FALSE(dlbridge::is_host_alias(Device{dlabi::kDLCUDA, 0}, cpu));
  EXPECT_FALSE(dlbridge::is_host_alias(ext0, cpu));
  // Only a request for the CPU takes it: not another device, not CPU id 1.
  EXPECT_FALSE(dlbridge::is_host_alias(Device{dlabi::kDLCUDAHost, 0}, Device{dlabi::kDLCUDA, 0}));
  EXPECT_FALSE(dlbridge::is_host_alias(Device{dlabi::kDLCUDAHost, 0}, Device{dlabi::kDLCPU, 1}));
}

TEST_F(Negotiation, DeviceMemoryToTheHostIsACopy) {
  TensorView on_fake = host.with_device(ext0);
  EXPECT_TRUE(plan(on_fake, cpu).copy);
  auto e = plan_error(on_fake, cpu, false);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), ErrorCode::copy_required);
}

TEST_F(Negotiation, StreamsAreCheckedForTheTargetDevice) {
  ExchangeRequest r;
  r.device = cpu;
  r.stream = StreamArg{true, 1};
  auto e = error_of([&] { dlbridge::plan_export(host, r); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), ErrorCode::invalid_stream);
  r.stream = StreamArg{true, -1};
  EXPECT_FALSE(dlbridge::plan_export(host, r).copy);
}

TEST_F(Negotiation, LegacyInLegacyOutDataOfUnknownWritabilityLeavesAsItCameWithoutReadOnly) {
  const TensorView ro = host.with_flags(DLBRIDGE_FLAG_READ_ONLY);
  ExchangeRequest legacy;  // max_version None: a legacy capsule
  // Known read-only: refused as a legacy capsule unless copied.
  auto e = error_of([&] { (void)dlbridge::plan_export(ro, dlbridge::Writability::read_only, legacy); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), ErrorCode::read_only);
  // Unknown (a legacy capsule delivered it): leaves as it came, claiming nothing more.
  const ExchangePlan p = dlbridge::plan_export(ro, dlbridge::Writability::unknown, legacy);
  EXPECT_TRUE(p.drop_read_only);
  EXPECT_FALSE(p.copy);
  // A versioned request keeps READ_ONLY; a copy is writable and needs nothing dropped.
  ExchangeRequest versioned;
  versioned.max_version = dlabi::DLPackVersion{1, 3};
  EXPECT_FALSE(dlbridge::plan_export(ro, dlbridge::Writability::unknown, versioned).drop_read_only);
  legacy.copy = true;
  EXPECT_FALSE(dlbridge::plan_export(ro, dlbridge::Writability::unknown, legacy).drop_read_only);
}

// ------------------------------------------------------ carrying out the plan

TEST_F(Negotiation, ACopyToADeviceAsksItOnceAndCarriesOutWithTheBackendsOfThePlan) {
  auto p = plan(host, ext0);
  EXPECT_EQ(p.to, fake);
  EXPECT_EQ(p.from, nullptr);  // host memory: nothing to wait for
  std::optional<ManagedTensor> out = dlbridge::carry_out(host, p);
  ASSERT_TRUE(out);
  EXPECT_EQ(out->view().device(), ext0);
  EXPECT_EQ(out->flags(), uint64_t(DLBRIDGE_FLAG_IS_COPIED));
  EXPECT_EQ(read(out->view()), data);
  EXPECT_EQ(fake->availability_calls, 1);
}

TEST_F(Negotiation, ACopyFromADeviceAsksItOnce) {
  TensorView on_fake = host.with_device(ext0);
  auto p = plan(on_fake, cpu);
  EXPECT_EQ(p.from, fake);
  std::optional<ManagedTensor> out = dlbridge::carry_out(on_fake, p);
  ASSERT_TRUE(out);
  EXPECT_EQ(out->view().device(), cpu);
  EXPECT_EQ(read(out->view()), data);
  EXPECT_EQ(fake->availability_calls, 1);
}

TEST_F(Negotiation, WithoutACopyThePlanHoldsNoBackendAndTheResultIsTheTensor) {
  auto p = plan(host, std::nullopt);
  EXPECT_EQ(p.to, nullptr);
  EXPECT_FALSE(dlbridge::carry_out(host, p));
  // A host copy needs no backend either.
  auto copied = plan(host, cpu, true);
  EXPECT_EQ(copied.to, nullptr);
  std::optional<ManagedTensor> out = dlbridge::carry_out(host.with_flags(DLBRIDGE_FLAG_READ_ONLY), copied);
  ASSERT_TRUE(out);
  EXPECT_EQ(out->flags(), uint64_t(DLBRIDGE_FLAG_IS_COPIED));  // writable
  EXPECT_EQ(read(out->view()), data);
  EXPECT_EQ(fake->availability_calls, 0);
}

// A zero-copy export of device memory orders the consumer's stream through
// the backend the plan asked, of the registry the plan was made with:
// carrying it out asks no registry (the default one least of all).
TEST_F(Negotiation, AZeroCopyExportWaitsThroughThePlansRegistry) {
  auto own_fake = std::make_shared<FakeBackend>();
  backend::Registry own;
  own.set(dlabi::kDLExtDev, own_fake);
  TensorView on_fake = host.with_device(ext0);
  ExchangeRequest r;
  r.max_version = dlabi::DLPackVersion{1, 3};
  r.stream = StreamArg{true, 9};
  ExchangePlan p = dlbridge::plan_export(on_fake, r, own);
  EXPECT_FALSE(p.copy);
  EXPECT_EQ(p.to, nullptr);
  EXPECT_EQ(p.from, own_fake);
  EXPECT_EQ(own_fake->availability_calls, 1);
  EXPECT_FALSE(dlbridge::carry_out(on_fake, p, r.stream));
  ASSERT_EQ(own_fake->waits.size(), 1u);
  EXPECT_EQ(own_fake->waits[0].second.handle, 9u);  // the consumer's stream waits
  EXPECT_EQ(own_fake->availability_calls, 1);       // not asked again
  EXPECT_TRUE(fake->waits.empty());                 // the default registry's backend
  EXPECT_EQ(fake->availability_calls, 0);
  // No stream, or -1, asks for no ordering: no backend is kept.
  for (StreamArg none : {StreamArg{}, StreamArg{true, -1}}) {
    r.stream = none;
    EXPECT_EQ(dlbridge::plan_export(on_fake, r, own).from, nullptr);
  }
}

}  // namespace
