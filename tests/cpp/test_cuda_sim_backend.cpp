// dlbridge's CudaBackend and RuntimeLoader on the simulated runtime: what
// each entry point does when the runtime works, and the coded error it
// turns each runtime failure into (an injected fault, a runtime newer than
// the driver, a device id that does not exist, memory that runs out).
#include <gtest/gtest.h>

#include "support/cuda_sim.hpp"
#include "support/error_of.hpp"

#include <dlbridge/copy/transfer.hpp>

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace {

namespace dlb = dlbridge;
namespace dlabi = dlbridge::abi;
namespace backend = dlbridge::backend;
namespace cuda = dlbridge::backend::cuda;
using dlb::Device;
using dlb::ErrorCode;
using test_support::error_of;
using test_support::sim;
using test_support::SimStream;

constexpr Device cuda0{dlabi::kDLCUDA, 0}, cuda1{dlabi::kDLCUDA, 1};
constexpr Device pinned{dlabi::kDLCUDAHost, 0}, managed{dlabi::kDLCUDAManaged, 0};
constexpr backend::Stream legacy{backend::StreamKind::default_stream, backend::cuda_legacy_stream};

backend::CudaBackend& cuda_backend() { return *sim().cuda; }

int current_device() {
  int d = -1;
  EXPECT_EQ(cudaGetDevice(&d), cudaSuccess);
  return d;
}

TEST(CudaSimBackend, AvailabilityNamesTheDevicesThatExist) {
  EXPECT_TRUE(cuda_backend().availability(cuda0).available);
  EXPECT_TRUE(cuda_backend().availability(cuda1).available);
  const backend::Availability missing = cuda_backend().availability({dlabi::kDLCUDA, 2});
  EXPECT_FALSE(missing.available);
  EXPECT_EQ(missing.reason, "this machine has 2 CUDA devices (ids 0..1).");
  EXPECT_TRUE(cuda_backend().availability(pinned).available);
  EXPECT_FALSE(cuda_backend().availability({dlabi::kDLCUDAHost, 1}).available);
  EXPECT_EQ(cuda_backend().device_count(dlabi::kDLCUDA), 2);
  EXPECT_EQ(cuda_backend().device_count(dlabi::kDLCUDAManaged), 1);
}

TEST(CudaSimBackend, AllocatesEachKindWhereThePointerAttributesSayItIs) {
  struct Case {
    Device device;
    Device reported;
    bool host_accessible;
  };
  for (const Case& c : {Case{cuda0, cuda0, false}, Case{cuda1, cuda1, false},
                        Case{pinned, pinned, true}, Case{managed, managed, true}}) {
    void* p = cuda_backend().allocate(c.device, 100);
    ASSERT_NE(p, nullptr);
    const auto info = cuda_backend().pointer_info(p);
    ASSERT_TRUE(info.has_value());
    EXPECT_EQ(info->device, c.reported) << dlb::to_string(c.device);
    EXPECT_EQ(info->host_accessible, c.host_accessible);
    cuda_backend().free(c.device, p);
    EXPECT_FALSE(cuda_backend().pointer_info(p).has_value()) << "freed memory is unknown";
  }
  int local = 0;
  const auto info = cuda_backend().pointer_info(&local);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->device, Device{});
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "the backend left an error behind";
}

TEST(CudaSimBackend, EmptyAllocationsGetTheirOwnAddress) {
  void* a = cuda_backend().allocate(cuda0, 0);
  void* b = cuda_backend().allocate(cuda0, 0);
  EXPECT_NE(a, nullptr);
  EXPECT_NE(a, b);
  cuda_backend().free(cuda0, a);
  cuda_backend().free(cuda0, b);
  cuda_backend().free(cuda0, nullptr);  // nothing to do
}

// Device ids are explicit: work on device 1 from a thread whose current
// device is 0 lands on device 1 and leaves 0 current.
TEST(CudaSimBackend, OtherDevicesAreUsedWithoutChangingTheCurrentOne) {
  ASSERT_EQ(current_device(), 0);
  void* p = cuda_backend().allocate(cuda1, 64);
  EXPECT_EQ(cuda_backend().pointer_info(p)->device, cuda1);
  EXPECT_EQ(current_device(), 0);
  std::vector<char> host(64, 1);
  cuda_backend().copy(p, cuda1, host.data(), Device{}, {64, 1, 64, 64}, legacy);
  cuda_backend().synchronize(cuda1, legacy);
  EXPECT_EQ(test_support::peek<char>(p, 64), host);
  EXPECT_EQ(current_device(), 0);
  cuda_backend().free(cuda1, p);
  EXPECT_EQ(current_device(), 0);
}

TEST(CudaSimBackend, OutOfMemoryIsACodedError) {
  auto e = error_of([] { cuda_backend().allocate(cuda0, int64_t(1) << 40); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), ErrorCode::out_of_memory);
  EXPECT_NE(std::string(e->what()).find("out of memory (2)"), std::string::npos) << e->what();
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "the failure was left sticky";
  for (const char* function : {"cudaMallocHost", "cudaMallocManaged"}) {
    cudasim_fail_next(function, cudaErrorMemoryAllocation, 1);
    auto f = error_of([&] {
      cuda_backend().allocate(function[10] == 'H' ? pinned : managed, 16);
    });
    ASSERT_TRUE(f) << function;
    EXPECT_EQ(f->code(), ErrorCode::out_of_memory);
  }
}

// Every runtime failure inside a call becomes device_unavailable with the
// runtime's own words, and is cleared so that it does not resurface.
TEST(CudaSimBackend, RuntimeFailuresBecomeCodedErrorsWithTheRuntimesText) {
  std::vector<char> host(64);
  void* dev = cuda_backend().allocate(cuda0, 64);
  struct Case {
    const char* function;
    std::function<void()> call;
    const char* says;
  };
  const Case cases[] = {
      {"cudaMemcpyAsync",
       [&] { cuda_backend().copy(dev, cuda0, host.data(), Device{}, {64, 1, 64, 64}, legacy); },
       "copying from cpu to cuda:0"},
      {"cudaMemcpy2DAsync",
       [&] { cuda_backend().copy(dev, cuda0, host.data(), Device{}, {16, 2, 32, 16}, legacy); },
       "copying from cpu to cuda:0"},
      {"cudaStreamSynchronize", [&] { cuda_backend().synchronize(cuda0, legacy); },
       "synchronizing a stream"},
      {"cudaGetDevice", [&] { cuda_backend().synchronize(cuda1, legacy); },
       "querying the current device"},
      {"cudaSetDevice", [&] { cuda_backend().synchronize(cuda1, legacy); },
       "selecting device 1"},
      {"cudaEventCreateWithFlags",
       [&] { cuda_backend().wait_for(cuda0, legacy, {backend::StreamKind::per_thread, 2}); },
       "creating an event"},
      {"cudaEventRecord",
       [&] { cuda_backend().wait_for(cuda0, legacy, {backend::StreamKind::per_thread, 2}); },
       "ordering the consumer's stream"},
      {"cudaStreamWaitEvent",
       [&] { cuda_backend().wait_for(cuda0, legacy, {backend::StreamKind::per_thread, 2}); },
       "ordering the consumer's stream"},
  };
  for (const Case& c : cases) {
    cudasim_fail_next(c.function, cudaErrorInvalidResourceHandle, 1);
    auto e = error_of(c.call);
    ASSERT_TRUE(e) << c.function;
    EXPECT_EQ(e->code(), ErrorCode::device_unavailable) << c.function;
    const std::string what = e->what();
    EXPECT_NE(what.find(c.says), std::string::npos) << what;
    EXPECT_NE(what.find("invalid resource handle (400)"), std::string::npos) << what;
    EXPECT_EQ(cudaGetLastError(), cudaSuccess) << c.function;
    EXPECT_EQ(current_device(), 0) << c.function;
  }
  // A pointer query that fails is "not known", not an error.
  cudasim_fail_next("cudaPointerGetAttributes", cudaErrorInvalidValue, 1);
  EXPECT_FALSE(cuda_backend().pointer_info(dev).has_value());
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  cuda_backend().free(cuda0, dev);
}

// Pairs that need no ordering queue nothing: -1 on either side, a host
// side, or one stream on both sides.
TEST(CudaSimBackend, WaitForQueuesNothingWhenNothingNeedsOrdering) {
  const backend::Stream no_sync{backend::StreamKind::no_sync, 0};
  const backend::Stream host{backend::StreamKind::host, 0};
  cudasim_reset_counts();
  cuda_backend().wait_for(cuda0, legacy, no_sync);
  cuda_backend().wait_for(cuda0, no_sync, legacy);
  cuda_backend().wait_for(cuda0, host, legacy);
  cuda_backend().wait_for(cuda0, legacy, host);
  cuda_backend().wait_for(cuda0, legacy, legacy);
  EXPECT_EQ(cudasim_count("stream_wait"), 0);
  SimStream s;
  cuda_backend().wait_for(cuda0, legacy, backend::resolve_stream(cuda0, s.arg()));
  EXPECT_EQ(cudasim_count("event_record"), 1);
  EXPECT_EQ(cudasim_count("stream_wait"), 1);
}

// A copy between two host-accessible kinds still goes through the runtime
// when asked to (no device end: the current device's stream orders it).
TEST(CudaSimBackend, CopiesBetweenPinnedAndManagedMemory) {
  EXPECT_EQ(cuda_backend().name(), "cuda");
  void* from = cuda_backend().allocate(pinned, 32);
  void* to = cuda_backend().allocate(managed, 32);
  std::memset(from, 4, 32);
  cuda_backend().copy(to, managed, from, pinned, {32, 1, 32, 32}, legacy);
  cuda_backend().synchronize(managed, legacy);
  EXPECT_EQ(test_support::peek<char>(to, 32), std::vector<char>(32, 4));
  cuda_backend().free(pinned, from);
  cuda_backend().free(managed, to);
}

// Stream arguments are checked before anything is allocated or queued,
// with the CUDA values for the CUDA family and the host rule for targets
// the host reads.
TEST(CudaSimBackend, StreamArgumentsAreCheckedBeforeAnyWork) {
  std::vector<float> host(8, 1.0f);
  const auto view = dlb::TensorView::from_data(host.data(), {dlabi::kDLFloat, 32, 1}, {8});
  auto code_of = [&](Device target, dlb::StreamArg stream) {
    dlb::TransferOptions o;
    o.stream = stream;
    auto e = error_of([&] { dlb::copy_to_device(view, target, o, sim().registry); });
    return e ? e->code() : ErrorCode::invalid_argument;
  };
  cudasim_reset_counts();
  EXPECT_EQ(code_of(cuda0, {true, 0}), ErrorCode::invalid_stream);
  EXPECT_EQ(code_of(cuda0, {true, -2}), ErrorCode::invalid_stream);
  EXPECT_EQ(code_of(pinned, {true, 5}), ErrorCode::invalid_stream);
  EXPECT_EQ(cudasim_count("malloc"), 0);
  // -1: the consumer synchronises itself; the copy is still queued.
  dlb::TransferOptions o;
  o.stream = {true, -1};
  dlb::ManagedTensor t = dlb::copy_to_device(view, cuda0, o, sim().registry);
  EXPECT_EQ(cudasim_count("host_to_device"), 1);
  test_support::settle();
  // The CUDA defaults mean nothing on ROCm, and other families take any
  // integer as a handle.
  const Device rocm{dlabi::kDLROCM, 0}, ext{dlabi::kDLExtDev, 0};
  for (int64_t s : {1, 2, -7})
    EXPECT_EQ(error_of([&] { backend::resolve_stream(rocm, {true, s}); })->code(),
              ErrorCode::invalid_stream);
  EXPECT_EQ(backend::resolve_stream(rocm, {true, 0}).kind, backend::StreamKind::default_stream);
  EXPECT_EQ(backend::resolve_stream(rocm, {true, -1}).kind, backend::StreamKind::no_sync);
  EXPECT_EQ(backend::resolve_stream(rocm, {true, 64}).kind, backend::StreamKind::handle);
  EXPECT_EQ(backend::resolve_stream(ext, {}).kind, backend::StreamKind::default_stream);
  EXPECT_EQ(backend::resolve_stream(ext, {true, -1}).kind, backend::StreamKind::no_sync);
  EXPECT_EQ(backend::resolve_stream(ext, {true, 0}).kind, backend::StreamKind::handle);
}

// The process-wide registry loads the runtime that DLBRIDGE_CUDART_PATH
// names, as the Python package does.
TEST(CudaSimBackend, DefaultRegistryLoadsTheRuntimeTheEnvironmentNames) {
  setenv("DLBRIDGE_CUDART_PATH", test_support::cudasim_path(), 1);
  const backend::Availability a =
      backend::default_registry().find(dlabi::kDLCUDA)->availability(cuda1);
  unsetenv("DLBRIDGE_CUDART_PATH");
  ASSERT_TRUE(a.available) << a.reason;
  std::vector<int32_t> host(16, 9);
  const auto view = dlb::TensorView::from_data(host.data(), {dlabi::kDLInt, 32, 1}, {16});
  dlb::ManagedTensor t = dlb::copy_to_device(view, cuda1);
  SimStream consumer(1);
  cudaSetDevice(1);
  dlb::make_ready_on(t.view(), consumer.arg());
  cudaSetDevice(0);
  test_support::settle();
  EXPECT_EQ(test_support::peek<int32_t>(t.view().data(), 16), host);
}

// ---- the loader ----------------------------------------------------------

// A copy of the simulator under `name` in a fresh directory: a second,
// independent runtime (dlopen tells files apart by inode).
struct RuntimeCopy {
  std::string dir;
  explicit RuntimeCopy(const std::vector<std::string>& names) {
    char pattern[] = "/tmp/dlbridge-cudasim-XXXXXX";
    dir = mkdtemp(pattern);
    for (const std::string& name : names) {
      std::ifstream in(test_support::cudasim_path(), std::ios::binary);
      std::ofstream out(dir + "/" + name, std::ios::binary);
      out << in.rdbuf();
    }
  }
  std::string path(const std::string& name) const { return dir + "/" + name; }
  ~RuntimeCopy() {
    // The files may stay mapped; unlinking them is still fine.
    std::string command = "rm -rf '" + dir + "'";
    if (std::system(command.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", dir.c_str());
  }
};

// Makes the runtime at `path` answer as one newer than the driver does.
void make_too_new(const std::string& path) {
  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(library, nullptr) << dlerror();
  auto set = reinterpret_cast<void (*)(int)>(dlsym(library, "cudasim_set_insufficient_driver"));
  ASSERT_NE(set, nullptr);
  set(1);
}

TEST(CudaSimLoader, ARuntimeNewerThanTheDriverIsPassedOverForAnOlderOne) {
  RuntimeCopy copies({"libcudart.so.13", "libcudart.so.12"});
  make_too_new(copies.path("libcudart.so.13"));
  setenv("DLBRIDGE_CUDART_PATH", ("/nonexistent-dir:" + copies.dir).c_str(), 1);
  cuda::RuntimeLoader loader({}, true);
  const cuda::Runtime* rt = loader.get();
  unsetenv("DLBRIDGE_CUDART_PATH");
  ASSERT_NE(rt, nullptr);
  EXPECT_EQ(rt->path, copies.path("libcudart.so.12"));
  backend::CudaBackend b(loader);
  EXPECT_TRUE(b.availability(cuda0).available);
}

TEST(CudaSimLoader, OnlyARuntimeNewerThanTheDriverMakesCudaUnavailableWithItsWords) {
  RuntimeCopy copies({"libcudart.so.13"});
  make_too_new(copies.path("libcudart.so.13"));
  cuda::RuntimeLoader loader({copies.path("libcudart.so.13")}, false);
  backend::CudaBackend b(loader);
  const backend::Availability a = b.availability(cuda0);
  EXPECT_FALSE(a.available);
  EXPECT_NE(a.reason.find("CUDA driver version is insufficient for CUDA runtime version (35)"),
            std::string::npos)
      << a.reason;
  EXPECT_EQ(b.device_count(dlabi::kDLCUDA), 0);
  auto e = error_of([&] { b.allocate(cuda0, 16); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), ErrorCode::device_unavailable);
  EXPECT_NE(std::string(e->what()).find("insufficient"), std::string::npos);
}

TEST(CudaSimLoader, HintedDirectoriesAreSearchedAndAThrowingHintIsIgnored) {
  RuntimeCopy copies({"libcudart.so.12"});
  cuda::RuntimeLoader throwing({"/nonexistent/libcudart.so"}, false);
  throwing.set_hint_provider([]() -> std::vector<std::string> { throw std::runtime_error("x"); });
  std::string why;
  EXPECT_EQ(throwing.get(&why), nullptr);
  EXPECT_NE(why.find("/nonexistent/libcudart.so"), std::string::npos) << why;

  cuda::RuntimeLoader hinted({"/nonexistent/libcudart.so"}, false);
  hinted.set_hint_provider([&] { return std::vector<std::string>{copies.dir}; });
  const cuda::Runtime* rt = hinted.get();
  ASSERT_NE(rt, nullptr);
  EXPECT_EQ(rt->path, copies.path("libcudart.so.12"));
}

TEST(CudaSimLoader, AFailedSearchIsRetriedWhenADirectoryArrives) {
  RuntimeCopy copies({"libcudart.so"});
  cuda::RuntimeLoader loader({"libc.so.6"}, false);
  std::string why;
  EXPECT_EQ(loader.get(&why), nullptr);
  EXPECT_NE(why.find("libc.so.6 (opened, but has no cudaGetDeviceCount)"), std::string::npos)
      << why;
  loader.add_search_dir(copies.dir);
  loader.add_search_dir(copies.dir);  // once is enough
  ASSERT_NE(loader.get(), nullptr);
  EXPECT_EQ(loader.get()->path, copies.path("libcudart.so"));
}

TEST(CudaSimLoader, ABackendWithoutARuntimeSaysSoEverywhere) {
  cuda::RuntimeLoader loader({"/nonexistent/libcudart.so"}, false);
  backend::CudaBackend b(loader);
  EXPECT_FALSE(b.availability(cuda0).available);
  EXPECT_EQ(b.device_count(dlabi::kDLCUDA), 0);
  EXPECT_FALSE(b.pointer_info(&loader).has_value());
  b.free(cuda0, &loader);  // no runtime: nothing to free, and no crash
  auto e = error_of([&] { b.synchronize(cuda0, legacy); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), ErrorCode::device_unavailable);
  EXPECT_NE(std::string(e->what()).find("CUDA is not available"), std::string::npos);
}

}  // namespace
