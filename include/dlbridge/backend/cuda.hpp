// The CUDA family: device memory (kDLCUDA), pinned host memory (kDLCUDAHost)
// and managed memory (kDLCUDAManaged), through the runtime that
// cuda_runtime.hpp loads on first use.
#pragma once

#include <mutex>
#include <new>
#include <string>

#include "../error.hpp"
#include "backend.hpp"
#include "cuda_call.hpp"
#include "cuda_runtime.hpp"

namespace dlbridge::backend {

class CudaBackend final : public DeviceBackend {
 public:
  explicit CudaBackend(cuda::RuntimeLoader& loader = cuda::default_loader())
      : loader_(loader) {}

  std::string_view name() const noexcept override { return "cuda"; }
  bool serves(DeviceType type) const noexcept override {
    return type == abi::kDLCUDA || type == abi::kDLCUDAHost || type == abi::kDLCUDAManaged;
  }

  Availability availability(Device device) override {
    std::string why;
    const int count = count_devices(&why);
    if (count < 0) return {false, why};
    if (count == 0) return {false, why};
    if (device.type == abi::kDLCUDA) {
      if (device.id < count) return {true, {}};
      return {false, "this machine has " + std::to_string(count) + " CUDA device" +
                         (count == 1 ? "" : "s") + " (ids 0.." + std::to_string(count - 1) +
                         ")."};
    }
    // DLPack labels pinned and managed memory with device id 0 always.
    if (device.id == 0) return {true, {}};
    return {false, device_type_label(device.type) + " memory is always device id 0."};
  }

  int32_t device_count(DeviceType type) override {
    const int count = count_devices(nullptr);
    if (count <= 0) return 0;
    return type == abi::kDLCUDA ? count : 1;
  }

  void* allocate(Device device, int64_t bytes) override {
    const cuda::Runtime& rt = runtime();
    // cudaMalloc(0) may hand back NULL; one byte gives an empty tensor a
    // unique address.
    const size_t size = bytes > 0 ? size_t(bytes) : 1;
    void* p = nullptr;
    cuda::cuda_error status = cuda::success;
    switch (device.type) {
      case abi::kDLCUDA: {
        cuda::DeviceGuard guard(rt, device.id);
        status = rt.malloc_device(&p, size);
        break;
      }
      case abi::kDLCUDAHost: status = rt.malloc_host(&p, size); break;
      default: status = rt.malloc_managed(&p, size, cuda::mem_attach_global); break;
    }
    if (status != cuda::success || p == nullptr) {
      rt.get_last_error();  // allocation failures are not sticky; clear it
      detail::fail(ErrorCode::out_of_memory,
                   "Allocating " + std::to_string(bytes) + " bytes on " + to_string(device) +
                       " failed: " + rt.error_text(status) + ".",
                   "Free device memory or copy a smaller tensor.");
    }
    return p;
  }

  void free(Device device, void* data) noexcept override {
    const cuda::Runtime* rt = loader_.get();
    if (rt == nullptr || data == nullptr) return;
    // Errors here (e.g. the driver shutting down at exit) leave nothing to
    // recover; they are cleared so they do not surface in an unrelated call.
    if (device.type == abi::kDLCUDAHost) {
      rt->free_host(data);
    } else {
      cuda::DeviceGuard guard(*rt, device.type == abi::kDLCUDA ? device.id : -1, std::nothrow);
      rt->free_device(data);
    }
    rt->get_last_error();
  }

  void copy(void* dst, Device dst_device, const void* src, Device src_device,
            const Rows& rows, Stream stream) override {
    const cuda::Runtime& rt = runtime();
    cuda::DeviceGuard guard(rt, queue_device(dst_device, src_device));
    const cuda::cuda_stream s = native(stream);
    cuda::cuda_error status;
    if (rows.rows == 1 || (rows.src_pitch == rows.row_bytes && rows.dst_pitch == rows.row_bytes))
      status = rt.memcpy_async(dst, src, size_t(rows.row_bytes * rows.rows),
                               cuda::memcpy_default, s);
    else
      status = rt.memcpy_2d_async(dst, size_t(rows.dst_pitch), src, size_t(rows.src_pitch),
                                  size_t(rows.row_bytes), size_t(rows.rows),
                                  cuda::memcpy_default, s);
    cuda::check(rt, status,
                "copying from " + to_string(src_device) + " to " + to_string(dst_device));
  }

  void synchronize(Device device, Stream stream) override {
    const cuda::Runtime& rt = runtime();
    cuda::DeviceGuard guard(rt, device.type == abi::kDLCUDA ? device.id : -1);
    cuda::check(rt, rt.stream_synchronize(native(stream)), "synchronizing a stream");
  }

  void wait_for(Device device, Stream producer, Stream consumer) override {
    // -1 on either side: that side synchronises itself (a producer's -1
    // says its data needs no ordering).
    if (consumer.kind == StreamKind::no_sync || consumer.kind == StreamKind::host) return;
    if (producer.kind == StreamKind::no_sync || producer.kind == StreamKind::host) return;
    // Both streams belong to `device` (1 and 2 name that device's default
    // streams), so equal handles are one queue, ordered already.
    if (native(producer) == native(consumer)) return;
    const cuda::Runtime& rt = runtime();
    cuda::DeviceGuard guard(rt, device.type == abi::kDLCUDA ? device.id : -1);
    cuda::cuda_event event = nullptr;
    cuda::check(rt, rt.event_create_with_flags(&event, cuda::event_disable_timing),
                "creating an event");
    cuda::cuda_error status = rt.event_record(event, native(producer));
    if (status == cuda::success) status = rt.stream_wait_event(native(consumer), event, 0);
    // Destroying right away is allowed: the runtime keeps the event alive
    // until the wait it is part of has been resolved.
    rt.event_destroy(event);
    cuda::check(rt, status, "ordering the consumer's stream after the producer's");
  }

  std::optional<PointerInfo> pointer_info(const void* data) override {
    const cuda::Runtime* rt = loader_.get();
    if (rt == nullptr) return std::nullopt;
    cuda::pointer_attributes attributes{};
    if (rt->pointer_get_attributes(&attributes, data) != cuda::success) {
      rt->get_last_error();
      return std::nullopt;
    }
    switch (attributes.type) {
      case cuda::memory_unregistered: return PointerInfo{Device{}, true};
      case cuda::memory_host: return PointerInfo{Device{abi::kDLCUDAHost, 0}, true};
      case cuda::memory_device: return PointerInfo{Device{abi::kDLCUDA, attributes.device}, false};
      case cuda::memory_managed: return PointerInfo{Device{abi::kDLCUDAManaged, 0}, true};
    }
    return std::nullopt;
  }

 private:
  // The device whose stream orders a copy: the device end of it, the
  // destination when both ends are devices.
  static int queue_device(Device dst, Device src) noexcept {
    if (dst.type == abi::kDLCUDA) return dst.id;
    if (src.type == abi::kDLCUDA) return src.id;
    return -1;
  }

  static cuda::cuda_stream native(Stream stream) noexcept {
    switch (stream.kind) {
      case StreamKind::handle:
      case StreamKind::per_thread:
        return reinterpret_cast<cuda::cuda_stream>(stream.handle);
      default:
        // None, -1 and host requests queue on the legacy default stream,
        // which orders against every blocking stream.
        return reinterpret_cast<cuda::cuda_stream>(cuda_legacy_stream);
    }
  }

  const cuda::Runtime& runtime() { return cuda::loaded_runtime(loader_); }

  // -1 with *why when there is no runtime or it cannot count devices.
  int count_devices(std::string* why) {
    // The loader runs first and outside our lock: its hint provider may
    // wait for an interpreter lock that a thread waiting on ours holds.
    std::string reason;
    const cuda::Runtime* rt = loader_.get(&reason);
    if (rt == nullptr) {
      if (why) *why = reason;
      return -1;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (count_ < 0) {
      int count = 0;
      const cuda::cuda_error status = rt->get_device_count(&count);
      // No driver or no device is a stable answer, so it is remembered.
      if (status != cuda::success) {
        rt->get_last_error();
        count = 0;
        count_reason_ = "the CUDA runtime (" + rt->path + ") reports " +
                        rt->error_text(status) + ".";
      } else if (count == 0) {
        count_reason_ = "the CUDA runtime (" + rt->path + ") sees no CUDA device.";
      }
      count_ = count;
    }
    if (why && count_ == 0) *why = count_reason_;
    return count_;
  }

  cuda::RuntimeLoader& loader_;
  std::mutex mutex_;
  int count_ = -1;
  std::string count_reason_;
};

}  // namespace dlbridge::backend
