// The producer side of __dlpack__: turning a consumer's request (max_version,
// dl_device, copy, stream) into a plan, or into the error that explains why
// the request cannot be met. Language-neutral: the Python binding and C++
// producers apply the same rules.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "backend/registry.hpp"
#include "backend/stream.hpp"
#include "device_request.hpp"
#include "error.hpp"
#include "export.hpp"
#include "tensor_view.hpp"

namespace dlbridge {

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

// Whether a device of a servable type exists here: asks the backend that
// serves the type (a type without one is unsupported in this build).
inline DeviceSupport device_support(Device device) {
  if (!is_known_device_type(device.type)) return DeviceSupport::unsupported;
  auto b = backend::default_registry().find(device.type);
  if (!b) return DeviceSupport::unsupported;
  return b->availability(device).available ? DeviceSupport::served
                                           : DeviceSupport::unavailable;
}

// Stream values per the DLPack Python spec, interpreted for the device the
// consumer reads on; backend::resolve_stream holds the rules per family.
inline void validate_stream(Device target, StreamArg stream) {
  (void)backend::resolve_stream(target, stream);
}

// Returns only when data can be produced on (or read from) device:
// unsupported_device_type for a type no backend serves, device_unavailable
// with the backend's own reason (what it tried) for one absent here.
inline void require_served(Device device) {
  switch (device_support(device)) {
    case DeviceSupport::unsupported: fail_unsupported_device(device.type);
    case DeviceSupport::unavailable:
      fail_unavailable_device(device, backend::availability(device).reason);
    case DeviceSupport::served: return;
  }
}

// Applies the producer rules of DLPack 1.3 to view and request:
//  * max_version None or major < 1: legacy, refused for read-only data
//    unless a copy is made and for padded sub-byte data (unsupported_layout);
//    major >= 1: versioned (1, 3);
//  * dl_device of an unknown or unservable type: unsupported_device_type;
//    servable but absent here: device_unavailable;
//  * another device needs a copy: copy=False is copy_required;
//  * copy=True always copies.
inline ExportPlan plan_export(const TensorView& view, const ExportRequest& request) {
  ExportPlan plan;
  plan.format = negotiate_format(request.max_version);
  plan.target = request.device.value_or(view.device());
  const bool same_device = plan.target == view.device();
  if (!same_device) require_served(plan.target);
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
  // Copying device memory needs its runtime, even to reach the host.
  if (plan.copy && !is_host_accessible(view.device().type)) require_served(view.device());
  if (plan.format == ExportFormat::legacy) {
    // A copy keeps the padding but is writable.
    detail::check_legacy_padding(view.flags());
    if (view.readonly() && !plan.copy) detail::refuse_read_only_legacy();
  }
  return plan;
}

}  // namespace dlbridge
