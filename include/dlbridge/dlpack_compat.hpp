// Hand-over between the official <dlpack/dlpack.h> types (::DLTensor,
// ::DLManagedTensorVersioned, ...) and dlbridge's own (dlbridge::abi::...),
// for projects that already include the official header (PyTorch, TVM, CuPy,
// MLX ship it). Include it first, or let this header include
// <dlpack/dlpack.h>:
//
//   #include <ATen/dlpack.h>                 // any official copy, any 1.x
//   #include <dlbridge/dlpack_compat.hpp>
//   dlbridge::ManagedTensor t = dlbridge::adopt(at::toDLPackVersioned(x));
//   ::DLManagedTensorVersioned* out =
//       dlbridge::release_as<::DLManagedTensorVersioned>(t);
//
// The two declarations are layout-identical C structs. Every size, alignment
// and offset the conversions rely on is static_assert'ed below, so a
// mismatching header fails to compile here instead of corrupting memory; the
// one reinterpretation lives in detail::same_layout and nowhere else.
#pragma once

#ifndef DLPACK_MAJOR_VERSION
#include <dlpack/dlpack.h>
#endif

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "abi.hpp"
#include "managed_tensor.hpp"
#include "tensor_view.hpp"
#include "version.hpp"

// A tensor struct of another major version has another layout: refuse now.
static_assert(DLPACK_MAJOR_VERSION == DLBRIDGE_DLPACK_MAJOR,
              "dlbridge/dlpack_compat.hpp: the official dlpack.h has another major version");

namespace dlbridge {

namespace detail {

template <typename A, typename B>
constexpr bool same_size_and_alignment =
    sizeof(A) == sizeof(B) && alignof(A) == alignof(B) &&
    std::is_standard_layout_v<A> && std::is_standard_layout_v<B>;

#define DLBRIDGE_SAME_FIELD(type, field)                                  \
  static_assert(offsetof(::type, field) == offsetof(abi::type, field) &&  \
                    sizeof(::type::field) == sizeof(abi::type::field),    \
                "dlbridge/dlpack_compat.hpp: " #type "::" #field          \
                " differs from the official header")

static_assert(same_size_and_alignment<::DLPackVersion, abi::DLPackVersion>);
DLBRIDGE_SAME_FIELD(DLPackVersion, major);
DLBRIDGE_SAME_FIELD(DLPackVersion, minor);

static_assert(sizeof(::DLDeviceType) == sizeof(abi::DLDeviceType));
static_assert(same_size_and_alignment<::DLDevice, abi::DLDevice>);
DLBRIDGE_SAME_FIELD(DLDevice, device_type);
DLBRIDGE_SAME_FIELD(DLDevice, device_id);

static_assert(same_size_and_alignment<::DLDataType, abi::DLDataType>);
DLBRIDGE_SAME_FIELD(DLDataType, code);
DLBRIDGE_SAME_FIELD(DLDataType, bits);
DLBRIDGE_SAME_FIELD(DLDataType, lanes);

static_assert(same_size_and_alignment<::DLTensor, abi::DLTensor>);
DLBRIDGE_SAME_FIELD(DLTensor, data);
DLBRIDGE_SAME_FIELD(DLTensor, device);
DLBRIDGE_SAME_FIELD(DLTensor, ndim);
DLBRIDGE_SAME_FIELD(DLTensor, dtype);
DLBRIDGE_SAME_FIELD(DLTensor, shape);
DLBRIDGE_SAME_FIELD(DLTensor, strides);
DLBRIDGE_SAME_FIELD(DLTensor, byte_offset);
static_assert(std::is_same_v<decltype(::DLTensor::shape), decltype(abi::DLTensor::shape)> &&
              std::is_same_v<decltype(::DLTensor::strides), decltype(abi::DLTensor::strides)> &&
              std::is_same_v<decltype(::DLTensor::byte_offset), decltype(abi::DLTensor::byte_offset)>);

static_assert(same_size_and_alignment<::DLManagedTensor, abi::DLManagedTensor>);
DLBRIDGE_SAME_FIELD(DLManagedTensor, dl_tensor);
DLBRIDGE_SAME_FIELD(DLManagedTensor, manager_ctx);
DLBRIDGE_SAME_FIELD(DLManagedTensor, deleter);

static_assert(same_size_and_alignment<::DLManagedTensorVersioned, abi::DLManagedTensorVersioned>);
DLBRIDGE_SAME_FIELD(DLManagedTensorVersioned, version);
DLBRIDGE_SAME_FIELD(DLManagedTensorVersioned, manager_ctx);
DLBRIDGE_SAME_FIELD(DLManagedTensorVersioned, deleter);
DLBRIDGE_SAME_FIELD(DLManagedTensorVersioned, flags);
DLBRIDGE_SAME_FIELD(DLManagedTensorVersioned, dl_tensor);
static_assert(DLPACK_FLAG_BITMASK_READ_ONLY == DLBRIDGE_FLAG_READ_ONLY &&
              DLPACK_FLAG_BITMASK_IS_COPIED == DLBRIDGE_FLAG_IS_COPIED);

// The single place where a pointer to one declaration is read as the other;
// legal in practice for these extern "C" structs of asserted identical
// layout, as every DLPack consumer that ships its own copy relies on.
template <typename To, typename From>
To* same_layout(From* p) noexcept {
  static_assert(same_size_and_alignment<std::remove_cv_t<To>, std::remove_cv_t<From>>);
  return reinterpret_cast<To*>(p);
}

}  // namespace detail

// --- Values -----------------------------------------------------------------
inline ::DLPackVersion to_official(abi::DLPackVersion v) noexcept { return {v.major, v.minor}; }
inline abi::DLPackVersion from_official(::DLPackVersion v) noexcept { return {v.major, v.minor}; }
inline ::DLDevice to_official(abi::DLDevice d) noexcept {
  return {static_cast<::DLDeviceType>(d.device_type), d.device_id};
}
inline abi::DLDevice from_official(::DLDevice d) noexcept {
  return {static_cast<abi::DLDeviceType>(d.device_type), d.device_id};
}
inline ::DLDataType to_official(abi::DLDataType t) noexcept { return {t.code, t.bits, t.lanes}; }
inline abi::DLDataType from_official(::DLDataType t) noexcept { return {t.code, t.bits, t.lanes}; }

// --- Pointers: the same object seen through the other declaration -----------
#define DLBRIDGE_POINTER_PAIR(type)                                                        \
  inline ::type* to_official(abi::type* p) noexcept {                                      \
    return detail::same_layout<::type>(p);                                                 \
  }                                                                                        \
  inline const ::type* to_official(const abi::type* p) noexcept {                          \
    return detail::same_layout<const ::type>(p);                                           \
  }                                                                                        \
  inline abi::type* from_official(::type* p) noexcept {                                    \
    return detail::same_layout<abi::type>(p);                                              \
  }                                                                                        \
  inline const abi::type* from_official(const ::type* p) noexcept {                        \
    return detail::same_layout<const abi::type>(p);                                        \
  }
DLBRIDGE_POINTER_PAIR(DLTensor)
DLBRIDGE_POINTER_PAIR(DLManagedTensor)
DLBRIDGE_POINTER_PAIR(DLManagedTensorVersioned)
#undef DLBRIDGE_POINTER_PAIR

// --- Views and ownership ------------------------------------------------------

// A validated view of an official DLTensor (borrowed: t must outlive it).
inline TensorView view_of(const ::DLTensor& t, uint64_t flags = 0,
                          const ImportPolicy& policy = {}) {
  return TensorView::from_dltensor(*from_official(&t), flags, policy);
}

// The view as an official DLTensor; its shape and strides point into view.
inline ::DLTensor to_official(const TensorView& view) noexcept {
  const abi::DLTensor t = view.dltensor();
  return ::DLTensor{t.data,    to_official(t.device), t.ndim,       to_official(t.dtype),
                    t.shape,   t.strides,             t.byte_offset};
}

// Ownership of an official managed tensor, with ManagedTensor::adopt's rules:
// a major version other than dlbridge's is refused after its deleter ran.
inline ManagedTensor adopt(::DLManagedTensorVersioned* m, const ImportPolicy& policy = {}) {
  return ManagedTensor::adopt(from_official(m), policy);
}
inline ManagedTensor adopt(::DLManagedTensor* m, uint64_t assumed_flags = 0,
                           const ImportPolicy& policy = {}) {
  return ManagedTensor::adopt(from_official(m), assumed_flags, policy);
}

// Hands t over as an official struct; the caller calls its deleter once.
// release_as<::DLManagedTensor>() refuses what a legacy struct cannot say
// (read-only data, padded sub-byte elements) and then leaves t as it was.
template <typename Official>
Official* release_as(ManagedTensor& t) {
  static_assert(std::is_same_v<Official, ::DLManagedTensorVersioned> ||
                    std::is_same_v<Official, ::DLManagedTensor>,
                "release_as<T>: T is ::DLManagedTensorVersioned or ::DLManagedTensor");
  if constexpr (std::is_same_v<Official, ::DLManagedTensorVersioned>) {
    return to_official(t.release_versioned());
  } else {
    return to_official(t.release_legacy());
  }
}

#if DLPACK_MINOR_VERSION >= DLBRIDGE_DLPACK_MINOR
// The C exchange API table (DLPack 1.3), e.g. a producer's
// __dlpack_c_exchange_api__ read through the official header, for
// dlbridge's import_with().
namespace detail {
static_assert(same_size_and_alignment<::DLPackExchangeAPI, abi::DLPackExchangeAPI>);
DLBRIDGE_SAME_FIELD(DLPackExchangeAPI, header);
DLBRIDGE_SAME_FIELD(DLPackExchangeAPI, managed_tensor_allocator);
DLBRIDGE_SAME_FIELD(DLPackExchangeAPI, managed_tensor_from_py_object_no_sync);
DLBRIDGE_SAME_FIELD(DLPackExchangeAPI, managed_tensor_to_py_object_no_sync);
DLBRIDGE_SAME_FIELD(DLPackExchangeAPI, dltensor_from_py_object_no_sync);
DLBRIDGE_SAME_FIELD(DLPackExchangeAPI, current_work_stream);
}  // namespace detail
inline const abi::DLPackExchangeAPI* from_official(const ::DLPackExchangeAPI* api) noexcept {
  return detail::same_layout<const abi::DLPackExchangeAPI>(api);
}
inline const ::DLPackExchangeAPI* to_official(const abi::DLPackExchangeAPI* api) noexcept {
  return detail::same_layout<const ::DLPackExchangeAPI>(api);
}
#endif

#undef DLBRIDGE_SAME_FIELD

}  // namespace dlbridge
