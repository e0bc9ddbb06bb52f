// The single source of every version string in dlbridge: CMake, the Python
// package metadata and the tests all read the numbers below.
#pragma once

#define DLBRIDGE_VERSION_MAJOR 0
#define DLBRIDGE_VERSION_MINOR 1
#define DLBRIDGE_VERSION_PATCH 0
#define DLBRIDGE_VERSION_STRING "0.1.0"

// The DLPack version that dlbridge produces and fully understands.
#define DLBRIDGE_DLPACK_MAJOR 1
#define DLBRIDGE_DLPACK_MINOR 3
