// Device backends: the registry, the CPU backend, the CUDA backend on a
// machine without CUDA (it must say why, not crash), and stream values.
// plan_export's negotiation is in test_plan_export.cpp, copy_to_device in
// test_transfer.cpp.
#include <gtest/gtest.h>

#include "support/error_of.hpp"
#include "support/fake_backend.hpp"

#include <dlbridge/copy/transfer.hpp>
#include <dlbridge/exchange/plan_export.hpp>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

using dlbridge::Device;
using dlbridge::DType;
using dlbridge::Error;
using dlbridge::ErrorCode;
using dlbridge::ExchangeRequest;
using dlbridge::ManagedTensor;
using dlbridge::StreamArg;
using dlbridge::TensorView;
namespace backend = dlbridge::backend;
namespace cuda = dlbridge::backend::cuda;
namespace dlabi = dlbridge::abi;

constexpr DType f32{dlabi::kDLFloat, 32, 1};
constexpr Device cpu{};
constexpr Device ext0{dlabi::kDLExtDev, 0};
constexpr Device ext1{dlabi::kDLExtDev, 1};

using test_support::error_of;
using test_support::FakeBackend;
using test_support::iota;

// ---------------------------------------------------------------- registry

TEST(Registry, DefaultServesCpuAndTheCudaFamilyWithOneBackend) {
  auto& r = backend::default_registry();
  ASSERT_NE(r.find(dlabi::kDLCPU), nullptr);
  EXPECT_EQ(r.find(dlabi::kDLCPU)->name(), "cpu");
  auto cuda_backend = r.find(dlabi::kDLCUDA);
  ASSERT_NE(cuda_backend, nullptr);
  EXPECT_EQ(cuda_backend->name(), "cuda");
  // One backend object: pinned and managed memory share the runtime and
  // its device count with kDLCUDA.
  EXPECT_EQ(r.find(dlabi::kDLCUDAHost), cuda_backend);
  EXPECT_EQ(r.find(dlabi::kDLCUDAManaged), cuda_backend);
  EXPECT_EQ(r.find(dlabi::kDLROCM), nullptr);
  EXPECT_EQ(r.find(dlabi::kDLOneAPI), nullptr);
  EXPECT_EQ(r.find(dlbridge::DeviceType(99)), nullptr);
}

TEST(Registry, SetReturnsThePreviousBackendAndRefusesUnknownTypes) {
  backend::Registry r;
  auto fake = std::make_shared<FakeBackend>();
  EXPECT_EQ(r.set(dlabi::kDLExtDev, fake), nullptr);
  EXPECT_EQ(r.find(dlabi::kDLExtDev), fake);
  EXPECT_EQ(r.set(dlabi::kDLExtDev, nullptr), fake);
  EXPECT_EQ(r.find(dlabi::kDLExtDev), nullptr);
  auto e = error_of([&] { r.set(dlbridge::DeviceType(5), fake); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), ErrorCode::invalid_argument);
}

TEST(Registry, InstallCoversEveryTypeABackendServes) {
  backend::Registry r;
  r.install(std::make_shared<backend::CudaBackend>());
  EXPECT_NE(r.find(dlabi::kDLCUDAHost), nullptr);
  EXPECT_EQ(r.find(dlabi::kDLCPU), nullptr);
}

// ------------------------------------------------------------- CPU backend

TEST(CpuBackend, OnlyDeviceZeroExists) {
  backend::CpuBackend b;
  EXPECT_TRUE(b.availability(cpu).available);
  auto one = b.availability(Device{dlabi::kDLCPU, 1});
  EXPECT_FALSE(one.available);
  EXPECT_EQ(one.reason, "the CPU is device 0.");
}

TEST(CpuBackend, CopiesPitchedRows) {
  backend::CpuBackend b;
  auto* dst = static_cast<char*>(b.allocate(cpu, 6));
  const char src[] = "ab--cd--ef";
  // Three rows of two bytes, four apart in the source, packed in dst.
  b.copy(dst, cpu, src, cpu, backend::Rows{2, 3, 4, 2}, {});
  EXPECT_EQ(std::string(dst, 6), "abcdef");
  EXPECT_EQ(b.pointer_info(dst), std::nullopt);
  b.free(cpu, dst);
}

TEST(CpuBackend, EmptyAllocationsHaveTheirOwnAddress) {
  backend::CpuBackend b;
  void* a = b.allocate(cpu, 0);
  void* c = b.allocate(cpu, 0);
  EXPECT_NE(a, nullptr);
  EXPECT_NE(a, c);
  b.free(cpu, a);
  b.free(cpu, c);
}

// ------------------------------------------------------------ CUDA runtime

TEST(CudaRuntime, AbsentRuntimeIsReportedWithWhatWasTried) {
  cuda::RuntimeLoader loader({"libdlbridge-no-such-cudart.so.1"}, false);
  std::string why;
  EXPECT_EQ(loader.get(&why), nullptr);
  EXPECT_NE(why.find("libcudart"), std::string::npos) << why;
  EXPECT_NE(why.find("libdlbridge-no-such-cudart.so.1"), std::string::npos) << why;
  EXPECT_NE(why.find("DLBRIDGE_CUDART_PATH"), std::string::npos) << why;
}

TEST(CudaRuntime, ALibraryWithoutTheEntryPointsIsRefusedByName) {
  // libm opens everywhere and has none of the runtime's symbols.
  cuda::RuntimeLoader loader({"libm.so.6"}, false);
  std::string why;
  EXPECT_EQ(loader.get(&why), nullptr);
  EXPECT_NE(why.find("libm.so.6 (opened, but has no cudaGetDeviceCount)"), std::string::npos)
      << why;
}

class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/dlbridge-backend-XXXXXX";
    path = mkdtemp(pattern);
  }
  ~TempDir() {
    std::remove((path + "/libcudart.so.99").c_str());
    rmdir(path.c_str());
  }
  std::string path;
};

TEST(CudaRuntime, SearchesHintedDirectoriesAndRetriesWhenOneArrives) {
  TempDir dir;
  std::ofstream(dir.path + "/libcudart.so.99") << "not an ELF file";
  cuda::RuntimeLoader loader({"libdlbridge-no-such-cudart.so.1"}, false);
  std::string why;
  EXPECT_EQ(loader.get(&why), nullptr);
  EXPECT_EQ(why.find("libcudart.so.99"), std::string::npos);
  int provided = 0;
  loader.set_hint_provider([&] {
    ++provided;
    return std::vector<std::string>{dir.path};
  });
  EXPECT_EQ(loader.get(&why), nullptr);
  EXPECT_NE(why.find(dir.path + "/libcudart.so.99"), std::string::npos) << why;
  EXPECT_EQ(loader.get(&why), nullptr);
  EXPECT_EQ(provided, 1);  // hints cost one call, not one per lookup
}

TEST(CudaRuntime, EnvironmentHintIsTriedFirst) {
  TempDir dir;
  std::ofstream(dir.path + "/libcudart.so.99") << "not an ELF file";
  setenv("DLBRIDGE_CUDART_PATH", dir.path.c_str(), 1);
  cuda::RuntimeLoader loader({"libdlbridge-no-such-cudart.so.1"}, true);
  std::string why;
  EXPECT_EQ(loader.get(&why), nullptr);
  unsetenv("DLBRIDGE_CUDART_PATH");
  const size_t hinted = why.find(dir.path + "/libcudart.so.99");
  ASSERT_NE(hinted, std::string::npos) << why;
  EXPECT_LT(hinted, why.find("libdlbridge-no-such-cudart.so.1"));
}

TEST(CudaBackend, WithoutARuntimeEveryEntryPointFailsCleanly) {
  cuda::RuntimeLoader loader({"libdlbridge-no-such-cudart.so.1"}, false);
  backend::CudaBackend b(loader);
  for (Device d : {Device{dlabi::kDLCUDA, 0}, Device{dlabi::kDLCUDAHost, 0},
                   Device{dlabi::kDLCUDAManaged, 0}}) {
    auto a = b.availability(d);
    EXPECT_FALSE(a.available);
    EXPECT_NE(a.reason.find("libcudart"), std::string::npos) << a.reason;
    EXPECT_EQ(b.device_count(d.type), 0);
  }
  EXPECT_EQ(b.pointer_info(&loader), std::nullopt);
  b.free(Device{dlabi::kDLCUDA, 0}, nullptr);
  auto e = error_of([&] { b.allocate(Device{dlabi::kDLCUDA, 0}, 16); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), ErrorCode::device_unavailable);
  EXPECT_NE(e->message().find("libcudart"), std::string::npos);
}

bool cuda_present() {
  const Device cuda0{dlabi::kDLCUDA, 0};
  return backend::default_registry().find(cuda0.type)->availability(cuda0).available;
}

TEST(CudaBackend, DefaultReportsUnavailableHereWithAReason) {
  if (cuda_present()) GTEST_SKIP() << "a CUDA device is present; this checks its absence";
  for (auto type : {dlabi::kDLCUDA, dlabi::kDLCUDAHost}) {
    auto absent = error_of([&] { dlbridge::served_backend(Device{type, 0}); });
    ASSERT_TRUE(absent);
    EXPECT_EQ(absent->code(), ErrorCode::device_unavailable);
  }
  std::vector<float> data = iota(4);
  TensorView v = TensorView::from_data(data.data(), f32, {4});
  ExchangeRequest request;
  request.device = Device{dlabi::kDLCUDA, 0};
  auto e = error_of([&] { dlbridge::plan_export(v, request); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), ErrorCode::device_unavailable);
  // The user learns what was searched, not a generic "no runtime".
  EXPECT_NE(e->message().find("libcudart"), std::string::npos) << e->message();
  EXPECT_NE(e->message().find("is not available"), std::string::npos);
}

TEST(CudaBackend, DeviceMemoryCannotBeCopiedWithoutTheRuntime) {
  if (cuda_present()) GTEST_SKIP() << "a CUDA device is present; this checks its absence";
  std::vector<float> data = iota(4);
  TensorView v = TensorView::from_data(data.data(), f32, {4}, {}, Device{dlabi::kDLCUDA, 0});
  auto copy = error_of([&] { dlbridge::copy_to_device(v, cpu); });
  ASSERT_TRUE(copy);
  EXPECT_EQ(copy->code(), ErrorCode::device_unavailable);
  ExchangeRequest to_host;
  to_host.device = cpu;
  auto plan = error_of([&] { dlbridge::plan_export(v, to_host); });
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->code(), ErrorCode::device_unavailable);
  EXPECT_NE(plan->message().find("cuda:0"), std::string::npos);
}

// ------------------------------------------------------------------ streams

backend::Stream resolve(Device d, std::optional<int64_t> s) {
  return backend::resolve_stream(d, s ? StreamArg{true, *s} : StreamArg{});
}

ErrorCode stream_error(Device d, int64_t s) {
  auto e = error_of([&] { resolve(d, s); });
  return e ? e->code() : ErrorCode::invalid_argument;
}

TEST(Streams, CudaValuesFollowTheSpec) {
  const Device gpu{dlabi::kDLCUDA, 0};
  EXPECT_EQ(resolve(gpu, std::nullopt),
            (backend::Stream{backend::StreamKind::default_stream, backend::cuda_legacy_stream}));
  EXPECT_EQ(resolve(gpu, 1), resolve(gpu, std::nullopt));
  EXPECT_EQ(resolve(gpu, 2),
            (backend::Stream{backend::StreamKind::per_thread, backend::cuda_per_thread_stream}));
  EXPECT_EQ(resolve(gpu, -1).kind, backend::StreamKind::no_sync);
  EXPECT_EQ(resolve(gpu, 0x7f001000),
            (backend::Stream{backend::StreamKind::handle, 0x7f001000}));
  EXPECT_EQ(stream_error(gpu, 0), ErrorCode::invalid_stream);
  EXPECT_EQ(stream_error(gpu, -2), ErrorCode::invalid_stream);
  EXPECT_EQ(resolve(Device{dlabi::kDLCUDAManaged, 0}, 2).kind, backend::StreamKind::per_thread);
}

TEST(Streams, RocmAndHostValuesFollowTheSpec) {
  const Device rocm{dlabi::kDLROCM, 0};
  EXPECT_EQ(resolve(rocm, std::nullopt).kind, backend::StreamKind::default_stream);
  EXPECT_EQ(resolve(rocm, 0).kind, backend::StreamKind::default_stream);
  EXPECT_EQ(stream_error(rocm, 1), ErrorCode::invalid_stream);
  EXPECT_EQ(stream_error(rocm, 2), ErrorCode::invalid_stream);
  EXPECT_EQ(stream_error(rocm, -3), ErrorCode::invalid_stream);
  EXPECT_EQ(resolve(rocm, 4096).kind, backend::StreamKind::handle);
  for (Device host : {cpu, Device{dlabi::kDLCUDAHost, 0}}) {
    EXPECT_EQ(resolve(host, std::nullopt).kind, backend::StreamKind::host);
    EXPECT_EQ(resolve(host, -1).kind, backend::StreamKind::host);
    EXPECT_EQ(stream_error(host, 1), ErrorCode::invalid_stream);
  }
  auto e = error_of([&] { resolve(Device{dlabi::kDLCUDA, 0}, 0); });
  ASSERT_TRUE(e);
  EXPECT_NE(e->message().find("stream=0 is invalid for kDLCUDA"), std::string::npos);
}

}  // namespace
