// CUDA IPC on the simulated runtime, across real processes: the runtime's
// rules for memory and event handles, as the CUDA documentation states
// them, and dlbridge's wrapper (backend/cuda_ipc.hpp) on top. A test that
// needs a second process forks and execs this very binary to run one
// DISABLED_ "child" test, handing it the handles in its environment.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <dlbridge/backend/cuda_ipc.hpp>

#include "support/cuda_sim.hpp"

extern char** environ;

namespace {

namespace ipc = dlbridge::backend::cuda_ipc;
namespace cu = dlbridge::backend::cuda;
using test_support::peek;
using test_support::settle;
using test_support::sim_loader;

constexpr size_t n = 4096;
// Far longer than starting a child process on a loaded machine.
constexpr unsigned slow_us = 3000000;

template <typename Handle>
std::string hex(const Handle& h) {
  std::string out;
  char byte[3];
  for (char c : h.reserved) {
    std::snprintf(byte, sizeof byte, "%02x", static_cast<unsigned char>(c));
    out += byte;
  }
  return out;
}

template <typename Handle>
Handle unhex(const char* text) {
  Handle h{};
  for (size_t i = 0; text && i < sizeof h.reserved && text[2 * i] && text[2 * i + 1]; ++i) {
    unsigned value = 0;
    std::sscanf(text + 2 * i, "%2x", &value);
    h.reserved[i] = static_cast<char>(value);
  }
  return h;
}

// Runs this binary's DISABLED_ test `name` in a new process with `env`
// added; its exit status (0: the child test passed).
int run_child(const std::string& name, const std::vector<std::string>& env) {
  // Everything exec needs is built before fork: the simulator runs threads,
  // and a forked child may only call async-signal-safe functions.
  std::vector<std::string> strings(env);
  for (char** e = environ; *e; ++e) strings.emplace_back(*e);
  std::vector<char*> envp;
  for (auto& s : strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  const std::string filter = "--gtest_filter=CudaSimIpcChild.DISABLED_" + name;
  const pid_t pid = fork();
  if (pid == 0) {
    execle("/proc/self/exe", "child", filter.c_str(), "--gtest_also_run_disabled_tests",
           static_cast<char*>(nullptr), envp.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

struct Device1Memory {
  void* data = nullptr;
  Device1Memory() {
    EXPECT_EQ(cudaSetDevice(1), cudaSuccess);
    EXPECT_EQ(cudaMalloc(&data, n), cudaSuccess);
    EXPECT_EQ(cudaSetDevice(0), cudaSuccess);
  }
  ~Device1Memory() {
    if (data) cudaFree(data);
  }
};

bool all_bytes(const void* p, size_t bytes, unsigned char value) {
  for (unsigned char b : peek<unsigned char>(p, bytes))
    if (b != value) return false;
  return true;
}

TEST(CudaSimIpc, MemoryHandlesAre64BytesAndNameTheBaseOfACudaMallocAllocation) {
  static_assert(sizeof(cudaIpcMemHandle_t) == 64 && sizeof(cudaIpcEventHandle_t) == 64);
  static_assert(sizeof(cu::ipc_mem_handle) == sizeof(cudaIpcMemHandle_t));
  static_assert(sizeof(cu::ipc_event_handle) == sizeof(cudaIpcEventHandle_t));
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, n), cudaSuccess);
  cudaIpcMemHandle_t a{}, b{};
  ASSERT_EQ(cudaIpcGetMemHandle(&a, p), cudaSuccess);
  ASSERT_EQ(cudaIpcGetMemHandle(&b, p), cudaSuccess);
  EXPECT_EQ(hex(a), hex(b)) << "exporting twice is harmless and gives the same handle";
  EXPECT_EQ(cudaIpcGetMemHandle(&b, static_cast<char*>(p) + 256), cudaErrorInvalidValue)
      << "only the base of an allocation has a handle";
  EXPECT_EQ(cudaIpcGetMemHandle(nullptr, p), cudaErrorInvalidValue);
  void* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(&pinned, n), cudaSuccess);
  EXPECT_EQ(cudaIpcGetMemHandle(&b, pinned), cudaErrorInvalidValue);
  ASSERT_EQ(cudaFreeHost(pinned), cudaSuccess);
  // A new allocation at a freed address has a handle of its own.
  ASSERT_EQ(cudaFree(p), cudaSuccess);
  void* q = nullptr;
  ASSERT_EQ(cudaMalloc(&q, n), cudaSuccess);
  ASSERT_EQ(q, p);
  ASSERT_EQ(cudaIpcGetMemHandle(&b, q), cudaSuccess);
  EXPECT_NE(hex(a), hex(b));
  ASSERT_EQ(cudaFree(q), cudaSuccess);
  cudaGetLastError();
}

TEST(CudaSimIpc, AHandleDoesNotOpenInTheProcessThatExportedIt) {
  Device1Memory memory;
  cudaIpcMemHandle_t h{};
  ASSERT_EQ(cudaIpcGetMemHandle(&h, memory.data), cudaSuccess);
  void* p = nullptr;
  EXPECT_EQ(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess),
            cudaErrorDeviceUninitialized);
  EXPECT_EQ(cudaGetLastError(), cudaErrorDeviceUninitialized);
  EXPECT_STREQ(cudaGetErrorString(cudaErrorDeviceUninitialized), "invalid device context");
  EXPECT_EQ(cudaIpcOpenMemHandle(&p, h, 0), cudaErrorInvalidValue) << "the flag is required";
  EXPECT_EQ(cudaIpcOpenMemHandle(nullptr, h, cudaIpcMemLazyEnablePeerAccess), cudaErrorInvalidValue);
  EXPECT_EQ(cudaIpcOpenMemHandle(&p, cudaIpcMemHandle_t{}, cudaIpcMemLazyEnablePeerAccess),
            cudaErrorInvalidResourceHandle)
      << "64 zero bytes are no handle";
  EXPECT_EQ(cudaIpcCloseMemHandle(memory.data), cudaErrorInvalidValue)
      << "only what cudaIpcOpenMemHandle returned can be closed";
  try {
    ipc::open_memory(1, *reinterpret_cast<cu::ipc_mem_handle*>(&h), sim_loader());
    ADD_FAILURE() << "opened in the exporting process";
  } catch (const dlbridge::Error& e) {
    EXPECT_EQ(e.code(), dlbridge::ErrorCode::device_unavailable);
    EXPECT_NE(std::string(e.what()).find("invalid device context (201)"), std::string::npos)
        << e.what();
  }
  cudaGetLastError();
}

TEST(CudaSimIpc, EventHandlesNeedAnInterprocessEventWithoutTiming) {
  cudaEvent_t plain = nullptr, shared = nullptr;
  ASSERT_EQ(cudaEventCreateWithFlags(&plain, cudaEventDisableTiming), cudaSuccess);
  cudaIpcEventHandle_t h{};
  EXPECT_EQ(cudaIpcGetEventHandle(&h, plain), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaEventCreateWithFlags(&shared, cudaEventInterprocess), cudaErrorInvalidValue)
      << "an interprocess event must disable timing";
  ASSERT_EQ(cudaEventCreateWithFlags(&shared, cudaEventInterprocess | cudaEventDisableTiming),
            cudaSuccess);
  ASSERT_EQ(cudaIpcGetEventHandle(&h, shared), cudaSuccess);
  cudaEvent_t opened = nullptr;
  EXPECT_EQ(cudaIpcOpenEventHandle(&opened, h), cudaErrorDeviceUninitialized);
  EXPECT_EQ(cudaIpcOpenEventHandle(&opened, cudaIpcEventHandle_t{}), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaEventDestroy(plain), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(shared), cudaSuccess);
  cudaGetLastError();
}

// The child sees the parent's pending write only after waiting for the
// parent's event, writes back, and opens the handle twice (one pointer,
// counted), through dlbridge's wrapper.
TEST(CudaSimIpc, AnotherProcessMapsTheSamePagesAfterTheExportersEvent) {
  Device1Memory memory;
  // A slow write queued on device 1's legacy default stream, where
  // dlbridge's device data is ready, and the event recorded after it.
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  ASSERT_EQ(cudasim_sleep_async(slow_us, cudaStreamLegacy), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(memory.data, 7, n, cudaStreamLegacy), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  cu::cuda_event done = ipc::create_event(1, sim_loader());
  const cu::ipc_event_handle event = ipc::record_event(1, done, sim_loader());
  const cu::ipc_mem_handle handle = ipc::export_memory(1, memory.data, sim_loader());
  EXPECT_EQ(run_child("OpensWaitsAndWrites",
                      {"CUDASIM_TEST_MEMORY=" + hex(handle), "CUDASIM_TEST_EVENT=" + hex(event)}),
            0);
  EXPECT_TRUE(all_bytes(memory.data, 16, 9)) << "the child's write is not in the parent's memory";
  EXPECT_TRUE(all_bytes(static_cast<char*>(memory.data) + 16, n - 16, 7));
  ipc::destroy_event(done, sim_loader());
}

TEST(CudaSimIpcChild, DISABLED_OpensWaitsAndWrites) {
  const auto handle = unhex<cu::ipc_mem_handle>(std::getenv("CUDASIM_TEST_MEMORY"));
  const auto event = unhex<cu::ipc_event_handle>(std::getenv("CUDASIM_TEST_EVENT"));
  void* p = ipc::open_memory(1, handle, sim_loader());
  cudaPointerAttributes attributes{};
  ASSERT_EQ(cudaPointerGetAttributes(&attributes, p), cudaSuccess);
  EXPECT_EQ(attributes.type, cudaMemoryTypeDevice);
  EXPECT_EQ(attributes.device, 1) << "opened on the device that was current";
  EXPECT_TRUE(all_bytes(p, n, static_cast<unsigned char>(cudasim_fresh_byte())))
      << "the parent's slow write is not pending any more";
  ipc::wait_for_event(1, event, sim_loader());
  std::vector<unsigned char> host(n, 0);
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(host.data(), p, n, cudaMemcpyDefault, cudaStreamLegacy), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(cudaStreamLegacy), cudaSuccess);
  EXPECT_EQ(host, std::vector<unsigned char>(n, 7)) << "the legacy stream did not wait for the event";
  ASSERT_EQ(cudaMemsetAsync(p, 9, 16, cudaStreamLegacy), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(cudaStreamLegacy), cudaSuccess);
  EXPECT_EQ(ipc::open_memory(1, handle, sim_loader()), p) << "a second open returns the same pointer";
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ipc::close_memory(1, p, sim_loader());
  ipc::close_memory(1, p, sim_loader());
  EXPECT_EQ(cudasim_count("ipc_close"), 2);
  EXPECT_EQ(cudaIpcCloseMemHandle(p), cudaErrorInvalidValue) << "closed as often as opened";
  EXPECT_EQ(cudasim_count("ipc_open"), 2);
  int current = -1;
  ASSERT_EQ(cudaGetDevice(&current), cudaSuccess);
  EXPECT_EQ(current, 0) << "close_memory left the caller's device as it was";
}

TEST(CudaSimIpc, AHandleStopsOpeningOnceTheExporterFreesTheMemory) {
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, n), cudaSuccess);
  cudaIpcMemHandle_t h{};
  ASSERT_EQ(cudaIpcGetMemHandle(&h, p), cudaSuccess);
  ASSERT_EQ(cudaFree(p), cudaSuccess);
  EXPECT_EQ(run_child("CannotOpen", {"CUDASIM_TEST_MEMORY=" + hex(h)}), 0);
}

TEST(CudaSimIpc, AHandleFromAnExitedProcessDoesNotOpen) {
  const std::string file = ::testing::TempDir() + "cudasim_ipc_handle_" + std::to_string(getpid());
  ASSERT_EQ(run_child("ExportsAndExits", {"CUDASIM_TEST_FILE=" + file}), 0);
  std::ifstream in(file);
  std::string text;
  in >> text;
  std::remove(file.c_str());
  ASSERT_EQ(text.size(), 128u);
  void* p = nullptr;
  EXPECT_EQ(cudaIpcOpenMemHandle(&p, unhex<cudaIpcMemHandle_t>(text.c_str()),
                                 cudaIpcMemLazyEnablePeerAccess),
            cudaErrorMapBufferObjectFailed);
  cudaGetLastError();
}

TEST(CudaSimIpcChild, DISABLED_CannotOpen) {
  const auto handle = unhex<cu::ipc_mem_handle>(std::getenv("CUDASIM_TEST_MEMORY"));
  try {
    ipc::open_memory(0, handle, sim_loader());
    ADD_FAILURE() << "a freed allocation opened";
  } catch (const dlbridge::Error& e) {
    EXPECT_EQ(e.code(), dlbridge::ErrorCode::device_unavailable);
    EXPECT_NE(std::string(e.what()).find("mapping of buffer object failed (205)"), std::string::npos)
        << e.what();
    EXPECT_NE(e.hint().find("must still be running"), std::string::npos) << e.hint();
  }
}

TEST(CudaSimIpcChild, DISABLED_ExportsAndExits) {
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, n), cudaSuccess);
  cudaIpcMemHandle_t h{};
  ASSERT_EQ(cudaIpcGetMemHandle(&h, p), cudaSuccess);
  std::ofstream(std::getenv("CUDASIM_TEST_FILE")) << hex(h) << "\n";
}

}  // namespace

namespace {

TEST(CudaSimIpcWrapper, WithoutARuntimeEachCallIsACodedErrorAndReleasesAreNoOps) {
  static auto* absent = new cu::RuntimeLoader({"/nonexistent/libcudart.so"}, false);
  const cu::ipc_mem_handle memory{};
  const cu::ipc_event_handle event{};
  auto expect_unavailable = [](auto&& call) {
    try {
      call();
      ADD_FAILURE() << "no error without a runtime";
    } catch (const dlbridge::Error& e) {
      EXPECT_EQ(e.code(), dlbridge::ErrorCode::device_unavailable);
      EXPECT_NE(std::string(e.what()).find("CUDA is not available"), std::string::npos) << e.what();
    }
  };
  expect_unavailable([&] { ipc::export_memory(0, nullptr, *absent); });
  expect_unavailable([&] { ipc::open_memory(0, memory, *absent); });
  expect_unavailable([&] { ipc::create_event(0, *absent); });
  expect_unavailable([&] { ipc::record_event(0, nullptr, *absent); });
  expect_unavailable([&] { ipc::wait_for_event(0, event, *absent); });
  expect_unavailable([&] { ipc::synchronize_default_stream(0, *absent); });
  ipc::close_memory(0, reinterpret_cast<void*>(0x1000), *absent);
  ipc::destroy_event(reinterpret_cast<cu::cuda_event>(0x1000), *absent);
}

TEST(CudaSimIpcWrapper, FailuresCarryTheRuntimesWordsAndLeaveTheCurrentDevice) {
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  try {
    ipc::export_memory(1, reinterpret_cast<void*>(0x1000), sim_loader());
    ADD_FAILURE() << "exported memory that is no allocation";
  } catch (const dlbridge::Error& e) {
    EXPECT_EQ(e.code(), dlbridge::ErrorCode::device_unavailable);
    EXPECT_NE(std::string(e.what()).find("cudaIpcGetMemHandle): invalid argument (1)"),
              std::string::npos)
        << e.what();
  }
  int current = -1;
  ASSERT_EQ(cudaGetDevice(&current), cudaSuccess);
  EXPECT_EQ(current, 0);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "the wrapper clears the error it reported";
  try {
    ipc::create_event(7, sim_loader());
    ADD_FAILURE() << "device 7 exists";
  } catch (const dlbridge::Error& e) {
    EXPECT_NE(std::string(e.what()).find("selecting device 7"), std::string::npos) << e.what();
  }
}

TEST(CudaSimIpcWrapper, SynchronizeDefaultStreamWaitsForQueuedWork) {
  Device1Memory memory;
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  ASSERT_EQ(cudasim_sleep_async(300000, cudaStreamLegacy), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(memory.data, 3, n, cudaStreamLegacy), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ipc::synchronize_default_stream(1, sim_loader());
  EXPECT_TRUE(all_bytes(memory.data, n, 3));
}

}  // namespace
