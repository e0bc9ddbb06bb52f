// Interprocess handles, simulated: cudaIpcGetMemHandle / cudaIpcOpenMemHandle
// / cudaIpcCloseMemHandle and cudaIpcGetEventHandle / cudaIpcOpenEventHandle,
// with the rules the CUDA documentation gives them:
// - a memory handle names the base of a live cudaMalloc allocation; a new
//   allocation at a freed address gets a new handle, and the old one no
//   longer opens;
// - opening maps the same memory (here: the same pages of the exporter's
//   device memfd, through /proc/<pid>/fd) and must be closed; opening a
//   handle again in the same process returns the same pointer and counts;
// - a handle cannot be opened in the process that exported it
//   (cudaErrorDeviceUninitialized, CUDA's "invalid device context");
// - an exporter that freed the memory or exited leaves a handle that no
//   longer maps (cudaErrorMapBufferObjectFailed);
// - an interprocess event (cudaEventInterprocess | cudaEventDisableTiming)
//   exports a handle that another process opens as an event it can wait on.
// Handles are CUDA_IPC_HANDLE_SIZE (64) bytes. Each exporting process keeps
// one table, in a memfd of its own, saying which exports are live, where
// each lies and how large it is, and how far each interprocess event has
// got; importers map that table read-write. What an importer maps comes from
// the table, as a real driver's comes from its own records: a handle whose
// bytes claim another place or size does not open.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>
#include <tuple>

#include "cudasim.h"
#include "sim_state.hpp"

namespace cudasim {
namespace {

constexpr uint32_t memory_magic = 0x4d495343u;  // "CSIM"
constexpr uint32_t event_magic = 0x45495343u;   // "CSIE"
constexpr uint64_t table_magic = 0x314342544d495343ull;
constexpr uint32_t export_slots = 4096;
constexpr uint32_t event_slots = 1024;

struct Table {
  uint64_t magic;
  uint64_t token;                  // random per process: a reused pid is not the exporter
  uint64_t exports[export_slots];  // allocation id of a live export, 0 when free; atomic
  uint64_t export_offset[export_slots];  // where it lies in its device's memfd; set before the id
  uint64_t export_bytes[export_slots];   // its size; set before the id
  EventSlot events[event_slots];
};

// What a handle's 64 bytes hold.
struct MemoryWire {
  uint32_t magic;
  int32_t pid;
  uint64_t token;
  int32_t table_fd;
  int32_t memory_fd;
  uint32_t slot;
  int32_t device;
  uint64_t id;
  uint64_t offset;
  uint64_t bytes;
};
struct EventWire {
  uint32_t magic;
  int32_t pid;
  uint64_t token;
  int32_t table_fd;
  uint32_t slot;
  uint64_t serial;
};
static_assert(sizeof(MemoryWire) <= CUDA_IPC_HANDLE_SIZE);
static_assert(sizeof(EventWire) <= CUDA_IPC_HANDLE_SIZE);

template <typename Wire, typename Handle>
Wire decode(const Handle& handle) {
  Wire w;
  std::memcpy(&w, handle.reserved, sizeof w);
  return w;
}

template <typename Handle, typename Wire>
void encode(Handle* handle, const Wire& w) {
  std::memset(handle->reserved, 0, sizeof handle->reserved);
  std::memcpy(handle->reserved, &w, sizeof w);
}

void* map_file(int fd, size_t offset, size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, off_t(offset));
  return p == MAP_FAILED ? nullptr : p;
}

// An open of another process's descriptor, as /proc shows it; -1 when that
// process or descriptor is gone.
int open_remote(int pid, int fd, size_t needed) {
  if (pid <= 0 || fd < 0) return -1;
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/fd/%d", pid, fd);
  const int local = open(path, O_RDWR | O_CLOEXEC);
  struct stat info {};
  if (local >= 0 && (fstat(local, &info) != 0 || size_t(info.st_size) < needed)) {
    close(local);
    return -1;
  }
  return local;
}

struct State {
  std::mutex mutex;
  // This process's table, made on the first export.
  int fd = -1;
  Table* table = nullptr;
  std::map<uint64_t, uint32_t> slot_of;  // allocation id -> export slot
  uint64_t next_serial = 0;
  // Other processes' tables, by (pid, token), mapped once and kept.
  std::map<std::pair<int32_t, uint64_t>, Table*> remote_tables;
  // Imported memory, by (pid, token, allocation id) and by pointer.
  struct Opened {
    void* pointer;
    void* mapping;
    size_t mapped;
    int count;
  };
  std::map<std::tuple<int32_t, uint64_t, uint64_t>, Opened> opened;
  std::map<void*, std::tuple<int32_t, uint64_t, uint64_t>> key_of;
};

State& state() {
  static State* s = new State();  // never destroyed: handles may be used at exit
  return *s;
}

// Caller holds the lock. NULL when no table can be made.
Table* own_table(State& s) {
  if (s.table) return s.table;
  const int fd = memfd_create("cudasim-ipc", MFD_CLOEXEC);
  if (fd < 0) return nullptr;
  void* p = ftruncate(fd, off_t(sizeof(Table))) == 0 ? map_file(fd, 0, sizeof(Table)) : nullptr;
  if (p == nullptr) {
    close(fd);
    return nullptr;
  }
  auto* t = static_cast<Table*>(p);
  std::random_device random;
  t->token = (uint64_t(random()) << 32) ^ random() ^ uint64_t(getpid());
  t->magic = table_magic;
  s.fd = fd;
  s.table = t;
  return t;
}

// Caller holds the lock. NULL when the exporter or its table is gone. The
// exporter's descriptor is opened and its header read on every call, so a
// handle whose exporter exited (even if its pid was reused since) fails.
Table* remote_table(State& s, int32_t pid, int32_t fd, uint64_t token) {
  const int local = open_remote(pid, fd, sizeof(Table));
  if (local < 0) return nullptr;
  uint64_t header[2] = {0, 0};
  const bool same = pread(local, header, sizeof header, 0) == ssize_t(sizeof header) &&
                    header[0] == table_magic && header[1] == token;
  Table* t = nullptr;
  if (same) {
    auto key = std::make_pair(pid, token);
    if (auto it = s.remote_tables.find(key); it != s.remote_tables.end()) {
      t = it->second;
    } else if (void* p = map_file(local, 0, sizeof(Table))) {
      t = static_cast<Table*>(p);
      s.remote_tables[key] = t;  // kept: opened events point into it
    }
  }
  close(local);
  return t;
}

uint64_t load(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }

}  // namespace

EventSlot* claim_event_slot() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  Table* t = own_table(s);
  if (t == nullptr) return nullptr;
  for (EventSlot& slot : t->events)
    if (load(&slot.serial) == 0) {
      __atomic_store_n(&slot.recorded, 0, __ATOMIC_RELEASE);
      __atomic_store_n(&slot.completed, 0, __ATOMIC_RELEASE);
      __atomic_store_n(&slot.serial, ++s.next_serial, __ATOMIC_RELEASE);
      return &slot;
    }
  return nullptr;
}

void free_event_slot(EventSlot* slot) { __atomic_store_n(&slot->serial, 0, __ATOMIC_RELEASE); }

void forget_exports(uint64_t allocation_id) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.slot_of.find(allocation_id);
  if (it == s.slot_of.end()) return;
  __atomic_store_n(&s.table->exports[it->second], 0, __ATOMIC_RELEASE);
  s.slot_of.erase(it);
}

std::function<void()> ipc_record(EventSlot* slot) {
  const uint64_t target = __atomic_add_fetch(&slot->recorded, 1, __ATOMIC_ACQ_REL);
  return [slot, target] {
    uint64_t done = load(&slot->completed);
    while (done < target && !__atomic_compare_exchange_n(&slot->completed, &done, target, false,
                                                         __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    }
  };
}

uint64_t ipc_target(const EventSlot* slot) { return load(&slot->recorded); }

bool ipc_done(const EventSlot* slot, uint64_t target) { return load(&slot->completed) >= target; }

void ipc_wait(const EventSlot* slot, uint64_t target) {
  while (!ipc_done(slot, target)) std::this_thread::sleep_for(std::chrono::microseconds(100));
}

}  // namespace cudasim

using namespace cudasim;

extern "C" {

cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t* handle, void* devPtr) {
  if (cudaError_t e = enter("cudaIpcGetMemHandle")) return answer(e);
  Allocation a;
  if (handle == nullptr || !device_allocation(devPtr, &a)) return answer(cudaErrorInvalidValue);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  Table* t = own_table(s);
  if (t == nullptr) return answer(cudaErrorMemoryAllocation);
  auto it = s.slot_of.find(a.id);
  if (it == s.slot_of.end()) {
    uint32_t slot = 0;
    while (slot < export_slots && load(&t->exports[slot]) != 0) ++slot;
    if (slot == export_slots) return answer(cudaErrorMemoryAllocation);
    __atomic_store_n(&t->export_offset[slot], uint64_t(a.offset), __ATOMIC_RELAXED);
    __atomic_store_n(&t->export_bytes[slot], uint64_t(a.bytes), __ATOMIC_RELAXED);
    __atomic_store_n(&t->exports[slot], a.id, __ATOMIC_RELEASE);
    it = s.slot_of.emplace(a.id, slot).first;
  }
  count("ipc_export");
  encode(handle, MemoryWire{memory_magic, int32_t(getpid()), t->token, s.fd, a.fd, it->second,
                            a.device, a.id, a.offset, a.bytes});
  return cudaSuccess;
}

cudaError_t cudaIpcOpenMemHandle(void** devPtr, cudaIpcMemHandle_t handle, unsigned int flags) {
  if (cudaError_t e = enter("cudaIpcOpenMemHandle")) return answer(e);
  if (devPtr == nullptr || flags != cudaIpcMemLazyEnablePeerAccess)
    return answer(cudaErrorInvalidValue);
  const auto w = decode<MemoryWire>(handle);
  if (w.magic != memory_magic || w.slot >= export_slots || w.bytes == 0 ||
      w.offset > UINT64_MAX - w.bytes)
    return answer(cudaErrorInvalidResourceHandle);
  if (w.pid == int32_t(getpid())) return answer(cudaErrorDeviceUninitialized);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  const auto key = std::make_tuple(w.pid, w.token, w.id);
  Table* t = remote_table(s, w.pid, w.table_fd, w.token);
  if (t == nullptr || load(&t->exports[w.slot]) != w.id)
    return answer(cudaErrorMapBufferObjectFailed);
  const uint64_t offset = load(&t->export_offset[w.slot]);
  const uint64_t bytes = load(&t->export_bytes[w.slot]);
  if (load(&t->exports[w.slot]) != w.id) return answer(cudaErrorMapBufferObjectFailed);
  if (offset != w.offset || bytes != w.bytes) return answer(cudaErrorInvalidResourceHandle);
  if (auto it = s.opened.find(key); it != s.opened.end()) {
    ++it->second.count;
    *devPtr = it->second.pointer;
    count("ipc_open");
    return cudaSuccess;
  }
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  const size_t first = size_t(offset) / page * page;
  const size_t mapped = size_t(offset + bytes) - first;
  const int local = open_remote(w.pid, w.memory_fd, size_t(offset + bytes));
  void* mapping = local >= 0 ? map_file(local, first, mapped) : nullptr;
  if (local >= 0) close(local);
  if (mapping == nullptr) return answer(cudaErrorMapBufferObjectFailed);
  void* pointer = static_cast<char*>(mapping) + (size_t(offset) - first);
  s.opened[key] = State::Opened{pointer, mapping, mapped, 1};
  s.key_of[pointer] = key;
  add_import(pointer, size_t(bytes), current_device());
  count("ipc_open");
  *devPtr = pointer;
  return cudaSuccess;
}

cudaError_t cudaIpcCloseMemHandle(void* devPtr) {
  if (cudaError_t e = enter("cudaIpcCloseMemHandle")) return answer(e);
  State& s = state();
  std::unique_lock<std::mutex> lock(s.mutex);
  auto k = s.key_of.find(devPtr);
  if (k == s.key_of.end()) return answer(cudaErrorInvalidValue);
  auto it = s.opened.find(k->second);
  count("ipc_close");
  if (--it->second.count > 0) return cudaSuccess;
  const State::Opened opened = it->second;
  s.opened.erase(it);
  s.key_of.erase(k);
  forget_import(opened.pointer);
  lock.unlock();
  // As cudaFree does: work still queued on the mapping runs first.
  drain(-1);
  munmap(opened.mapping, opened.mapped);
  return cudaSuccess;
}

cudaError_t cudaIpcGetEventHandle(cudaIpcEventHandle_t* handle, cudaEvent_t event) {
  if (cudaError_t e = enter("cudaIpcGetEventHandle")) return answer(e);
  if (handle == nullptr) return answer(cudaErrorInvalidValue);
  Event e;
  if (!read_event(event, &e) || e.ipc == nullptr || e.remote)
    return answer(cudaErrorInvalidResourceHandle);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  const auto slot = uint32_t(e.ipc - s.table->events);
  encode(handle, EventWire{event_magic, int32_t(getpid()), s.table->token, s.fd, slot,
                           load(&e.ipc->serial)});
  return cudaSuccess;
}

cudaError_t cudaIpcOpenEventHandle(cudaEvent_t* event, cudaIpcEventHandle_t handle) {
  if (cudaError_t e = enter("cudaIpcOpenEventHandle")) return answer(e);
  if (event == nullptr) return answer(cudaErrorInvalidValue);
  const auto w = decode<EventWire>(handle);
  if (w.magic != event_magic || w.slot >= event_slots || w.serial == 0)
    return answer(cudaErrorInvalidResourceHandle);
  if (w.pid == int32_t(getpid())) return answer(cudaErrorDeviceUninitialized);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  Table* t = remote_table(s, w.pid, w.table_fd, w.token);
  if (t == nullptr || load(&t->events[w.slot].serial) != w.serial)
    return answer(cudaErrorMapBufferObjectFailed);
  *event = create_event(&t->events[w.slot], true);
  return cudaSuccess;
}

}  // extern "C"
