// plan_export (producer.hpp): which device, copy or no copy, and which
// refusal, for each request; driven through a fake kDLExtDev backend.
#include <gtest/gtest.h>

#include "support/error_of.hpp"
#include "support/fake_device_test.hpp"

#include <dlbridge/carry_out.hpp>
#include <dlbridge/producer.hpp>

#include <memory>
#include <optional>
#include <vector>

namespace {

using dlbridge::Device;
using dlbridge::DType;
using dlbridge::Error;
using dlbridge::ErrorCode;
using dlbridge::DeviceSupport;
using dlbridge::ExportRequest;
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

  dlbridge::ExportPlan plan(const TensorView& v, std::optional<Device> device,
                            std::optional<bool> copy = std::nullopt) {
    ExportRequest r;
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
  EXPECT_EQ(dlbridge::device_support(ext0), DeviceSupport::served);
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
  EXPECT_EQ(dlbridge::device_support(ext1), DeviceSupport::unavailable);
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
  ExportRequest r;
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

TEST_F(Negotiation, DeviceMemoryToTheHostIsACopy) {
  TensorView on_fake = host.with_device(ext0);
  EXPECT_TRUE(plan(on_fake, cpu).copy);
  auto e = plan_error(on_fake, cpu, false);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), ErrorCode::copy_required);
}

TEST_F(Negotiation, StreamsAreCheckedForTheTargetDevice) {
  ExportRequest r;
  r.device = cpu;
  r.stream = StreamArg{true, 1};
  auto e = error_of([&] { dlbridge::plan_export(host, r); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), ErrorCode::invalid_stream);
  r.stream = StreamArg{true, -1};
  EXPECT_FALSE(dlbridge::plan_export(host, r).copy);
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

}  // namespace
