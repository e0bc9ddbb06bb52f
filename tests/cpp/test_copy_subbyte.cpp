// The sub-byte kernels (unpack_run, pack_run, extend_run) against their
// value-by-value reference over random widths, lengths and bit offsets, on
// every vector set this CPU runs; and copy_unpacked, copy_packed and packed
// copy_into over random and transposed layouts against a definition written
// here bit by bit. Buffers are sized to exactly the bytes a run may touch,
// so AddressSanitizer sees any read or write past them.
#include <gtest/gtest.h>

#include <dlbridge/copy/copy.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace {

using dlbridge::DType;
using dlbridge::TensorView;
using dlbridge::detail::VectorIsa;
namespace dlabi = dlbridge::abi;
using Bytes = std::vector<unsigned char>;

const char* isa_name(VectorIsa isa) {
  switch (isa) {
    case VectorIsa::portable: return "portable";
    case VectorIsa::avx2: return "avx2";
    case VectorIsa::avx512: return "avx512";
  }
  return "?";
}

// Runs body once for each vector set up to the CPU's best, then restores it.
void for_each_isa(const std::function<void(VectorIsa)>& body) {
  std::atomic<VectorIsa>& isa = dlbridge::detail::subbyte_isa();
  const VectorIsa best = dlbridge::detail::best_vector_isa();
  for (int level = 0; level <= int(best); ++level) {
    isa = VectorIsa(level);
    body(VectorIsa(level));
  }
  isa = best;
}

Bytes random_bytes(size_t n, std::mt19937& rng) {
  Bytes out(n);
  for (auto& b : out) b = (unsigned char)rng();
  return out;
}

// Bit `bit` of a buffer, the definition the kernels must follow.
unsigned bit_of(const Bytes& b, int64_t bit) { return (b[size_t(bit / 8)] >> (bit % 8)) & 1u; }

// Value `bits` wide at bit `bit`, widened to a byte as copy_unpacked does.
unsigned char value_at(const Bytes& b, int64_t bit, unsigned bits, bool sign) {
  int v = 0;
  for (unsigned k = 0; k < bits; ++k) v |= int(bit_of(b, bit + k)) << k;
  if (sign && bits < 8 && (v >> (bits - 1)) & 1) v -= 1 << bits;
  return (unsigned char)v;
}

int64_t random_length(std::mt19937& rng) {
  // Mostly short, sometimes past several vector blocks of every width.
  return rng() % 4 == 0 ? int64_t(rng() % 3000) : int64_t(rng() % 200);
}

TEST(SubbyteKernels, UnpackMatchesTheDefinition) {
  for_each_isa([](VectorIsa isa) {
    std::mt19937 rng(7);
    for (int round = 0; round < 3000; ++round) {
      const unsigned bits = 1 + rng() % 8;
      const int64_t n = random_length(rng);
      const int64_t bit = bits == 8 ? 8 * int64_t(rng() % 4) : int64_t(rng() % 64);
      const bool sign = rng() % 2;
      const Bytes src = random_bytes(size_t((bit + n * bits + 7) / 8), rng);
      Bytes out(size_t(n) + 1, 0xA5);
      dlbridge::detail::unpack_run(out.data(), src.data(), bit, n, bits, sign);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(out[size_t(i)], value_at(src, bit + i * bits, bits, sign))
            << isa_name(isa) << " bits " << bits << " n " << n << " bit " << bit << " i " << i;
      ASSERT_EQ(out[size_t(n)], 0xA5) << isa_name(isa) << " wrote past the run";
    }
  });
}

TEST(SubbyteKernels, PackMatchesTheDefinitionAndKeepsForeignBits) {
  for_each_isa([](VectorIsa isa) {
    std::mt19937 rng(11);
    for (int round = 0; round < 3000; ++round) {
      const unsigned bits = 1 + rng() % 8;
      const int64_t n = random_length(rng);
      const int64_t bit = bits == 8 ? 8 * int64_t(rng() % 4) : int64_t(rng() % 64);
      const Bytes values = random_bytes(size_t(n), rng);  // padding bits random too
      const Bytes before = random_bytes(size_t((bit + n * bits + 7) / 8), rng);
      Bytes dst = before;
      dlbridge::detail::pack_run(dst.data(), bit, values.data(), n, bits);
      for (int64_t b = 0; b < int64_t(dst.size()) * 8; ++b) {
        const int64_t i = (b - bit) / int64_t(bits);
        const bool inside = b >= bit && i < n;
        const unsigned want = inside ? (values[size_t(i)] >> ((b - bit) % bits)) & 1u
                                     : bit_of(before, b);
        ASSERT_EQ(bit_of(dst, b), want) << isa_name(isa) << " bits " << bits << " n " << n
                                        << " bit " << bit << " at bit " << b;
      }
    }
  });
}

TEST(SubbyteKernels, ExtendMasksOrSignExtendsPaddedValues) {
  for_each_isa([](VectorIsa isa) {
    std::mt19937 rng(13);
    for (int round = 0; round < 500; ++round) {
      const unsigned bits = 1 + rng() % 8;
      const int64_t n = random_length(rng);
      const bool sign = rng() % 2, in_place = rng() % 2;
      const Bytes src = random_bytes(size_t(n), rng);
      Bytes out = in_place ? src : Bytes(size_t(n));
      dlbridge::detail::extend_run(out.data(), in_place ? out.data() : src.data(), n, bits, sign);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(out[size_t(i)], value_at(src, 8 * i, bits, sign))
            << isa_name(isa) << " bits " << bits << " i " << i;
    }
  });
}

// Every value of every signed width, in one long run: int4 0b1000 is -8, 0b0111 is 7.
TEST(SubbyteKernels, SignExtensionGivesInt8Values) {
  for_each_isa([](VectorIsa isa) {
    for (unsigned bits = 1; bits < 8; ++bits) {
      const int count = 1 << bits, n = 200 * count;
      Bytes values(static_cast<size_t>(n)), packed(static_cast<size_t>(n * bits / 8 + 1));
      for (int i = 0; i < n; ++i) values[size_t(i)] = (unsigned char)(i % count);
      dlbridge::detail::pack_run(packed.data(), 0, values.data(), n, bits);
      Bytes out(static_cast<size_t>(n));
      dlbridge::detail::unpack_run(out.data(), packed.data(), 0, n, bits, true);
      for (int i = 0; i < n; ++i) {
        const int v = i % count, expected = v >= count / 2 ? v - count : v;
        ASSERT_EQ(int(int8_t(out[size_t(i)])), expected) << isa_name(isa) << " bits " << bits;
      }
      dlbridge::detail::unpack_run(out.data(), packed.data(), 0, n, bits, false);
      for (int i = 0; i < n; ++i) ASSERT_EQ(int(out[size_t(i)]), i % count);
    }
  });
}

// A sub-byte tensor in its own buffer: shape, strides (elements) and where
// element 0 sits, in elements from the start of a byte-aligned buffer.
struct Layout {
  std::vector<int64_t> shape, strides;
  int64_t origin = 0;
};

int64_t count_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

// A random permutation of the dims, each maybe reversed, with gaps.
Layout random_layout(std::mt19937& rng, bool allow_transposed) {
  Layout l;
  const size_t ndim = rng() % 4;
  for (size_t d = 0; d < ndim; ++d) {
    static const int64_t sizes[] = {1, 2, 3, 5, 8, 17, 33, 64, 70, 131};
    l.shape.push_back(sizes[rng() % std::size(sizes)]);
  }
  while (count_of(l.shape) > 30000)
    for (auto& s : l.shape) s = std::max<int64_t>(1, s / 2);
  std::vector<size_t> order(ndim);
  for (size_t d = 0; d < ndim; ++d) order[d] = d;
  if (allow_transposed && rng() % 2) std::shuffle(order.begin(), order.end(), rng);
  l.strides.assign(ndim, 0);
  int64_t step = 1, low = 0, high = 0;
  for (size_t k = ndim; k-- > 0;) {
    const size_t d = order[k];
    l.strides[d] = rng() % 4 == 0 ? -step : step;
    const int64_t reach = l.strides[d] * (l.shape[d] - 1);
    (reach < 0 ? low : high) += reach;
    step *= l.shape[d] + (rng() % 3 == 0 ? int64_t(rng() % 3) : 0);
  }
  l.origin = -low + int64_t(rng() % 3);
  (void)high;
  return l;
}

// The buffer a layout needs, in elements of `step_bits`, plus a byte.
size_t buffer_bytes(const Layout& l, int64_t step_bits) {
  int64_t high = 0;
  for (size_t d = 0; d < l.shape.size(); ++d)
    if (l.strides[d] > 0) high += l.strides[d] * (l.shape[d] - 1);
  return size_t(((l.origin + high + 1) * step_bits + 7) / 8);
}

// Offsets (in elements) of every index in row-major order.
std::vector<int64_t> offsets_of(const Layout& l) {
  std::vector<int64_t> out;
  const int64_t n = count_of(l.shape);
  for (int64_t flat = 0; flat < n; ++flat) {
    int64_t rest = flat, at = l.origin;
    for (size_t k = l.shape.size(); k-- > 0;) {
      at += rest % l.shape[k] * l.strides[k];
      rest /= l.shape[k];
    }
    out.push_back(at);
  }
  return out;
}

struct SubbyteType {
  const char* name;
  DType dtype;
  bool padded;
};

const SubbyteType subbyte_types[] = {
    {"int4", {dlabi::kDLInt, 4, 1}, false},
    {"uint4", {dlabi::kDLUInt, 4, 1}, false},
    {"int2", {dlabi::kDLInt, 2, 1}, false},
    {"uint1", {dlabi::kDLUInt, 1, 1}, false},
    {"int3", {dlabi::kDLInt, 3, 1}, false},
    {"int7", {dlabi::kDLInt, 7, 1}, false},
    {"float4_e2m1fn", {dlabi::kDLFloat4_e2m1fn, 4, 1}, false},
    {"float6_e2m3fn", {dlabi::kDLFloat6_e2m3fn, 6, 1}, false},
    {"float6_e3m2fn", {dlabi::kDLFloat6_e3m2fn, 6, 1}, false},
    {"float4_e2m1fn_x2", {dlabi::kDLFloat4_e2m1fn, 4, 2}, false},
    {"int2x3", {dlabi::kDLInt, 2, 3}, false},
    {"int4 padded", {dlabi::kDLInt, 4, 1}, true},
    {"float4_e2m1fn padded", {dlabi::kDLFloat4_e2m1fn, 4, 1}, true},
    {"uint2x3 padded", {dlabi::kDLUInt, 2, 3}, true},
    {"float8_e4m3fn", {dlabi::kDLFloat8_e4m3fn, 8, 1}, false},
    {"float8_e5m2x4", {dlabi::kDLFloat8_e5m2, 8, 4}, false},
};

int64_t step_bits_of(const SubbyteType& t) {
  return t.dtype.is_subbyte() && !t.padded ? int64_t(t.dtype.element_bits())
                                           : int64_t(t.dtype.element_bytes()) * 8;
}

TensorView view_of(Bytes& buffer, const Layout& l, const SubbyteType& t) {
  // Element 0's byte; place_origin keeps it on a byte boundary.
  return TensorView::from_data(buffer.data() + l.origin * step_bits_of(t) / 8, t.dtype, l.shape,
                               l.strides, {},
                               t.padded ? DLBRIDGE_FLAG_IS_SUBBYTE_TYPE_PADDED : 0);
}

void align_origin(Layout& l, int64_t step_bits) {
  while (l.origin * step_bits % 8 != 0) ++l.origin;
}

TEST(CopyUnpacked, MatchesTheDefinitionOverRandomLayouts) {
  for_each_isa([](VectorIsa isa) {
    std::mt19937 rng(17);
    for (const SubbyteType& t : subbyte_types)
      for (int round = 0; round < 60; ++round) {
        Layout l = random_layout(rng, true);
        const int64_t step = step_bits_of(t);
        align_origin(l, step);
        Bytes buffer = random_bytes(buffer_bytes(l, step), rng);
        const bool sign = rng() % 2;
        const auto out = dlbridge::copy_unpacked(view_of(buffer, l, t), 0,
                                                 dlbridge::UnpackOptions{sign});
        const auto* got = static_cast<const unsigned char*>(out.view().data());
        const unsigned bits = t.dtype.bits, lanes = t.dtype.lanes;
        const bool extend_sign = sign && t.dtype.code == dlabi::kDLInt;
        const std::vector<int64_t> offsets = offsets_of(l);
        for (size_t e = 0; e < offsets.size(); ++e)
          for (unsigned lane = 0; lane < lanes; ++lane) {
            const size_t at = e * lanes + lane;
            if (bits >= 8) continue;  // whole bytes: checked below
            ASSERT_EQ(got[at], value_at(buffer, offsets[e] * step + lane * bits, bits, extend_sign))
                << t.name << " " << isa_name(isa) << " round " << round << " element " << e;
          }
        if (bits >= 8) {
          for (size_t e = 0; e < offsets.size(); ++e)
            for (unsigned k = 0; k < lanes; ++k)
              ASSERT_EQ(got[e * lanes + k], buffer[size_t(offsets[e] * lanes + k)]) << t.name;
        }
      }
  });
}

// Large transposed and shifted packed copies, the tiled and buffered paths,
// in copy_into and copy_unpacked; checked against the definition.
TEST(CopyUnpacked, TransposedPackedSources) {
  for_each_isa([](VectorIsa isa) {
    std::mt19937 rng(19);
    for (const SubbyteType& t : subbyte_types) {
      if (!t.dtype.is_subbyte() || t.padded || t.dtype.lanes != 1) continue;
      const std::pair<int64_t, int64_t> shapes[] = {{130, 75}, {64, 64}, {3, 200}};
      for (const auto& [rows, cols] : shapes) {
        Layout l;
        l.shape = {rows, cols};
        l.strides = {1, rows};  // a column-major source: src.T of a compact one
        const int64_t step = step_bits_of(t);
        l.origin = int64_t(rng() % 9);
        align_origin(l, step);
        Bytes buffer = random_bytes(buffer_bytes(l, step), rng);
        const auto out = dlbridge::copy_unpacked(view_of(buffer, l, t));
        const auto* got = static_cast<const unsigned char*>(out.view().data());
        const std::vector<int64_t> offsets = offsets_of(l);
        for (size_t e = 0; e < offsets.size(); ++e)
          ASSERT_EQ(got[e], value_at(buffer, offsets[e] * step, t.dtype.bits, false))
              << t.name << " " << isa_name(isa) << " " << rows << "x" << cols;

        // The same into a packed compact dst, copy_into's tiled path.
        Layout d;
        d.shape = l.shape;
        d.strides = {cols, 1};
        d.origin = int64_t(rng() % 9);
        align_origin(d, step);
        Bytes dst = random_bytes(buffer_bytes(d, step), rng);
        Bytes expected = dst;
        const std::vector<int64_t> dst_offsets = offsets_of(d);
        for (size_t e = 0; e < offsets.size(); ++e)
          for (int64_t k = 0; k < step; ++k) {
            const int64_t b = dst_offsets[e] * step + k;
            const unsigned v = bit_of(buffer, offsets[e] * step + k);
            auto& byte = expected[size_t(b / 8)];
            byte = (unsigned char)((byte & ~(1u << (b % 8))) | (v << (b % 8)));
          }
        dlbridge::copy_into(view_of(buffer, l, t), view_of(dst, d, t));
        ASSERT_EQ(dst, expected) << t.name << " " << isa_name(isa) << " copy_into " << rows << "x"
                                 << cols;
      }
    }
  });
}

TEST(CopyPacked, ReversesCopyUnpackedAndIgnoresPaddingBits) {
  for_each_isa([](VectorIsa isa) {
    std::mt19937 rng(23);
    for (const SubbyteType& t : subbyte_types) {
      if (!t.dtype.is_subbyte()) continue;
      for (int round = 0; round < 40; ++round) {
        Layout l = random_layout(rng, true);
        const int64_t step = step_bits_of(t);
        align_origin(l, step);
        Bytes buffer = random_bytes(buffer_bytes(l, step), rng);
        const TensorView src = view_of(buffer, l, t);
        const auto packed = dlbridge::copy_packed(src);
        EXPECT_EQ(packed.flags(), uint64_t(DLBRIDGE_FLAG_IS_COPIED));
        EXPECT_TRUE(packed.view().packed()) << t.name;
        // Element e of the packed result holds src's element e, every lane.
        const auto* p = static_cast<const unsigned char*>(packed.view().data());
        const Bytes got(p, p + packed.view().nbytes());
        const unsigned element_bits = t.dtype.element_bits();
        const std::vector<int64_t> offsets = offsets_of(l);
        for (size_t e = 0; e < offsets.size(); ++e)
          for (unsigned k = 0; k < element_bits; ++k)
            ASSERT_EQ(bit_of(got, int64_t(e) * element_bits + k), bit_of(buffer, offsets[e] * step + k))
                << t.name << " " << isa_name(isa) << " round " << round << " element " << e;
      }
    }
  });
}

TEST(CopyPacked, WholeBytesAndEmptyAndDevices) {
  std::vector<float> data{1, 2, 3, 4};
  const auto out = dlbridge::copy_packed(
      TensorView::from_data(data.data(), dlbridge::dtype_of<float>(), {2, 2}, {1, 2}));
  const auto* f = static_cast<const float*>(out.view().data());
  EXPECT_EQ(std::vector<float>(f, f + 4), (std::vector<float>{1, 3, 2, 4}));
  const DType int4{dlabi::kDLInt, 4, 1};
  EXPECT_EQ(dlbridge::copy_packed(TensorView::from_data(nullptr, int4, {0, 3}, {},
                                                        {}, DLBRIDGE_FLAG_IS_SUBBYTE_TYPE_PADDED))
                .view()
                .size(),
            0);
  try {
    dlbridge::copy_packed(TensorView::from_data(data.data(), int4, {2}, {}, {dlabi::kDLCUDA, 0}));
    ADD_FAILURE() << "copy_packed read device memory";
  } catch (const dlbridge::Error& e) {
    EXPECT_EQ(e.code(), dlbridge::ErrorCode::device_unavailable) << e.what();
    EXPECT_NE(std::string(e.what()).find("copy_packed"), std::string::npos);
  }
}

}  // namespace
