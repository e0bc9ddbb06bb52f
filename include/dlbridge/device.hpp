// Devices: every DLPack 1.3 device type with its kDL name and a short name
// for "type:id" strings. Unknown numbers are values to report, never UB: the
// enum has a fixed underlying type, so any int32 is representable.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "abi.hpp"
#include "error.hpp"

namespace dlbridge {

using DeviceType = abi::DLDeviceType;

struct DeviceTypeInfo {
  DeviceType type;
  std::string_view dl_name;     // "kDLCUDA"
  std::string_view short_name;  // "cuda", as in "cuda:1"
  bool host_accessible;         // plain CPU loads and stores reach the memory
  // DLTensor::data is an address in the device's address space. Where it is
  // an opaque handle instead (OpenCL's cl_mem, as the DLPack header says),
  // dlbridge does no arithmetic on it: no alignment or address-wrap checks.
  bool direct_address = true;
};

inline constexpr DeviceTypeInfo device_type_table[] = {
    {abi::kDLCPU, "kDLCPU", "cpu", true},
    {abi::kDLCUDA, "kDLCUDA", "cuda", false},
    {abi::kDLCUDAHost, "kDLCUDAHost", "cuda_host", true},
    {abi::kDLOpenCL, "kDLOpenCL", "opencl", false, false},  // data is a cl_mem
    {abi::kDLVulkan, "kDLVulkan", "vulkan", false},
    {abi::kDLMetal, "kDLMetal", "metal", false},
    {abi::kDLVPI, "kDLVPI", "vpi", false},
    {abi::kDLROCM, "kDLROCM", "rocm", false},
    {abi::kDLROCMHost, "kDLROCMHost", "rocm_host", true},
    {abi::kDLExtDev, "kDLExtDev", "ext_dev", false},
    {abi::kDLCUDAManaged, "kDLCUDAManaged", "cuda_managed", true},
    {abi::kDLOneAPI, "kDLOneAPI", "oneapi", false},
    {abi::kDLWebGPU, "kDLWebGPU", "webgpu", false},
    {abi::kDLHexagon, "kDLHexagon", "hexagon", false},
    {abi::kDLMAIA, "kDLMAIA", "maia", false},
    {abi::kDLTrn, "kDLTrn", "trn", false},
};

namespace detail {
// An index, not a pointer: GCC's UBSan null checks make any pointer test on
// the table non-constant, so the constexpr API would fail under sanitizers.
constexpr int device_type_index(int32_t value) noexcept {
  constexpr int count = int(sizeof device_type_table / sizeof device_type_table[0]);
  for (int i = 0; i < count; ++i)
    if (static_cast<int32_t>(device_type_table[i].type) == value) return i;
  return -1;
}
}  // namespace detail

// NULL when the number is not a DLPack 1.3 device type.
constexpr const DeviceTypeInfo* find_device_type(int32_t value) noexcept {
  const int i = detail::device_type_index(value);
  return i < 0 ? nullptr : &device_type_table[i];
}

constexpr bool is_known_device_type(int32_t value) noexcept {
  return detail::device_type_index(value) >= 0;
}

constexpr bool is_host_accessible(DeviceType type) noexcept {
  const int i = detail::device_type_index(type);
  return i >= 0 && device_type_table[i].host_accessible;
}

// Whether data of this type is an address dlbridge may check (alignment,
// wrap-around); unknown types are treated as addresses, the common case.
constexpr bool has_direct_address(DeviceType type) noexcept {
  const int i = detail::device_type_index(type);
  return i < 0 || device_type_table[i].direct_address;
}

// "kDLCUDA", or the bare number ("99") for an unknown type.
inline std::string device_type_label(int32_t value) {
  if (const DeviceTypeInfo* info = find_device_type(value))
    return std::string(info->dl_name);
  return std::to_string(value);
}

// The sentence every unsupported_device_type message starts with (JAX's,
// which users search for), whether the type came in a dl_device request or
// in a tensor handed over for import.
inline std::string unsupported_device_sentence(int32_t type) {
  return "The device specification passed to to_dlpack contains an unsupported "
         "device type (DLDeviceType: " + device_type_label(type) + ").";
}

struct Device {
  DeviceType type = abi::kDLCPU;
  int32_t id = 0;

  constexpr abi::DLDevice to_dl() const noexcept { return {type, id}; }
  static constexpr Device from_dl(abi::DLDevice d) noexcept {
    return {d.device_type, d.device_id};
  }
  friend constexpr bool operator==(Device a, Device b) noexcept {
    return a.type == b.type && a.id == b.id;
  }
  friend constexpr bool operator!=(Device a, Device b) noexcept {
    return !(a == b);
  }
};

// "cpu" for CPU device 0, otherwise "<short name>:<id>" ("cuda:1"); an
// unknown type prints as its number ("99:0").
inline std::string to_string(Device device) {
  const DeviceTypeInfo* info = find_device_type(device.type);
  std::string name = info ? std::string(info->short_name)
                          : std::to_string(static_cast<int32_t>(device.type));
  if (device.type == abi::kDLCPU && device.id == 0) return name;
  return name + ":" + std::to_string(device.id);
}

// Accepts "<short name>" (id 0) or "<short name>:<id>", also the kDL names
// ("kDLCUDA:1"). Anything else is ErrorCode::invalid_argument.
inline Device parse_device(std::string_view text) {
  std::string_view name = text;
  int64_t id = 0;
  if (size_t colon = text.find(':'); colon != std::string_view::npos) {
    name = text.substr(0, colon);
    std::string_view digits = text.substr(colon + 1);
    if (digits.empty())
      detail::fail(ErrorCode::invalid_argument,
                   "Device string '" + std::string(text) +
                       "' has no device id after ':'.",
                   "Write it as 'cpu' or 'cuda:1'.");
    for (char c : digits) {
      if (c < '0' || c > '9')
        detail::fail(ErrorCode::invalid_argument,
                     "Device string '" + std::string(text) +
                         "' has a non-numeric device id.",
                     "Write it as 'cpu' or 'cuda:1'.");
      // Checked per digit so that no length of input can overflow id.
      id = id * 10 + (c - '0');
      if (id > INT32_MAX)
        detail::fail(ErrorCode::invalid_argument,
                     "Device id in '" + std::string(text) +
                         "' does not fit in int32.",
                     "Device ids are small non-negative numbers, e.g. "
                     "'cuda:0'.");
    }
  }
  for (const auto& info : device_type_table)
    if (name == info.short_name || name == info.dl_name)
      return Device{info.type, static_cast<int32_t>(id)};
  std::string known;
  for (const auto& info : device_type_table) {
    if (!known.empty()) known += ", ";
    known += info.short_name;
  }
  detail::fail(ErrorCode::invalid_argument,
               "Unknown device name '" + std::string(name) + "'.",
               "Use one of: " + known + ".");
}

}  // namespace dlbridge
