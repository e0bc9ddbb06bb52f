// copy_to_device through dlbridge's real CUDA backend on the simulated
// runtime: every pair of CPU, two CUDA devices, pinned and managed memory,
// in every layout class the transfer code distinguishes (compact, rows a
// pitch apart, anything else through the host). A result on a host target
// must be complete when the call returns; one on a device after its stream
// has run.
#include <gtest/gtest.h>

#include "support/cuda_sim.hpp"

#include <dlbridge/copy/transfer.hpp>

#include <string>
#include <tuple>
#include <vector>

namespace {

namespace dlb = dlbridge;
namespace dlabi = dlbridge::abi;
using test_support::peek;
using test_support::settle;
using test_support::sim;
using test_support::SimMemory;

constexpr dlb::DType f32{dlabi::kDLFloat, 32, 1};
constexpr int64_t base_elements = 64 * 64;

struct Layout {
  const char* name;
  std::vector<int64_t> shape, strides;  // strides in elements; empty: row-major
  int64_t offset;                       // first element, from the buffer start
};

const std::vector<Layout>& layouts() {
  static const std::vector<Layout> all = {
      {"compact", {8, 16}, {}, 0},
      {"pitched_rows", {8, 10}, {64, 1}, 3},
      {"transposed", {16, 8}, {1, 16}, 0},
      {"stepped", {4, 5}, {128, 3}, 1},
      {"negative", {6, 7}, {-64, -2}, 64 * 5 + 13},
      {"size1_dims", {1, 8, 1}, {999, 2, 7}, 2},
      {"zero_d", {}, {}, 5},
      {"empty", {0, 4}, {}, 0},
  };
  return all;
}

struct Place {
  const char* name;
  dlb::Device device;
};

const std::vector<Place>& places() {
  static const std::vector<Place> all = {
      {"cpu", {dlabi::kDLCPU, 0}},
      {"cuda0", {dlabi::kDLCUDA, 0}},
      {"cuda1", {dlabi::kDLCUDA, 1}},
      {"pinned", {dlabi::kDLCUDAHost, 0}},
      {"managed", {dlabi::kDLCUDAManaged, 0}},
  };
  return all;
}

std::vector<float> base_values() {
  std::vector<float> v(static_cast<size_t>(base_elements));
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(i) + 0.5f;
  return v;
}

dlb::TensorView view_of(void* buffer, const Layout& l, dlb::Device device) {
  return dlb::TensorView::from_data(static_cast<float*>(buffer) + l.offset, f32, l.shape,
                                    l.strides, device);
}

// The source: the base values in memory of `device`, seen through `layout`.
struct Source {
  std::vector<float> host = base_values();
  std::unique_ptr<SimMemory> memory;
  void* data = host.data();

  explicit Source(dlb::Device device) {
    if (device.type == dlabi::kDLCPU) return;
    const size_t bytes = host.size() * sizeof(float);
    memory = std::make_unique<SimMemory>(device.type, device.id, bytes);
    data = memory->data;
    if (device.type == dlabi::kDLCUDA) {
      test_support::expect_cuda(
          cudaMemcpyAsync(data, host.data(), bytes, cudaMemcpyDefault, cudaStreamLegacy),
          "cudaMemcpyAsync");
      settle();
    } else {
      std::memcpy(data, host.data(), bytes);
    }
  }
};

using Case = std::tuple<size_t, size_t, size_t>;  // source place, target place, layout

class CudaSimTransfer : public ::testing::TestWithParam<Case> {};

TEST_P(CudaSimTransfer, CopiesEveryElementToTheTarget) {
  const auto [s, t, l] = GetParam();
  const dlb::Device source = places()[s].device, target = places()[t].device;
  const Layout& layout = layouts()[l];
  Source src(source);
  std::vector<float> reference = base_values();
  const dlb::ManagedTensor expected =
      dlb::copy_to_compact(view_of(reference.data(), layout, dlb::Device{}));
  const size_t count = size_t(expected.view().size());

  const dlb::ManagedTensor result =
      dlb::copy_to_device(view_of(src.data, layout, source), target, {}, sim().registry);
  const dlb::TensorView& r = result.view();
  EXPECT_EQ(r.device(), target);
  EXPECT_TRUE(r.is_c_contiguous());
  ASSERT_EQ(r.size(), int64_t(count));
  // A host target is complete on return; a device target once its stream ran.
  if (!dlb::is_host_accessible(target.type)) settle();
  EXPECT_EQ(peek<float>(r.data(), count), peek<float>(expected.view().data(), count));
  settle();
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const auto [s, t, l] = info.param;
  return std::string(places()[s].name) + "_to_" + places()[t].name + "_" + layouts()[l].name;
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (size_t s = 0; s < places().size(); ++s)
    for (size_t t = 0; t < places().size(); ++t)
      for (size_t l = 0; l < layouts().size(); ++l)
        if (s != 0 || t != 0) cases.emplace_back(s, t, l);
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllPairs, CudaSimTransfer, ::testing::ValuesIn(all_cases()), case_name);

// empty_on allocates on the target itself: no host buffer of garbage is
// made and uploaded (which would cost a transfer for nothing).
TEST(CudaSimEmpty, AllocatesOnTheTargetAndCopiesNothing) {
  cudasim_reset_counts();
  for (const Place& p : places()) {
    const dlb::ManagedTensor t = dlb::empty_on(p.device, f32, {4, 5}, sim().registry);
    EXPECT_EQ(t.view().device(), p.device);
    EXPECT_TRUE(t.view().is_c_contiguous());
    EXPECT_EQ(t.view().nbytes(), 80);
    if (p.device.type != dlabi::kDLCPU) {
      EXPECT_EQ(sim().cuda->pointer_info(t.view().data())->device, p.device);
    }
  }
  EXPECT_EQ(cudasim_count("malloc"), 4);
  EXPECT_EQ(cudasim_count("host_to_device") + cudasim_count("host_to_host"), 0);
  auto bad = [](std::vector<int64_t> shape, dlb::Device d) {
    try {
      dlb::empty_on(d, f32, shape, sim().registry);
    } catch (const dlb::Error& e) {
      return e.code();
    }
    return dlb::ErrorCode::invalid_tensor;
  };
  EXPECT_EQ(bad({-1}, places()[1].device), dlb::ErrorCode::invalid_argument);
  EXPECT_EQ(bad({int64_t(1) << 62, 8}, places()[1].device), dlb::ErrorCode::invalid_argument);
  EXPECT_EQ(bad({4}, {dlabi::kDLCUDA, 2}), dlb::ErrorCode::device_unavailable);
  EXPECT_EQ(bad({int64_t(1) << 40}, places()[1].device), dlb::ErrorCode::out_of_memory);
}

// A second device family (kDLExtDev) whose "device memory" is host memory
// only it touches: no stream spans it and CUDA, so a copy between them goes
// through the host.
class OtherFamily final : public dlb::backend::DeviceBackend {
 public:
  std::string_view name() const noexcept override { return "other"; }
  bool serves(dlb::DeviceType t) const noexcept override { return t == dlabi::kDLExtDev; }
  dlb::backend::Availability availability(dlb::Device d) override { return {d.id == 0, "id 0 only"}; }
  int32_t device_count(dlb::DeviceType) override { return 1; }
  void* allocate(dlb::Device, int64_t bytes) override { return std::malloc(size_t(bytes ? bytes : 1)); }
  void free(dlb::Device, void* p) noexcept override { std::free(p); }
  void copy(void* dst, dlb::Device, const void* src, dlb::Device, const dlb::backend::Rows& rows,
            dlb::backend::Stream) override {
    for (int64_t r = 0; r < rows.rows; ++r)
      std::memcpy(static_cast<char*>(dst) + r * rows.dst_pitch,
                  static_cast<const char*>(src) + r * rows.src_pitch, size_t(rows.row_bytes));
  }
  void synchronize(dlb::Device, dlb::backend::Stream) override {}
  void wait_for(dlb::Device, dlb::backend::Stream, dlb::backend::Stream) override {}
  std::optional<dlb::backend::PointerInfo> pointer_info(const void*) override { return std::nullopt; }
};

TEST(CudaSimTransferAcrossFamilies, GoesThroughTheHostBothWays) {
  dlb::backend::Registry registry;
  registry.install(std::make_shared<dlb::backend::CpuBackend>());
  registry.install(sim().cuda);
  registry.install(std::make_shared<OtherFamily>());
  const dlb::Device other{dlabi::kDLExtDev, 0}, cuda1{dlabi::kDLCUDA, 1};
  std::vector<float> values = base_values();
  const dlb::TensorView host = view_of(values.data(), layouts()[0], dlb::Device{});
  const dlb::ManagedTensor on_other = dlb::copy_to_device(host, other, {}, registry);
  const dlb::ManagedTensor on_cuda = dlb::copy_to_device(on_other.view(), cuda1, {}, registry);
  const dlb::ManagedTensor back = dlb::copy_to_device(on_cuda.view(), other, {}, registry);
  const size_t count = size_t(host.size());
  settle();
  EXPECT_EQ(peek<float>(on_cuda.view().data(), count), peek<float>(host.data(), count));
  EXPECT_EQ(peek<float>(back.view().data(), count), peek<float>(host.data(), count));
}

}  // namespace
