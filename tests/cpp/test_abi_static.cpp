// Compiling this file is the test: every size, offset and alignment that a
// foreign DLPack producer or consumer relies on is pinned here against the
// LP64 layouts written down in docs/dlpack-rules.md. A field moved by one
// byte breaks the build instead of corrupting memory at run time.
#include <gtest/gtest.h>

#include <dlbridge/abi.hpp>

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace {

namespace abi = dlbridge::abi;

// offsetof is only defined for standard-layout types; a C++ change that made
// one of these non-standard-layout would silently break C interop.
static_assert(std::is_standard_layout_v<abi::DLPackVersion>);
static_assert(std::is_standard_layout_v<abi::DLDevice>);
static_assert(std::is_standard_layout_v<abi::DLDataType>);
static_assert(std::is_standard_layout_v<abi::DLTensor>);
static_assert(std::is_standard_layout_v<abi::DLManagedTensor>);
static_assert(std::is_standard_layout_v<abi::DLManagedTensorVersioned>);
static_assert(std::is_standard_layout_v<abi::DLPackExchangeAPIHeader>);
static_assert(std::is_standard_layout_v<abi::DLPackExchangeAPI>);

// Producers memcpy and zero-initialise these; they must stay trivial.
static_assert(std::is_trivially_copyable_v<abi::DLTensor>);
static_assert(std::is_trivially_copyable_v<abi::DLManagedTensorVersioned>);
static_assert(std::is_trivially_copyable_v<abi::DLPackExchangeAPI>);

// The enums travel inside structs as their underlying integer.
static_assert(std::is_same_v<std::underlying_type_t<abi::DLDeviceType>, int32_t>);
static_assert(std::is_same_v<std::underlying_type_t<abi::DLDataTypeCode>, uint8_t>);
static_assert(sizeof(abi::DLDeviceType) == 4);

// The layouts below assume 8-byte pointers; a 32-bit build has other offsets.
static_assert(sizeof(void*) == 8, "ABI pins are written for LP64 targets");
static_assert(sizeof(void (*)()) == 8);

static_assert(sizeof(abi::DLPackVersion) == 8);
static_assert(alignof(abi::DLPackVersion) == 4);
static_assert(offsetof(abi::DLPackVersion, major) == 0);
static_assert(offsetof(abi::DLPackVersion, minor) == 4);

static_assert(sizeof(abi::DLDevice) == 8);
static_assert(alignof(abi::DLDevice) == 4);
static_assert(offsetof(abi::DLDevice, device_type) == 0);
static_assert(offsetof(abi::DLDevice, device_id) == 4);

static_assert(sizeof(abi::DLDataType) == 4);
static_assert(alignof(abi::DLDataType) == 2);
static_assert(offsetof(abi::DLDataType, code) == 0);
static_assert(offsetof(abi::DLDataType, bits) == 1);
static_assert(offsetof(abi::DLDataType, lanes) == 2);

static_assert(sizeof(abi::DLTensor) == 48);
static_assert(alignof(abi::DLTensor) == 8);
static_assert(offsetof(abi::DLTensor, data) == 0);
static_assert(offsetof(abi::DLTensor, device) == 8);
static_assert(offsetof(abi::DLTensor, ndim) == 16);
static_assert(offsetof(abi::DLTensor, dtype) == 20);
static_assert(offsetof(abi::DLTensor, shape) == 24);
static_assert(offsetof(abi::DLTensor, strides) == 32);
static_assert(offsetof(abi::DLTensor, byte_offset) == 40);

static_assert(sizeof(abi::DLManagedTensor) == 64);
static_assert(alignof(abi::DLManagedTensor) == 8);
static_assert(offsetof(abi::DLManagedTensor, dl_tensor) == 0);
static_assert(offsetof(abi::DLManagedTensor, manager_ctx) == 48);
static_assert(offsetof(abi::DLManagedTensor, deleter) == 56);

static_assert(sizeof(abi::DLManagedTensorVersioned) == 80);
static_assert(alignof(abi::DLManagedTensorVersioned) == 8);
static_assert(offsetof(abi::DLManagedTensorVersioned, version) == 0);
static_assert(offsetof(abi::DLManagedTensorVersioned, manager_ctx) == 8);
static_assert(offsetof(abi::DLManagedTensorVersioned, deleter) == 16);
static_assert(offsetof(abi::DLManagedTensorVersioned, flags) == 24);
static_assert(offsetof(abi::DLManagedTensorVersioned, dl_tensor) == 32);

static_assert(sizeof(abi::DLPackExchangeAPIHeader) == 16);
static_assert(alignof(abi::DLPackExchangeAPIHeader) == 8);
static_assert(offsetof(abi::DLPackExchangeAPIHeader, version) == 0);
static_assert(offsetof(abi::DLPackExchangeAPIHeader, prev_api) == 8);

static_assert(sizeof(abi::DLPackExchangeAPI) == 56);
static_assert(alignof(abi::DLPackExchangeAPI) == 8);
static_assert(offsetof(abi::DLPackExchangeAPI, header) == 0);
static_assert(offsetof(abi::DLPackExchangeAPI, managed_tensor_allocator) == 16);
static_assert(offsetof(abi::DLPackExchangeAPI, managed_tensor_from_py_object_no_sync) == 24);
static_assert(offsetof(abi::DLPackExchangeAPI, managed_tensor_to_py_object_no_sync) == 32);
static_assert(offsetof(abi::DLPackExchangeAPI, dltensor_from_py_object_no_sync) == 40);
static_assert(offsetof(abi::DLPackExchangeAPI, current_work_stream) == 48);

// Flags are bit positions fixed by the spec; consumers test them with '&'.
static_assert(DLBRIDGE_FLAG_READ_ONLY == (uint64_t{1} << 0));
static_assert(DLBRIDGE_FLAG_IS_COPIED == (uint64_t{1} << 1));
static_assert(DLBRIDGE_FLAG_IS_SUBBYTE_TYPE_PADDED == (uint64_t{1} << 2));
static_assert(std::is_same_v<decltype(DLBRIDGE_FLAG_READ_ONLY), uint64_t>);

}  // namespace

// The assertions above already ran in the compiler; this gives ctest an
// executable that proves the file was built with the flags of the suite.
TEST(AbiStatic, LayoutsPinnedAtCompileTime) {
  SUCCEED();
}
