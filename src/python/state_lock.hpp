// The extension's one guard for the state it keeps for the whole process: the
// producer-type registry and its last-type cache (producer_types.cpp),
// convert's learnt targets and hooks (convert.cpp), the keyword cache of the
// raw entry points (entry_points.cpp), and what the package installs once
// (Installed, below: the library hooks and the error classes).
//
// Why one small lock and no more: with the GIL, CPython runs one thread's
// Python-facing C code at a time, so this state needs no lock of its own, and
// the import path must not pay for one (bench/callgrind.py). A free-threaded
// interpreter (3.13t) has no GIL: there nanobind's FREE_THREADED build
// (src/python/CMakeLists.txt) defines NB_FREE_THREADED, and nb::ft_mutex
// becomes a PyMutex; everywhere else it compiles to nothing.
//
// The rules that keep it free of deadlocks: hold it for plain C++ reads and
// writes only, never across a call into Python (which may come back into
// dlbridge and take it again, or wait on another thread that waits for it),
// and drop references to Python objects after unlocking. What a thread needs
// of its own lives in thread_local storage instead (the storage pool, the
// hand-over's note of a freed struct); the re-entry guard of imports is one
// list for every thread, under this lock, each entry marked with its thread
// (import.cpp, ImportingGuard).
//
// Taking the lock can end the thread: a contended PyMutex parks the thread
// without its thread state, and CPython (3.13t) ends a thread that takes
// its state back while the interpreter finalizes, by the same forced unwind
// as gil.hpp describes. StateMutex parks the thread there instead, as
// restore_thread does, so a daemon thread at exit never unwinds through a
// destructor that holds or takes the lock.
#pragma once

#include <nanobind/nanobind.h>

#include <atomic>

#include "gil.hpp"

namespace dlbridge::python {

class StateMutex {
 public:
  StateMutex() = default;
  StateMutex(const StateMutex&) = delete;
  StateMutex& operator=(const StateMutex&) = delete;

  void lock() noexcept {
#if defined(NB_FREE_THREADED) && defined(__GLIBCXX__)
    try {
      mutex_.lock();
    } catch (::abi::__forced_unwind&) {
      park_thread();
    }
#else
    mutex_.lock();
#endif
  }
  void unlock() noexcept { mutex_.unlock(); }

 private:
  nanobind::ft_mutex mutex_;
};

class StateLock {
 public:
  explicit StateLock(StateMutex& mutex) noexcept : mutex_(mutex) { mutex_.lock(); }
  ~StateLock() { mutex_.unlock(); }
  StateLock(const StateLock&) = delete;
  StateLock& operator=(const StateLock&) = delete;

 private:
  StateMutex& mutex_;
};

// A Python object that the package installs (a hook, a table) and every call
// reads. Readers get a borrowed pointer without a lock: an installed object
// is never released, since another thread may still be using the one it
// read (the package installs each once; a test that installs another leaves
// the first alive, which is all it costs).
class Installed {
 public:
  Installed() = default;
  Installed(const Installed&) = delete;
  Installed& operator=(const Installed&) = delete;

  // The installed object (borrowed), or NULL before installation.
  PyObject* get() const noexcept { return object_.load(std::memory_order_acquire); }
  // Installs value; the object it replaces stays alive (see above).
  void install(nanobind::object value) noexcept {
    object_.store(value.release().ptr(), std::memory_order_release);
  }

 private:
  std::atomic<PyObject*> object_{nullptr};
};

}  // namespace dlbridge::python
