// copy_into against a reference: random small shapes, dtypes (bytes,
// multi-byte, packed and padded sub-byte, lanes), strides of any sign
// including broadcasts, src and dst in one buffer (overlapping) or two, and
// thread settings that split even tiny copies.
//
// The reference reads every src element first and then writes dst bit by
// bit, so it is right for overlapping views by construction. copy_into must
// produce exactly the same buffers (bits outside dst untouched), or refuse
// with the code the first failing rule documents.
//
// The input's remaining bytes then drive the sub-byte kernels directly
// (unpack_run, pack_run, extend_run on a vector set up to the CPU's best)
// against their value-by-value reference, over runs long enough for every
// vector block, from any bit offset; each run's buffer is exactly the bytes
// it may touch, so ASan reports a read or write past it.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "fuzz_support.hpp"

namespace {

using namespace dlbridge;

struct Kind {
  DType dtype;
  bool padded;
};

// One representative of each way elements sit in memory.
const Kind kinds[] = {
    {{abi::kDLUInt, 8, 1}, false},   {{abi::kDLInt, 16, 1}, false},
    {{abi::kDLFloat, 32, 1}, false}, {{abi::kDLComplex, 128, 1}, false},
    {{abi::kDLInt, 8, 3}, false},    {{abi::kDLInt, 12, 1}, false},
    {{abi::kDLInt, 4, 1}, false},    {{abi::kDLInt, 4, 1}, true},
    {{abi::kDLUInt, 1, 1}, false},   {{abi::kDLFloat6_e2m3fn, 6, 1}, false},
    {{abi::kDLUInt, 2, 3}, false},   {{abi::kDLInt, 4, 2}, false},
    {{abi::kDLFloat4_e2m1fn, 4, 1}, true},
};

constexpr int64_t arena_bytes = 256;

struct Layout {
  std::vector<int64_t> shape, strides;
  int64_t low = 0, high = 0;  // element offsets reached, inclusive
};

Layout read_layout(FuzzedDataProvider& in, const std::vector<int64_t>& shape) {
  Layout l;
  l.shape = shape;
  for (size_t d = 0; d < shape.size(); ++d) {
    const int64_t stride = in.ConsumeIntegralInRange<int64_t>(-9, 9);
    l.strides.push_back(stride);
    if (shape[d] > 0) (stride < 0 ? l.low : l.high) += stride * (shape[d] - 1);
  }
  return l;
}

struct Placed {
  unsigned char* element0 = nullptr;
  bool fits = false;
};

// Puts element 0 of a layout at a random byte of the arena such that every
// element lies inside it.
Placed place(FuzzedDataProvider& in, unsigned char* arena, const Layout& l, int64_t step_bits) {
  const int64_t low_byte = (l.low * step_bits - 7) / 8;  // rounds towards -inf for negatives
  const int64_t high_byte = (l.high * step_bits + step_bits + 7) / 8;
  const int64_t first = -std::min<int64_t>(low_byte, 0);
  const int64_t last = arena_bytes - high_byte;
  if (first > last) return {};
  return {arena + in.ConsumeIntegralInRange<int64_t>(first, last), true};
}

void run(FuzzedDataProvider& in) {
  const Kind kind = in.PickValueInArray(kinds);
  const bool packed = kind.dtype.is_subbyte() && !kind.padded;
  const int64_t step = fuzz::element_step_bits(kind.dtype, packed);
  const uint64_t padded_flag = kind.padded ? DLBRIDGE_FLAG_IS_SUBBYTE_TYPE_PADDED : 0;
  std::vector<int64_t> shape(in.ConsumeIntegralInRange<size_t>(0, 4));
  for (int64_t& extent : shape) extent = in.ConsumeIntegralInRange<int64_t>(0, 4);
  const bool same_arena = in.ConsumeBool();
  const bool dst_readonly = in.ConsumeIntegralInRange<int>(0, 15) == 0;
  std::vector<int64_t> dst_shape = shape;
  if (!shape.empty() && in.ConsumeIntegralInRange<int>(0, 15) == 0) dst_shape.back() += 1;
  CopyOptions options;
  options.max_threads = in.ConsumeIntegralInRange<unsigned>(1, 3);
  options.min_bytes_per_thread = in.ConsumeIntegralInRange<int64_t>(1, 64);
  options.min_contiguous_bytes_per_thread = in.ConsumeIntegralInRange<int64_t>(1, 64);
  const Layout src_layout = read_layout(in, shape);
  const Layout dst_layout = read_layout(in, dst_shape);

  unsigned char arenas[2][arena_bytes];
  for (auto& arena : arenas)
    for (unsigned char& byte : arena) byte = in.ConsumeIntegral<unsigned char>();
  const Placed src = place(in, arenas[0], src_layout, step);
  const Placed dst = place(in, arenas[same_arena ? 0 : 1], dst_layout, step);
  if (!src.fits || !dst.fits) return;

  // The expected arenas: all of src read first, then written to dst.
  unsigned char expected[2][arena_bytes];
  std::memcpy(expected, arenas, sizeof arenas);
  const int64_t value_bits = packed ? int64_t(kind.dtype.element_bits()) : step;
  const std::vector<bool> values =
      fuzz::read_elements(src.element0, src_layout.shape, src_layout.strides, value_bits, step);
  const std::vector<int64_t> dst_offsets = fuzz::element_offsets(dst_layout.shape, dst_layout.strides);
  std::vector<int64_t> sorted = dst_offsets;
  std::sort(sorted.begin(), sorted.end());
  const bool dst_overlaps = std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end();

  // The rules in the order copy_into checks them; the first broken one names the code.
  const bool should_fail = dst_shape != shape || dst_readonly || dst_overlaps;
  const ErrorCode expected_code = dst_shape != shape ? ErrorCode::invalid_argument
                                  : dst_readonly     ? ErrorCode::read_only
                                                     : ErrorCode::unsupported_layout;
  if (!should_fail) {
    unsigned char* out = expected[same_arena ? 0 : 1] + (dst.element0 - arenas[same_arena ? 0 : 1]);
    for (size_t i = 0; i < dst_offsets.size(); ++i)
      for (int64_t b = 0; b < value_bits; ++b)
        fuzz::write_bit(out, dst_offsets[i] * step + b, values[i * size_t(value_bits) + size_t(b)]);
  }

  const TensorView src_view = TensorView::from_data(src.element0, kind.dtype, src_layout.shape,
                                                    src_layout.strides, Device{}, padded_flag);
  const TensorView dst_view = TensorView::from_data(
      dst.element0, kind.dtype, dst_layout.shape, dst_layout.strides, Device{},
      padded_flag | (dst_readonly ? DLBRIDGE_FLAG_READ_ONLY : 0));
  bool failed = false;
  try {
    copy_into(src_view, dst_view, options);
  } catch (const Error& error) {
    failed = true;
    fuzz::expect_error_code(error, {expected_code});
  }
  FUZZ_CHECK(failed == should_fail);
  FUZZ_CHECK(std::memcmp(expected, arenas, sizeof arenas) == 0);
}

void check_subbyte_kernels(FuzzedDataProvider& in) {
  using detail::VectorIsa;
  const int best = int(detail::best_vector_isa());
  detail::subbyte_isa() = VectorIsa(in.ConsumeIntegralInRange<int>(0, best));
  const unsigned bits = in.ConsumeIntegralInRange<unsigned>(1, 8);
  const int64_t bit = bits == 8 ? 8 * in.ConsumeIntegralInRange<int64_t>(0, 3)
                                : in.ConsumeIntegralInRange<int64_t>(0, 63);
  const int64_t n = in.ConsumeIntegralInRange<int64_t>(0, 700);
  const bool sign = in.ConsumeBool();
  const size_t bytes = size_t((bit + n * bits + 7) / 8);
  std::vector<unsigned char> packed(bytes), values(static_cast<size_t>(n));
  for (auto& b : packed) b = in.ConsumeIntegral<unsigned char>();
  for (auto& b : values) b = in.ConsumeIntegral<unsigned char>();

  std::vector<unsigned char> got(static_cast<size_t>(n)), want(static_cast<size_t>(n));
  detail::unpack_run(got.data(), packed.data(), bit, n, bits, sign);
  detail::unpack_reference(want.data(), packed.data(), bit, n, bits, sign);
  FUZZ_CHECK(got == want);

  std::vector<unsigned char> packed_got = packed, packed_want = packed;
  detail::pack_run(packed_got.data(), bit, values.data(), n, bits);
  detail::pack_reference(packed_want.data(), bit, values.data(), n, bits);
  FUZZ_CHECK(packed_got == packed_want);

  detail::extend_run(got.data(), values.data(), n, bits, sign);
  for (int64_t i = 0; i < n; ++i)
    want[size_t(i)] = bits >= 8 ? values[size_t(i)]
                                : detail::extend_value(values[size_t(i)] & ((1u << bits) - 1), bits, sign);
  FUZZ_CHECK(got == want);
  detail::subbyte_isa() = VectorIsa(best);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  run(in);
  if (in.remaining_bytes() > 0) check_subbyte_kernels(in);
  return 0;
}
