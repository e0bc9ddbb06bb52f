// Control of the simulated CUDA runtime, for tests only: nothing here is
// CUDA API. Settings that must hold before the first CUDA call come from
// the environment:
//   CUDASIM_DEVICES      number of devices (default 2; 0 makes
//                        cudaGetDeviceCount answer cudaErrorNoDevice)
//   CUDASIM_DEVICE_MIB   size of each device's memory (default 256)
//   CUDASIM_DELAY_US     how long each queued copy or memset waits before it
//   CUDASIM_JITTER_US    runs: DELAY plus a random part below JITTER
//                        (defaults 300 and 300)
//   CUDASIM_IGNORE_STREAM_WAITS=1  as cudasim_set_ignore_stream_waits(1)
#pragma once

#include "cuda_api.h"

extern "C" {
// Changes the queue delay of work enqueued from now on.
void cudasim_set_delay(unsigned delay_us, unsigned jitter_us);
// A slow kernel: `stream` is busy for `us` microseconds before later work
// on it runs (what torch.cuda._sleep is on a real GPU).
cudaError_t cudasim_sleep_async(unsigned us, cudaStream_t stream);
// The next `times` calls of the entry point named `function` (e.g.
// "cudaMalloc") fail with `error` and do nothing else.
void cudasim_fail_next(const char* function, int error, int times);
// From now on every entry point answers cudaErrorInsufficientDriver, as a
// runtime newer than the installed driver does.
void cudasim_set_insufficient_driver(int on);
// cudaStreamWaitEvent then succeeds and orders nothing: the runtime a
// caller that forgot its stream wait would effectively have. For showing
// that a test fails without the wait.
void cudasim_set_ignore_stream_waits(int on);
// Counters since the last reset: "host_to_device", "device_to_host",
// "device_to_device", "host_to_host" (copies by where the bytes are; pinned
// and managed memory count as host), "pageable_source" (copies whose source
// was read at the call), "malloc", "stream_wait", "event_record",
// "stream_synchronize". Unknown names count 0.
long long cudasim_count(const char* what);
void cudasim_reset_counts(void);
// The byte the simulator fills new device, pinned and managed memory with,
// so that a read of memory nobody wrote is recognisable.
int cudasim_fresh_byte(void);
}
