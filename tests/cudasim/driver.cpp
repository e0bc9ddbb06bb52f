// The one driver entry point dlbridge reaches through the runtime, simulated:
// cudaGetDriverEntryPoint(ByVersion)("cuMemGetAddressRange") returns a
// function that reports the allocation holding a pointer (an opened IPC
// handle's mapping included) as the driver does, from the simulator's own
// records: the size a caller can trust, whatever a handle or a message said.
#include <cstdint>
#include <cstring>

#include "cudasim.h"
#include "sim_state.hpp"

namespace {

constexpr int cuda_error_not_found = 500;  // CUDA_ERROR_NOT_FOUND
constexpr int cuda_error_insufficient_driver = 35;

// CUresult cuMemGetAddressRange_v2(CUdeviceptr* pbase, size_t* psize, CUdeviceptr dptr)
int sim_mem_get_address_range(unsigned long long* base, size_t* size, unsigned long long p) {
  if (cudasim::insufficient_driver()) return cuda_error_insufficient_driver;
  const void* start = nullptr;
  size_t bytes = 0;
  if (!cudasim::allocation_range(reinterpret_cast<const void*>(uintptr_t(p)), &start, &bytes))
    return cuda_error_not_found;
  if (base != nullptr) *base = reinterpret_cast<uintptr_t>(start);
  if (size != nullptr) *size = bytes;
  cudasim::count("address_range");
  return 0;
}

// flags: cudaEnableDefault, cudaEnableLegacyStream or cudaEnablePerThreadDefaultStream.
// version: the CUDA version asked for; cuMemGetAddressRange_v2 exists since 3.2.
cudaError_t entry_point(const char* symbol, void** function, unsigned long long flags,
                        unsigned version, int* status) {
  if (cudaError_t e = cudasim::enter("cudaGetDriverEntryPoint")) return cudasim::answer(e);
  if (symbol == nullptr || function == nullptr || flags > 2)
    return cudasim::answer(cudaErrorInvalidValue);
  const bool known = std::strcmp(symbol, "cuMemGetAddressRange") == 0;
  const bool recent = version >= 3020;
  *function = known && recent ? reinterpret_cast<void*>(&sim_mem_get_address_range) : nullptr;
  // cudaDriverEntryPointSuccess, ...SymbolNotFound, ...VersionNotSufficent
  if (status != nullptr) *status = !known ? 1 : recent ? 0 : 2;
  return cudaSuccess;
}

}  // namespace

// Defined with the prototypes of the header the simulator is built against:
// CUDA 11's cudaGetDriverEntryPoint has no status argument, ByVersion came
// with 12.5.
extern "C" {

#if defined(DLBRIDGE_HAVE_CUDA_RUNTIME_API) && CUDART_VERSION < 12000
cudaError_t cudaGetDriverEntryPoint(const char* symbol, void** funcPtr, unsigned long long flags) {
  return entry_point(symbol, funcPtr, flags, CUDART_VERSION, nullptr);
}
#else
cudaError_t cudaGetDriverEntryPoint(const char* symbol, void** funcPtr, unsigned long long flags,
                                    cudaDriverEntryPointQueryResult* driverStatus) {
  return entry_point(symbol, funcPtr, flags, 12000, reinterpret_cast<int*>(driverStatus));
}
#endif

#if !defined(DLBRIDGE_HAVE_CUDA_RUNTIME_API) || CUDART_VERSION >= 12050
cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** funcPtr,
                                             unsigned int cudaVersion, unsigned long long flags,
                                             cudaDriverEntryPointQueryResult* driverStatus) {
  return entry_point(symbol, funcPtr, flags, cudaVersion, reinterpret_cast<int*>(driverStatus));
}
#endif

}  // extern "C"
