// dlbridge declares the DLPack ABI itself (abi.hpp) so that it never clashes
// with another copy of dlpack.h. This file is the proof that the two agree:
// it includes an official v1.3 header (from a pinned registry wheel) beside
// dlbridge's and compares every value, size, offset and signature.
#include <gtest/gtest.h>

#include <dlpack/dlpack.h>

#include <dlbridge/abi.hpp>
#include <dlbridge/version.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <type_traits>

namespace {

// Not "abi": <cxxabi.h>, pulled in by GoogleTest, owns the global name.
namespace dlabi = dlbridge::abi;

// The two enums are distinct types; comparing them directly is -Wenum-compare.
template <typename E>
constexpr int64_t num(E value) {
  return static_cast<int64_t>(value);
}

static_assert(DLPACK_MAJOR_VERSION == DLBRIDGE_DLPACK_MAJOR,
              "dlbridge's DLPack major version differs from the official header");
static_assert(DLPACK_MINOR_VERSION == DLBRIDGE_DLPACK_MINOR,
              "dlbridge's DLPack minor version differs from the official header");

// --- Signatures -------------------------------------------------------------
// Sizes alone would accept a swapped pair of pointer parameters. Mapping each
// dlbridge type to its official twin and requiring the mapped function types
// to be *identical* checks every parameter and return type.
template <typename T>
struct official {
  using type = T;  // int, int32_t, void*, const char*: shared by both
};
template <typename T>
using official_t = typename official<T>::type;

template <> struct official<dlabi::DLPackVersion> { using type = ::DLPackVersion; };
template <> struct official<dlabi::DLDeviceType> { using type = ::DLDeviceType; };
template <> struct official<dlabi::DLDevice> { using type = ::DLDevice; };
template <> struct official<dlabi::DLDataType> { using type = ::DLDataType; };
template <> struct official<dlabi::DLTensor> { using type = ::DLTensor; };
template <> struct official<dlabi::DLManagedTensor> { using type = ::DLManagedTensor; };
template <> struct official<dlabi::DLManagedTensorVersioned> {
  using type = ::DLManagedTensorVersioned;
};
template <> struct official<dlabi::DLPackExchangeAPIHeader> {
  using type = ::DLPackExchangeAPIHeader;
};
template <> struct official<dlabi::DLPackExchangeAPI> { using type = ::DLPackExchangeAPI; };
template <typename T>
struct official<T*> {
  using type = official_t<T>*;
};
template <typename T>
struct official<const T> {
  using type = const official_t<T>;
};
template <typename R, typename... Args>
struct official<R (*)(Args...)> {
  using type = official_t<R> (*)(official_t<Args>...);
};

static_assert(std::is_same_v<official_t<dlabi::DLPackManagedTensorAllocator>,
                             ::DLPackManagedTensorAllocator>);
static_assert(std::is_same_v<official_t<dlabi::DLPackManagedTensorFromPyObjectNoSync>,
                             ::DLPackManagedTensorFromPyObjectNoSync>);
static_assert(std::is_same_v<official_t<dlabi::DLPackManagedTensorToPyObjectNoSync>,
                             ::DLPackManagedTensorToPyObjectNoSync>);
static_assert(std::is_same_v<official_t<dlabi::DLPackDLTensorFromPyObjectNoSync>,
                             ::DLPackDLTensorFromPyObjectNoSync>);
static_assert(std::is_same_v<official_t<dlabi::DLPackCurrentWorkStream>,
                             ::DLPackCurrentWorkStream>);
static_assert(std::is_same_v<official_t<decltype(dlabi::DLManagedTensor::deleter)>,
                             decltype(::DLManagedTensor::deleter)>);
static_assert(std::is_same_v<official_t<decltype(dlabi::DLManagedTensorVersioned::deleter)>,
                             decltype(::DLManagedTensorVersioned::deleter)>);
static_assert(std::is_same_v<official_t<decltype(dlabi::DLPackExchangeAPIHeader::prev_api)>,
                             decltype(::DLPackExchangeAPIHeader::prev_api)>);

// Every field of the exchange table has the official field's type.
#define DLB_SAME_FIELD_TYPE(S, f)                                        \
  static_assert(std::is_same_v<official_t<decltype(dlabi::S::f)>,          \
                               decltype(::S::f)>,                        \
                "type of " #S "::" #f " differs from the official header")
DLB_SAME_FIELD_TYPE(DLPackExchangeAPI, header);
DLB_SAME_FIELD_TYPE(DLPackExchangeAPI, managed_tensor_allocator);
DLB_SAME_FIELD_TYPE(DLPackExchangeAPI, managed_tensor_from_py_object_no_sync);
DLB_SAME_FIELD_TYPE(DLPackExchangeAPI, managed_tensor_to_py_object_no_sync);
DLB_SAME_FIELD_TYPE(DLPackExchangeAPI, dltensor_from_py_object_no_sync);
DLB_SAME_FIELD_TYPE(DLPackExchangeAPI, current_work_stream);
DLB_SAME_FIELD_TYPE(DLManagedTensorVersioned, version);
DLB_SAME_FIELD_TYPE(DLManagedTensorVersioned, manager_ctx);
DLB_SAME_FIELD_TYPE(DLManagedTensorVersioned, flags);
DLB_SAME_FIELD_TYPE(DLManagedTensorVersioned, dl_tensor);
DLB_SAME_FIELD_TYPE(DLTensor, data);
DLB_SAME_FIELD_TYPE(DLTensor, device);
DLB_SAME_FIELD_TYPE(DLTensor, ndim);
DLB_SAME_FIELD_TYPE(DLTensor, dtype);
DLB_SAME_FIELD_TYPE(DLTensor, shape);
DLB_SAME_FIELD_TYPE(DLTensor, strides);
DLB_SAME_FIELD_TYPE(DLTensor, byte_offset);
DLB_SAME_FIELD_TYPE(DLDataType, code);
DLB_SAME_FIELD_TYPE(DLDataType, bits);
DLB_SAME_FIELD_TYPE(DLDataType, lanes);
DLB_SAME_FIELD_TYPE(DLDevice, device_type);
DLB_SAME_FIELD_TYPE(DLDevice, device_id);
DLB_SAME_FIELD_TYPE(DLPackVersion, major);
DLB_SAME_FIELD_TYPE(DLPackVersion, minor);
#undef DLB_SAME_FIELD_TYPE

// --- Layout -----------------------------------------------------------------
#define DLB_SAME_SIZE(S)                                                   \
  static_assert(sizeof(dlabi::S) == sizeof(::S), "sizeof " #S " differs");   \
  static_assert(alignof(dlabi::S) == alignof(::S), "alignof " #S " differs")
#define DLB_SAME_OFFSET(S, f)                             \
  static_assert(offsetof(dlabi::S, f) == offsetof(::S, f),  \
                "offset of " #S "::" #f " differs")
DLB_SAME_SIZE(DLPackVersion);
DLB_SAME_SIZE(DLDeviceType);
DLB_SAME_SIZE(DLDevice);
DLB_SAME_SIZE(DLDataType);
DLB_SAME_SIZE(DLTensor);
DLB_SAME_SIZE(DLManagedTensor);
DLB_SAME_SIZE(DLManagedTensorVersioned);
DLB_SAME_SIZE(DLPackExchangeAPIHeader);
DLB_SAME_SIZE(DLPackExchangeAPI);
DLB_SAME_OFFSET(DLPackVersion, major);
DLB_SAME_OFFSET(DLPackVersion, minor);
DLB_SAME_OFFSET(DLDevice, device_type);
DLB_SAME_OFFSET(DLDevice, device_id);
DLB_SAME_OFFSET(DLDataType, code);
DLB_SAME_OFFSET(DLDataType, bits);
DLB_SAME_OFFSET(DLDataType, lanes);
DLB_SAME_OFFSET(DLTensor, data);
DLB_SAME_OFFSET(DLTensor, device);
DLB_SAME_OFFSET(DLTensor, ndim);
DLB_SAME_OFFSET(DLTensor, dtype);
DLB_SAME_OFFSET(DLTensor, shape);
DLB_SAME_OFFSET(DLTensor, strides);
DLB_SAME_OFFSET(DLTensor, byte_offset);
DLB_SAME_OFFSET(DLManagedTensor, dl_tensor);
DLB_SAME_OFFSET(DLManagedTensor, manager_ctx);
DLB_SAME_OFFSET(DLManagedTensor, deleter);
DLB_SAME_OFFSET(DLManagedTensorVersioned, version);
DLB_SAME_OFFSET(DLManagedTensorVersioned, manager_ctx);
DLB_SAME_OFFSET(DLManagedTensorVersioned, deleter);
DLB_SAME_OFFSET(DLManagedTensorVersioned, flags);
DLB_SAME_OFFSET(DLManagedTensorVersioned, dl_tensor);
DLB_SAME_OFFSET(DLPackExchangeAPIHeader, version);
DLB_SAME_OFFSET(DLPackExchangeAPIHeader, prev_api);
DLB_SAME_OFFSET(DLPackExchangeAPI, header);
DLB_SAME_OFFSET(DLPackExchangeAPI, managed_tensor_allocator);
DLB_SAME_OFFSET(DLPackExchangeAPI, managed_tensor_from_py_object_no_sync);
DLB_SAME_OFFSET(DLPackExchangeAPI, managed_tensor_to_py_object_no_sync);
DLB_SAME_OFFSET(DLPackExchangeAPI, dltensor_from_py_object_no_sync);
DLB_SAME_OFFSET(DLPackExchangeAPI, current_work_stream);
#undef DLB_SAME_SIZE
#undef DLB_SAME_OFFSET

// --- Values -----------------------------------------------------------------
// Each pair once, so that the static checks and the runtime report share it.
struct EnumPair {
  const char* name;
  int64_t ours;
  int64_t theirs;
};

#define DLB_PAIR(name) EnumPair{#name, num(dlabi::name), num(::name)}
constexpr EnumPair device_types[] = {
    DLB_PAIR(kDLCPU),     DLB_PAIR(kDLCUDA),        DLB_PAIR(kDLCUDAHost),
    DLB_PAIR(kDLOpenCL),  DLB_PAIR(kDLVulkan),      DLB_PAIR(kDLMetal),
    DLB_PAIR(kDLVPI),     DLB_PAIR(kDLROCM),        DLB_PAIR(kDLROCMHost),
    DLB_PAIR(kDLExtDev),  DLB_PAIR(kDLCUDAManaged), DLB_PAIR(kDLOneAPI),
    DLB_PAIR(kDLWebGPU),  DLB_PAIR(kDLHexagon),     DLB_PAIR(kDLMAIA),
    DLB_PAIR(kDLTrn),
};
constexpr EnumPair dtype_codes[] = {
    DLB_PAIR(kDLInt),           DLB_PAIR(kDLUInt),
    DLB_PAIR(kDLFloat),         DLB_PAIR(kDLOpaqueHandle),
    DLB_PAIR(kDLBfloat),        DLB_PAIR(kDLComplex),
    DLB_PAIR(kDLBool),          DLB_PAIR(kDLFloat8_e3m4),
    DLB_PAIR(kDLFloat8_e4m3),   DLB_PAIR(kDLFloat8_e4m3b11fnuz),
    DLB_PAIR(kDLFloat8_e4m3fn), DLB_PAIR(kDLFloat8_e4m3fnuz),
    DLB_PAIR(kDLFloat8_e5m2),   DLB_PAIR(kDLFloat8_e5m2fnuz),
    DLB_PAIR(kDLFloat8_e8m0fnu), DLB_PAIR(kDLFloat6_e2m3fn),
    DLB_PAIR(kDLFloat6_e3m2fn), DLB_PAIR(kDLFloat4_e2m1fn),
};
#undef DLB_PAIR

constexpr EnumPair flags[] = {
    {"READ_ONLY", int64_t(DLBRIDGE_FLAG_READ_ONLY),
     int64_t(DLPACK_FLAG_BITMASK_READ_ONLY)},
    {"IS_COPIED", int64_t(DLBRIDGE_FLAG_IS_COPIED),
     int64_t(DLPACK_FLAG_BITMASK_IS_COPIED)},
    {"IS_SUBBYTE_TYPE_PADDED", int64_t(DLBRIDGE_FLAG_IS_SUBBYTE_TYPE_PADDED),
     int64_t(DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED)},
};

template <size_t N>
constexpr bool all_equal(const EnumPair (&pairs)[N]) {
  for (const EnumPair& p : pairs)
    if (p.ours != p.theirs) return false;
  return true;
}
static_assert(std::size(device_types) == 16, "DLPack 1.3 has 16 device types");
static_assert(std::size(dtype_codes) == 18, "DLPack 1.3 has 18 dtype codes");
static_assert(all_equal(device_types), "a DLDeviceType value differs");
static_assert(all_equal(dtype_codes), "a DLDataTypeCode value differs");
static_assert(all_equal(flags), "a flag bit differs");

template <size_t N>
void expect_all_equal(const EnumPair (&pairs)[N]) {
  for (const EnumPair& p : pairs)
    EXPECT_EQ(p.ours, p.theirs) << p.name;
}

}  // namespace

// The static_asserts already decided; the runtime checks name the entry that
// differs, which is what a reader of a CI log needs.
TEST(AbiOfficial, Versions) {
  EXPECT_EQ(DLBRIDGE_DLPACK_MAJOR, DLPACK_MAJOR_VERSION);
  EXPECT_EQ(DLBRIDGE_DLPACK_MINOR, DLPACK_MINOR_VERSION);
}

TEST(AbiOfficial, DeviceTypes) { expect_all_equal(device_types); }

TEST(AbiOfficial, DTypeCodes) { expect_all_equal(dtype_codes); }

TEST(AbiOfficial, FlagBits) { expect_all_equal(flags); }

TEST(AbiOfficial, StructSizes) {
  EXPECT_EQ(sizeof(dlabi::DLPackVersion), sizeof(::DLPackVersion));
  EXPECT_EQ(sizeof(dlabi::DLDevice), sizeof(::DLDevice));
  EXPECT_EQ(sizeof(dlabi::DLDataType), sizeof(::DLDataType));
  EXPECT_EQ(sizeof(dlabi::DLTensor), sizeof(::DLTensor));
  EXPECT_EQ(sizeof(dlabi::DLManagedTensor), sizeof(::DLManagedTensor));
  EXPECT_EQ(sizeof(dlabi::DLManagedTensorVersioned), sizeof(::DLManagedTensorVersioned));
  EXPECT_EQ(sizeof(dlabi::DLPackExchangeAPIHeader), sizeof(::DLPackExchangeAPIHeader));
  EXPECT_EQ(sizeof(dlabi::DLPackExchangeAPI), sizeof(::DLPackExchangeAPI));
}

TEST(AbiOfficial, ExchangeApiOffsets) {
  EXPECT_EQ(offsetof(dlabi::DLPackExchangeAPI, managed_tensor_allocator),
            offsetof(::DLPackExchangeAPI, managed_tensor_allocator));
  EXPECT_EQ(offsetof(dlabi::DLPackExchangeAPI, managed_tensor_from_py_object_no_sync),
            offsetof(::DLPackExchangeAPI, managed_tensor_from_py_object_no_sync));
  EXPECT_EQ(offsetof(dlabi::DLPackExchangeAPI, managed_tensor_to_py_object_no_sync),
            offsetof(::DLPackExchangeAPI, managed_tensor_to_py_object_no_sync));
  EXPECT_EQ(offsetof(dlabi::DLPackExchangeAPI, dltensor_from_py_object_no_sync),
            offsetof(::DLPackExchangeAPI, dltensor_from_py_object_no_sync));
  EXPECT_EQ(offsetof(dlabi::DLPackExchangeAPI, current_work_stream),
            offsetof(::DLPackExchangeAPI, current_work_stream));
}

// Layout equality is what lets dlbridge hand its structs to code compiled
// against dlpack.h; show it by writing through one view and reading the other.
TEST(AbiOfficial, ManagedTensorVersionedReadsThroughOfficialView) {
  int64_t shape[2] = {3, 4};
  int64_t strides[2] = {4, 1};
  dlabi::DLManagedTensorVersioned ours{};
  ours.version = {1, 3};
  ours.flags = DLBRIDGE_FLAG_READ_ONLY | DLBRIDGE_FLAG_IS_COPIED;
  ours.dl_tensor.device = {dlabi::kDLCUDA, 7};
  ours.dl_tensor.ndim = 2;
  ours.dl_tensor.dtype = {dlabi::kDLFloat4_e2m1fn, 4, 2};
  ours.dl_tensor.shape = shape;
  ours.dl_tensor.strides = strides;
  ours.dl_tensor.byte_offset = 256;

  ::DLManagedTensorVersioned theirs;
  static_assert(sizeof theirs == sizeof ours);
  std::memcpy(&theirs, &ours, sizeof ours);
  EXPECT_EQ(theirs.version.major, 1u);
  EXPECT_EQ(theirs.version.minor, 3u);
  EXPECT_EQ(theirs.flags, DLPACK_FLAG_BITMASK_READ_ONLY | DLPACK_FLAG_BITMASK_IS_COPIED);
  EXPECT_EQ(theirs.dl_tensor.device.device_type, ::kDLCUDA);
  EXPECT_EQ(theirs.dl_tensor.device.device_id, 7);
  EXPECT_EQ(theirs.dl_tensor.ndim, 2);
  EXPECT_EQ(num(theirs.dl_tensor.dtype.code), num(::kDLFloat4_e2m1fn));
  EXPECT_EQ(theirs.dl_tensor.dtype.bits, 4);
  EXPECT_EQ(theirs.dl_tensor.dtype.lanes, 2);
  EXPECT_EQ(theirs.dl_tensor.shape, shape);
  EXPECT_EQ(theirs.dl_tensor.strides, strides);
  EXPECT_EQ(theirs.dl_tensor.byte_offset, 256u);
}
