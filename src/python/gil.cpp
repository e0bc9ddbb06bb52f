// See gil.hpp: GIL requests that cannot abort the process at exit.
#include "gil.hpp"

#include <chrono>
#include <thread>

#if defined(__GLIBCXX__)
#include <cxxabi.h>
#endif
#if defined(__GLIBCXX__) && defined(__linux__)
#include <dlfcn.h>
#include <unwind.h>
#endif

namespace dlbridge::python {

void park_thread() noexcept {
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

#if defined(__GLIBCXX__) && defined(__linux__)
// The backstop for every other call into Python. Any of them can end the
// thread at exit, not only the GIL requests below: a module import, a
// lock.acquire() or the eval loop inside a producer's __dlpack__ retakes
// the GIL, and a C++ frame of this module may call into Python in many
// places (nanobind's own among them). The forced unwind then ran this
// module's cleanups without the GIL -- Py_DECREF of a tuple while the main
// thread finalizes (a segfault in tupledealloc) -- and ended in a
// catch (...) of python_boundary or nanobind, whose handler cannot stop it
// (std::current_exception() is empty for it: std::rethrow_exception
// segfaulted; or std::terminate).
//
// The unwinder asks a frame's personality routine what to run in it; every
// frame of this module names the one below, which the module defines for
// itself (hidden: its own frames bind to it, no other library's do). At the
// first frame of this module with anything to run, glibc's thread-exit
// unwind (exception class 0, forced) parks the thread before any of it runs;
// the thread then holds no GIL (it was refused it) and dies with the process.
// Every other unwind, C++ exceptions included, goes to libstdc++'s routine.
namespace {
using Personality = _Unwind_Reason_Code (*)(int, _Unwind_Action, _Unwind_Exception_Class, _Unwind_Exception*,
                                            _Unwind_Context*);
Personality libstdcxx_personality() noexcept {
  static const Personality found = reinterpret_cast<Personality>(dlsym(RTLD_NEXT, "__gxx_personality_v0"));
  return found;
}
}  // namespace
}  // namespace dlbridge::python

extern "C" __attribute__((visibility("hidden"), used)) _Unwind_Reason_Code __gxx_personality_v0(
    int version, _Unwind_Action actions, _Unwind_Exception_Class exception_class, _Unwind_Exception* exception,
    _Unwind_Context* context) {
  if ((actions & _UA_FORCE_UNWIND) && exception_class == 0) dlbridge::python::park_thread();
  return dlbridge::python::libstdcxx_personality()(version, actions, exception_class, exception, context);
}

namespace dlbridge::python {
#endif

#if defined(__GLIBCXX__)
// The forced unwind may be caught, but the handler must not end without
// rethrowing it; it never ends here.
void restore_thread(PyThreadState* state) noexcept {
  try {
    PyEval_RestoreThread(state);
  } catch (abi::__forced_unwind&) {
    park_thread();
  }
}

PyGILState_STATE ensure_gil() noexcept {
  try {
    return PyGILState_Ensure();
  } catch (abi::__forced_unwind&) {
    park_thread();
  }
}
#else
// Other C++ runtimes do not unwind C++ frames on thread exit.
void restore_thread(PyThreadState* state) noexcept { PyEval_RestoreThread(state); }
PyGILState_STATE ensure_gil() noexcept { return PyGILState_Ensure(); }
#endif

}  // namespace dlbridge::python
