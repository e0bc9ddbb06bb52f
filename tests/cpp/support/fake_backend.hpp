// Shared by the C++ tests of negotiation and transfer: a device backend for
// kDLExtDev that keeps its "device memory" on the host and records every
// call, so the copy paths can be checked without a GPU.
#pragma once

#include <dlbridge/backend/cpu.hpp>
#include <dlbridge/backend/registry.hpp>
#include <dlbridge/tensor_view.hpp>

#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace test_support {

namespace backend = dlbridge::backend;
using dlbridge::Device;

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
  int availability_calls = 0;  // a copy must ask each device once

  std::string_view name() const noexcept override { return "fake"; }
  bool serves(dlbridge::DeviceType t) const noexcept override { return t == dlbridge::abi::kDLExtDev; }
  backend::Availability availability(Device d) override {
    ++availability_calls;
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

inline std::vector<float> iota(int n) {
  std::vector<float> v(size_t(n), 0.0f);
  for (int i = 0; i < n; ++i) v[size_t(i)] = float(i);
  return v;
}

inline std::vector<float> read(const dlbridge::TensorView& v) {
  const auto* p = static_cast<const float*>(v.data());
  return std::vector<float>(p, p + v.size());
}

}  // namespace test_support
