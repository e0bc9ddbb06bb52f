// Releasing and retaking the GIL in a way that survives interpreter exit.
//
// While the interpreter finalizes, CPython (3.8-3.13) ends any thread that
// asks for the GIL by calling pthread_exit. glibc implements that as a
// forced unwind, and on its way it meets C++ frames that may not be left by
// an exception: nanobind's catch (...) and every destructor (noexcept). The
// result was std::terminate, "terminate called without an active
// exception", for a daemon thread inside Tensor.copy() at exit. These
// helpers catch that unwind where the GIL is requested and park the thread
// for good instead; it holds no GIL and no lock then, and dies with the
// process, as Python 3.14 does with such threads itself.
//
// The same unwind can start inside any Python code the extension calls
// (os.write retaking the GIL, or the eval loop handing it over between two
// bytecodes): calling_python parks the thread there too, before the unwind
// reaches nanobind's catch (...) or a noexcept caller. Every other call into
// Python is covered by the module's own personality routine (exit_unwind.cpp), which
// parks the thread at the first frame of the module that the unwind reaches,
// before that frame's destructors drop Python references without the GIL.
#pragma once

#include <Python.h>

#include <utility>

#if defined(__GLIBCXX__)
#include <cxxabi.h>
#endif

namespace dlbridge::python {

// PyEval_RestoreThread(state), or never returns during interpreter exit.
void restore_thread(PyThreadState* state) noexcept;
// PyGILState_Ensure(), or never returns during interpreter exit.
PyGILState_STATE ensure_gil() noexcept;
// Sleeps for good: what a thread that interpreter exit ended does instead
// of unwinding.
[[noreturn]] void park_thread() noexcept;

// body() (which runs Python code), or never returns when interpreter exit
// ends the thread inside it. Its exceptions propagate.
template <typename Body>
decltype(auto) calling_python(Body&& body) {
#if defined(__GLIBCXX__)
  try {
    return std::forward<Body>(body)();
  } catch (::abi::__forced_unwind&) {
    park_thread();
  }
#else
  return std::forward<Body>(body)();
#endif
}

// Releases the GIL for the lifetime of the object (large copies run without
// it); the destructor takes it back through restore_thread.
class GilReleased {
 public:
  GilReleased() noexcept : state_(PyEval_SaveThread()) {}
  ~GilReleased() { restore_thread(state_); }
  GilReleased(const GilReleased&) = delete;
  GilReleased& operator=(const GilReleased&) = delete;

 private:
  PyThreadState* state_;
};

}  // namespace dlbridge::python
