// A daemon thread ended inside dlbridge at interpreter exit parks before any
// of dlbridge's cleanups run (gil.hpp says why such a thread must not unwind).
#include <chrono>  // first: it says which standard library this is (__GLIBCXX__)
#include <thread>

#if defined(__GLIBCXX__) && defined(__linux__)
#include <dlfcn.h>
#include <unwind.h>

// The backstop for every call into Python. Any of them can end the thread
// at exit, not only the GIL requests gil.hpp parks at: a module import, a
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
// Compiled into each extension module (_core and _share), so that the frames
// of both name it.
namespace {
using Personality = _Unwind_Reason_Code (*)(int, _Unwind_Action, _Unwind_Exception_Class, _Unwind_Exception*,
                                            _Unwind_Context*);
Personality libstdcxx_personality() noexcept {
  static const Personality found = reinterpret_cast<Personality>(dlsym(RTLD_NEXT, "__gxx_personality_v0"));
  return found;
}

[[noreturn]] void park() noexcept {
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}
}  // namespace

extern "C" __attribute__((visibility("hidden"), used)) _Unwind_Reason_Code __gxx_personality_v0(
    int version, _Unwind_Action actions, _Unwind_Exception_Class exception_class, _Unwind_Exception* exception,
    _Unwind_Context* context) {
  if ((actions & _UA_FORCE_UNWIND) && exception_class == 0) park();
  return libstdcxx_personality()(version, actions, exception_class, exception, context);
}

#endif
