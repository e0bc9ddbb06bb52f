// The producer side of __dlpack__: turning a consumer's request (max_version,
// dl_device, copy, stream) into a plan, or into the error that explains why
// the request cannot be met. Language-neutral: the Python binding and C++
// producers apply the same rules.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "device_request.hpp"
#include "error.hpp"
#include "export.hpp"
#include "tensor_view.hpp"

namespace dlbridge {

// A stream argument as the DLPack Python spec defines it: absent (None) or
// an integer whose meaning depends on the device type.
struct StreamArg {
  bool given = false;
  int64_t value = 0;
};

struct ExportRequest {
  std::optional<abi::DLPackVersion> max_version;
  std::optional<Device> device;  // dl_device; nullopt keeps the tensor's own
  std::optional<bool> copy;      // true: always, false: never, nullopt: if needed
  StreamArg stream;
};

struct ExportPlan {
  ExportFormat format = ExportFormat::versioned;
  Device target{};
  bool copy = false;  // the export is a new buffer: IS_COPIED is set
};

// Whether a device of a servable type exists here. Filled in by the device
// backends; the CPU is device 0 only.
inline DeviceSupport device_support(Device device) {
  if (!is_known_device_type(device.type) || !is_servable_device_type(device.type))
    return DeviceSupport::unsupported;
  if (device.type == abi::kDLCPU)
    return device.id == 0 ? DeviceSupport::served : DeviceSupport::unavailable;
  return DeviceSupport::unavailable;
}

// Stream values per the DLPack Python spec. On the CPU nothing is queued, so
// only "no stream" (None) and -1 ("do not synchronise", trivially honoured)
// make sense; anything else is a caller's mistake worth reporting.
inline void validate_stream(Device target, StreamArg stream) {
  if (!stream.given) return;
  const int64_t s = stream.value;
  auto refuse = [&](const std::string& why, const std::string& fix) {
    detail::fail(ErrorCode::invalid_stream,
                 "stream=" + std::to_string(s) + " is invalid for " +
                     device_type_label(target.type) + ": " + why,
                 fix);
  };
  switch (target.type) {
    case abi::kDLCPU:
    case abi::kDLCUDAHost:
    case abi::kDLROCMHost:
      if (s != -1)
        refuse("host memory has no stream.",
               "Pass stream=None (or -1) for CPU tensors.");
      return;
    case abi::kDLCUDA:
    case abi::kDLCUDAManaged:
      if (s == 0)
        refuse("0 is ambiguous between the legacy and per-thread default streams.",
               "Pass 1 (legacy default), 2 (per-thread default), a stream "
               "pointer, or -1 to skip synchronisation.");
      if (s < -1)
        refuse("negative stream values other than -1 are undefined.",
               "Pass None, 1, 2, a stream pointer, or -1.");
      return;
    case abi::kDLROCM:
      if (s == 1 || s == 2)
        refuse("1 and 2 are CUDA-only values.",
               "Pass None or 0 for the default stream, a stream pointer, or -1.");
      return;
    default:
      return;
  }
}

// Applies the producer rules of DLPack 1.3 to view and request:
//  * max_version None or major < 1: legacy, refused for read-only data
//    unless a copy is made; major >= 1: versioned (1, 3);
//  * dl_device of an unknown or unservable type: unsupported_device_type;
//    servable but absent here: device_unavailable;
//  * another device needs a copy: copy=False is copy_required;
//  * copy=True always copies.
inline ExportPlan plan_export(const TensorView& view, const ExportRequest& request) {
  ExportPlan plan;
  plan.format = negotiate_format(request.max_version);
  plan.target = request.device.value_or(view.device());
  const bool same_device = plan.target == view.device();
  if (!same_device) {
    switch (device_support(plan.target)) {
      case DeviceSupport::unsupported:
        fail_unsupported_device(plan.target.type);
      case DeviceSupport::unavailable:
        fail_unavailable_device(plan.target,
                                plan.target.type == abi::kDLCPU
                                    ? "the CPU is device 0."
                                    : "no runtime for it was found.");
      case DeviceSupport::served:
        break;
    }
  }
  validate_stream(plan.target, request.stream);
  // Host-accessible memory reaches a CPU request without moving.
  const bool host_alias = plan.target.type == abi::kDLCPU && plan.target.id == 0 &&
                          is_host_accessible(view.device().type);
  const bool must_copy = !same_device && !host_alias;
  if (must_copy && request.copy == false)
    detail::fail(ErrorCode::copy_required,
                 "Moving the tensor from " + to_string(view.device()) + " to " +
                     to_string(plan.target) + " needs a copy, but copy=False.",
                 "Pass copy=None or copy=True, or leave dl_device=None.");
  plan.copy = must_copy || request.copy == true;
  if (plan.format == ExportFormat::legacy && view.readonly() && !plan.copy)
    detail::refuse_read_only_legacy();
  return plan;
}

}  // namespace dlbridge
