// Carrying out an exchange plan, from either side: the copy (between
// devices, ordered on the consumer's stream) or, without one, the stream
// wait that makes the tensor's own memory ready for the consumer. The plan
// (plan_export in plan_export.hpp, plan_import in plan_import.hpp) asked
// every device involved whether it is here and keeps the backends that
// answered; carrying it out uses those and asks no registry again.
#pragma once

#include <cstdint>
#include <optional>

#include "../copy/copy.hpp"
#include "../copy/transfer.hpp"
#include "../managed_tensor.hpp"
#include "../request.hpp"
#include "../tensor_view.hpp"
#include "plan.hpp"

namespace dlbridge {

// The copy the plan asks for, with `copy_flags` (READ_ONLY never; the
// source's sub-byte padding always); or, when the plan copies nothing,
// nullopt: the result is `view` itself, relabelled to plan.target
// (view.with_device), whose pending device work the consumer's stream now
// waits for. `stream` is the stream the plan was made for (the request's).
inline std::optional<ManagedTensor> carry_out(const TensorView& view, const ExchangePlan& plan,
                                              StreamArg stream = {},
                                              uint64_t copy_flags = DLBRIDGE_FLAG_IS_COPIED,
                                              const CopyOptions& host = {}) {
  if (!plan.copy) {
    if (plan.from) detail::order_after_default_stream(*plan.from, view.device(), stream);
    return std::nullopt;
  }
  if (!plan.to) {  // host to host (host_only_copy): the CPU copy engine alone
    validate_stream(plan.target, stream);
    return copy_to_compact(view, copy_flags & ~uint64_t(DLBRIDGE_FLAG_READ_ONLY), host);
  }
  TransferOptions options;
  options.stream = stream;
  options.flags = copy_flags;
  options.host = host;
  return detail::copy_along(view, plan.target, plan.to, plan.from, options);
}

}  // namespace dlbridge
