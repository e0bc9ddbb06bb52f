// Simulated memory: one reserved region of the address space per device,
// one for pinned host memory and one for managed memory, each handing out
// blocks first-fit. The regions are ordinary host memory (the simulator's
// "device" is the CPU), but an address tells which kind and device it is,
// as unified addressing does on a real GPU. A device's region is a memfd
// mapped shared, so that another process can map an exported allocation's
// very pages (ipc.cpp), as cudaIpcOpenMemHandle does.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "cudasim.h"
#include "sim_state.hpp"

namespace cudasim {
namespace {

// New blocks are filled with this byte, freed ones with its complement, so
// that reading memory nobody wrote (or memory already freed) is visible.
constexpr unsigned char fresh_fill = 0xA5;
constexpr size_t block_alignment = 256;  // what cudaMalloc guarantees

class Arena {
 public:
  // shared: backed by a memfd that other processes may map.
  Arena(size_t capacity, bool shared) : capacity_(capacity) {
    void* p = MAP_FAILED;
    if (shared) {
      fd_ = memfd_create("cudasim-device", MFD_CLOEXEC);
      if (fd_ >= 0 && ftruncate(fd_, off_t(capacity)) == 0)
        p = mmap(nullptr, capacity, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd_, 0);
    } else {
      p = mmap(nullptr, capacity, PROT_READ | PROT_WRITE,
               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    }
    base_ = p == MAP_FAILED ? nullptr : static_cast<char*>(p);
  }

  bool owns(const void* p) const {
    const auto* c = static_cast<const char*>(p);
    return base_ != nullptr && c >= base_ && c < base_ + capacity_;
  }

  void* allocate(size_t bytes, int device) {
    if (base_ == nullptr) return nullptr;
    const size_t size = (bytes + block_alignment - 1) / block_alignment * block_alignment;
    std::lock_guard<std::mutex> lock(mutex_);
    size_t start = 0;
    for (const auto& [offset, block] : blocks_) {
      if (offset - start >= size) break;
      start = offset + block.reserved;
    }
    if (capacity_ - start < size) return nullptr;
    blocks_[start] = Block{bytes, size, device, next_id_.fetch_add(1) + 1};
    std::memset(base_ + start, fresh_fill, bytes);
    return base_ + start;
  }

  bool release(const void* p) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = blocks_.find(size_t(static_cast<const char*>(p) - base_));
    if (it == blocks_.end()) return false;
    std::memset(base_ + it->first, static_cast<unsigned char>(~fresh_fill), it->second.bytes);
    forget_exports(it->second.id);
    blocks_.erase(it);
    return true;
  }

  bool allocation(const void* p, Allocation* out) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = blocks_.find(size_t(static_cast<const char*>(p) - base_));
    if (it == blocks_.end()) return false;
    *out = Allocation{it->second.device, fd_, it->first, it->second.bytes, it->second.id};
    return true;
  }

  // The live block that holds p: its start and the bytes asked for.
  bool block_of(const void* p, const void** base, size_t* bytes) const {
    const size_t offset = size_t(static_cast<const char*>(p) - base_);
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = blocks_.upper_bound(offset);
    if (it == blocks_.begin()) return false;
    --it;
    if (offset - it->first >= std::max<size_t>(it->second.bytes, 1)) return false;
    *base = base_ + it->first;
    *bytes = it->second.bytes;
    return true;
  }

  // Whether [p, p + bytes) lies inside one live block, and that block's device.
  bool holds(const void* p, size_t bytes, int* device) const {
    const size_t offset = size_t(static_cast<const char*>(p) - base_);
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = blocks_.upper_bound(offset);
    if (it == blocks_.begin()) return false;
    --it;
    *device = it->second.device;
    return offset - it->first <= it->second.bytes &&
           bytes <= it->second.bytes - (offset - it->first) &&
           (bytes > 0 || offset - it->first < it->second.bytes);
  }

 private:
  struct Block {
    size_t bytes;     // what was asked for
    size_t reserved;  // rounded up to the alignment
    int device;
    uint64_t id;
  };
  static inline std::atomic<uint64_t> next_id_{0};
  int fd_ = -1;
  char* base_ = nullptr;
  size_t capacity_;
  mutable std::mutex mutex_;
  std::map<size_t, Block> blocks_;  // by offset from base_
};

struct Regions {
  std::vector<std::unique_ptr<Arena>> devices;
  Arena pinned{size_t(256) << 20, false};
  Arena managed{size_t(256) << 20, false};
  // Mappings of other processes' exports: base -> (bytes, device).
  std::mutex imports_mutex;
  std::map<const char*, std::pair<size_t, int>> imports;

  Regions() {
    for (int d = 0; d < device_count(); ++d)
      devices.push_back(std::make_unique<Arena>(device_bytes(), true));
  }

  Arena* arena(Place place, int device) {
    switch (place) {
      case Place::device:
        return device >= 0 && device < int(devices.size()) ? devices[size_t(device)].get() : nullptr;
      case Place::pinned: return &pinned;
      case Place::managed: return &managed;
      case Place::pageable: break;
    }
    return nullptr;
  }
};

Regions& regions() {
  static Regions* r = new Regions();  // never destroyed: queued work may outlive exit
  return *r;
}

}  // namespace

Where locate(const void* p, size_t bytes) {
  Regions& r = regions();
  auto check = [&](Arena& arena, Place place, int device) {
    Where w{place, device, false};
    int owner = device;
    w.valid = arena.holds(p, bytes, &owner);
    if (place != Place::device) w.device = owner;
    return w;
  };
  for (size_t d = 0; d < r.devices.size(); ++d)
    if (r.devices[d]->owns(p)) return check(*r.devices[d], Place::device, int(d));
  if (r.pinned.owns(p)) return check(r.pinned, Place::pinned, -1);
  if (r.managed.owns(p)) return check(r.managed, Place::managed, -1);
  {
    // An import is device memory; a range must lie inside one mapping.
    const auto* c = static_cast<const char*>(p);
    std::lock_guard<std::mutex> lock(r.imports_mutex);
    auto it = r.imports.upper_bound(c);
    if (it != r.imports.begin()) {
      --it;
      const size_t offset = size_t(c - it->first);
      if (offset < it->second.first)
        return Where{Place::device, it->second.second, bytes <= it->second.first - offset};
    }
  }
  return Where{};
}

bool device_allocation(const void* p, Allocation* out) {
  for (auto& arena : regions().devices)
    if (arena->owns(p)) return arena->allocation(p, out);
  return false;
}

bool allocation_range(const void* p, const void** base, size_t* bytes) {
  Regions& r = regions();
  for (auto& arena : r.devices)
    if (arena->owns(p)) return arena->block_of(p, base, bytes);
  const auto* c = static_cast<const char*>(p);
  std::lock_guard<std::mutex> lock(r.imports_mutex);
  auto it = r.imports.upper_bound(c);
  if (it == r.imports.begin()) return false;
  --it;
  if (size_t(c - it->first) >= std::max<size_t>(it->second.first, 1)) return false;
  *base = it->first;
  *bytes = it->second.first;
  return true;
}

void add_import(const void* base, size_t bytes, int device) {
  Regions& r = regions();
  std::lock_guard<std::mutex> lock(r.imports_mutex);
  r.imports[static_cast<const char*>(base)] = {bytes, device};
}

void forget_import(const void* base) {
  Regions& r = regions();
  std::lock_guard<std::mutex> lock(r.imports_mutex);
  r.imports.erase(static_cast<const char*>(base));
}

void* allocate(Place place, int device, size_t bytes) {
  Arena* arena = regions().arena(place, device);
  return arena ? arena->allocate(bytes, device) : nullptr;
}

bool release(Place place, const void* p) {
  Regions& r = regions();
  if (place == Place::device) {
    for (auto& arena : r.devices)
      if (arena->owns(p)) return arena->release(p);
    return false;
  }
  Arena* arena = r.arena(place, -1);
  return arena && arena->owns(p) && arena->release(p);
}

}  // namespace cudasim

extern "C" int cudasim_fresh_byte(void) { return cudasim::fresh_fill; }
