// DType: the DLPack (code, bits, lanes) triple with canonical names, parsing,
// validation of what a consumer may accept, and C++ type traits.
#pragma once

#include <complex>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "abi.hpp"
#include "error.hpp"

namespace dlbridge {

struct DType {
  uint8_t code = abi::kDLFloat;
  uint8_t bits = 32;
  uint16_t lanes = 1;

  constexpr abi::DLDataType to_dl() const noexcept { return {code, bits, lanes}; }
  static constexpr DType from_dl(abi::DLDataType t) noexcept {
    return {t.code, t.bits, t.lanes};
  }
  friend constexpr bool operator==(DType a, DType b) noexcept {
    return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
  }
  friend constexpr bool operator!=(DType a, DType b) noexcept { return !(a == b); }

  // Bits of one element including all lanes.
  constexpr uint32_t element_bits() const noexcept {
    return uint32_t(bits) * uint32_t(lanes);
  }
  // Elements narrower than a byte are packed several to a byte (unless the
  // producer set DLBRIDGE_FLAG_IS_SUBBYTE_TYPE_PADDED).
  constexpr bool is_subbyte() const noexcept { return element_bits() < 8; }
  // Storage of one element when it is not packed: ceil(bits * lanes / 8).
  constexpr uint32_t element_bytes() const noexcept {
    return (element_bits() + 7) / 8;
  }
};

struct DTypeCodeInfo {
  uint8_t code;
  std::string_view name;  // the canonical name, or the prefix before the bits
  uint8_t fixed_bits;     // nonzero: the only width the spec allows
};

// Codes whose width is part of the name carry it as fixed_bits.
inline constexpr DTypeCodeInfo dtype_code_table[] = {
    {abi::kDLInt, "int", 0},
    {abi::kDLUInt, "uint", 0},
    {abi::kDLFloat, "float", 0},
    {abi::kDLOpaqueHandle, "handle", 0},
    {abi::kDLBfloat, "bfloat", 0},
    {abi::kDLComplex, "complex", 0},
    {abi::kDLBool, "bool", 8},
    {abi::kDLFloat8_e3m4, "float8_e3m4", 8},
    {abi::kDLFloat8_e4m3, "float8_e4m3", 8},
    {abi::kDLFloat8_e4m3b11fnuz, "float8_e4m3b11fnuz", 8},
    {abi::kDLFloat8_e4m3fn, "float8_e4m3fn", 8},
    {abi::kDLFloat8_e4m3fnuz, "float8_e4m3fnuz", 8},
    {abi::kDLFloat8_e5m2, "float8_e5m2", 8},
    {abi::kDLFloat8_e5m2fnuz, "float8_e5m2fnuz", 8},
    {abi::kDLFloat8_e8m0fnu, "float8_e8m0fnu", 8},
    {abi::kDLFloat6_e2m3fn, "float6_e2m3fn", 6},
    {abi::kDLFloat6_e3m2fn, "float6_e3m2fn", 6},
    {abi::kDLFloat4_e2m1fn, "float4_e2m1fn", 4},
};

// The table is indexed by code: DLPack numbers its codes 0, 1, 2, ...
inline constexpr size_t dtype_code_count = sizeof(dtype_code_table) / sizeof(dtype_code_table[0]);
constexpr bool dtype_codes_are_indices() noexcept {
  for (size_t i = 0; i < dtype_code_count; ++i)
    if (dtype_code_table[i].code != i) return false;
  return true;
}
static_assert(dtype_codes_are_indices(), "dtype_code_table must list codes 0, 1, 2, ... in order");

constexpr const DTypeCodeInfo* find_dtype_code(uint8_t code) noexcept {
  return code < dtype_code_count ? &dtype_code_table[code] : nullptr;
}

// Whether dtype_problem(t) is std::nullopt, without building the Error
// (every import asks; test_dtype.cpp pins the two together for every
// code and width). The rules are dtype_problem's, in the same terms.
// By index, not pointer: see device_type_index on UBSan and constexpr.
constexpr bool dtype_valid(DType t) noexcept {
  if (t.code >= dtype_code_count || t.bits == 0 || t.lanes == 0) return false;
  const uint8_t fixed_bits = dtype_code_table[t.code].fixed_bits;
  if (fixed_bits != 0 && t.bits != fixed_bits) return false;
  return t.code != abi::kDLComplex || t.bits % 2 == 0;
}

// Why a consumer must refuse this dtype, or std::nullopt when it is valid.
// Unknown codes are ErrorCode::unsupported_dtype; known codes with impossible
// widths (FP4 with bits != 4, bits == 0, lanes == 0) are invalid_tensor.
inline std::optional<Error> dtype_problem(DType t) {
  if (dtype_valid(t)) return std::nullopt;
  const DTypeCodeInfo* info = find_dtype_code(t.code);
  if (info == nullptr)
    return Error(ErrorCode::unsupported_dtype,
                 "DLDataType code " + std::to_string(t.code) +
                     " is not defined by DLPack 1.3.",
                 "The producer speaks a newer DLPack; convert the data to a "
                 "standard dtype before the exchange.");
  if (t.bits == 0 || t.lanes == 0)
    return Error(ErrorCode::invalid_tensor,
                 "DLDataType has bits=" + std::to_string(t.bits) +
                     " lanes=" + std::to_string(t.lanes) +
                     "; both must be at least 1.",
                 "The producer built a malformed DLTensor; report it there.");
  if (info->fixed_bits != 0 && t.bits != info->fixed_bits)
    return Error(ErrorCode::invalid_tensor,
                 std::string(info->name) + " must have bits=" +
                     std::to_string(info->fixed_bits) + ", got bits=" +
                     std::to_string(t.bits) + ".",
                 "The producer built a malformed DLTensor; report it there.");
  if (t.code == abi::kDLComplex && t.bits % 2 != 0)
    return Error(ErrorCode::invalid_tensor,
                 "complex dtype with odd bits=" + std::to_string(t.bits) + ".",
                 "The producer built a malformed DLTensor; report it there.");
  return std::nullopt;
}

inline void validate_dtype(DType t) {
  if (!dtype_valid(t)) throw *dtype_problem(t);
}

// "float32", "bool", "float8_e4m3fn", "int4"; lanes > 1 add "x<lanes>"
// ("float32x4"). A name is printed only for a valid dtype, so parse_dtype
// reads back every name printed; anything dtype_problem refuses (unknown
// codes, odd complex widths, ...) prints as "dtype(<code>,<bits>,<lanes>)".
inline std::string dtype_name(DType t) {
  const DTypeCodeInfo* info = find_dtype_code(t.code);
  if (!dtype_valid(t))
    return "dtype(" + std::to_string(t.code) + "," + std::to_string(t.bits) +
           "," + std::to_string(t.lanes) + ")";
  std::string name(info->name);
  if (info->fixed_bits == 0) name += std::to_string(t.bits);
  if (t.lanes != 1) name += "x" + std::to_string(t.lanes);
  return name;
}

namespace detail {
inline bool parse_decimal(std::string_view digits, uint32_t max,
                          uint32_t& out) {
  // A leading zero would give one dtype many names ("float032").
  if (digits.empty() || digits.size() > 5 || digits[0] == '0') return false;
  uint32_t value = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + uint32_t(c - '0');
  }
  if (value == 0 || value > max) return false;
  out = value;
  return true;
}

// A name without the lanes suffix ("float32", "float8_e4m3fn").
inline std::optional<DType> parse_dtype_base(std::string_view base,
                                             uint16_t lanes) {
  // Fixed-width names first: "float8_e4m3fn" must not read as "float" + 8.
  for (const auto& info : dtype_code_table)
    if (info.fixed_bits != 0 && base == info.name)
      return DType{info.code, info.fixed_bits, lanes};
  for (const auto& info : dtype_code_table) {
    if (info.fixed_bits != 0 || base.substr(0, info.name.size()) != info.name)
      continue;
    uint32_t bits = 0;
    if (!parse_decimal(base.substr(info.name.size()), 255, bits)) continue;
    DType t{info.code, uint8_t(bits), lanes};
    if (!dtype_problem(t)) return t;
  }
  return std::nullopt;
}
}  // namespace detail

// Inverse of dtype_name for every valid dtype. Unknown names are
// ErrorCode::invalid_argument.
inline DType parse_dtype(std::string_view text) {
  if (auto t = detail::parse_dtype_base(text, 1)) return *t;
  // "complex64" contains an 'x' too, so the suffix is tried only second.
  if (size_t x = text.rfind('x'); x != std::string_view::npos && x > 0) {
    uint32_t lanes = 0;
    if (detail::parse_decimal(text.substr(x + 1), 65535, lanes))
      if (auto t = detail::parse_dtype_base(text.substr(0, x), uint16_t(lanes)))
        return *t;
  }
  detail::fail(ErrorCode::invalid_argument,
               "Unknown dtype name '" + std::string(text) + "'.",
               "Use a DLPack name such as 'float32', 'int8', 'bool', "
               "'bfloat16', 'complex64', 'float8_e4m3fn' or "
               "'float4_e2m1fn', optionally with 'x<lanes>'.");
}

// dtype_of<T>() for the standard arithmetic types.
template <typename T, typename = void>
struct dtype_traits;  // undefined: no DLPack dtype for T

template <>
struct dtype_traits<bool> {
  static constexpr DType value{abi::kDLBool, 8, 1};
};
template <typename T>
struct dtype_traits<T, std::enable_if_t<std::is_integral_v<T> &&
                                        !std::is_same_v<T, bool>>> {
  static constexpr DType value{
      uint8_t(std::is_signed_v<T> ? abi::kDLInt : abi::kDLUInt),
      uint8_t(sizeof(T) * 8), 1};
};
template <typename T>
struct dtype_traits<T, std::enable_if_t<std::is_floating_point_v<T> &&
                                        (sizeof(T) == 4 || sizeof(T) == 8)>> {
  static constexpr DType value{abi::kDLFloat, uint8_t(sizeof(T) * 8), 1};
};
template <typename T>
struct dtype_traits<std::complex<T>,
                    std::enable_if_t<std::is_same_v<T, float> ||
                                     std::is_same_v<T, double>>> {
  static constexpr DType value{abi::kDLComplex, uint8_t(sizeof(T) * 16), 1};
};

template <typename T>
constexpr DType dtype_of() noexcept {
  return dtype_traits<std::remove_cv_t<T>>::value;
}

}  // namespace dlbridge
