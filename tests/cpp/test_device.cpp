// Device names are user input (Python's Device("cuda:1"), dl_device=...) and
// device numbers arrive from foreign producers, so both directions are tested
// for every DLPack 1.3 type and for the inputs that must be refused cleanly.
#include <gtest/gtest.h>

#include <dlbridge/device.hpp>

#include <climits>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>

namespace {

using dlbridge::Device;
using dlbridge::DeviceType;
using dlbridge::ErrorCode;
// Not "abi": <cxxabi.h>, pulled in by GoogleTest, owns the global name.
namespace dlabi = dlbridge::abi;

// The table is constexpr so that compile-time callers can use it too; these
// also run under -fsanitize=undefined, whose null checks once made them fail.
static_assert(dlbridge::is_known_device_type(2));
static_assert(dlbridge::find_device_type(2)->short_name == "cuda");
static_assert(!dlbridge::is_known_device_type(5));
static_assert(dlbridge::is_host_accessible(dlabi::kDLCPU));
static_assert(!dlbridge::is_host_accessible(dlabi::kDLCUDA));
// DLTensor::data is an address everywhere but on OpenCL (a cl_mem handle).
static_assert(dlbridge::has_direct_address(dlabi::kDLCUDA));
static_assert(dlbridge::has_direct_address(dlabi::kDLCPU));
static_assert(!dlbridge::has_direct_address(dlabi::kDLOpenCL));

struct Expected {
  int32_t number;
  std::string_view dl_name;
  std::string_view short_name;
  bool host_accessible;
};

// Written out independently of device_type_table so that a typo there fails.
constexpr Expected expected_types[] = {
    {1, "kDLCPU", "cpu", true},
    {2, "kDLCUDA", "cuda", false},
    {3, "kDLCUDAHost", "cuda_host", true},
    {4, "kDLOpenCL", "opencl", false},
    {7, "kDLVulkan", "vulkan", false},
    {8, "kDLMetal", "metal", false},
    {9, "kDLVPI", "vpi", false},
    {10, "kDLROCM", "rocm", false},
    {11, "kDLROCMHost", "rocm_host", true},
    {12, "kDLExtDev", "ext_dev", false},
    {13, "kDLCUDAManaged", "cuda_managed", true},
    {14, "kDLOneAPI", "oneapi", false},
    {15, "kDLWebGPU", "webgpu", false},
    {16, "kDLHexagon", "hexagon", false},
    {17, "kDLMAIA", "maia", false},
    {18, "kDLTrn", "trn", false},
};

constexpr int32_t unknown_numbers[] = {0, 5, 6, 19, 99, -1, INT32_MIN, INT32_MAX};

DeviceType as_type(int32_t number) { return static_cast<DeviceType>(number); }

// Runs parse_device, which must throw; returns the error for inspection.
dlbridge::Error parse_error(std::string_view text) {
  try {
    Device d = dlbridge::parse_device(text);
    ADD_FAILURE() << "'" << text << "' parsed as " << dlbridge::to_string(d);
  } catch (const dlbridge::Error& e) {
    return e;
  }
  return dlbridge::Error(ErrorCode::invalid_argument, "no error thrown");
}

}  // namespace

TEST(DeviceTable, HoldsEveryDLPack13TypeOnce) {
  ASSERT_EQ(std::size(dlbridge::device_type_table), std::size(expected_types));
  std::set<std::string_view> names;
  for (const auto& info : dlbridge::device_type_table) {
    EXPECT_TRUE(names.insert(info.dl_name).second) << info.dl_name;
    EXPECT_TRUE(names.insert(info.short_name).second) << info.short_name;
  }
}

TEST(DeviceTable, NamesAndHostAccess) {
  for (const Expected& want : expected_types) {
    SCOPED_TRACE(want.dl_name);
    const dlbridge::DeviceTypeInfo* info = dlbridge::find_device_type(want.number);
    ASSERT_NE(info, nullptr);
    EXPECT_EQ(static_cast<int32_t>(info->type), want.number);
    EXPECT_EQ(info->dl_name, want.dl_name);
    EXPECT_EQ(info->short_name, want.short_name);
    EXPECT_EQ(info->host_accessible, want.host_accessible);
    EXPECT_TRUE(dlbridge::is_known_device_type(want.number));
    EXPECT_EQ(dlbridge::is_host_accessible(as_type(want.number)), want.host_accessible);
    EXPECT_EQ(dlbridge::device_type_label(want.number), want.dl_name);
  }
}

TEST(DeviceTable, UnknownNumbersAreReportedNotFound) {
  for (int32_t number : unknown_numbers) {
    SCOPED_TRACE(number);
    EXPECT_EQ(dlbridge::find_device_type(number), nullptr);
    EXPECT_FALSE(dlbridge::is_known_device_type(number));
    EXPECT_FALSE(dlbridge::is_host_accessible(as_type(number)));
    EXPECT_EQ(dlbridge::device_type_label(number), std::to_string(number));
  }
}

TEST(DeviceParse, EveryNameRoundTrips) {
  for (const Expected& want : expected_types) {
    SCOPED_TRACE(want.dl_name);
    const DeviceType type = as_type(want.number);
    const std::string short_name(want.short_name);
    const std::string dl_name(want.dl_name);

    EXPECT_EQ(dlbridge::parse_device(short_name), (Device{type, 0}));
    EXPECT_EQ(dlbridge::parse_device(dl_name), (Device{type, 0}));
    EXPECT_EQ(dlbridge::parse_device(short_name + ":3"), (Device{type, 3}));
    EXPECT_EQ(dlbridge::parse_device(dl_name + ":3"), (Device{type, 3}));

    for (int32_t id : {0, 1, 3, INT32_MAX}) {
      const Device device{type, id};
      EXPECT_EQ(dlbridge::parse_device(dlbridge::to_string(device)), device)
          << dlbridge::to_string(device);
    }
  }
}

TEST(DeviceParse, CommonSpellings) {
  EXPECT_EQ(dlbridge::parse_device("cpu"), (Device{dlabi::kDLCPU, 0}));
  EXPECT_EQ(dlbridge::parse_device("cuda:1"), (Device{dlabi::kDLCUDA, 1}));
  EXPECT_EQ(dlbridge::parse_device("kDLCUDA:2"), (Device{dlabi::kDLCUDA, 2}));
  EXPECT_EQ(dlbridge::parse_device("cuda"), (Device{dlabi::kDLCUDA, 0}));
  EXPECT_EQ(dlbridge::parse_device("cuda:2147483647"), (Device{dlabi::kDLCUDA, INT32_MAX}));
}

TEST(DeviceParse, MissingIdIsRefused) {
  dlbridge::Error e = parse_error("cuda:");
  EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
  EXPECT_NE(e.message().find("'cuda:'"), std::string::npos) << e.what();
  EXPECT_NE(e.hint().find("cuda:1"), std::string::npos) << e.what();
}

TEST(DeviceParse, NonNumericIdIsRefused) {
  for (std::string_view text : {"cuda:x", "cuda:-1", "cuda:+1", "cuda:1x", "cuda: 1",
                                "cuda:1:2"}) {
    SCOPED_TRACE(text);
    dlbridge::Error e = parse_error(text);
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_NE(e.message().find(std::string(text)), std::string::npos) << e.what();
    EXPECT_NE(e.message().find("non-numeric"), std::string::npos) << e.what();
  }
}

TEST(DeviceParse, UnknownNameListsTheKnownOnes) {
  for (std::string_view text : {"gpu", "gpu:0", "", "CUDA", "kDLGPU:1"}) {
    SCOPED_TRACE(text);
    dlbridge::Error e = parse_error(text);
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_NE(e.message().find("Unknown device name"), std::string::npos) << e.what();
    for (const Expected& want : expected_types)
      EXPECT_NE(e.hint().find(want.short_name), std::string::npos) << want.short_name;
  }
}

TEST(DeviceParse, OutOfRangeIdIsRefusedAtAnyLength) {
  for (std::string_view text :
       {"cuda:2147483648", "cuda:9999999999", "cuda:99999999999",
        "cuda:000000000000000000000000000000000000000099999999999"}) {
    SCOPED_TRACE(text);
    dlbridge::Error e = parse_error(text);
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_NE(e.message().find("does not fit in int32"), std::string::npos) << e.what();
    EXPECT_FALSE(e.hint().empty());
  }
}

TEST(DeviceToString, ShortFormsAndUnknownTypes) {
  EXPECT_EQ(dlbridge::to_string(Device{}), "cpu");
  EXPECT_EQ(dlbridge::to_string(Device{dlabi::kDLCPU, 2}), "cpu:2");
  EXPECT_EQ(dlbridge::to_string(Device{dlabi::kDLCUDA, 0}), "cuda:0");
  EXPECT_EQ(dlbridge::to_string(Device{dlabi::kDLCUDA, 1}), "cuda:1");
  EXPECT_EQ(dlbridge::to_string(Device{dlabi::kDLCUDAManaged, 0}), "cuda_managed:0");
  EXPECT_EQ(dlbridge::to_string(Device{as_type(99), 0}), "99:0");
  EXPECT_EQ(dlbridge::to_string(Device{as_type(-1), 4}), "-1:4");
  EXPECT_EQ(dlbridge::to_string(Device{as_type(INT32_MIN), 0}),
            std::to_string(INT32_MIN) + ":0");
}

TEST(DeviceStruct, ConvertsToAndFromDLDevice) {
  const Device device{dlabi::kDLROCM, 5};
  const dlabi::DLDevice dl = device.to_dl();
  EXPECT_EQ(dl.device_type, dlabi::kDLROCM);
  EXPECT_EQ(dl.device_id, 5);
  EXPECT_EQ(Device::from_dl(dl), device);
  EXPECT_NE(device, (Device{dlabi::kDLROCM, 4}));
  EXPECT_NE(device, (Device{dlabi::kDLCUDA, 5}));
  // An unknown type survives the trip unchanged; only validation may judge it.
  const dlabi::DLDevice odd{as_type(99), 1};
  EXPECT_EQ(static_cast<int32_t>(Device::from_dl(odd).type), 99);
}
