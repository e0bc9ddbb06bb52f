// The producer side of __dlpack__: turning a consumer's request (max_version,
// dl_device, copy, stream) into a plan, or into the error that explains why
// the request cannot be met. Language-neutral: the Python binding and C++
// producers apply the same rules. carry_out (carry_out.hpp) then makes the
// export the plan describes.
#pragma once

#include "error.hpp"
#include "export.hpp"
#include "request.hpp"
#include "tensor_view.hpp"

namespace dlbridge {

// Applies the producer rules of DLPack 1.3 to view and request:
//  * max_version None or major < 1: legacy, refused for read-only data
//    unless a copy is made and for padded sub-byte data (unsupported_layout);
//    major >= 1: versioned (1, 3);
//  * dl_device of an unknown or unservable type: unsupported_device_type;
//    servable but absent here: device_unavailable;
//  * another device needs a copy: copy=False is copy_required;
//  * copy=True always copies.
// Each device involved is asked once whether it is here; the plan keeps
// the backends that answered.
inline ExportPlan plan_export(const TensorView& view, const ExchangeRequest& request,
                              backend::Registry& registry = backend::default_registry()) {
  ExportPlan plan;
  plan.format = negotiate_format(request.max_version);
  plan.target = request.device.value_or(view.device());
  const bool same_device = plan.target == view.device();
  if (!same_device) plan.to = served_backend(plan.target, registry);
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
  if (plan.copy) detail::route_copy(plan, view.device(), registry);
  else plan.to = nullptr;
  if (plan.format == ExportFormat::legacy) {
    // A copy keeps the padding but is writable.
    detail::check_legacy_padding(view.flags());
    if (view.readonly() && !plan.copy) detail::refuse_read_only_legacy();
  }
  return plan;
}

}  // namespace dlbridge
