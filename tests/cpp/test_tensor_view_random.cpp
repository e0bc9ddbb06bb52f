// Random hostile DLTensors: whatever the fields say, from_dltensor either
// refuses with a dlbridge::Error or returns a view whose byte extent is
// exactly the range its elements cover (checked element by element).
#include <gtest/gtest.h>

#include <dlbridge/dlbridge.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <vector>

namespace {

namespace dl = dlbridge;
namespace dlabi = dlbridge::abi;

constexpr int64_t interesting[] = {0, 1, 2, 3, 7, -1, -2, -3, 1 << 20, int64_t(1) << 31,
                                   int64_t(1) << 62, std::numeric_limits<int64_t>::max(),
                                   std::numeric_limits<int64_t>::min()};

int64_t pick(std::mt19937_64& rng, bool small) {
  if (small) return int64_t(rng() % 5) - (rng() % 4 == 0 ? 2 : 0);
  return interesting[rng() % std::size(interesting)];
}

// The byte range the elements really cover, by visiting every index.
dl::ByteExtent brute_extent(const dl::TensorView& v) {
  const int64_t unit = v.packed() ? int64_t(v.dtype().element_bits()) : int64_t(v.dtype().element_bytes());
  int64_t low = 0, high = 0;
  std::vector<int64_t> index(size_t(v.ndim()), 0);
  for (int64_t n = 0; n < v.size(); ++n) {
    int64_t offset = 0;
    for (int32_t d = 0; d < v.ndim(); ++d) offset += index[size_t(d)] * v.stride(d);
    low = std::min(low, offset * unit);
    high = std::max(high, offset * unit + unit);
    for (int32_t d = v.ndim() - 1; d >= 0; --d) {
      if (++index[size_t(d)] < v.shape(d)) break;
      index[size_t(d)] = 0;
    }
  }
  if (v.packed()) {
    low = low >= 0 ? low / 8 : -((-low + 7) / 8);
    high = (high + 7) / 8;
  }
  return {low, high};
}

TEST(TensorViewRandom, RefusesOrDescribesExactly) {
  std::mt19937_64 rng(20261202);
  std::vector<int64_t> shape(80), strides(80);
  alignas(64) static unsigned char memory[64];
  int accepted = 0, checked = 0;
  for (int round = 0; round < 200000; ++round) {
    const bool small = rng() % 2 == 0;
    dlabi::DLTensor t{};
    t.ndim = int32_t(rng() % 8 == 0 ? int64_t(rng() % 80) - 5 : int64_t(rng() % 5));
    for (auto& s : shape) s = pick(rng, small);
    for (auto& s : strides) s = pick(rng, small);
    t.shape = rng() % 16 == 0 ? nullptr : shape.data();
    t.strides = rng() % 4 == 0 ? nullptr : strides.data();
    t.data = rng() % 8 == 0 ? nullptr : (rng() % 8 == 0 ? reinterpret_cast<void*>(~uintptr_t(0) - 64) : memory + 32);
    t.byte_offset = rng() % 4 == 0 ? uint64_t(pick(rng, small)) : 0;
    t.device = {dlabi::DLDeviceType(int32_t(rng() % 22) - 1), int32_t(rng() % 3) - (rng() % 8 == 0)};
    t.dtype = {uint8_t(rng() % 20), uint8_t(rng() % 4 == 0 ? rng() % 256 : 8 << (rng() % 4)),
               uint16_t(rng() % 8 == 0 ? rng() % 3 : 1)};
    const uint64_t flags = rng() % 4 == 0 ? DLBRIDGE_FLAG_IS_SUBBYTE_TYPE_PADDED : 0;
    try {
      dl::TensorView v = dl::TensorView::from_dltensor(t, flags);
      ++accepted;
      EXPECT_LE(v.extent().low, 0);
      EXPECT_GE(v.extent().high, 0);
      if (v.size() > 0) {
        EXPECT_NE(v.base_data(), nullptr);
        if (v.size() <= 4096) {
          ++checked;
          const dl::ByteExtent expected = brute_extent(v);
          ASSERT_EQ(v.extent().low, expected.low) << "round " << round;
          ASSERT_EQ(v.extent().high, expected.high) << "round " << round;
        }
      }
    } catch (const dl::Error& e) {
      // Every refusal carries one of the import codes and a fix.
      EXPECT_TRUE(e.code() == dl::ErrorCode::invalid_tensor ||
                  e.code() == dl::ErrorCode::unsupported_dtype ||
                  e.code() == dl::ErrorCode::unsupported_device_type)
          << e.what();
      EXPECT_FALSE(e.hint().empty()) << e.what();
    }
  }
  // The generator must reach both outcomes, or the test proves nothing.
  EXPECT_GT(accepted, 1000);
  EXPECT_GT(checked, 500);
}

}  // namespace

namespace {

// Every field a view exposes; two readings agree when all of these do.
void expect_same_view(const dl::TensorView& got, const dl::TensorView& want, int round) {
  ASSERT_EQ(got.ndim(), want.ndim()) << "round " << round;
  EXPECT_EQ(got.base_data(), want.base_data()) << "round " << round;
  EXPECT_EQ(got.byte_offset(), want.byte_offset()) << "round " << round;
  EXPECT_EQ(got.device(), want.device()) << "round " << round;
  EXPECT_EQ(got.dtype(), want.dtype()) << "round " << round;
  EXPECT_EQ(got.flags(), want.flags()) << "round " << round;
  EXPECT_EQ(got.size(), want.size()) << "round " << round;
  EXPECT_EQ(got.nbytes(), want.nbytes()) << "round " << round;
  EXPECT_EQ(got.extent().low, want.extent().low) << "round " << round;
  EXPECT_EQ(got.extent().high, want.extent().high) << "round " << round;
  for (int32_t d = 0; d < want.ndim(); ++d) {
    EXPECT_EQ(got.shape(d), want.shape(d)) << "round " << round << " dim " << d;
    EXPECT_EQ(got.stride(d), want.stride(d)) << "round " << round << " dim " << d;
  }
}

struct Outcome {
  std::optional<dl::TensorView> view;
  std::optional<dl::Error> error;
};

template <typename Read>
Outcome outcome_of(Read&& read) {
  Outcome out;
  try {
    out.view = read();
  } catch (const dl::Error& e) {
    out.error = e;
  }
  return out;
}

// from_dltensor reads the common tensors in one pass (assign_plain) and
// hands everything else to the general reading. Over random tensors biased
// towards the common ones and their edges (size 0, NULL data, addresses
// near the top, strides near the int64 limits, each device kind, each
// dtype family), the one pass only ever accepts what the general reading
// accepts, with every field equal, and from_dltensor's result (view or
// error code, message and fix) is the general reading's.
TEST(TensorViewRandom, OnePassAgreesWithTheGeneralReading) {
  std::mt19937_64 rng(20261203);
  std::vector<int64_t> shape(16), strides(16);
  alignas(64) static unsigned char memory[64];
  const int32_t devices[] = {dlabi::kDLCPU, dlabi::kDLCPU, dlabi::kDLCUDA, dlabi::kDLOpenCL,
                             dlabi::kDLCUDAHost, 0, 99};
  int plain = 0, general_only_accepted = 0, refused = 0;
  for (int round = 0; round < 100000; ++round) {
    const bool small = rng() % 4 != 0;
    dlabi::DLTensor t{};
    t.ndim = int32_t(rng() % 9) - (rng() % 32 == 0 ? 2 : 0);
    for (auto& s : shape) s = pick(rng, small);
    for (auto& s : strides) s = pick(rng, small);
    t.shape = rng() % 32 == 0 ? nullptr : shape.data();
    t.strides = rng() % 8 == 0 ? nullptr : strides.data();
    switch (rng() % 8) {
      case 0: t.data = nullptr; break;
      case 1: t.data = reinterpret_cast<void*>(~uintptr_t(0) - 64); break;
      case 2: t.data = reinterpret_cast<void*>(uintptr_t(16)); break;
      default: t.data = memory + 32;
    }
    t.byte_offset = rng() % 4 == 0 ? uint64_t(pick(rng, small)) : 0;
    t.device = {dlabi::DLDeviceType(devices[rng() % std::size(devices)]),
                int32_t(rng() % 3) - (rng() % 16 == 0)};
    // Mostly the byte-sized standard dtypes, sometimes any triple.
    if (rng() % 4 == 0) {
      t.dtype = {uint8_t(rng() % 20), uint8_t(rng() % 256), uint16_t(rng() % 3)};
    } else {
      t.dtype = {uint8_t(rng() % 7), uint8_t(4 << (rng() % 5)), uint16_t(rng() % 8 == 0 ? 4 : 1)};
    }
    const uint64_t flags = rng() % 4 == 0 ? DLBRIDGE_FLAG_IS_SUBBYTE_TYPE_PADDED
                                          : (rng() % 4 == 0 ? DLBRIDGE_FLAG_READ_ONLY : 0);
    const Outcome general = outcome_of([&] { return dl::TensorView::from_dltensor_general(t, flags); });
    const Outcome full = outcome_of([&] { return dl::TensorView::from_dltensor(t, flags); });
    const std::optional<dl::TensorView> one_pass = dl::TensorView::from_dltensor_plain(t, flags);
    if (one_pass) {
      ++plain;
      ASSERT_TRUE(general.view.has_value()) << "round " << round << ": the one pass took a tensor "
                                            << "the general reading refuses: " << general.error->what();
      expect_same_view(*one_pass, *general.view, round);
    }
    ASSERT_EQ(full.view.has_value(), general.view.has_value()) << "round " << round;
    if (general.view) {
      general_only_accepted += !one_pass;
      expect_same_view(*full.view, *general.view, round);
    } else {
      ++refused;
      EXPECT_EQ(full.error->code(), general.error->code()) << "round " << round;
      EXPECT_EQ(full.error->message(), general.error->message()) << "round " << round;
      EXPECT_EQ(full.error->hint(), general.error->hint()) << "round " << round;
    }
  }
  // Each kind of outcome must be common, or the comparison proves little.
  EXPECT_GT(plain, 7000) << plain;
  EXPECT_GT(general_only_accepted, 5000) << general_only_accepted;
  EXPECT_GT(refused, 20000) << refused;
}

// The tensors every import sees take the one pass; the ones it leaves to
// the general reading are the ones it was not written for.
TEST(TensorViewRandom, OnePassTakesTheCommonTensors) {
  alignas(64) static float memory[64];
  int64_t shape[] = {8, 8};
  int64_t c_strides[] = {8, 1}, f_strides[] = {1, 8}, reversed[] = {8, -1};
  dlabi::DLTensor t{};
  t.data = memory;
  t.device = {dlabi::kDLCPU, 0};
  t.ndim = 2;
  t.dtype = {dlabi::kDLFloat, 32, 1};
  t.shape = shape;
  for (int64_t* strides : {c_strides, f_strides, reversed}) {
    t.strides = strides;
    t.byte_offset = strides == reversed ? 28 : 0;
    auto view = dl::TensorView::from_dltensor_plain(t, DLBRIDGE_FLAG_READ_ONLY);
    ASSERT_TRUE(view.has_value());
    expect_same_view(*view, dl::TensorView::from_dltensor_general(t, DLBRIDGE_FLAG_READ_ONLY), 0);
  }
  t.byte_offset = 0;
  t.strides = c_strides;
  dlabi::DLTensor scalar = t;
  scalar.ndim = 0;
  scalar.shape = scalar.strides = nullptr;
  EXPECT_TRUE(dl::TensorView::from_dltensor_plain(scalar).has_value());
  dlabi::DLTensor empty = t;
  int64_t zero_shape[] = {0, 8};
  empty.shape = zero_shape;
  empty.data = nullptr;
  ASSERT_TRUE(dl::TensorView::from_dltensor_plain(empty).has_value());
  EXPECT_EQ(dl::TensorView::from_dltensor_plain(empty)->size(), 0);

  // Left to the general reading, which accepts them.
  dlabi::DLTensor no_strides = t;
  no_strides.strides = nullptr;
  dlabi::DLTensor packed = t;
  packed.dtype = {dlabi::kDLFloat4_e2m1fn, 4, 1};
  dlabi::DLTensor opaque = t;
  opaque.device = {dlabi::kDLOpenCL, 0};
  int64_t seven[7] = {1, 1, 1, 1, 1, 8, 8}, seven_strides[7] = {64, 64, 64, 64, 64, 8, 1};
  dlabi::DLTensor many = t;
  many.ndim = 7;
  many.shape = seven;
  many.strides = seven_strides;
  for (const dlabi::DLTensor& other : {no_strides, packed, opaque, many}) {
    EXPECT_FALSE(dl::TensorView::from_dltensor_plain(other).has_value());
    EXPECT_NO_THROW((void)dl::TensorView::from_dltensor(other));
  }
}

}  // namespace
