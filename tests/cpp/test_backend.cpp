// Device backends: the registry, the CPU backend, the CUDA backend on a
// machine without CUDA (it must say why, not crash), and the negotiation
// paths of plan_export and copy_to_device driven through a fake device
// that keeps its "device memory" on the host and records every call.
#include <gtest/gtest.h>

#include "support/error_of.hpp"

#include <dlbridge/backend/transfer.hpp>
#include <dlbridge/producer.hpp>

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
using dlbridge::DeviceSupport;
using dlbridge::DType;
using dlbridge::Error;
using dlbridge::ErrorCode;
using dlbridge::ExportRequest;
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

// kDLExtDev with device 0 present and device 1 absent. Its memory is host
// memory, but nothing outside this backend may touch it: the device table
// says ext_dev is not host-accessible, so the copy paths must come here.
class FakeBackend final : public backend::DeviceBackend {
 public:
  struct Copy {
    Device dst, src;
    backend::Rows rows;
    backend::Stream stream;
  };
  std::vector<Copy> copies;
  std::vector<backend::Stream> synchronized;
  std::vector<std::pair<backend::Stream, backend::Stream>> waits;
  int allocations = 0, frees = 0;

  std::string_view name() const noexcept override { return "fake"; }
  bool serves(dlbridge::DeviceType t) const noexcept override { return t == dlabi::kDLExtDev; }
  backend::Availability availability(Device d) override {
    if (d.id == 0) return {true, {}};
    return {false, "the fake has device 0 only."};
  }
  int32_t device_count(dlbridge::DeviceType) override { return 1; }
  void* allocate(Device, int64_t bytes) override {
    ++allocations;
    return std::malloc(size_t(bytes > 0 ? bytes : 1));
  }
  void free(Device, void* p) noexcept override {
    ++frees;
    std::free(p);
  }
  void copy(void* dst, Device dst_device, const void* src, Device src_device,
            const backend::Rows& rows, backend::Stream stream) override {
    copies.push_back({dst_device, src_device, rows, stream});
    cpu_backend.copy(dst, dst_device, src, src_device, rows, stream);
  }
  void synchronize(Device, backend::Stream s) override { synchronized.push_back(s); }
  void wait_for(Device, backend::Stream p, backend::Stream c) override { waits.push_back({p, c}); }
  std::optional<backend::PointerInfo> pointer_info(const void*) override { return std::nullopt; }

 private:
  backend::CpuBackend cpu_backend;
};

// Installs a backend into the default registry for one test.
class ScopedBackend {
 public:
  ScopedBackend(dlbridge::DeviceType type, std::shared_ptr<backend::DeviceBackend> b)
      : type_(type), previous_(backend::default_registry().set(type, std::move(b))) {}
  ~ScopedBackend() { backend::default_registry().set(type_, previous_); }

 private:
  dlbridge::DeviceType type_;
  std::shared_ptr<backend::DeviceBackend> previous_;
};

std::vector<float> iota(int n) {
  std::vector<float> v(size_t(n), 0.0f);
  for (int i = 0; i < n; ++i) v[size_t(i)] = float(i);
  return v;
}

std::vector<float> read(const TensorView& v) {
  const auto* p = static_cast<const float*>(v.data());
  return std::vector<float>(p, p + v.size());
}

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
  return backend::availability(Device{dlabi::kDLCUDA, 0}).available;
}

TEST(CudaBackend, DefaultReportsUnavailableHereWithAReason) {
  if (cuda_present()) GTEST_SKIP() << "a CUDA device is present; this checks its absence";
  EXPECT_EQ(dlbridge::device_support(Device{dlabi::kDLCUDA, 0}), DeviceSupport::unavailable);
  EXPECT_EQ(dlbridge::device_support(Device{dlabi::kDLCUDAHost, 0}), DeviceSupport::unavailable);
  std::vector<float> data = iota(4);
  TensorView v = TensorView::from_data(data.data(), f32, {4});
  ExportRequest request;
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
  ExportRequest to_host;
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

// -------------------------------------------------- negotiation (plan_export)

struct Negotiation : ::testing::Test {
  std::shared_ptr<FakeBackend> fake = std::make_shared<FakeBackend>();
  ScopedBackend installed{dlabi::kDLExtDev, fake};
  std::vector<float> data = iota(6);
  TensorView host = TensorView::from_data(data.data(), f32, {2, 3});

  dlbridge::ExportPlan plan(const TensorView& v, std::optional<Device> device,
                            std::optional<bool> copy = std::nullopt) {
    ExportRequest r;
    r.max_version = dlabi::DLPackVersion{1, 3};
    r.device = device;
    r.copy = copy;
    return dlbridge::plan_export(v, r);
  }
  std::optional<Error> plan_error(const TensorView& v, Device device,
                                  std::optional<bool> copy = std::nullopt) {
    return error_of([&] { plan(v, device, copy); });
  }
};

TEST_F(Negotiation, AnotherAvailableDeviceIsACopy) {
  EXPECT_EQ(dlbridge::device_support(ext0), DeviceSupport::served);
  for (std::optional<bool> copy : {std::optional<bool>{}, std::optional<bool>{true}}) {
    auto p = plan(host, ext0, copy);
    EXPECT_TRUE(p.copy);
    EXPECT_EQ(p.target, ext0);
  }
}

TEST_F(Negotiation, CopyFalseAcrossDevicesIsCopyRequired) {
  auto e = plan_error(host, ext0, false);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), ErrorCode::copy_required);
  EXPECT_NE(e->message().find("from cpu to ext_dev"), std::string::npos) << e->message();
}

TEST_F(Negotiation, SameDeviceCopiesOnlyWhenAsked) {
  EXPECT_FALSE(plan(host, std::nullopt).copy);
  EXPECT_FALSE(plan(host, cpu, false).copy);
  EXPECT_TRUE(plan(host, cpu, true).copy);
}

TEST_F(Negotiation, AnAbsentDeviceIdCarriesTheBackendsReason) {
  EXPECT_EQ(dlbridge::device_support(ext1), DeviceSupport::unavailable);
  auto e = plan_error(host, ext1);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), ErrorCode::device_unavailable);
  EXPECT_NE(e->message().find("the fake has device 0 only."), std::string::npos);
}

TEST_F(Negotiation, ATypeWithoutABackendIsUnsupportedWithTheExactMessage) {
  auto e = plan_error(host, Device{dlabi::kDLVulkan, 0});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), ErrorCode::unsupported_device_type);
  EXPECT_NE(e->message().find("The device specification passed to to_dlpack contains an "
                              "unsupported device type (DLDeviceType: kDLVulkan)"),
            std::string::npos);
  auto unknown = plan_error(host, Device{dlbridge::DeviceType(42), 0});
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->code(), ErrorCode::unsupported_device_type);
}

TEST_F(Negotiation, HostAccessibleMemoryReachesTheCpuWithoutACopy) {
  for (auto type : {dlabi::kDLCUDAHost, dlabi::kDLCUDAManaged}) {
    TensorView pinned = host.with_device(Device{type, 0});
    // No runtime is needed to relabel: the bytes do not move.
    auto p = plan(pinned, cpu, false);
    EXPECT_FALSE(p.copy);
    EXPECT_EQ(p.target, cpu);
  }
}

TEST_F(Negotiation, DeviceMemoryToTheHostIsACopy) {
  TensorView on_fake = host.with_device(ext0);
  EXPECT_TRUE(plan(on_fake, cpu).copy);
  auto e = plan_error(on_fake, cpu, false);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), ErrorCode::copy_required);
}

TEST_F(Negotiation, StreamsAreCheckedForTheTargetDevice) {
  ExportRequest r;
  r.device = cpu;
  r.stream = StreamArg{true, 1};
  auto e = error_of([&] { dlbridge::plan_export(host, r); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), ErrorCode::invalid_stream);
  r.stream = StreamArg{true, -1};
  EXPECT_FALSE(dlbridge::plan_export(host, r).copy);
}

// ----------------------------------------------------------- copy_to_device

TEST_F(Negotiation, HostToDeviceIsOneTransferOnTheConsumersStream) {
  dlbridge::TransferOptions options;
  options.stream = StreamArg{true, 77};
  {
    ManagedTensor t = dlbridge::copy_to_device(host.with_flags(DLBRIDGE_FLAG_READ_ONLY), ext0,
                                               options);
    EXPECT_EQ(t.view().device(), ext0);
    EXPECT_EQ(t.flags(), uint64_t(DLBRIDGE_FLAG_IS_COPIED));  // writable, marked copied
    EXPECT_TRUE(t.view().is_c_contiguous());
    EXPECT_EQ(read(t.view()), data);
    ASSERT_EQ(fake->copies.size(), 1u);
    EXPECT_EQ(fake->copies[0].src, cpu);
    EXPECT_EQ(fake->copies[0].rows.row_bytes * fake->copies[0].rows.rows, 24);
    EXPECT_EQ(fake->copies[0].stream, (backend::Stream{backend::StreamKind::handle, 77}));
    // Pageable host memory is read before the call returns: no host wait.
    EXPECT_TRUE(fake->synchronized.empty());
  }
  EXPECT_EQ(fake->allocations, 1);
  EXPECT_EQ(fake->frees, 1);
}

TEST_F(Negotiation, StridedHostSourcesAreCompactedOnTheHostFirst) {
  // The transpose of host: shape (3, 2), strides (1, 3).
  TensorView t = TensorView::from_data(data.data(), f32, {3, 2}, {1, 3});
  ManagedTensor out = dlbridge::copy_to_device(t, ext0);
  EXPECT_EQ(read(out.view()), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  ASSERT_EQ(fake->copies.size(), 1u);
  EXPECT_EQ(fake->copies[0].rows.rows, 1);
}

TEST_F(Negotiation, DeviceToHostWaitsForTheCopyAndUsesPitchedRows) {
  // Columns 1..2 of a 3x4 matrix on the fake: three rows of two floats,
  // four floats apart.
  std::vector<float> matrix = iota(12);
  TensorView slice = TensorView::from_data(matrix.data() + 1, f32, {3, 2}, {4, 1}, ext0);
  ManagedTensor out = dlbridge::copy_to_device(slice, cpu);
  EXPECT_EQ(out.view().device(), cpu);
  EXPECT_EQ(read(out.view()), (std::vector<float>{1, 2, 5, 6, 9, 10}));
  ASSERT_EQ(fake->copies.size(), 1u);
  const backend::Rows& rows = fake->copies[0].rows;
  EXPECT_EQ(rows.rows, 3);
  EXPECT_EQ(rows.row_bytes, 8);
  EXPECT_EQ(rows.src_pitch, 16);
  EXPECT_EQ(rows.dst_pitch, 8);
  // The target is the host: blocking there is the only way to be done.
  EXPECT_EQ(fake->synchronized.size(), 1u);
}

TEST_F(Negotiation, DeviceLayoutsThatAreNotRowsAreStagedThroughTheHost) {
  // Negative strides: the last row first, each row reversed.
  std::vector<float> matrix = iota(6);
  TensorView reversed = TensorView::from_data(matrix.data() + 5, f32, {2, 3}, {-3, -1}, ext0);
  ManagedTensor out = dlbridge::copy_to_device(reversed, cpu);
  EXPECT_EQ(read(out.view()), (std::vector<float>{5, 4, 3, 2, 1, 0}));
  ASSERT_EQ(fake->copies.size(), 1u);
  EXPECT_EQ(fake->copies[0].rows.row_bytes, 24);  // the whole span, once
}

TEST_F(Negotiation, DeviceToDeviceOrdersStreamsWithoutBlockingTheHost) {
  TensorView on_fake = host.with_device(ext0);
  dlbridge::TransferOptions options;
  options.stream = StreamArg{true, 9};
  options.source_stream = StreamArg{true, 5};
  ManagedTensor out = dlbridge::copy_to_device(on_fake, ext0, options);
  EXPECT_EQ(read(out.view()), data);
  ASSERT_EQ(fake->waits.size(), 1u);
  EXPECT_EQ(fake->waits[0].first.handle, 5u);
  EXPECT_EQ(fake->waits[0].second.handle, 9u);
  ASSERT_EQ(fake->copies.size(), 1u);
  EXPECT_EQ(fake->copies[0].stream.handle, 9u);
  EXPECT_TRUE(fake->synchronized.empty());
}

TEST_F(Negotiation, CopyToAnAbsentOrUnsupportedDeviceFails) {
  auto absent = error_of([&] { dlbridge::copy_to_device(host, ext1); });
  ASSERT_TRUE(absent);
  EXPECT_EQ(absent->code(), ErrorCode::device_unavailable);
  auto unsupported = error_of([&] { dlbridge::copy_to_device(host, Device{dlabi::kDLMetal, 0}); });
  ASSERT_TRUE(unsupported);
  EXPECT_EQ(unsupported->code(), ErrorCode::unsupported_device_type);
  auto bad_stream = error_of([&] {
    dlbridge::TransferOptions options;
    options.stream = StreamArg{true, 3};
    dlbridge::copy_to_device(host, cpu, options);
  });
  ASSERT_TRUE(bad_stream);
  EXPECT_EQ(bad_stream->code(), ErrorCode::invalid_stream);
  EXPECT_EQ(fake->allocations, fake->frees);
}

TEST_F(Negotiation, EmptyTensorsMoveNoBytes) {
  TensorView empty = TensorView::from_data(nullptr, f32, {0, 3});
  ManagedTensor out = dlbridge::copy_to_device(empty, ext0);
  EXPECT_EQ(out.view().size(), 0);
  EXPECT_TRUE(fake->copies.empty());
}

TEST_F(Negotiation, PackedSubByteDataStaysPacked) {
  const DType int4{dlabi::kDLInt, 4, 1};
  std::vector<unsigned char> bytes = {0x21, 0x43, 0x65};
  TensorView packed = TensorView::from_data(bytes.data(), int4, {6});
  ManagedTensor on_fake = dlbridge::copy_to_device(packed, ext0);
  EXPECT_EQ(on_fake.view().nbytes(), 3);
  ManagedTensor back = dlbridge::copy_to_device(on_fake.view(), cpu);
  const auto* out = static_cast<const unsigned char*>(back.view().data());
  EXPECT_EQ(std::vector<unsigned char>(out, out + 3), bytes);
}

}  // namespace
