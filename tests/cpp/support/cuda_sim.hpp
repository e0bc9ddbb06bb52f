// The CUDA simulator (tests/cudasim) for the C++ tests: a registry whose
// CUDA backend is dlbridge's real CudaBackend over a RuntimeLoader that can
// only load the simulator, and helpers that set up and inspect simulated
// memory directly through the runtime, independently of dlbridge.
#pragma once

#include <cudasim.h>

#include <dlbridge/backend/registry.hpp>

#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace test_support {

namespace dlb = dlbridge;

// Set by CMake: the simulator library this test binary is linked with.
inline const char* cudasim_path() { return DLBRIDGE_CUDASIM_PATH; }

inline dlb::backend::cuda::RuntimeLoader& sim_loader() {
  static auto* loader = new dlb::backend::cuda::RuntimeLoader({cudasim_path()}, false);
  return *loader;
}

// CPU and CUDA backends, the CUDA one bound to the simulator.
struct SimRegistry {
  dlb::backend::Registry registry;
  std::shared_ptr<dlb::backend::CudaBackend> cuda;
  SimRegistry() {
    registry.install(std::make_shared<dlb::backend::CpuBackend>());
    cuda = std::make_shared<dlb::backend::CudaBackend>(sim_loader());
    registry.install(cuda);
  }
};

inline SimRegistry& sim() {
  static auto* s = new SimRegistry();  // never destroyed: tensors may outlive tests
  return *s;
}

inline void expect_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// Waits for every queue of every simulated device, as a test's "later".
inline void settle() {
  int previous = 0, count = 0;
  expect_cuda(cudaGetDevice(&previous), "cudaGetDevice");
  expect_cuda(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  for (int d = 0; d < count; ++d) {
    expect_cuda(cudaSetDevice(d), "cudaSetDevice");
    expect_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
  expect_cuda(cudaSetDevice(previous), "cudaSetDevice");
}

// The bytes at p *now*, without waiting for anything: simulated device
// memory is host memory, so the test can see what a kernel would read.
template <typename T>
std::vector<T> peek(const void* p, size_t n) {
  std::vector<T> out(n);
  if (n) std::memcpy(out.data(), p, n * sizeof(T));
  return out;
}

// Simulated memory freed by cudaFree / cudaFreeHost.
struct SimMemory {
  void* data = nullptr;
  bool pinned = false;
  SimMemory(dlb::DeviceType type, int id, size_t bytes) {
    if (type == dlb::abi::kDLCUDAHost) {
      pinned = true;
      expect_cuda(cudaMallocHost(&data, bytes), "cudaMallocHost");
    } else if (type == dlb::abi::kDLCUDAManaged) {
      expect_cuda(cudaMallocManaged(&data, bytes, cudaMemAttachGlobal), "cudaMallocManaged");
    } else {
      int previous = 0;
      expect_cuda(cudaGetDevice(&previous), "cudaGetDevice");
      expect_cuda(cudaSetDevice(id), "cudaSetDevice");
      expect_cuda(cudaMalloc(&data, bytes), "cudaMalloc");
      expect_cuda(cudaSetDevice(previous), "cudaSetDevice");
    }
  }
  ~SimMemory() {
    if (pinned) cudaFreeHost(data);
    else cudaFree(data);
  }
  SimMemory(const SimMemory&) = delete;
  SimMemory& operator=(const SimMemory&) = delete;
};

// A non-blocking stream of `device`, destroyed with the object.
struct SimStream {
  cudaStream_t handle = nullptr;
  explicit SimStream(int device = 0, unsigned flags = cudaStreamNonBlocking) {
    int previous = 0;
    expect_cuda(cudaGetDevice(&previous), "cudaGetDevice");
    expect_cuda(cudaSetDevice(device), "cudaSetDevice");
    expect_cuda(cudaStreamCreateWithFlags(&handle, flags), "cudaStreamCreateWithFlags");
    expect_cuda(cudaSetDevice(previous), "cudaSetDevice");
  }
  ~SimStream() { cudaStreamDestroy(handle); }
  SimStream(const SimStream&) = delete;
  SimStream& operator=(const SimStream&) = delete;
  // As a DLPack stream argument.
  dlb::StreamArg arg() const { return {true, int64_t(reinterpret_cast<uintptr_t>(handle))}; }
};

}  // namespace test_support
