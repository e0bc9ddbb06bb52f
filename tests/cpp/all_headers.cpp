// Every public header of the core in one translation unit, for the compilers
// the suite does not build with: scripts/test compiles it with Clang
// (-Wall -Wextra -Wpedantic -Werror) when Clang is installed. Left out:
// dlpack_compat.hpp (needs the official <dlpack/dlpack.h>) and the python/
// headers that need Python (nanobind.hpp, pybind11.hpp, caster.hpp,
// bridge.hpp, caster_api.hpp).
#include <dlbridge/dlbridge.hpp>

#include <dlbridge/backend/cuda_ipc.hpp>
#include <dlbridge/buffer_view.hpp>
#include <dlbridge/platform/shared_memory.hpp>
#include <dlbridge/python/tensor_arg.hpp>

int main() { return 0; }
