// CUDA memory shared between processes (CUDA IPC), through the runtime that
// cuda_runtime.hpp loads: a 64-byte handle for an allocation's base that
// another process opens as a pointer to the same device memory, and an
// interprocess event that lets the opener's stream wait for the exporter's
// work on it. What the handles may and may not do is the CUDA runtime's:
// - a memory handle names the *base* of a cudaMalloc allocation (pointers
//   inside it travel as base + offset);
// - a handle opens only in another process; opening it again in the same
//   process returns the same pointer and counts, and each open is closed
//   with close_memory;
// - the exporter must not free the allocation, nor exit, while another
//   process has it open (dlbridge's Python layer counts the openers in a
//   shared-memory segment for that: src/python/cuda_ipc.cpp);
// - how large an opened allocation is, only the driver knows
//   (cuMemGetAddressRange, reached through the runtime's
//   cudaGetDriverEntryPoint): a size that travelled beside the handle is a
//   claim, never a bound.
// Every failure is a coded dlbridge::Error carrying the runtime's words.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <string>

#include "../error.hpp"
#include "cuda_call.hpp"
#include "cuda_runtime.hpp"
#include "stream.hpp"

namespace dlbridge::backend::cuda_ipc {

namespace detail {

// The loaded runtime, which must have the interprocess entry points.
inline const cuda::Runtime& runtime(cuda::RuntimeLoader& loader) {
  const cuda::Runtime* rt = &cuda::loaded_runtime(loader);
  if (!rt->ipc_get_mem_handle || !rt->ipc_open_mem_handle || !rt->ipc_close_mem_handle ||
      !rt->ipc_get_event_handle || !rt->ipc_open_event_handle)
    dlbridge::detail::fail(ErrorCode::device_unavailable,
                           "The CUDA runtime " + rt->path +
                               " has no interprocess (cudaIpc*) entry points.",
                           "Share a host copy instead: t.copy(device='cpu').share_memory().");
  return *rt;
}

inline cuda::cuda_stream legacy() { return reinterpret_cast<cuda::cuda_stream>(cuda_legacy_stream); }

}  // namespace detail

// A handle for the allocation that starts at `base` on `device`.
inline cuda::ipc_mem_handle export_memory(int device, void* base,
                                          cuda::RuntimeLoader& loader = cuda::default_loader()) {
  const cuda::Runtime& rt = detail::runtime(loader);
  cuda::DeviceGuard current(rt, device);
  cuda::ipc_mem_handle handle{};
  cuda::check(rt, rt.ipc_get_mem_handle(&handle, base),
              "exporting device memory for another process (cudaIpcGetMemHandle)");
  return handle;
}

// The exporter's memory, mapped into this process on `device`.
inline void* open_memory(int device, const cuda::ipc_mem_handle& handle,
                         cuda::RuntimeLoader& loader = cuda::default_loader()) {
  const cuda::Runtime& rt = detail::runtime(loader);
  cuda::DeviceGuard current(rt, device);
  void* p = nullptr;
  cuda::check(rt, rt.ipc_open_mem_handle(&p, handle, cuda::ipc_mem_lazy_enable_peer_access),
              "opening device memory another process shared (cudaIpcOpenMemHandle)",
              "The process that shared it must still be running and hold the tensor; CUDA "
              "memory opens only in another process on the same machine.");
  return p;
}

// Undoes one open_memory. Errors are cleared: nothing is left to recover.
inline void close_memory(int device, void* p,
                         cuda::RuntimeLoader& loader = cuda::default_loader()) noexcept {
  const cuda::Runtime* rt = loader.get();
  if (rt == nullptr || rt->ipc_close_mem_handle == nullptr || p == nullptr) return;
  {
    cuda::DeviceGuard current(*rt, device, std::nothrow);
    rt->ipc_close_mem_handle(p);
  }
  rt->get_last_error();
}

// An allocation as the driver knows it: where it starts and how many bytes
// it has.
struct AllocationRange {
  void* base = nullptr;
  size_t bytes = 0;
};

// The allocation that holds p on `device` (an opened handle's pointer
// included), from the driver's cuMemGetAddressRange.
inline AllocationRange allocation_range(int device, const void* p,
                                        cuda::RuntimeLoader& loader = cuda::default_loader()) {
  const cuda::Runtime& rt = detail::runtime(loader);
  // CUresult cuMemGetAddressRange_v2(CUdeviceptr*, size_t*, CUdeviceptr)
  using address_range_fn = int (*)(unsigned long long*, size_t*, unsigned long long);
  void* entry = nullptr;
  int found = 0;
  cuda::cuda_error status = cuda::success;
  if (rt.get_driver_entry_point_by_version)
    status = rt.get_driver_entry_point_by_version("cuMemGetAddressRange", &entry, 12000, 0, &found);
  else if (rt.get_driver_entry_point)
    status = rt.get_driver_entry_point("cuMemGetAddressRange", &entry, 0, &found);
  else
    dlbridge::detail::fail(ErrorCode::device_unavailable,
                           "The CUDA runtime " + rt.path +
                               " cannot say how large shared device memory is: it has no "
                               "cudaGetDriverEntryPoint (CUDA 11.3 and later have it).",
                           "Use a CUDA runtime of version 11.3 or later, or share a host copy: "
                           "t.copy(device='cpu').share_memory().");
  cuda::check(rt, status, "looking up cuMemGetAddressRange (cudaGetDriverEntryPoint)");
  if (entry == nullptr)
    dlbridge::detail::fail(ErrorCode::device_unavailable,
                           "The CUDA driver has no cuMemGetAddressRange for the runtime " + rt.path +
                               ".",
                           "Update the NVIDIA driver, or share a host copy: "
                           "t.copy(device='cpu').share_memory().");
  cuda::DeviceGuard current(rt, device);
  unsigned long long base = 0;
  size_t bytes = 0;
  const int result = reinterpret_cast<address_range_fn>(entry)(
      &base, &bytes, static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(p)));
  if (result != 0)
    dlbridge::detail::fail(ErrorCode::device_unavailable,
                           "The CUDA driver failed reporting the extent of shared device memory "
                           "(cuMemGetAddressRange): CUresult " + std::to_string(result) + ".",
                           "The process that shared it must still be running and hold the tensor.");
  return {reinterpret_cast<void*>(uintptr_t(base)), bytes};
}

// An event that other processes can open (interprocess, without timing).
inline cuda::cuda_event create_event(int device,
                                     cuda::RuntimeLoader& loader = cuda::default_loader()) {
  const cuda::Runtime& rt = detail::runtime(loader);
  cuda::DeviceGuard current(rt, device);
  cuda::cuda_event event = nullptr;
  cuda::check(rt,
              rt.event_create_with_flags(&event,
                                         cuda::event_interprocess | cuda::event_disable_timing),
              "creating an interprocess event");
  return event;
}

inline void destroy_event(cuda::cuda_event event,
                          cuda::RuntimeLoader& loader = cuda::default_loader()) noexcept {
  const cuda::Runtime* rt = loader.get();
  if (rt == nullptr || event == nullptr) return;
  rt->event_destroy(event);
  rt->get_last_error();
}

// Marks the point, on `device`'s legacy default stream (where dlbridge's
// device data is ready), that an opener must wait for; returns the handle
// that carries it.
inline cuda::ipc_event_handle record_event(int device, cuda::cuda_event event,
                                           cuda::RuntimeLoader& loader = cuda::default_loader()) {
  const cuda::Runtime& rt = detail::runtime(loader);
  cuda::DeviceGuard current(rt, device);
  cuda::check(rt, rt.event_record(event, detail::legacy()), "recording an interprocess event");
  cuda::ipc_event_handle handle{};
  cuda::check(rt, rt.ipc_get_event_handle(&handle, event),
              "exporting an event for another process (cudaIpcGetEventHandle)");
  return handle;
}

// Blocks until the work queued so far on `device`'s legacy default stream
// is done.
inline void synchronize_default_stream(int device,
                                       cuda::RuntimeLoader& loader = cuda::default_loader()) {
  const cuda::Runtime& rt = detail::runtime(loader);
  cuda::DeviceGuard current(rt, device);
  cuda::check(rt, rt.stream_synchronize(detail::legacy()), "synchronizing a stream");
}

// Orders this process's legacy default stream on `device` after the
// exporter's recorded work, without blocking the host.
inline void wait_for_event(int device, const cuda::ipc_event_handle& handle,
                           cuda::RuntimeLoader& loader = cuda::default_loader()) {
  const cuda::Runtime& rt = detail::runtime(loader);
  cuda::DeviceGuard current(rt, device);
  cuda::cuda_event event = nullptr;
  cuda::check(rt, rt.ipc_open_event_handle(&event, handle),
              "opening an event another process shared (cudaIpcOpenEventHandle)",
              "The process that shared the tensor must still be running.");
  const cuda::cuda_error status = rt.stream_wait_event(detail::legacy(), event, 0);
  rt.event_destroy(event);  // the wait keeps what it needs
  cuda::check(rt, status, "ordering this process's stream after the sharing process's");
}

}  // namespace dlbridge::backend::cuda_ipc
