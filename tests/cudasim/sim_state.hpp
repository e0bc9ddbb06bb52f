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

cudaEvent_t create_event();
// false when the handle is unknown.
bool read_event(cudaEvent_t handle, Event* out);
bool record_event(cudaEvent_t handle, const Mark& mark);
bool destroy_event(cudaEvent_t handle);

// ---- the calling thread's runtime state (runtime.cpp) -----------------------

int current_device();

}  // namespace cudasim
