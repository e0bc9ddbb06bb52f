// Random hostile DLTensors: whatever the fields say, from_dltensor either
// refuses with a dlbridge::Error or returns a view whose byte extent is
// exactly the range its elements cover (checked element by element).
#include <gtest/gtest.h>

#include <dlbridge/dlbridge.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
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
