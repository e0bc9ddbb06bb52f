// compiler.hpp: the standard forms of overflow-checked arithmetic, which
// compilers other than GCC and Clang run, give the same answer and the same
// wrapped result as GCC's and Clang's builtins, for every pair of 8-bit
// values and for the edges of the wider types.
#include <gtest/gtest.h>

#include <dlbridge/compiler.hpp>

#include <cstdint>
#include <limits>
#include <vector>

namespace {

namespace standard = dlbridge::detail::standard;

template <typename T>
void expect_same(T a, T b) {
  T builtin_out{}, standard_out{};
  EXPECT_EQ(__builtin_add_overflow(a, b, &builtin_out), standard::add_overflow(a, b, standard_out))
      << +a << " + " << +b;
  EXPECT_EQ(builtin_out, standard_out) << +a << " + " << +b;
  EXPECT_EQ(__builtin_sub_overflow(a, b, &builtin_out), standard::sub_overflow(a, b, standard_out))
      << +a << " - " << +b;
  EXPECT_EQ(builtin_out, standard_out) << +a << " - " << +b;
  EXPECT_EQ(__builtin_mul_overflow(a, b, &builtin_out), standard::mul_overflow(a, b, standard_out))
      << +a << " * " << +b;
  EXPECT_EQ(builtin_out, standard_out) << +a << " * " << +b;
}

template <typename T>
void every_pair() {
  for (int a = std::numeric_limits<T>::min(); a <= std::numeric_limits<T>::max(); ++a)
    for (int b = std::numeric_limits<T>::min(); b <= std::numeric_limits<T>::max(); ++b)
      expect_same(T(a), T(b));
}

// The values around zero, one, the square root of the range and its ends.
template <typename T>
std::vector<T> edges() {
  constexpr T max = std::numeric_limits<T>::max(), min = std::numeric_limits<T>::min();
  const T root = T(T(1) << (std::numeric_limits<T>::digits / 2));
  std::vector<T> out{T(0), T(1), T(2), T(3), root, T(root - 1), T(root + 1), T(max / 2), T(max / 2 + 1),
                     T(max - 1), max, min, T(min + 1), T(min / 2)};
  if constexpr (std::is_signed_v<T>)
    for (T v : {T(-1), T(-2), T(-3), T(-root), T(-root - 1), T(-root + 1), T(-(max / 2) - 1)}) out.push_back(v);
  return out;
}

template <typename T>
void every_edge_pair() {
  const auto values = edges<T>();
  for (T a : values)
    for (T b : values) expect_same(a, b);
}

TEST(StandardOverflow, MatchesTheBuiltinsForEveryEightBitPair) {
  every_pair<int8_t>();
  every_pair<uint8_t>();
}

TEST(StandardOverflow, MatchesTheBuiltinsAtTheEdgesOfWiderTypes) {
  every_edge_pair<int16_t>();
  every_edge_pair<uint16_t>();
  every_edge_pair<int32_t>();
  every_edge_pair<uint32_t>();
  every_edge_pair<int64_t>();
  every_edge_pair<uint64_t>();
}

TEST(StandardOverflow, ReportsTheOverflowsTheCoreChecksFor) {
  int64_t out = 0;
  EXPECT_TRUE(standard::mul_overflow(int64_t(1) << 32, int64_t(1) << 31, out));
  EXPECT_FALSE(standard::mul_overflow(int64_t(1) << 31, int64_t(1) << 31, out));
  EXPECT_EQ(out, int64_t(1) << 62);
  EXPECT_TRUE(standard::add_overflow(std::numeric_limits<int64_t>::max(), int64_t(1), out));
  EXPECT_TRUE(standard::sub_overflow(std::numeric_limits<int64_t>::min(), int64_t(1), out));
  uint64_t wide = 0;
  EXPECT_TRUE(standard::add_overflow(std::numeric_limits<uint64_t>::max(), uint64_t(1), wide));
  EXPECT_EQ(wide, 0u);
}

}  // namespace
