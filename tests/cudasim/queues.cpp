// Simulated streams: each is a queue with its own worker thread that runs
// the queue's work in order, each piece after a delay, so that work is done
// *later* than the call that queued it, as on a GPU. Ordering between
// queues exists only where CUDA defines it: an event wait, or the legacy
// default stream's implicit synchronisation with the blocking streams of
// its device. One lock and one condition variable guard all queues; the
// simulator is for correctness, not speed.
#include <chrono>
#include <set>
#include <thread>
#include <unordered_map>

#include "sim_state.hpp"

namespace cudasim {

struct Queue {
  int device = 0;
  bool legacy = false;    // the device's legacy default stream
  bool blocking = true;   // ordered with the legacy stream (not cudaStreamNonBlocking)
  bool closing = false;   // destroyed: the worker ends once the queue is empty
  uint64_t tail = 0;      // position of the last work queued
  uint64_t done = 0;      // position of the last work finished
  struct Work {
    uint64_t seq;
    std::function<void()> run;  // empty: a marker
    unsigned delay_us;
    std::vector<Mark> after;
  };
  std::deque<Work> pending;
};

namespace {

struct Scheduler {
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<QueuePtr> legacy;                       // per device
  std::vector<std::vector<QueuePtr>> blocking;        // per device: streams ordered with legacy
  std::vector<QueuePtr> all;                          // every live queue, for drain()
  std::unordered_map<cudaStream_t, QueuePtr> created; // handles of cudaStreamCreate
  std::set<cudaEvent_t> events;
};

Scheduler& scheduler() {
  static Scheduler* s = new Scheduler();  // never destroyed: workers run until exit
  return *s;
}

bool finished(const Mark& m) { return !m.queue || m.queue->done >= m.seq; }

void work_loop(QueuePtr q) {
  Scheduler& s = scheduler();
  std::unique_lock<std::mutex> lock(s.mutex);
  for (;;) {
    s.changed.wait(lock, [&] { return !q->pending.empty() || q->closing; });
    if (q->pending.empty()) return;
    Queue::Work work = std::move(q->pending.front());
    q->pending.pop_front();
    s.changed.wait(lock, [&] {
      for (const Mark& m : work.after)
        if (!finished(m)) return false;
      return true;
    });
    lock.unlock();
    if (work.delay_us) std::this_thread::sleep_for(std::chrono::microseconds(work.delay_us));
    if (work.run) work.run();
    lock.lock();
    q->done = work.seq;
    s.changed.notify_all();
  }
}

// Caller holds the lock.
QueuePtr start_queue(int device, bool legacy, bool blocking) {
  Scheduler& s = scheduler();
  auto q = std::make_shared<Queue>();
  q->device = device;
  q->legacy = legacy;
  q->blocking = blocking;
  if (s.legacy.empty()) {
    s.legacy.resize(size_t(device_count()));
    s.blocking.resize(size_t(device_count()));
  }
  if (blocking && !legacy) s.blocking[size_t(device)].push_back(q);
  s.all.push_back(q);
  std::thread(work_loop, q).detach();
  return q;
}

QueuePtr legacy_queue(int device) {
  Scheduler& s = scheduler();
  if (s.legacy.empty() || !s.legacy[size_t(device)]) {
    QueuePtr q = start_queue(device, true, false);
    s.legacy[size_t(device)] = q;
  }
  return s.legacy[size_t(device)];
}

void forget(std::vector<QueuePtr>& list, const QueuePtr& q) {
  for (auto it = list.begin(); it != list.end(); ++it)
    if (*it == q) {
      list.erase(it);
      return;
    }
}

}  // namespace

QueuePtr resolve(cudaStream_t handle) {
  Scheduler& s = scheduler();
  std::lock_guard<std::mutex> lock(s.mutex);
  const int device = current_device();
  if (handle == nullptr || handle == cudaStreamLegacy) return legacy_queue(device);
  if (handle == cudaStreamPerThread) {
    // One per thread and device, kept for the life of the process.
    thread_local std::unordered_map<int, QueuePtr> per_thread;
    QueuePtr& q = per_thread[device];
    if (!q) q = start_queue(device, false, true);
    return q;
  }
  auto it = s.created.find(handle);
  return it == s.created.end() ? nullptr : it->second;
}

bool is_stream(cudaStream_t handle) { return resolve(handle) != nullptr; }

cudaStream_t create_stream(int device, bool blocking) {
  Scheduler& s = scheduler();
  std::lock_guard<std::mutex> lock(s.mutex);
  QueuePtr q = start_queue(device, false, blocking);
  // The handle is the queue's address: unique while the queue lives.
  auto handle = reinterpret_cast<cudaStream_t>(q.get());
  s.created[handle] = q;
  return handle;
}

bool destroy_stream(cudaStream_t handle) {
  Scheduler& s = scheduler();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.created.find(handle);
  if (it == s.created.end()) return false;
  QueuePtr q = it->second;
  s.created.erase(it);
  forget(s.blocking[size_t(q->device)], q);
  forget(s.all, q);
  // As in CUDA, queued work still runs; the worker ends after it.
  q->closing = true;
  s.changed.notify_all();
  return true;
}

Mark enqueue(const QueuePtr& q, std::function<void()> work, unsigned delay_us,
             std::vector<Mark> after) {
  Scheduler& s = scheduler();
  std::lock_guard<std::mutex> lock(s.mutex);
  // The legacy stream waits for the work queued before on every blocking
  // stream of its device, and every blocking stream waits for the work
  // queued before on the legacy stream.
  if (q->legacy) {
    for (const QueuePtr& other : s.blocking[size_t(q->device)])
      if (other->tail > other->done) after.push_back({other, other->tail});
  } else if (q->blocking) {
    QueuePtr legacy = legacy_queue(q->device);
    if (legacy->tail > legacy->done) after.push_back({legacy, legacy->tail});
  }
  const uint64_t seq = ++q->tail;
  q->pending.push_back({seq, std::move(work), delay_us, std::move(after)});
  s.changed.notify_all();
  return {q, seq};
}

Mark last_mark(const QueuePtr& queue) {
  std::lock_guard<std::mutex> lock(scheduler().mutex);
  return {queue, queue->tail};
}

void wait(const Mark& mark) {
  Scheduler& s = scheduler();
  std::unique_lock<std::mutex> lock(s.mutex);
  s.changed.wait(lock, [&] { return finished(mark); });
}

bool is_done(const Mark& mark) {
  std::lock_guard<std::mutex> lock(scheduler().mutex);
  return finished(mark);
}

void drain(int device) {
  std::vector<Mark> marks;
  {
    Scheduler& s = scheduler();
    std::lock_guard<std::mutex> lock(s.mutex);
    for (const QueuePtr& q : s.all)
      if (device < 0 || q->device == device) marks.push_back({q, q->tail});
  }
  for (const Mark& m : marks) wait(m);
}

cudaEvent_t create_event(EventSlot* ipc, bool remote) {
  Scheduler& s = scheduler();
  auto* event = new Event();
  event->ipc = ipc;
  event->remote = remote;
  auto handle = reinterpret_cast<cudaEvent_t>(event);
  std::lock_guard<std::mutex> lock(s.mutex);
  s.events.insert(handle);
  return handle;
}

bool read_event(cudaEvent_t handle, Event* out) {
  Scheduler& s = scheduler();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.events.count(handle) == 0) return false;
  *out = *reinterpret_cast<Event*>(handle);
  return true;
}

bool record_event(cudaEvent_t handle, const Mark& mark) {
  Scheduler& s = scheduler();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.events.count(handle) == 0) return false;
  auto* event = reinterpret_cast<Event*>(handle);
  event->recorded = true;
  event->mark = mark;
  return true;
}

bool destroy_event(cudaEvent_t handle) {
  Scheduler& s = scheduler();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.events.erase(handle) == 0) return false;
  // Waits already queued hold their own copy of the mark.
  delete reinterpret_cast<Event*>(handle);
  return true;
}

}  // namespace cudasim
