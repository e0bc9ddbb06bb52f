// The producer side of __dlpack__: turning a consumer's request (max_version,
// dl_device, copy, stream) into a plan, or into the error that explains why
// the request cannot be met. Language-neutral: the Python binding and C++
// producers apply the same rules. carry_out (carry_out.hpp) then makes the
// export the plan describes.
#pragma once

#include "../backend/device_support.hpp"
#include "../backend/registry.hpp"
#include "../error.hpp"
#include "../export.hpp"
#include "../managed_tensor.hpp"
#include "../request.hpp"
#include "../tensor_view.hpp"
#include "plan.hpp"

namespace dlbridge {

// Applies the producer rules of DLPack 1.3 to view and request:
//  * max_version None or major < 1: legacy, refused for read-only data
//    unless a copy is made (data whose writability is unknown leaves as it
//    came: drop_read_only) and for padded sub-byte data (unsupported_layout);
//    major >= 1: versioned (1, 3);
//  * dl_device of an unknown or unservable type: unsupported_device_type;
//    servable but absent here: device_unavailable;
//  * another device needs a copy: copy=False is copy_required;
//  * copy=True always copies.
// Each device involved is asked once whether it is here, of `registry`; the
// plan keeps the backends that answered.
inline ExchangePlan plan_export(const TensorView& view, Writability writability, const ExchangeRequest& request,
                                backend::Registry& registry = backend::default_registry()) {
  ExchangePlan plan;
  plan.format = negotiate_format(request.max_version);
  plan.target = request.device.value_or(view.device());
  const bool same_device = plan.target == view.device();
  if (!same_device) plan.to = served_backend(plan.target, registry);
  validate_stream(plan.target, request.stream);
  const bool must_copy = !same_device && !is_host_alias(view.device(), plan.target);
  if (must_copy && request.copy == false)
    detail::fail(ErrorCode::copy_required,
                 "Moving the tensor from " + to_string(view.device()) + " to " +
                     to_string(plan.target) + " needs a copy, but copy=False.",
                 "Pass copy=None or copy=True, or leave dl_device=None.");
  plan.copy = must_copy || request.copy == true;
  // Copying device memory needs its runtime, even to reach the host; device
  // memory handed over as it is needs it to order the consumer's stream.
  detail::plan_backends(plan, view.device(), request.stream, registry);
  if (plan.format == ExportFormat::legacy) {
    // A copy keeps the padding but is writable.
    detail::check_legacy_padding(view.flags());
    if (writability == Writability::unknown && !plan.copy)
      plan.drop_read_only = true;
    else if (view.readonly() && !plan.copy)
      detail::refuse_read_only_legacy();
  }
  return plan;
}

// plan_export for a tensor whose READ_ONLY flag says all about its writability.
inline ExchangePlan plan_export(const TensorView& view, const ExchangeRequest& request,
                                backend::Registry& registry = backend::default_registry()) {
  return plan_export(view, view.readonly() ? Writability::read_only : Writability::writable, request, registry);
}

}  // namespace dlbridge
