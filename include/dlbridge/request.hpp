// One request and one plan for both sides of an exchange. A consumer's
// request (max_version, device, copy, stream, and what the result must
// satisfy) is the same whether dlbridge produces (__dlpack__, plan_export in
// producer.hpp) or consumes (from_dlpack, plan_import in consumer.hpp); the
// plan says where the result lives and whether bytes move, and carries the
// device backends it asked, so that carrying it out (carry_out.hpp) asks
// no one again.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "backend/registry.hpp"
#include "backend/stream.hpp"
#include "device_request.hpp"
#include "export.hpp"
#include "tensor_view.hpp"

namespace dlbridge {

struct ExchangeRequest {
  // Producer side only: the newest DLPack version the consumer reads.
  std::optional<abi::DLPackVersion> max_version;
  // dl_device / device=: where the result must live; nullopt keeps the
  // tensor's own device.
  std::optional<Device> device;
  std::optional<bool> copy;  // true: always, false: never, nullopt: if needed
  // Producer side: the consumer's stream. Consumer side: the stream the
  // caller reads on (absent: the device family's default).
  StreamArg stream;
  // Consumer side only: what the result must satisfy; an unmet requirement
  // is met by a copy unless copy=False forbids one.
  ImportPolicy require;
};

// Whether a consumer's request asks nothing of the result: no device, no
// copy decision, no requirement. plan_import then takes any tensor as it
// is (no copy, same device), so a hot path may skip planning.
inline bool asks_nothing(const ExchangeRequest& r) noexcept {
  const ImportPolicy& p = r.require;
  return !r.device && !r.copy && !p.require_c_contiguous && !p.require_writable &&
         !p.require_host_accessible && p.min_alignment <= 1;
}

// The names each side used before there was one type.
using ExportRequest = ExchangeRequest;
using ImportRequest = ExchangeRequest;

struct ExchangePlan {
  ExportFormat format = ExportFormat::versioned;  // producer side only
  Device target{};
  bool copy = false;  // the result is a new buffer (IS_COPIED on export)
  // Set when copy is and a device is involved: the backend that allocates
  // on target and the one whose queued work on the source must finish
  // first (NULL for memory no stream writes to). Both were asked whether
  // their device is here while planning.
  std::shared_ptr<backend::DeviceBackend> to, from;
};

using ExportPlan = ExchangePlan;
using ImportPlan = ExchangePlan;

// "kDLCPU, kDLCUDA, ...": the types registry serves, for messages.
inline std::string served_device_list(
    const backend::Registry& registry = backend::default_registry()) {
  std::string text;
  for (DeviceType t : registry.served_types()) {
    if (!text.empty()) text += ", ";
    text += device_type_label(t);
  }
  return text;
}

[[noreturn]] inline void fail_unsupported_device(
    int32_t type, const backend::Registry& registry = backend::default_registry()) {
  detail::fail(ErrorCode::unsupported_device_type, unsupported_device_sentence(type),
               "dlbridge serves " + served_device_list(registry) +
                   ". Pass dl_device=None to keep the tensor on its own device, or "
                   "request one of those types.");
}

// Whether a device of a servable type exists here: asks the backend that
// serves the type (a type without one is unsupported in this build).
inline DeviceSupport device_support(Device device) {
  if (!is_known_device_type(device.type)) return DeviceSupport::unsupported;
  auto b = backend::default_registry().find(device.type);
  if (!b) return DeviceSupport::unsupported;
  return b->availability(device).available ? DeviceSupport::served
                                           : DeviceSupport::unavailable;
}

// The backend that serves device, after asking it once whether the device
// is here: unsupported_device_type for a type no backend serves,
// device_unavailable with the backend's own reason (what it tried) for one
// absent here.
inline std::shared_ptr<backend::DeviceBackend> served_backend(
    Device device, backend::Registry& registry = backend::default_registry()) {
  auto b = registry.find(device.type);
  if (!b) fail_unsupported_device(device.type, registry);
  backend::Availability a = b->availability(device);
  if (!a.available) fail_unavailable_device(device, a.reason);
  return b;
}

// Returns only when data can be produced on (or read from) device.
inline void require_served(Device device) { (void)served_backend(device); }

// The backend whose queued work a copy out of `source` waits for. Host
// memory has none. Device memory needs its backend (or the error why not).
// Host-accessible memory of a device family (CUDA managed memory) uses its
// backend when one is here; without one, no work can have been queued.
inline std::shared_ptr<backend::DeviceBackend> source_backend(
    Device source, backend::Registry& registry = backend::default_registry()) {
  if (backend::stream_family(source.type) == backend::StreamFamily::host) return nullptr;
  if (!is_host_accessible(source.type)) return served_backend(source, registry);
  auto b = registry.find(source.type);
  if (b && !b->availability(source).available) return nullptr;
  return b;
}

// Whether a copy from source to target is the host's business alone: no
// backend allocates, moves or orders anything.
constexpr bool host_only_copy(Device source, Device target) noexcept {
  return target == Device{} &&
         backend::stream_family(source.type) == backend::StreamFamily::host;
}

// Stream values per the DLPack Python spec, interpreted for the device the
// consumer reads on; backend::resolve_stream holds the rules per family.
inline void validate_stream(Device target, StreamArg stream) {
  (void)backend::resolve_stream(target, stream);
}

namespace detail {

// Fills in the backends of a plan that copies `source`; `to` may already
// have been asked while checking the request.
inline void route_copy(ExchangePlan& plan, Device source,
                       backend::Registry& registry = backend::default_registry()) {
  if (host_only_copy(source, plan.target)) return;
  if (!plan.to) plan.to = served_backend(plan.target, registry);
  plan.from = source_backend(source, registry);
}

}  // namespace detail
}  // namespace dlbridge
