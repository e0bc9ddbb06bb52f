// The simulated CUDA runtime itself, checked against what the CUDA runtime
// documentation says, before any dlbridge code is run on it: work queued on
// a stream happens later; events and cudaStreamWaitEvent order two queues;
// the legacy default stream orders itself with blocking streams but not
// with non-blocking ones; the per-thread stream is one per thread; pointer
// attributes; errors and cudaGetLastError; injected faults.
#include <gtest/gtest.h>

#include "support/cuda_sim.hpp"

#include <cstdint>
#include <thread>
#include <vector>

namespace {

using test_support::peek;
using test_support::settle;
using test_support::SimMemory;
using test_support::SimStream;

constexpr size_t n = 4096;
// A "kernel" far slower than any queue delay, and than any stall of a
// loaded test machine between two calls of a test.
constexpr unsigned slow_us = 300000;

unsigned char fresh() { return static_cast<unsigned char>(cudasim_fresh_byte()); }

bool all_bytes(const void* p, size_t bytes, unsigned char value) {
  for (unsigned char b : peek<unsigned char>(p, bytes))
    if (b != value) return false;
  return true;
}

TEST(CudaSimRuntime, QueuedWorkRunsLaterAndSynchronizeWaitsForIt) {
  SimMemory dev(dlbridge::abi::kDLCUDA, 0, n);
  SimStream s;
  ASSERT_EQ(cudasim_sleep_async(slow_us, s.handle), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(dev.data, 7, n, s.handle), cudaSuccess);
  EXPECT_TRUE(all_bytes(dev.data, n, fresh())) << "the memset ran before its stream got to it";
  EXPECT_EQ(cudaStreamQuery(s.handle), cudaErrorNotReady);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "not-ready is a status, not an error";
  ASSERT_EQ(cudaStreamSynchronize(s.handle), cudaSuccess);
  EXPECT_TRUE(all_bytes(dev.data, n, 7));
  EXPECT_EQ(cudaStreamQuery(s.handle), cudaSuccess);
}

TEST(CudaSimRuntime, PageableSourceIsReadAtTheCallPinnedSourceWhenTheCopyRuns) {
  SimMemory dev(dlbridge::abi::kDLCUDA, 0, 2 * n);
  SimMemory pinned(dlbridge::abi::kDLCUDAHost, 0, n);
  std::vector<unsigned char> pageable(n, 1);
  std::memset(pinned.data, 1, n);
  SimStream s;
  ASSERT_EQ(cudasim_sleep_async(slow_us, s.handle), cudaSuccess);
  auto* d = static_cast<char*>(dev.data);
  ASSERT_EQ(cudaMemcpyAsync(d, pageable.data(), n, cudaMemcpyDefault, s.handle), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(d + n, pinned.data, n, cudaMemcpyDefault, s.handle), cudaSuccess);
  std::fill(pageable.begin(), pageable.end(), 2);
  std::memset(pinned.data, 2, n);
  ASSERT_EQ(cudaStreamSynchronize(s.handle), cudaSuccess);
  EXPECT_TRUE(all_bytes(d, n, 1)) << "pageable memory is staged before the call returns";
  EXPECT_TRUE(all_bytes(d + n, n, 2)) << "pinned memory is read when the copy runs";
}

TEST(CudaSimRuntime, StreamWaitEventOrdersOneQueueAfterAnother) {
  SimMemory a(dlbridge::abi::kDLCUDA, 0, n), b(dlbridge::abi::kDLCUDA, 0, n);
  SimStream producer, consumer;
  cudaEvent_t event = nullptr;
  ASSERT_EQ(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudasim_sleep_async(slow_us, producer.handle), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(a.data, 9, n, producer.handle), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(event, producer.handle), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(event), cudaErrorNotReady);
  ASSERT_EQ(cudaStreamWaitEvent(consumer.handle, event, 0), cudaSuccess);
  ASSERT_EQ(cudaEventDestroy(event), cudaSuccess);  // the wait keeps what it needs
  ASSERT_EQ(cudaMemcpyAsync(b.data, a.data, n, cudaMemcpyDefault, consumer.handle), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(consumer.handle), cudaSuccess);
  EXPECT_TRUE(all_bytes(b.data, n, 9));
}

TEST(CudaSimRuntime, WithoutAWaitTheConsumerReadsStaleData) {
  SimMemory a(dlbridge::abi::kDLCUDA, 0, n), b(dlbridge::abi::kDLCUDA, 0, n);
  SimStream producer, consumer;
  ASSERT_EQ(cudasim_sleep_async(slow_us, producer.handle), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(a.data, 9, n, producer.handle), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(b.data, a.data, n, cudaMemcpyDefault, consumer.handle), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(consumer.handle), cudaSuccess);
  EXPECT_TRUE(all_bytes(b.data, n, fresh()));
  settle();
}

TEST(CudaSimRuntime, EventSynchronizeAndAnUnrecordedEvent) {
  SimMemory a(dlbridge::abi::kDLCUDA, 0, n);
  SimStream s;
  cudaEvent_t event = nullptr;
  ASSERT_EQ(cudaEventCreateWithFlags(&event, 0), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(event), cudaSuccess) << "an unrecorded event stands for no work";
  EXPECT_EQ(cudaStreamWaitEvent(s.handle, event, 0), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(a.data, 3, n, s.handle), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(event, s.handle), cudaSuccess);
  ASSERT_EQ(cudaEventSynchronize(event), cudaSuccess);
  EXPECT_TRUE(all_bytes(a.data, n, 3));
  EXPECT_EQ(cudaEventDestroy(event), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(event), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "reading the last error clears it";
}

// The legacy stream waits for earlier work of blocking streams and they for
// its earlier work; a non-blocking stream is ordered with neither.
TEST(CudaSimRuntime, LegacyStreamOrdersBlockingStreamsOnly) {
  SimMemory a(dlbridge::abi::kDLCUDA, 0, n), b(dlbridge::abi::kDLCUDA, 0, n),
      c(dlbridge::abi::kDLCUDA, 0, n);
  SimStream blocking(0, cudaStreamDefault), non_blocking(0, cudaStreamNonBlocking);
  ASSERT_EQ(cudasim_sleep_async(slow_us, blocking.handle), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(a.data, 5, n, blocking.handle), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(b.data, a.data, n, cudaMemcpyDefault, cudaStreamLegacy), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(c.data, a.data, n, cudaMemcpyDefault, non_blocking.handle),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(non_blocking.handle), cudaSuccess);
  EXPECT_TRUE(all_bytes(c.data, n, fresh())) << "a non-blocking stream waited for the legacy one";
  ASSERT_EQ(cudaStreamSynchronize(cudaStreamLegacy), cudaSuccess);
  EXPECT_TRUE(all_bytes(b.data, n, 5)) << "the legacy stream did not wait for a blocking stream";

  ASSERT_EQ(cudasim_sleep_async(slow_us, cudaStreamLegacy), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(a.data, 6, n, cudaStreamLegacy), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(b.data, a.data, n, cudaMemcpyDefault, blocking.handle), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(blocking.handle), cudaSuccess);
  EXPECT_TRUE(all_bytes(b.data, n, 6)) << "a blocking stream did not wait for the legacy one";
}

TEST(CudaSimRuntime, PerThreadStreamIsOnePerThreadAndBlocking) {
  SimMemory a(dlbridge::abi::kDLCUDA, 0, n), b(dlbridge::abi::kDLCUDA, 0, n);
  ASSERT_EQ(cudasim_sleep_async(slow_us, cudaStreamPerThread), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(a.data, 4, n, cudaStreamPerThread), cudaSuccess);
  // Another thread's per-thread stream is another queue: not ordered.
  std::thread other([&] {
    cudaMemcpyAsync(b.data, a.data, n, cudaMemcpyDefault, cudaStreamPerThread);
    cudaStreamSynchronize(cudaStreamPerThread);
  });
  other.join();
  EXPECT_TRUE(all_bytes(b.data, n, fresh()));
  // The legacy stream is ordered after it (it is a blocking stream).
  ASSERT_EQ(cudaMemcpyAsync(b.data, a.data, n, cudaMemcpyDefault, cudaStreamLegacy), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(cudaStreamLegacy), cudaSuccess);
  EXPECT_TRUE(all_bytes(b.data, n, 4));
}

TEST(CudaSimRuntime, StreamsOfEachDeviceAreTheirOwn) {
  SimMemory a(dlbridge::abi::kDLCUDA, 1, n), b(dlbridge::abi::kDLCUDA, 0, n);
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  ASSERT_EQ(cudasim_sleep_async(slow_us, cudaStreamLegacy), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(a.data, 8, n, cudaStreamLegacy), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  // Device 0's legacy stream is another queue.
  ASSERT_EQ(cudaMemcpyAsync(b.data, a.data, n, cudaMemcpyDefault, cudaStreamLegacy), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(cudaStreamLegacy), cudaSuccess);
  EXPECT_TRUE(all_bytes(b.data, n, fresh()));
  settle();
  EXPECT_TRUE(all_bytes(a.data, n, 8));
}

TEST(CudaSimRuntime, PointerAttributesByKind) {
  SimMemory dev1(dlbridge::abi::kDLCUDA, 1, n), pinned(dlbridge::abi::kDLCUDAHost, 0, n),
      managed(dlbridge::abi::kDLCUDAManaged, 0, n);
  std::vector<char> pageable(16);
  cudaPointerAttributes a{};
  ASSERT_EQ(cudaPointerGetAttributes(&a, static_cast<char*>(dev1.data) + 100), cudaSuccess);
  EXPECT_EQ(a.type, cudaMemoryTypeDevice);
  EXPECT_EQ(a.device, 1);
  EXPECT_EQ(a.hostPointer, nullptr);
  ASSERT_EQ(cudaPointerGetAttributes(&a, pinned.data), cudaSuccess);
  EXPECT_EQ(a.type, cudaMemoryTypeHost);
  EXPECT_EQ(a.hostPointer, pinned.data);
  ASSERT_EQ(cudaPointerGetAttributes(&a, managed.data), cudaSuccess);
  EXPECT_EQ(a.type, cudaMemoryTypeManaged);
  ASSERT_EQ(cudaPointerGetAttributes(&a, pageable.data()), cudaSuccess);
  EXPECT_EQ(a.type, cudaMemoryTypeUnregistered);
  EXPECT_EQ(a.devicePointer, nullptr);
  EXPECT_EQ(cudaPointerGetAttributes(nullptr, pageable.data()), cudaErrorInvalidValue);
  cudaGetLastError();
}

TEST(CudaSimRuntime, CopiesOutsideAnAllocationAreRefused) {
  SimMemory dev(dlbridge::abi::kDLCUDA, 0, n);
  std::vector<char> host(2 * n);
  EXPECT_EQ(cudaMemcpyAsync(dev.data, host.data(), n + 1, cudaMemcpyDefault, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy2DAsync(dev.data, 8, host.data(), 16, 16, 2, cudaMemcpyDefault, nullptr),
            cudaErrorInvalidPitchValue);
  EXPECT_EQ(cudaMemcpyAsync(dev.data, host.data(), 8, cudaMemcpyKind(7), nullptr),
            cudaErrorInvalidMemcpyDirection);
  SimStream s;
  cudaStream_t gone = s.handle;
  ASSERT_EQ(cudaStreamDestroy(s.handle), cudaSuccess);
  s.handle = nullptr;  // the destructor's second destroy is then of the legacy stream
  EXPECT_EQ(cudaMemcpyAsync(dev.data, host.data(), 8, cudaMemcpyDefault, gone),
            cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidResourceHandle);
}

TEST(CudaSimRuntime, DevicesAndAllocationErrors) {
  int count = 0, device = -1;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  EXPECT_EQ(count, 2);
  EXPECT_EQ(cudaSetDevice(2), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaSetDevice(-1), cudaErrorInvalidDevice);
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  EXPECT_EQ(device, 0);
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, size_t(1) << 40), cudaErrorMemoryAllocation);
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(cudaMallocManaged(&p, 16, 7), cudaErrorInvalidValue);
  char local = 0;
  EXPECT_EQ(cudaFree(&local), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFreeHost(&local), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
}

TEST(CudaSimRuntime, FreedMemoryIsReusedAndNoLongerKnown) {
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, n), cudaSuccess);
  ASSERT_EQ(cudaFree(p), cudaSuccess);
  cudaPointerAttributes a{};
  EXPECT_EQ(cudaPointerGetAttributes(&a, p), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(p), cudaErrorInvalidValue);
  cudaGetLastError();
  void* q = nullptr;
  ASSERT_EQ(cudaMalloc(&q, n), cudaSuccess);
  EXPECT_EQ(q, p);
  EXPECT_TRUE(all_bytes(q, n, fresh()));
  ASSERT_EQ(cudaFree(q), cudaSuccess);
}

TEST(CudaSimRuntime, InjectedFaultsHitTheNamedCallOnly) {
  void* p = nullptr;
  cudasim_fail_next("cudaMalloc", cudaErrorMemoryAllocation, 2);
  EXPECT_EQ(cudaMalloc(&p, 16), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaMalloc(&p, 16), cudaErrorMemoryAllocation);
  ASSERT_EQ(cudaMalloc(&p, 16), cudaSuccess);
  EXPECT_EQ(cudaFree(p), cudaSuccess);
  cudaGetLastError();
}

TEST(CudaSimRuntime, ErrorStringsForEveryCodeUsed) {
  EXPECT_STREQ(cudaGetErrorString(cudaSuccess), "no error");
  EXPECT_STREQ(cudaGetErrorString(cudaErrorMemoryAllocation), "out of memory");
  EXPECT_STREQ(cudaGetErrorString(cudaErrorInvalidDevice), "invalid device ordinal");
  EXPECT_STREQ(cudaGetErrorString(cudaErrorNoDevice), "no CUDA-capable device is detected");
  EXPECT_STREQ(cudaGetErrorString(cudaErrorInsufficientDriver),
               "CUDA driver version is insufficient for CUDA runtime version");
  EXPECT_STREQ(cudaGetErrorString(cudaErrorInvalidResourceHandle), "invalid resource handle");
  EXPECT_STREQ(cudaGetErrorString(cudaError_t(12345)), "unrecognized error code");
}

}  // namespace
