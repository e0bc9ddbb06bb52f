// The stream hand-off rules, through dlbridge's real CUDA backend on the
// simulated runtime: a producer's pending work is made visible to the
// consumer's stream, or waited for by the host, before anything reads it.
// Each test gives the producer's stream a slow "kernel" (300 ms), so that a
// read not ordered after it sees the memory's fresh fill instead.
//
// ctest also runs the tests named in test_cuda_sim_handoff_without_waits
// with CUDASIM_IGNORE_STREAM_WAITS=1, where cudaStreamWaitEvent orders
// nothing, and requires them to fail: proof that they detect a missing wait.
#include <gtest/gtest.h>

#include "support/cuda_sim.hpp"

#include <dlbridge/copy/transfer.hpp>

#include <vector>

namespace {

namespace dlb = dlbridge;
namespace dlabi = dlbridge::abi;
using test_support::peek;
using test_support::settle;
using test_support::sim;
using test_support::SimMemory;
using test_support::SimStream;

constexpr dlb::DType u8{dlabi::kDLUInt, 8, 1};
constexpr size_t n = 1 << 16;
constexpr unsigned slow_us = 300000;
constexpr dlb::Device cuda0{dlabi::kDLCUDA, 0}, cuda1{dlabi::kDLCUDA, 1};
constexpr dlb::Device pinned{dlabi::kDLCUDAHost, 0}, managed{dlabi::kDLCUDAManaged, 0};

dlb::TensorView bytes_at(void* p, dlb::Device device, size_t count = n) {
  return dlb::TensorView::from_data(p, u8, {int64_t(count)}, {}, device);
}

dlb::TransferOptions options(dlb::StreamArg consumer = {}, dlb::StreamArg producer = {}) {
  dlb::TransferOptions o;
  o.stream = consumer;
  o.source_stream = producer;
  return o;
}

bool all_equal(const void* p, unsigned char value, size_t count = n) {
  for (unsigned char b : peek<unsigned char>(p, count))
    if (b != value) return false;
  return true;
}

// Device memory whose final contents (7s) are still being written by a slow
// kernel on `producer` when the test goes on.
void pending_write(void* p, cudaStream_t producer) {
  ASSERT_EQ(cudasim_sleep_async(slow_us, producer), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(p, 7, n, producer), cudaSuccess);
}

class CudaSimHandOff : public ::testing::Test {
 protected:
  void TearDown() override { settle(); }
};

// A device-to-device copy is queued on the consumer's stream after an
// event wait on the producer's: the consumer, synchronising only its own
// stream, sees the producer's write.
TEST_F(CudaSimHandOff, DeviceCopyOnTheConsumersStreamSeesTheProducersWrite) {
  SimMemory data(dlabi::kDLCUDA, 0, n);
  SimStream producer, consumer;
  pending_write(data.data, producer.handle);
  dlb::ManagedTensor copy = dlb::copy_to_device(
      bytes_at(data.data, cuda0), cuda0, options(consumer.arg(), producer.arg()), sim().registry);
  ASSERT_EQ(cudaStreamSynchronize(consumer.handle), cudaSuccess);
  EXPECT_TRUE(all_equal(copy.view().data(), 7));
}

// The same with the producer on the per-thread default stream (2): it is
// ordered with the legacy stream, but not with a non-blocking consumer.
TEST_F(CudaSimHandOff, PerThreadProducerAndANonBlockingConsumer) {
  SimMemory data(dlabi::kDLCUDA, 0, n);
  SimStream consumer;
  pending_write(data.data, cudaStreamPerThread);
  dlb::ManagedTensor copy = dlb::copy_to_device(
      bytes_at(data.data, cuda0), cuda0, options(consumer.arg(), {true, 2}), sim().registry);
  ASSERT_EQ(cudaStreamSynchronize(consumer.handle), cudaSuccess);
  EXPECT_TRUE(all_equal(copy.view().data(), 7));
}

// Export: dlbridge's own device data is ready on the legacy stream (its
// upload is queued there, behind slow work); a consumer naming its own
// non-blocking stream gets that stream ordered after the upload.
TEST_F(CudaSimHandOff, ExportOrdersTheConsumersStreamAfterTheUpload) {
  ASSERT_EQ(cudasim_sleep_async(slow_us, cudaStreamLegacy), cudaSuccess);
  std::vector<unsigned char> host(n, 3);
  dlb::ManagedTensor on_device =
      dlb::copy_to_device(bytes_at(host.data(), {}), cuda0, options(), sim().registry);
  SimStream consumer;
  SimMemory seen(dlabi::kDLCUDAHost, 0, n);
  dlb::make_ready_on(on_device.view(), consumer.arg(), sim().registry);
  ASSERT_EQ(cudaMemcpyAsync(seen.data, on_device.view().data(), n, cudaMemcpyDefault,
                            consumer.handle),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(consumer.handle), cudaSuccess);
  EXPECT_TRUE(all_equal(seen.data, 3));
}

// __cuda_array_interface__'s rule as the Python layer applies it: the
// legacy stream is made to wait for the producer's stream.
TEST_F(CudaSimHandOff, WaitForOrdersTheLegacyStreamAfterAProducerStream) {
  SimMemory data(dlabi::kDLCUDA, 0, n), seen(dlabi::kDLCUDAHost, 0, n);
  SimStream producer;
  pending_write(data.data, producer.handle);
  sim().cuda->wait_for(cuda0, dlb::backend::resolve_stream(cuda0, producer.arg()),
                       dlb::backend::resolve_stream(cuda0, {}));
  ASSERT_EQ(cudaMemcpyAsync(seen.data, data.data, n, cudaMemcpyDefault, cudaStreamLegacy),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(cudaStreamLegacy), cudaSuccess);
  EXPECT_TRUE(all_equal(seen.data, 7));
}

// Copies whose target is the host block until the producer's write landed.
TEST_F(CudaSimHandOff, CopyToTheHostWaitsForTheProducer) {
  SimMemory data(dlabi::kDLCUDA, 0, n);
  SimStream producer;
  pending_write(data.data, producer.handle);
  dlb::ManagedTensor copy =
      dlb::copy_to_device(bytes_at(data.data, cuda0), {}, options({}, producer.arg()),
                          sim().registry);
  EXPECT_TRUE(all_equal(copy.view().data(), 7));
}

// Managed memory is host-readable, but device work may still be writing
// it: a host copy waits for the producer's stream first.
TEST_F(CudaSimHandOff, ManagedSourceWaitsForItsProducer) {
  SimMemory data(dlabi::kDLCUDAManaged, 0, n);
  SimStream producer;
  pending_write(data.data, producer.handle);
  dlb::ManagedTensor copy =
      dlb::copy_to_device(bytes_at(data.data, managed), {}, options({}, producer.arg()),
                          sim().registry);
  EXPECT_TRUE(all_equal(copy.view().data(), 7));
}

// Across devices no event can order the two streams: the host waits for
// the producer on device 1 before queueing the copy on device 0.
TEST_F(CudaSimHandOff, AcrossDevicesTheHostWaitsForTheProducer) {
  SimMemory data(dlabi::kDLCUDA, 1, n);
  SimStream producer(1), consumer(0);
  pending_write(data.data, producer.handle);
  dlb::ManagedTensor copy = dlb::copy_to_device(
      bytes_at(data.data, cuda1), cuda0, options(consumer.arg(), producer.arg()), sim().registry);
  ASSERT_EQ(cudaStreamSynchronize(consumer.handle), cudaSuccess);
  EXPECT_TRUE(all_equal(copy.view().data(), 7));
}

// Pinned memory is read by the runtime when the copy runs, not at the
// call: dlbridge must not return (and let the caller reuse the buffer)
// before the upload has read it.
TEST_F(CudaSimHandOff, PinnedSourceIsReadBeforeTheCopyReturns) {
  SimMemory source(dlabi::kDLCUDAHost, 0, n);
  std::memset(source.data, 5, n);
  ASSERT_EQ(cudasim_sleep_async(slow_us, cudaStreamLegacy), cudaSuccess);
  dlb::ManagedTensor copy =
      dlb::copy_to_device(bytes_at(source.data, pinned), cuda0, options(), sim().registry);
  std::memset(source.data, 6, n);  // the caller reuses its buffer
  settle();
  EXPECT_TRUE(all_equal(copy.view().data(), 5));
}

// The same memory labelled kDLCPU (a relabelled pinned tensor, or a
// producer that exports its pinned buffers as CPU memory): the runtime
// still reads it late, so the label cannot decide whether to wait.
TEST_F(CudaSimHandOff, PinnedMemoryLabelledCpuIsReadBeforeTheCopyReturns) {
  SimMemory source(dlabi::kDLCUDAHost, 0, n);
  std::memset(source.data, 5, n);
  ASSERT_EQ(cudasim_sleep_async(slow_us, cudaStreamLegacy), cudaSuccess);
  dlb::ManagedTensor copy =
      dlb::copy_to_device(bytes_at(source.data, {}), cuda0, options(), sim().registry);
  std::memset(source.data, 6, n);
  settle();
  EXPECT_TRUE(all_equal(copy.view().data(), 5));
}

}  // namespace
