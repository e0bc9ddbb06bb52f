// The consumer side of from_dlpack: what to do with the tensor a producer
// delivered, given what the caller asked for (device, copy, and the
// requirements of ImportPolicy). The rules mirror plan_export's, seen from
// the receiving end; carry_out (carry_out.hpp) makes the result. The Python
// binding and C++ consumers apply the same rules.
#pragma once

#include <string>

#include "../backend/registry.hpp"
#include "../error.hpp"
#include "../request.hpp"
#include "../tensor_view.hpp"
#include "plan.hpp"

namespace dlbridge {

// Applies the consumer rules to `received` (the producer's tensor, already
// validated) and request:
//  * a device other than received's own needs a copy, except that memory
//    the host can read reaches the CPU as it is (relabelled, not copied);
//  * copy=False with a needed move, or with a producer that could only
//    deliver a copy (copied_by_producer), is copy_required;
//  * copy=True copies unless the producer already did;
//  * an unmet requirement of request.require is met by a copy (compact,
//    writable, aligned, on the CPU when host access is required and no
//    device was named); with copy=False it is the requirement's own error.
// Each device a copy involves is asked once whether it is here, of
// `registry`; the plan keeps the backends that answered.
inline ExchangePlan plan_import(const TensorView& received, const ExchangeRequest& request,
                                bool copied_by_producer = false,
                                backend::Registry& registry = backend::default_registry()) {
  ExchangePlan plan;
  const Device source = received.device();
  plan.target = request.device.value_or(source);
  if (!request.device && request.require.require_host_accessible &&
      !is_host_accessible(source.type) && request.copy != false)
    plan.target = Device{};
  const bool moved = plan.target != source && !is_host_alias(source, plan.target);
  if (moved && request.copy == false)
    detail::fail(ErrorCode::copy_required,
                 "The tensor is on " + to_string(source) + " but device=" +
                     to_string(plan.target) + " was requested with copy=False.",
                 "Pass copy=None to allow the transfer.");
  if (copied_by_producer && request.copy == false)
    detail::fail(ErrorCode::copy_required,
                 "copy=False was requested, but the producer could only deliver a copy "
                 "(it set IS_COPIED).",
                 "Pass copy=None to accept the copy.");
  if (request.require.require_host_accessible && !is_host_accessible(plan.target.type)) {
    // No copy can meet it: the caller named a device the host cannot read.
    ImportPolicy host_access;
    host_access.require_host_accessible = true;
    received.with_device(plan.target).check(host_access);
  }
  plan.copy = moved || (request.copy == true && !copied_by_producer);
  if (!plan.copy && !received.meets(request.require)) {
    const TensorView result =
        plan.target == source ? received : received.with_device(plan.target);
    if (request.copy == false) result.check(request.require);
    // A fresh compact buffer is writable, contiguous and 64-byte aligned;
    // host access is met by the CPU target chosen above.
    if (!result.meets(request.require)) plan.copy = true;
  }
  detail::plan_backends(plan, source, request.stream, registry);
  return plan;
}

}  // namespace dlbridge
