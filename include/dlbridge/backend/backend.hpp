// DeviceBackend: what dlbridge needs from one family of devices (CUDA, ROCm,
// oneAPI, ...) to honour a dl_device request: is device N here, memory on
// it, byte copies to and from the host, and stream ordering. Layout work
// (strides, sub-byte packing) stays in the host copy engine; a backend only
// moves contiguous bytes or rows of bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "../device.hpp"
#include "stream.hpp"

namespace dlbridge::backend {

struct Availability {
  bool available = false;
  // Why not, in words a user can act on ("libcudart was not found; tried
  // ..."); empty when available.
  std::string reason;
};

// What the runtime knows about an address (cudaPointerGetAttributes).
struct PointerInfo {
  Device device;         // where the memory lives; kDLCPU for plain host memory
  bool host_accessible;  // plain loads and stores from the CPU reach it
};

// Rows of bytes: `rows` rows of `row_bytes` each, `pitch` bytes apart.
// A compact copy has rows == 1 (or pitch == row_bytes).
struct Rows {
  int64_t row_bytes = 0;
  int64_t rows = 1;
  int64_t src_pitch = 0;
  int64_t dst_pitch = 0;
};

// Every method may throw dlbridge::Error; none may be called for a device
// type the backend does not serve. Device ids are explicit everywhere: no
// method depends on, or leaves changed, a "current device".
class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;

  // "cuda", "cpu": for messages.
  virtual std::string_view name() const noexcept = 0;
  virtual bool serves(DeviceType type) const noexcept = 0;

  // Whether `device` can be used here, with the reason when not. Cheap
  // after the first call; the first may load a runtime.
  virtual Availability availability(Device device) = 0;
  // Devices of `type` present here; 0 when the runtime is absent.
  virtual int32_t device_count(DeviceType type) = 0;

  // At least `bytes` (a unique address even for 0). Never NULL: failure
  // throws out_of_memory.
  virtual void* allocate(Device device, int64_t bytes) = 0;
  virtual void free(Device device, void* data) noexcept = 0;

  // Copies rows of bytes from src (on src_device) to dst (on dst_device),
  // queued on `stream` of the device that is not the host (for two devices
  // of this backend: of dst_device). One of the two may be kDLCPU host
  // memory; the other is served by this backend.
  virtual void copy(void* dst, Device dst_device, const void* src, Device src_device,
                    const Rows& rows, Stream stream) = 0;

  // Blocks the host until work queued on `stream` is done. Only for a host
  // target: everything else orders streams with wait_for.
  virtual void synchronize(Device device, Stream stream) = 0;
  // Makes work queued so far on `producer` visible to later work on
  // `consumer` without blocking the host (CUDA: event record on the
  // producer, cudaStreamWaitEvent on the consumer).
  virtual void wait_for(Device device, Stream producer, Stream consumer) = 0;

  // The runtime's view of an address; nullopt when it does not know it.
  virtual std::optional<PointerInfo> pointer_info(const void* data) = 0;
};

}  // namespace dlbridge::backend
