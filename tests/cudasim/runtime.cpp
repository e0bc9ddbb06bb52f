// The CUDA runtime entry points, simulated. Each answers with the error
// codes the CUDA documentation lists for it, records failures for
// cudaGetLastError as the runtime does (per thread, cleared when read), and
// queues copies and memsets on the stream it is given, to run later.
#include <cstring>

#include "cudasim.h"
#include "sim_state.hpp"

namespace cudasim {
namespace {

thread_local cudaError_t last_error = cudaSuccess;
thread_local int current = 0;

const char* direction(Place dst, Place src) {
  const bool to_device = dst == Place::device;
  const bool from_device = src == Place::device;
  if (to_device) return from_device ? "device_to_device" : "host_to_device";
  return from_device ? "device_to_host" : "host_to_host";
}

// Copies `height` rows of `width` bytes, pitches apart, when the stream gets
// to it. A pageable source is read now, as the runtime stages pageable
// memory before the call returns; pinned, managed and device memory are
// read when the copy runs.
cudaError_t queue_copy(const char* function, void* dst, size_t dpitch, const void* src,
                       size_t spitch, size_t width, size_t height, int kind,
                       cudaStream_t stream) {
  if (cudaError_t e = enter(function)) return answer(e);
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault)
    return answer(cudaErrorInvalidMemcpyDirection);
  if (height > 1 && (width > dpitch || width > spitch)) return answer(cudaErrorInvalidPitchValue);
  QueuePtr queue = resolve(stream);
  if (!queue) return answer(cudaErrorInvalidResourceHandle);
  if (width == 0 || height == 0) return cudaSuccess;
  if (dst == nullptr || src == nullptr) return answer(cudaErrorInvalidValue);
  const Where to = locate(dst, dpitch * (height - 1) + width);
  const Where from = locate(src, spitch * (height - 1) + width);
  if (!to.valid || !from.valid) return answer(cudaErrorInvalidValue);
  count(direction(to.place, from.place));

  auto* out = static_cast<char*>(dst);
  std::function<void()> work;
  if (from.place == Place::pageable) {
    count("pageable_source");
    std::vector<char> staged(width * height);
    for (size_t r = 0; r < height; ++r)
      std::memcpy(staged.data() + r * width, static_cast<const char*>(src) + r * spitch, width);
    work = [out, dpitch, width, height, staged = std::move(staged)] {
      for (size_t r = 0; r < height; ++r) std::memcpy(out + r * dpitch, staged.data() + r * width, width);
    };
  } else {
    const auto* in = static_cast<const char*>(src);
    work = [out, dpitch, in, spitch, width, height] {
      for (size_t r = 0; r < height; ++r) std::memcpy(out + r * dpitch, in + r * spitch, width);
    };
  }
  enqueue(queue, std::move(work), next_delay_us());
  return cudaSuccess;
}

cudaError_t allocate_into(const char* function, void** ptr, size_t size, Place place) {
  if (cudaError_t e = enter(function)) return answer(e);
  if (ptr == nullptr) return answer(cudaErrorInvalidValue);
  *ptr = nullptr;
  if (size == 0) return place == Place::managed ? answer(cudaErrorInvalidValue) : cudaSuccess;
  void* p = allocate(place, current, size);
  if (p == nullptr) return answer(cudaErrorMemoryAllocation);
  count("malloc");
  *ptr = p;
  return cudaSuccess;
}

// cudaFree and cudaFreeHost wait for all queued work first, as the real
// ones synchronise the device: memory is never freed under a pending copy.
cudaError_t free_from(const char* function, void* ptr, Place place, Place also) {
  if (cudaError_t e = enter(function)) return answer(e);
  if (ptr == nullptr) return cudaSuccess;
  drain(-1);
  if (release(place, ptr) || (also != place && release(also, ptr))) return cudaSuccess;
  return answer(cudaErrorInvalidValue);
}

}  // namespace

int current_device() { return current; }

cudaError_t answer(cudaError_t error) {
  // cudaErrorNotReady is a status, not a failure: it is not recorded.
  if (error != cudaSuccess && error != cudaErrorNotReady) last_error = error;
  return error;
}

cudaError_t enter(const char* function) {
  if (insufficient_driver()) return cudaErrorInsufficientDriver;
  if (device_count() == 0) return cudaErrorNoDevice;
  return injected(function);
}

}  // namespace cudasim

using namespace cudasim;

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  if (count == nullptr) return answer(cudaErrorInvalidValue);
  *count = 0;
  if (cudaError_t e = enter("cudaGetDeviceCount")) return answer(e);
  *count = device_count();
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  if (cudaError_t e = enter("cudaGetDevice")) return answer(e);
  if (device == nullptr) return answer(cudaErrorInvalidValue);
  *device = current;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (cudaError_t e = enter("cudaSetDevice")) return answer(e);
  if (device < 0 || device >= device_count()) return answer(cudaErrorInvalidDevice);
  current = device;
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** ptr, size_t size) {
  return allocate_into("cudaMalloc", ptr, size, Place::device);
}

cudaError_t cudaFree(void* ptr) { return free_from("cudaFree", ptr, Place::device, Place::managed); }

cudaError_t cudaMallocHost(void** ptr, size_t size) {
  return allocate_into("cudaMallocHost", ptr, size, Place::pinned);
}

cudaError_t cudaFreeHost(void* ptr) {
  return free_from("cudaFreeHost", ptr, Place::pinned, Place::pinned);
}

cudaError_t cudaMallocManaged(void** ptr, size_t size, unsigned int flags) {
  // cudaMemAttachGlobal or cudaMemAttachHost (2), nothing else.
  if (flags != cudaMemAttachGlobal && flags != 2) return answer(cudaErrorInvalidValue);
  return allocate_into("cudaMallocManaged", ptr, size, Place::managed);
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  return queue_copy("cudaMemcpyAsync", dst, count, src, count, count, 1, kind, stream);
}

cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch,
                              size_t width, size_t height, cudaMemcpyKind kind,
                              cudaStream_t stream) {
  return queue_copy("cudaMemcpy2DAsync", dst, dpitch, src, spitch, width, height, kind, stream);
}

cudaError_t cudaMemsetAsync(void* ptr, int value, size_t count, cudaStream_t stream) {
  if (cudaError_t e = enter("cudaMemsetAsync")) return answer(e);
  QueuePtr queue = resolve(stream);
  if (!queue) return answer(cudaErrorInvalidResourceHandle);
  if (count == 0) return cudaSuccess;
  const Where where = locate(ptr, count);
  if (where.place == Place::pageable || !where.valid) return answer(cudaErrorInvalidValue);
  enqueue(queue, [ptr, value, count] { std::memset(ptr, value, count); }, next_delay_us());
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  if (cudaError_t e = enter("cudaStreamCreateWithFlags")) return answer(e);
  if (stream == nullptr || (flags != cudaStreamDefault && flags != cudaStreamNonBlocking))
    return answer(cudaErrorInvalidValue);
  *stream = create_stream(current, flags == cudaStreamDefault);
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (cudaError_t e = enter("cudaStreamDestroy")) return answer(e);
  return destroy_stream(stream) ? cudaSuccess : answer(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (cudaError_t e = enter("cudaStreamSynchronize")) return answer(e);
  QueuePtr queue = resolve(stream);
  if (!queue) return answer(cudaErrorInvalidResourceHandle);
  count("stream_synchronize");
  // A marker at the end of the queue, with the legacy stream's implicit
  // ordering, is done exactly when everything before it is.
  wait(enqueue(queue, {}, 0));
  return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  if (cudaError_t e = enter("cudaStreamQuery")) return answer(e);
  QueuePtr queue = resolve(stream);
  if (!queue) return answer(cudaErrorInvalidResourceHandle);
  return is_done(last_mark(queue)) ? cudaSuccess : answer(cudaErrorNotReady);
}

cudaError_t cudaDeviceSynchronize(void) {
  if (cudaError_t e = enter("cudaDeviceSynchronize")) return answer(e);
  drain(current);
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  if (cudaError_t e = enter("cudaEventCreateWithFlags")) return answer(e);
  // cudaEventBlockingSync (1), cudaEventDisableTiming (2), cudaEventInterprocess (4);
  // an interprocess event must not time (the documentation requires both).
  if (event == nullptr || (flags & ~7u) != 0) return answer(cudaErrorInvalidValue);
  if ((flags & cudaEventInterprocess) && !(flags & cudaEventDisableTiming))
    return answer(cudaErrorInvalidValue);
  EventSlot* slot = nullptr;
  if (flags & cudaEventInterprocess) {
    slot = claim_event_slot();
    if (slot == nullptr) return answer(cudaErrorMemoryAllocation);
  }
  *event = create_event(slot);
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (cudaError_t e = enter("cudaEventRecord")) return answer(e);
  QueuePtr queue = resolve(stream);
  Event state;
  if (!queue || !read_event(event, &state)) return answer(cudaErrorInvalidResourceHandle);
  count("event_record");
  // The event's position is a marker in the queue, so that on the legacy
  // stream it also follows the blocking streams' earlier work. An
  // interprocess event's marker also tells the other processes.
  std::function<void()> mark_done;
  if (state.ipc) mark_done = ipc_record(state.ipc);
  record_event(event, enqueue(queue, std::move(mark_done), 0));
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  if (cudaError_t e = enter("cudaEventQuery")) return answer(e);
  Event state;
  if (!read_event(event, &state)) return answer(cudaErrorInvalidResourceHandle);
  if (state.remote) return ipc_done(state.ipc, ipc_target(state.ipc)) ? cudaSuccess : answer(cudaErrorNotReady);
  // An event never recorded stands for no work: complete.
  return !state.recorded || is_done(state.mark) ? cudaSuccess : answer(cudaErrorNotReady);
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (cudaError_t e = enter("cudaEventSynchronize")) return answer(e);
  Event state;
  if (!read_event(event, &state)) return answer(cudaErrorInvalidResourceHandle);
  if (state.remote) ipc_wait(state.ipc, ipc_target(state.ipc));
  else if (state.recorded) wait(state.mark);
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (cudaError_t e = enter("cudaEventDestroy")) return answer(e);
  Event state;
  if (!read_event(event, &state)) return answer(cudaErrorInvalidResourceHandle);
  if (state.ipc && !state.remote) free_event_slot(state.ipc);
  return destroy_event(event) ? cudaSuccess : answer(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  if (cudaError_t e = enter("cudaStreamWaitEvent")) return answer(e);
  QueuePtr queue = resolve(stream);
  Event state;
  if (!queue || !read_event(event, &state)) return answer(cudaErrorInvalidResourceHandle);
  // cudaEventWaitDefault (0) or cudaEventWaitExternal (1).
  if (flags > 1) return answer(cudaErrorInvalidValue);
  count("stream_wait");
  if (ignore_stream_waits()) return cudaSuccess;
  if (state.remote) {
    // The exporter's records, as they stand now, are what the stream waits for.
    const uint64_t target = ipc_target(state.ipc);
    EventSlot* slot = state.ipc;
    if (!ipc_done(slot, target)) enqueue(queue, [slot, target] { ipc_wait(slot, target); }, 0);
    return cudaSuccess;
  }
  if (!state.recorded) return cudaSuccess;
  enqueue(queue, {}, 0, {state.mark});
  return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attributes, const void* ptr) {
  if (cudaError_t e = enter("cudaPointerGetAttributes")) return answer(e);
  if (attributes == nullptr) return answer(cudaErrorInvalidValue);
  const Where where = locate(ptr, 1);
  if (!where.valid) return answer(cudaErrorInvalidValue);  // inside a region, but freed
  // The whole struct is written, reserved tail included, as the runtime does.
  cudaPointerAttributes out;
  std::memset(&out, 0, sizeof out);
  void* p = const_cast<void*>(ptr);
  out.device = where.device;
  switch (where.place) {
    case Place::device:
      out.type = cudaMemoryTypeDevice;
      out.devicePointer = p;
      break;
    case Place::pinned:
    case Place::managed:
      out.type = where.place == Place::pinned ? cudaMemoryTypeHost : cudaMemoryTypeManaged;
      out.devicePointer = p;
      out.hostPointer = p;
      break;
    case Place::pageable:
      // The documentation gives unregistered memory no device; -2 is no id.
      out.type = cudaMemoryTypeUnregistered;
      out.device = -2;
      break;
  }
  *attributes = out;
  return cudaSuccess;
}

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidPitchValue: return "invalid pitch argument";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorInsufficientDriver:
      return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorDeviceUninitialized: return "invalid device context";
    case cudaErrorMapBufferObjectFailed: return "mapping of buffer object failed";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    default: return "unrecognized error code";
  }
}

cudaError_t cudaGetLastError(void) {
  const cudaError_t error = last_error;
  last_error = cudaSuccess;
  return error;
}

cudaError_t cudasim_sleep_async(unsigned us, cudaStream_t stream) {
  if (cudaError_t e = enter("cudasim_sleep_async")) return answer(e);
  QueuePtr queue = resolve(stream);
  if (!queue) return answer(cudaErrorInvalidResourceHandle);
  enqueue(queue, {}, us);
  return cudaSuccess;
}

}  // extern "C"
