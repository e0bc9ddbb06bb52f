// The simulator's internals, shared by its translation units: memory
// arenas (memory.cpp), stream queues and events (queues.cpp), settings and
// fault injection (control.cpp). The CUDA entry points live in runtime.cpp.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "cuda_api.h"

namespace cudasim {

// ---- settings (control.cpp) ------------------------------------------------

int device_count();
size_t device_bytes();
// A delay for one queued copy or memset: the base plus a random jitter.
unsigned next_delay_us();
bool ignore_stream_waits();
bool insufficient_driver();
// The error injected for this call of `function`, or cudaSuccess.
cudaError_t injected(const char* function);
void count(const std::string& what, long long n = 1);

// ---- memory (memory.cpp) ---------------------------------------------------

enum class Place { pageable, device, pinned, managed };

struct Where {
  Place place = Place::pageable;
  int device = -1;     // device memory: its device; pinned/managed: current at allocation
  bool valid = true;   // the range lies inside one live allocation (always for pageable)
};

// Where [p, p + bytes) is. Device, pinned and managed memory each come from
// their own region of the address space, so the kind is read off the address.
Where locate(const void* p, size_t bytes);
// NULL when the region is full.
void* allocate(Place place, int device, size_t bytes);
// false when p is not the start of a live allocation of that place.
bool release(Place place, const void* p);

// A live device allocation, as IPC exports it: the file behind its device's
// region (a memfd, so another process can map the same pages through
// /proc/<pid>/fd), where in that file it starts, and an id that no other
// allocation of this process ever has (a new one at a freed address gets a
// new id, so an old handle does not open it).
struct Allocation {
  int device = -1;
  int fd = -1;
  size_t offset = 0;
  size_t bytes = 0;
  uint64_t id = 0;
};
// false when p is not the start of a live device allocation.
bool device_allocation(const void* p, Allocation* out);
// The device allocation (or opened import) that holds p, as the driver's
// cuMemGetAddressRange reports it; false when p is in none.
bool allocation_range(const void* p, const void** base, size_t* bytes);
// Memory another process exported, mapped here: it counts as device memory
// of `device` (for locate) until forgotten.
void add_import(const void* base, size_t bytes, int device);
void forget_import(const void* base);

// ---- IPC (ipc.cpp) ----------------------------------------------------------

// One interprocess event's progress, in memory that the exporting process
// and every process that opened the event map: `recorded` counts records,
// `completed` is the highest record whose position its stream has passed.
struct EventSlot {
  uint64_t serial;     // which event holds the slot; 0: free
  uint64_t recorded;   // atomic
  uint64_t completed;  // atomic
};
// A free slot of this process's table for a new interprocess event; NULL
// when all are taken.
EventSlot* claim_event_slot();
void free_event_slot(EventSlot* slot);
// A freed allocation's exports stop opening.
void forget_exports(uint64_t allocation_id);
// A record of an interprocess event: counts it now, and returns the work
// that marks it complete when its stream gets there.
std::function<void()> ipc_record(EventSlot* slot);
// The last record counted so far; whether the records up to `target` are
// complete; blocks until they are.
uint64_t ipc_target(const EventSlot* slot);
bool ipc_done(const EventSlot* slot, uint64_t target);
void ipc_wait(const EventSlot* slot, uint64_t target);

// ---- queues (queues.cpp) ---------------------------------------------------

struct Queue;
using QueuePtr = std::shared_ptr<Queue>;

// A position in a queue: done when the queue has finished work number seq.
struct Mark {
  QueuePtr queue;
  uint64_t seq = 0;
};

struct Event {
  bool recorded = false;
  Mark mark;
  // Interprocess events (cudaEventInterprocess) also count their records in
  // a shared slot; an event opened from another process's handle has only
  // that slot (remote), and waits by watching it.
  EventSlot* ipc = nullptr;
  bool remote = false;
};

// The queue a handle names for the calling thread: NULL/1 the current
// device's legacy stream, 2 its per-thread stream, else a created stream;
// NULL when the handle is unknown.
QueuePtr resolve(cudaStream_t handle);
bool is_stream(cudaStream_t handle);
cudaStream_t create_stream(int device, bool blocking);
bool destroy_stream(cudaStream_t handle);

// Appends work to a queue, after everything before it there, after `after`,
// and after what the legacy-stream rules add; returns its position.
Mark enqueue(const QueuePtr& queue, std::function<void()> work, unsigned delay_us,
             std::vector<Mark> after = {});
// The position of the last work queued on `queue`.
Mark last_mark(const QueuePtr& queue);
// Blocks the calling thread until the mark is done.
void wait(const Mark& mark);
bool is_done(const Mark& mark);
// Blocks until all work queued so far on every queue of `device` (-1: of
// every device) is done.
void drain(int device);

cudaEvent_t create_event(EventSlot* ipc = nullptr, bool remote = false);
// false when the handle is unknown.
bool read_event(cudaEvent_t handle, Event* out);
bool record_event(cudaEvent_t handle, const Mark& mark);
bool destroy_event(cudaEvent_t handle);

// ---- the calling thread's runtime state (runtime.cpp) -----------------------

int current_device();
// Records a failure for cudaGetLastError and returns it.
cudaError_t answer(cudaError_t error);
// What every entry point checks first: the driver, the devices, then a
// fault a test asked for. cudaSuccess to go on.
cudaError_t enter(const char* function);

}  // namespace cudasim
