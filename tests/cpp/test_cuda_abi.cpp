// dlbridge declares the few CUDA runtime entry points it dlsym's by hand
// (cuda_runtime.hpp), so that it builds without CUDA. This test checks those
// declarations against the official cuda_runtime_api.h: every function
// pointer type, the cudaPointerAttributes layout, the enum values and the
// special stream handles. It only compiles the checks where CMake found the
// header (DLBRIDGE_HAVE_CUDA_RUNTIME_API); elsewhere it skips. Nothing is
// linked against or called: the official functions only appear in decltype.
#include <gtest/gtest.h>

#ifdef DLBRIDGE_HAVE_CUDA_RUNTIME_API

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <dlbridge/backend/cuda_runtime.hpp>
#include <dlbridge/backend/stream.hpp>

namespace {

namespace cu = dlbridge::backend::cuda;

// The official type each dlbridge stand-in replaces: cudaError_t and the
// enums become int, stream and event handles void*, the attributes struct
// dlbridge's copy of it. Anything else must match exactly.
template <typename T>
struct ours {
  using type = T;
};
template <>
struct ours<cudaError_t> {
  using type = int;
};
template <>
struct ours<cudaMemcpyKind> {
  using type = int;
};
template <>
struct ours<cudaStream_t> {
  using type = void*;
};
template <>
struct ours<cudaEvent_t> {
  using type = void*;
};
template <>
struct ours<cudaEvent_t*> {
  using type = void**;
};
template <>
struct ours<cudaPointerAttributes*> {
  using type = cu::pointer_attributes*;
};
template <>
struct ours<cudaIpcMemHandle_t> {
  using type = cu::ipc_mem_handle;
};
template <>
struct ours<cudaIpcMemHandle_t*> {
  using type = cu::ipc_mem_handle*;
};
template <>
struct ours<cudaIpcEventHandle_t> {
  using type = cu::ipc_event_handle;
};
template <>
struct ours<cudaIpcEventHandle_t*> {
  using type = cu::ipc_event_handle*;
};
template <typename R, typename... A>
struct ours<R (*)(A...)> {
  using type = typename ours<R>::type (*)(typename ours<A>::type...);
};
template <typename T>
using ours_t = typename ours<T>::type;

// cudaMallocManaged is overloaded in C++ (one overload has a default
// argument); the cast picks the one prototype there is.
using official_malloc_managed = cudaError_t (*)(void**, size_t, unsigned int);

#define DLBRIDGE_SAME_TYPE(member, official)                                              \
  static_assert(std::is_same_v<decltype(cu::Runtime::member), ours_t<decltype(official)>>, \
                #member " does not have the type of " #official)

DLBRIDGE_SAME_TYPE(get_device_count, &cudaGetDeviceCount);
DLBRIDGE_SAME_TYPE(get_device, &cudaGetDevice);
DLBRIDGE_SAME_TYPE(set_device, &cudaSetDevice);
DLBRIDGE_SAME_TYPE(malloc_device, &cudaMalloc);
DLBRIDGE_SAME_TYPE(free_device, &cudaFree);
DLBRIDGE_SAME_TYPE(malloc_host, static_cast<cudaError_t (*)(void**, size_t)>(&cudaMallocHost));
DLBRIDGE_SAME_TYPE(free_host, &cudaFreeHost);
DLBRIDGE_SAME_TYPE(malloc_managed, static_cast<official_malloc_managed>(&cudaMallocManaged));
DLBRIDGE_SAME_TYPE(memcpy_async, &cudaMemcpyAsync);
DLBRIDGE_SAME_TYPE(memcpy_2d_async, &cudaMemcpy2DAsync);
DLBRIDGE_SAME_TYPE(stream_synchronize, &cudaStreamSynchronize);
DLBRIDGE_SAME_TYPE(event_create_with_flags, &cudaEventCreateWithFlags);
DLBRIDGE_SAME_TYPE(event_record, &cudaEventRecord);
DLBRIDGE_SAME_TYPE(stream_wait_event, &cudaStreamWaitEvent);
DLBRIDGE_SAME_TYPE(event_destroy, &cudaEventDestroy);
DLBRIDGE_SAME_TYPE(pointer_get_attributes, &cudaPointerGetAttributes);
DLBRIDGE_SAME_TYPE(get_error_string, &cudaGetErrorString);
DLBRIDGE_SAME_TYPE(get_last_error, &cudaGetLastError);
DLBRIDGE_SAME_TYPE(ipc_get_mem_handle, &cudaIpcGetMemHandle);
DLBRIDGE_SAME_TYPE(ipc_open_mem_handle, &cudaIpcOpenMemHandle);
DLBRIDGE_SAME_TYPE(ipc_close_mem_handle, &cudaIpcCloseMemHandle);
DLBRIDGE_SAME_TYPE(ipc_get_event_handle, &cudaIpcGetEventHandle);
DLBRIDGE_SAME_TYPE(ipc_open_event_handle, &cudaIpcOpenEventHandle);

#undef DLBRIDGE_SAME_TYPE

// The stand-ins are interchangeable with what they replace at the ABI level.
static_assert(sizeof(cudaError_t) == sizeof(int));
static_assert(sizeof(cudaMemcpyKind) == sizeof(int));
static_assert(sizeof(cudaMemoryType) == sizeof(int));
static_assert(sizeof(cudaStream_t) == sizeof(void*));
static_assert(sizeof(cudaEvent_t) == sizeof(void*));

static_assert(cu::success == cudaSuccess);
static_assert(cu::insufficient_driver == cudaErrorInsufficientDriver);
static_assert(cu::memcpy_default == cudaMemcpyDefault);
static_assert(cu::event_disable_timing == cudaEventDisableTiming);
static_assert(cu::mem_attach_global == cudaMemAttachGlobal);
static_assert(cu::event_interprocess == cudaEventInterprocess);
static_assert(cu::ipc_mem_lazy_enable_peer_access == cudaIpcMemLazyEnablePeerAccess);
// The handles travel by value: the same size and alignment as CUDA's.
static_assert(cu::ipc_handle_size == CUDA_IPC_HANDLE_SIZE);
static_assert(sizeof(cu::ipc_mem_handle) == sizeof(cudaIpcMemHandle_t));
static_assert(alignof(cu::ipc_mem_handle) == alignof(cudaIpcMemHandle_t));
static_assert(sizeof(cu::ipc_event_handle) == sizeof(cudaIpcEventHandle_t));
static_assert(alignof(cu::ipc_event_handle) == alignof(cudaIpcEventHandle_t));
static_assert(cu::memory_unregistered == cudaMemoryTypeUnregistered);
static_assert(cu::memory_host == cudaMemoryTypeHost);
static_assert(cu::memory_device == cudaMemoryTypeDevice);
static_assert(cu::memory_managed == cudaMemoryTypeManaged);

// The runtime writes a whole cudaPointerAttributes into ours: each field
// where the runtime puts it, and room for all of it.
static_assert(offsetof(cu::pointer_attributes, type) == offsetof(cudaPointerAttributes, type));
static_assert(offsetof(cu::pointer_attributes, device) == offsetof(cudaPointerAttributes, device));
static_assert(offsetof(cu::pointer_attributes, device_pointer) ==
              offsetof(cudaPointerAttributes, devicePointer));
static_assert(offsetof(cu::pointer_attributes, host_pointer) ==
              offsetof(cudaPointerAttributes, hostPointer));
static_assert(sizeof(cu::pointer_attributes) >= sizeof(cudaPointerAttributes));
static_assert(alignof(cu::pointer_attributes) >= alignof(cudaPointerAttributes));

}  // namespace

// cudaStreamLegacy and cudaStreamPerThread are casts of integers to a
// pointer, which no constant expression may contain.
TEST(CudaAbi, SpecialStreamHandlesAreTheRuntimes) {
  EXPECT_EQ(dlbridge::backend::cuda_legacy_stream, reinterpret_cast<uintptr_t>(cudaStreamLegacy));
  EXPECT_EQ(dlbridge::backend::cuda_per_thread_stream,
            reinterpret_cast<uintptr_t>(cudaStreamPerThread));
}

#else

TEST(CudaAbi, SpecialStreamHandlesAreTheRuntimes) {
  GTEST_SKIP() << "cuda_runtime_api.h was not found at configure time "
                  "(set DLBRIDGE_CUDA_RUNTIME_INCLUDE to its directory)";
}

#endif
