// What a producer answers when a consumer asks for a device (dl_device): the
// request is served, the type is known but absent here, or the type is one
// this build cannot serve at all. The messages extend JAX's to_dlpack ones;
// the one that lists the served types is in request.hpp, beside the
// registry that knows them.
#pragma once

#include <string>

#include "device.hpp"
#include "error.hpp"

namespace dlbridge {

enum class DeviceSupport {
  served,       // data can be produced there
  unavailable,  // a type dlbridge serves, but no such device or runtime here
  unsupported,  // a type (or number) this build cannot serve
};

// The sentence every unsupported_device_type message starts with (JAX's,
// which users search for), whether the type came in a dl_device request or
// in a tensor handed over for import.
inline std::string unsupported_device_sentence(int32_t type) {
  return "The device specification passed to to_dlpack contains an unsupported "
         "device type (DLDeviceType: " + device_type_label(type) + ").";
}

[[noreturn]] inline void fail_unavailable_device(Device device,
                                                 const std::string& why) {
  detail::fail(ErrorCode::device_unavailable,
               "The requested device " + to_string(device) + " (" +
                   device_type_label(device.type) + ", id " +
                   std::to_string(device.id) + ") is not available: " + why,
               "Request dl_device=(1, 0) for the CPU, or run where that device "
               "and its runtime are installed.");
}

}  // namespace dlbridge
