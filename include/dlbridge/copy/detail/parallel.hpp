// Splitting one copy across threads. Threads are started per call rather
// than kept in a pool: a header-only library has no good place to own a pool
// (fork, unload and static destruction order would all be its problem), and
// the copies that get threads are large enough that starting one is a small
// part of their run time (see bench/copy_bench.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

#include "../../platform/platform.hpp"

namespace dlbridge::detail {

// 0 means "as many CPUs as this thread may run on" (its affinity: a
// process pinned to one CPU gets one thread, not two sharing it).
inline unsigned resolve_thread_count(unsigned requested) noexcept {
  return requested != 0 ? requested : platform::usable_cpus();
}

// How many threads a copy of `bytes` deserves: each must get at least
// min_bytes_per_thread, or starting it costs more than it saves. A copy too
// small for two never asks for the CPU count (a system call with
// max_threads 0), so small copies pay nothing for it.
inline unsigned threads_for(int64_t bytes, unsigned max_threads,
                            int64_t min_bytes_per_thread) noexcept {
  if (max_threads == 1) return 1;
  if (min_bytes_per_thread <= 0) return resolve_thread_count(max_threads);
  const int64_t by_size = bytes / min_bytes_per_thread;
  if (by_size <= 1) return 1;
  return unsigned(std::clamp<int64_t>(by_size, 1, int64_t(resolve_thread_count(max_threads))));
}

// Calls body(begin, end) on disjoint ranges covering [0, count), one per
// thread; the calling thread takes the first. body must not throw. If the
// system refuses a thread, its range runs on the calling thread instead, so
// the copy is never left half done.
template <typename Body>
void parallel_ranges(int64_t count, unsigned threads, const Body& body) {
  if (count <= 0) return;
  if (threads <= 1 || count == 1) {
    body(int64_t(0), count);
    return;
  }
  const int64_t parts = std::min<int64_t>(threads, count);
  // Written so that no product can overflow, however large count is.
  const int64_t base = count / parts, extra = count % parts;
  auto start = [&](int64_t p) { return p * base + std::min(p, extra); };
  std::vector<std::thread> workers;
  workers.reserve(size_t(parts - 1));
  for (int64_t p = 1; p < parts; ++p) {
    try {
      workers.emplace_back([&body, b = start(p), e = start(p + 1)] { body(b, e); });
    } catch (...) {
      body(start(p), start(p + 1));
    }
  }
  body(start(0), start(1));
  for (auto& worker : workers) worker.join();
}

}  // namespace dlbridge::detail
