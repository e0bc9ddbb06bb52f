// Which backend serves which DLDeviceType. The CPU and CUDA backends are
// built in; a ROCm or oneAPI backend (or a test's fake) is installed with
// set(). Lookups are cheap and thread-safe; creating the registry loads no
// runtime.
#pragma once

#include <memory>
#include <mutex>
#include <shared_mutex>
#include <utility>
#include <vector>

#include "backend.hpp"
#include "cpu.hpp"
#include "cuda.hpp"

namespace dlbridge::backend {

class Registry {
 public:
  // An empty registry; default_registry() is the one dlbridge consults.
  Registry() = default;

  // The backend for `type`, or NULL when none is installed.
  std::shared_ptr<DeviceBackend> find(DeviceType type) const {
    const int slot = slot_of(type);
    if (slot < 0) return nullptr;
    std::shared_lock<std::shared_mutex> lock(mutex_);
    return backends_[slot];
  }

  // Installs `backend` for each type it serves (NULL removes `type`) and
  // returns what was there before, so a test can put it back.
  std::shared_ptr<DeviceBackend> set(DeviceType type, std::shared_ptr<DeviceBackend> backend) {
    const int slot = slot_of(type);
    if (slot < 0)
      detail::fail(ErrorCode::invalid_argument,
                   "No backend can serve DLDeviceType " + device_type_label(type) + ".",
                   "Register backends for DLPack 1.3 device types only.");
    std::unique_lock<std::shared_mutex> lock(mutex_);
    return std::exchange(backends_[slot], std::move(backend));
  }

  // The device types a backend is installed for, in DLDeviceType order:
  // what error messages say dlbridge serves.
  std::vector<DeviceType> served_types() const {
    std::vector<DeviceType> types;
    std::shared_lock<std::shared_mutex> lock(mutex_);
    for (int t = 0; t < slots; ++t)
      if (backends_[t]) types.push_back(DeviceType(t));
    return types;
  }

  void install(const std::shared_ptr<DeviceBackend>& backend) {
    for (int t = 0; t < slots; ++t)
      if (is_known_device_type(t) && backend->serves(DeviceType(t))) set(DeviceType(t), backend);
  }

 private:
  // DLPack 1.3 types are 1..18; the table is indexed by the number itself.
  static constexpr int slots = 19;
  static int slot_of(DeviceType type) noexcept {
    const auto t = static_cast<int32_t>(type);
    return (is_known_device_type(t) && t < slots) ? t : -1;
  }

  mutable std::shared_mutex mutex_;
  std::shared_ptr<DeviceBackend> backends_[slots];
};

inline Registry& default_registry() {
  // Never destroyed: tensors freed during static destruction still need
  // their backend.
  static Registry* registry = [] {
    auto* r = new Registry();
    r->install(std::make_shared<CpuBackend>());
    r->install(std::make_shared<CudaBackend>());
    return r;
  }();
  return *registry;
}

}  // namespace dlbridge::backend
