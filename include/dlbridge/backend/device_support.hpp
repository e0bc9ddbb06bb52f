// Whether a device is here, asked in one place: served_backend answers with
// the backend that serves the device or with the coded error that says why
// none does (unsupported_device_type: no backend serves the type in this
// build; device_unavailable: the backend's own reason, what it tried);
// backend_if_here is the same question where absence is no error. The plans
// of exchange/ and the copies of copy/transfer.hpp ask through them, each
// device once, and keep the backend that answered. The registry is passed as
// Registry&, default_registry() unless the caller installed its own.
#pragma once

#include <memory>
#include <string>

#include "../device.hpp"
#include "../error.hpp"
#include "../request.hpp"
#include "backend.hpp"
#include "registry.hpp"
#include "stream.hpp"

namespace dlbridge {

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

// unsupported_device_type for `type`, listing what registry serves. The
// message extends JAX's to_dlpack one (device.hpp).
[[noreturn]] inline void fail_unsupported_device(
    int32_t type, const backend::Registry& registry = backend::default_registry()) {
  detail::fail(ErrorCode::unsupported_device_type, unsupported_device_sentence(type),
               "dlbridge serves " + served_device_list(registry) +
                   ". Pass dl_device=None to keep the tensor on its own device, or "
                   "request one of those types.");
}

// device_unavailable for `device`, with `why` it is absent here (the
// backend's Availability::reason).
[[noreturn]] inline void fail_unavailable_device(Device device, const std::string& why) {
  detail::fail(ErrorCode::device_unavailable,
               "The requested device " + to_string(device) + " (" +
                   device_type_label(device.type) + ", id " + std::to_string(device.id) +
                   ") is not available: " + why,
               "Request dl_device=(1, 0) for the CPU, or run where that device "
               "and its runtime are installed.");
}

// The backend that serves device, after asking it once whether the device
// is here: unsupported_device_type for a type no backend serves,
// device_unavailable with the backend's own reason for one absent here.
// Returning at all means data can be produced on (or read from) device.
inline std::shared_ptr<backend::DeviceBackend> served_backend(
    Device device, backend::Registry& registry = backend::default_registry()) {
  auto b = registry.find(device.type);
  if (!b) fail_unsupported_device(device.type, registry);
  backend::Availability a = b->availability(device);
  if (!a.available) fail_unavailable_device(device, a.reason);
  return b;
}

// served_backend where an absent device is no error: the backend, or NULL
// when no backend serves the type or the device is not here (then no
// runtime in this process can have queued work on its memory).
inline std::shared_ptr<backend::DeviceBackend> backend_if_here(
    Device device, backend::Registry& registry = backend::default_registry()) {
  auto b = registry.find(device.type);
  if (b && !b->availability(device).available) return nullptr;
  return b;
}

// The backend whose queued work a copy out of `source` waits for. Host
// memory has none. Device memory needs its backend (or the error why not).
// Host-accessible memory of a device family (CUDA managed memory) uses its
// backend when one is here.
inline std::shared_ptr<backend::DeviceBackend> source_backend(
    Device source, backend::Registry& registry = backend::default_registry()) {
  if (backend::stream_family(source.type) == backend::StreamFamily::host) return nullptr;
  if (!is_host_accessible(source.type)) return served_backend(source, registry);
  return backend_if_here(source, registry);
}

// The backend that orders `consumer_stream` after the memory of `device`
// without a copy (make_ready_on, and an exchange plan that copies nothing):
// NULL when there is nothing to order. Memory the host reads needs no
// stream, stream None or -1 asks for no ordering, and a device absent here
// has no work queued by this process (backend_if_here).
inline std::shared_ptr<backend::DeviceBackend> ready_backend(
    Device device, StreamArg consumer_stream,
    backend::Registry& registry = backend::default_registry()) {
  if (is_host_accessible(device.type) || !consumer_stream.given || consumer_stream.value == -1)
    return nullptr;
  return backend_if_here(device, registry);
}

}  // namespace dlbridge
