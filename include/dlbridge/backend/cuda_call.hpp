// Calling the CUDA runtime that cuda_runtime.hpp loads, for the CUDA backend
// (cuda.hpp) and CUDA IPC (cuda_ipc.hpp) alike: the runtime or the reason it
// is absent, the coded error for a failed call, and the guard that makes a
// device current for a call. Device ids are explicit everywhere (backend.hpp):
// a call on a device other than the current one leaves no trace.
#pragma once

#include <new>
#include <string>

#include "../error.hpp"
#include "cuda_runtime.hpp"

namespace dlbridge::backend::cuda {

// The loaded runtime; device_unavailable with the loader's reason (what it
// tried) when there is none.
inline const Runtime& loaded_runtime(RuntimeLoader& loader) {
  std::string why;
  const Runtime* rt = loader.get(&why);
  if (rt == nullptr)
    dlbridge::detail::fail(ErrorCode::device_unavailable, "CUDA is not available: " + why);
  return *rt;
}

// The fix for a failed call, unless the caller knows a better one.
inline constexpr const char* failed_call_hint =
    "Check the device with nvidia-smi; an earlier kernel fault makes every later call fail.";

// Nothing for success; otherwise device_unavailable with the runtime's words
// for `what` ("copying from cuda:0 to cpu"). The runtime's last error is
// cleared, so that it does not surface in an unrelated later call.
inline void check(const Runtime& rt, cuda_error status, const std::string& what,
                  const char* hint = failed_call_hint) {
  if (status == success) return;
  rt.get_last_error();
  dlbridge::detail::fail(ErrorCode::device_unavailable,
                         "The CUDA runtime failed " + what + ": " + rt.error_text(status) + ".",
                         hint);
}

// Makes device `id` current for the guard's life and gives the caller's
// current device back at its end. id -1 switches nothing (a call that
// names no particular device: pinned or managed memory).
class DeviceGuard {
 public:
  // A failed query or switch is check()'s coded error.
  DeviceGuard(const Runtime& rt, int id) : rt_(rt) {
    if (id < 0) return;
    check(rt, rt.get_device(&previous_), "querying the current device");
    if (previous_ != id) {
      check(rt, rt.set_device(id), "selecting device " + std::to_string(id));
      switched_ = true;
    }
  }
  // For release paths (frees, closes), which cannot report anything: a
  // query or switch that fails leaves the current device as it is.
  DeviceGuard(const Runtime& rt, int id, std::nothrow_t) noexcept : rt_(rt) {
    switched_ = id >= 0 && rt.get_device(&previous_) == success && previous_ != id &&
                rt.set_device(id) == success;
  }
  ~DeviceGuard() {
    if (switched_) rt_.set_device(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  const Runtime& rt_;
  int previous_ = 0;
  bool switched_ = false;
};

}  // namespace dlbridge::backend::cuda
