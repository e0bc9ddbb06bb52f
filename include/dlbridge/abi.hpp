// DLPack 1.3 C ABI, declared layout-identically in dlbridge's own namespace so
// that dlbridge never clashes with (or depends on) another copy of dlpack.h.
// tests/cpp/test_abi_official.cpp compares every size, offset and enum value
// below with an official v1.3 header shipped in a pinned registry package.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dlbridge::abi {

extern "C" {

// A consumer must refuse a tensor whose major version is above its own; a
// newer minor is readable when every field it carries is understood.
struct DLPackVersion {
  uint32_t major;
  uint32_t minor;
};

// Values 5 and 6 are unused; any number outside 1..18 is invalid input.
enum DLDeviceType : int32_t {
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3,  // pinned host memory allocated by CUDA
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLVPI = 9,
  kDLROCM = 10,
  kDLROCMHost = 11,  // pinned host memory allocated by ROCm
  kDLExtDev = 12,
  kDLCUDAManaged = 13,  // CUDA unified memory, reachable from host and device
  kDLOneAPI = 14,
  kDLWebGPU = 15,
  kDLHexagon = 16,
  kDLMAIA = 17,
  kDLTrn = 18,
};

// device_id is 0 for kDLCPU, kDLCUDAHost and kDLCUDAManaged.
struct DLDevice {
  DLDeviceType device_type;
  int32_t device_id;
};

enum DLDataTypeCode : uint8_t {
  kDLInt = 0,
  kDLUInt = 1,
  kDLFloat = 2,
  kDLOpaqueHandle = 3,
  kDLBfloat = 4,
  kDLComplex = 5,
  kDLBool = 6,  // always (6, 8, 1): one byte per element
  kDLFloat8_e3m4 = 7,
  kDLFloat8_e4m3 = 8,
  kDLFloat8_e4m3b11fnuz = 9,
  kDLFloat8_e4m3fn = 10,
  kDLFloat8_e4m3fnuz = 11,
  kDLFloat8_e5m2 = 12,
  kDLFloat8_e5m2fnuz = 13,
  kDLFloat8_e8m0fnu = 14,
  kDLFloat6_e2m3fn = 15,  // bits must be 6
  kDLFloat6_e3m2fn = 16,  // bits must be 6
  kDLFloat4_e2m1fn = 17,  // bits must be 4
};

// Sub-byte types are packed little-bit-endian unless the tensor carries
// DLBRIDGE_FLAG_IS_SUBBYTE_TYPE_PADDED (dlpack.h's
// DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED); a legacy struct cannot carry it.
struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};

// Element i of dimension d lives at
//   (char*)data + byte_offset + (sum_d index_d * strides[d]) * element_bytes.
// Strides count elements, not bytes. Since 1.2 strides is non-NULL when
// ndim != 0; older producers may leave it NULL, meaning compact row-major.
// A size-0 tensor may have data == NULL; ndim == 0 may have shape == NULL.
struct DLTensor {
  // The start of the allocation, an address on most devices; on some device
  // types an opaque handle (OpenCL: a cl_mem), on which no pointer
  // arithmetic is valid (DeviceTypeInfo::direct_address says which). Element
  // 0 is byte_offset bytes into it.
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
};

// Pre-1.0 ("legacy") managed tensor: no version, no flags, so a consumer
// cannot tell read-only data. The deleter may be NULL.
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};

#define DLBRIDGE_FLAG_READ_ONLY (UINT64_C(1) << 0)
#define DLBRIDGE_FLAG_IS_COPIED (UINT64_C(1) << 1)
#define DLBRIDGE_FLAG_IS_SUBBYTE_TYPE_PADDED (UINT64_C(1) << 2)

// The 1.x managed tensor. On a major-version mismatch the consumer calls the
// deleter and reads nothing else: later majors may move every other field.
struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
};

// --- DLPack 1.3 C exchange API -------------------------------------------
// Every function returns 0 on success and -1 on failure, with a Python error
// set (the allocator instead reports through its set_error callback, as its
// caller may hold no Python state); no C++ exception may cross these pointers.

using DLPackManagedTensorAllocator = int (*)(
    DLTensor* prototype, DLManagedTensorVersioned** out, void* error_ctx,
    void (*set_error)(void* error_ctx, const char* kind, const char* message));

// Returns a new owned tensor; the caller calls its deleter once.
using DLPackManagedTensorFromPyObjectNoSync = int (*)(
    void* py_object, DLManagedTensorVersioned** out);

// Takes ownership of tensor and returns a new reference.
using DLPackManagedTensorToPyObjectNoSync = int (*)(
    DLManagedTensorVersioned* tensor, void** out_py_object);

// Fills a borrowed view, valid only until control returns to the producer.
using DLPackDLTensorFromPyObjectNoSync = int (*)(void* py_object,
                                                 DLTensor* out);

// *out_stream may be set to NULL for kDLCPU.
using DLPackCurrentWorkStream = int (*)(DLDeviceType device_type,
                                        int32_t device_id, void** out_stream);

struct DLPackExchangeAPIHeader {
  DLPackVersion version;
  DLPackExchangeAPIHeader* prev_api;  // an older table, or NULL
};

struct DLPackExchangeAPI {
  DLPackExchangeAPIHeader header;
  DLPackManagedTensorAllocator managed_tensor_allocator;
  DLPackManagedTensorFromPyObjectNoSync managed_tensor_from_py_object_no_sync;
  DLPackManagedTensorToPyObjectNoSync managed_tensor_to_py_object_no_sync;
  DLPackDLTensorFromPyObjectNoSync dltensor_from_py_object_no_sync;  // may be NULL
  DLPackCurrentWorkStream current_work_stream;
};

}  // extern "C"

}  // namespace dlbridge::abi
