// See gil.hpp: GIL requests that cannot abort the process at exit.
#include "gil.hpp"

#include <chrono>
#include <thread>

#if defined(__GLIBCXX__)
#include <cxxabi.h>
#endif

namespace dlbridge::python {

void park_thread() noexcept {
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}


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
