// The host as a backend: device kDLCPU:0, plain memory, memcpy. Streams do
// not exist here, so ordering operations have nothing to do.
#pragma once

#include <cstdlib>
#include <cstring>
#include <string>

#include "../error.hpp"
#include "../platform/host_memory.hpp"
#include "backend.hpp"

namespace dlbridge::backend {

class CpuBackend final : public DeviceBackend {
 public:
  std::string_view name() const noexcept override { return "cpu"; }
  bool serves(DeviceType type) const noexcept override { return type == abi::kDLCPU; }

  Availability availability(Device device) override {
    if (device.id == 0) return {true, {}};
    return {false, "the CPU is device 0."};
  }
  int32_t device_count(DeviceType) override { return 1; }

  void* allocate(Device, int64_t bytes) override { return dlbridge::detail::allocate_host_raw(bytes); }
  void free(Device, void* data) noexcept override { std::free(data); }

  void copy(void* dst, Device, const void* src, Device, const Rows& rows,
            Stream) override {
    auto* d = static_cast<char*>(dst);
    const auto* s = static_cast<const char*>(src);
    for (int64_t r = 0; r < rows.rows; ++r)
      std::memcpy(d + r * rows.dst_pitch, s + r * rows.src_pitch, size_t(rows.row_bytes));
  }

  void synchronize(Device, Stream) override {}
  void wait_for(Device, Stream, Stream) override {}
  std::optional<PointerInfo> pointer_info(const void*) override { return std::nullopt; }
};

}  // namespace dlbridge::backend
