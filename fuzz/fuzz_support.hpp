// What the harnesses share: a check that aborts with a message (libFuzzer
// turns an abort into a saved crash input), the rule for which exceptions
// dlbridge may throw, and a reference reader of strided elements written
// independently of dlbridge's copy kernels, to compare them against.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <initializer_list>
#include <vector>

#include <dlbridge/dlbridge.hpp>

namespace fuzz {

[[noreturn]] inline void failed(const char* what, const char* file, int line) {
  std::fprintf(stderr, "%s:%d: fuzz check failed: %s\n", file, line, what);
  std::abort();
}

#define FUZZ_CHECK(condition) \
  ((condition) ? void(0) : ::fuzz::failed(#condition, __FILE__, __LINE__))

// A refusal must be a dlbridge::Error with one of the codes the caller
// documents; anything else (std::bad_alloc aside, a std:: exception leaking
// out of a validator) is a finding.
inline void expect_error_code(const dlbridge::Error& error,
                              std::initializer_list<dlbridge::ErrorCode> allowed) {
  for (dlbridge::ErrorCode code : allowed)
    if (error.code() == code) return;
  std::fprintf(stderr, "unexpected error code %s: %s\n",
               std::string(error.code_name()).c_str(), error.what());
  std::abort();
}

// Runs body and requires that it either returns or throws dlbridge::Error
// with an allowed code. True when body returned.
template <typename Body>
bool accepted(std::initializer_list<dlbridge::ErrorCode> allowed, Body&& body) {
  try {
    body();
    return true;
  } catch (const dlbridge::Error& error) {
    expect_error_code(error, allowed);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "non-dlbridge exception escaped: %s\n", error.what());
    std::abort();
  }
  return false;
}

// Element width in bits as the memory holds it: packed sub-byte elements
// abut, every other element takes whole bytes.
inline int64_t element_step_bits(dlbridge::DType dtype, bool packed) {
  return packed ? int64_t(dtype.element_bits()) : int64_t(dtype.element_bytes()) * 8;
}

inline bool read_bit(const unsigned char* base, int64_t bit) {
  const int64_t byte = bit >= 0 ? bit / 8 : -((-bit + 7) / 8);
  return (base[byte] >> (bit - byte * 8)) & 1;
}

inline void write_bit(unsigned char* base, int64_t bit, bool value) {
  const int64_t byte = bit >= 0 ? bit / 8 : -((-bit + 7) / 8);
  const unsigned mask = 1u << (bit - byte * 8);
  base[byte] = (unsigned char)(value ? base[byte] | mask : base[byte] & ~mask);
}

// Element offsets (in elements, from element 0) of every index in row-major
// order: the slow, obvious walk.
inline std::vector<int64_t> element_offsets(const std::vector<int64_t>& shape,
                                            const std::vector<int64_t>& strides) {
  int64_t count = 1;
  for (int64_t extent : shape) count *= extent;
  std::vector<int64_t> offsets;
  offsets.reserve(size_t(count));
  for (int64_t linear = 0; linear < count; ++linear) {
    int64_t rest = linear, offset = 0;
    for (size_t d = shape.size(); d-- > 0;) {
      offset += (rest % shape[d]) * strides[d];
      rest /= shape[d];
    }
    offsets.push_back(offset);
  }
  return offsets;
}

// Every element's bits, bit by bit, in row-major order.
inline std::vector<bool> read_elements(const void* element0, const std::vector<int64_t>& shape,
                                       const std::vector<int64_t>& strides,
                                       int64_t value_bits, int64_t step_bits) {
  const auto* base = static_cast<const unsigned char*>(element0);
  std::vector<bool> bits;
  for (int64_t offset : element_offsets(shape, strides))
    for (int64_t b = 0; b < value_bits; ++b) bits.push_back(read_bit(base, offset * step_bits + b));
  return bits;
}

inline std::vector<int64_t> row_major_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t step = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    strides[d] = step;
    step *= shape[d];
  }
  return strides;
}

}  // namespace fuzz
