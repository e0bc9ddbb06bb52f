// Every public header of the core in one translation unit, for the compilers
// the suite does not build with: scripts/test compiles it with Clang
// (-Wall -Wextra -Wpedantic -Werror) when Clang is installed. The bindings'
// headers (nanobind.hpp, pybind11.hpp) need Python and are left out.
#include <dlbridge/buffer_view.hpp>
#include <dlbridge/dlbridge.hpp>
#include <dlbridge/shared_memory.hpp>
#include <dlbridge/python/tensor_arg.hpp>

int main() { return 0; }
