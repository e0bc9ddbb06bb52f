// Reducing a strided copy to the fewest, best-ordered loops: drop size-1
// dims, turn negative destination strides around, order dims so that the
// innermost one writes contiguously, merge dims that walk memory as one, and
// pick the kernel that fits what is left.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "../../layout.hpp"

namespace dlbridge::detail {

// One loop of a copy. Strides are in bytes for byte-sized elements and in
// elements for packed sub-byte types.
struct CopyDim {
  int64_t size;
  int64_t src;
  int64_t dst;
};

struct CopyDims {
  int32_t ndim = 0;
  CopyDim dim[max_ndim];  // outermost first

  CopyDim& inner() noexcept { return dim[ndim - 1]; }
  void push(CopyDim d) noexcept { dim[ndim++] = d; }
};

// The strided index iterator of the copy kernels: an odometer over dims
// [0, ndim) of a CopyDims (the last varies fastest) that keeps the source
// and destination offsets of its position, in the unit of the strides
// (bytes for the byte kernels, elements for packed sub-byte data), so
// each step costs additions only.
struct StridedIndex {
  int64_t index[max_ndim] = {};
  int64_t src = 0, dst = 0;

  // Starts at position `row` of the row-major order over the dims.
  void seek(const CopyDim* dims, int32_t ndim, int64_t row) noexcept {
    src = dst = 0;
    for (int32_t d = ndim - 1; d >= 0; --d) {
      index[d] = row % dims[d].size;
      row /= dims[d].size;
      src += index[d] * dims[d].src;
      dst += index[d] * dims[d].dst;
    }
  }

  // Moves to the next position; false (back at the first) after the last.
  bool next(const CopyDim* dims, int32_t ndim) noexcept {
    for (int32_t d = ndim - 1; d >= 0; --d) {
      src += dims[d].src;
      dst += dims[d].dst;
      if (++index[d] < dims[d].size) return true;
      src -= dims[d].src * dims[d].size;
      dst -= dims[d].dst * dims[d].size;
      index[d] = 0;
    }
    return false;
  }
};

// The dims of size > 1, with strides scaled by unit (the element width in
// bytes, or 1 for packed types).
inline CopyDims gather_dims(int32_t ndim, const int64_t* shape,
                            const int64_t* src_strides,
                            const int64_t* dst_strides, int64_t unit) {
  CopyDims out;
  for (int32_t d = 0; d < ndim; ++d)
    if (shape[d] != 1)
      out.push({shape[d], src_strides[d] * unit, dst_strides[d] * unit});
  return out;
}

// Outermost first by |dst stride|, so the innermost loop writes the closest
// addresses; ties (only possible with broadcasting) fall back to src. An
// insertion sort: stable, no allocation (std::stable_sort's buffer is a
// visible part of the cost of a small copy), and ndim is small.
inline void sort_dims(CopyDims& dims) noexcept {
  auto outer_first = [](const CopyDim& a, const CopyDim& b) {
    const int64_t ad = std::llabs(a.dst), bd = std::llabs(b.dst);
    if (ad != bd) return ad > bd;
    return std::llabs(a.src) > std::llabs(b.src);
  };
  for (int32_t i = 1; i < dims.ndim; ++i) {
    const CopyDim key = dims.dim[i];
    int32_t j = i;
    for (; j > 0 && outer_first(key, dims.dim[j - 1]); --j) dims.dim[j] = dims.dim[j - 1];
    dims.dim[j] = key;
  }
}

// Merges dim i into dim i+1 wherever one loop over both walks src and dst
// by the inner stride: (n, s*m), (m, s) -> (n*m, s). Needs sorted dims.
inline void merge_dims(CopyDims& dims) {
  if (dims.ndim < 2) return;
  int32_t kept = dims.ndim - 1;  // dims[kept..] is the merged suffix
  for (int32_t d = dims.ndim - 2; d >= 0; --d) {
    CopyDim& inner = dims.dim[kept];
    const CopyDim outer = dims.dim[d];
    int64_t src_span = 0, dst_span = 0, size = 0;
    const bool mergeable =
        !mul_overflow(inner.src, inner.size, src_span) &&
        !mul_overflow(inner.dst, inner.size, dst_span) &&
        !mul_overflow(inner.size, outer.size, size) &&
        outer.src == src_span && outer.dst == dst_span;
    if (mergeable) {
      inner.size = size;
    } else {
      dims.dim[--kept] = outer;
    }
  }
  std::move(dims.dim + kept, dims.dim + dims.ndim, dims.dim);
  dims.ndim -= kept;
}

// Why dst cannot be written element by element without two elements landing
// on one address, or an empty string when it can. Strides in elements.
// Distinct addresses are proven cheaply when, sorted by |stride|, each
// stride steps over everything the smaller ones reach (true of every
// layout NumPy or PyTorch produce); otherwise small tensors are checked
// exactly with a bitmap, and large ones refused rather than guessed.
inline std::string dst_overlap_problem(int32_t ndim, const int64_t* shape,
                                       const int64_t* strides) {
  if (is_c_contiguous(ndim, shape, strides)) return {};  // the common case, cheaply
  std::vector<CopyDim> dims;
  for (int32_t d = 0; d < ndim; ++d) {
    if (shape[d] == 0) return {};
    if (shape[d] == 1) continue;
    if (strides[d] == 0)
      return "dst has stride 0 over dimension " + std::to_string(d) +
             " of size " + std::to_string(shape[d]) +
             ", so several elements would be written to one address.";
    dims.push_back({shape[d], std::llabs(strides[d]), 0});
  }
  std::sort(dims.begin(), dims.end(),
            [](const CopyDim& a, const CopyDim& b) { return a.src < b.src; });
  // Every reach below fits int64: TensorView validated the byte extent.
  int64_t span = 1;
  bool proven = true;
  for (const CopyDim& d : dims) {
    if (d.src < span) proven = false;
    span += d.src * (d.size - 1);
  }
  if (proven) return {};
  const std::string overlap =
      "dst's strides make several elements share one address.";
  constexpr int64_t max_exact_span = int64_t(1) << 26;
  if (span > max_exact_span)
    return "dst's strides could not be proven free of overlap (the check is "
           "exact only below 2^26 elements of span).";
  std::vector<uint64_t> seen(size_t((span + 63) / 64), 0);
  std::vector<int64_t> index(dims.size(), 0);
  int64_t offset = 0;  // from the lowest address, since |strides| are used
  while (true) {
    uint64_t& word = seen[size_t(offset / 64)];
    const uint64_t bit = uint64_t(1) << (offset % 64);
    if (word & bit) return overlap;
    word |= bit;
    size_t d = 0;
    for (; d < dims.size(); ++d) {
      offset += dims[d].src;
      if (++index[d] < dims[d].size) break;
      offset -= dims[d].src * dims[d].size;
      index[d] = 0;
    }
    if (d == dims.size()) return {};
  }
}

enum class ByteKernel {
  contiguous,  // no dims left: one block of `elem` bytes
  strided,     // innermost dim, any strides
  blocked,     // innermost two dims, cache-blocked (a transpose)
};

// A copy of byte-sized elements reduced to its loops. `elem` may exceed the
// dtype's width: a row contiguous in both src and dst is moved as one unit.
struct BytePlan {
  const char* src = nullptr;
  char* dst = nullptr;
  int64_t elem = 0;
  CopyDims dims;
  ByteKernel kernel = ByteKernel::contiguous;
  int64_t bytes = 0;  // total moved, for the thread decision
};

inline BytePlan plan_byte_copy(const char* src, char* dst, int64_t elem,
                               int32_t ndim, const int64_t* shape,
                               const int64_t* src_strides,
                               const int64_t* dst_strides, int64_t count) {
  BytePlan plan;
  plan.dims = gather_dims(ndim, shape, src_strides, dst_strides, elem);
  plan.bytes = count * elem;
  CopyDims& dims = plan.dims;
  // Walking a dim backwards in both tensors changes nothing but the order
  // of writes, and lets negative dst strides merge and stream like others.
  for (int32_t d = 0; d < dims.ndim; ++d) {
    CopyDim& c = dims.dim[d];
    if (c.dst < 0) {
      src += c.src * (c.size - 1);
      dst += c.dst * (c.size - 1);
      c.src = -c.src;
      c.dst = -c.dst;
    }
  }
  sort_dims(dims);
  merge_dims(dims);
  plan.src = src;
  plan.dst = dst;
  plan.elem = elem;
  while (dims.ndim > 0 && dims.inner().src == plan.elem &&
         dims.inner().dst == plan.elem) {
    plan.elem *= dims.inner().size;
    --dims.ndim;
  }
  if (dims.ndim == 0) {
    plan.kernel = ByteKernel::contiguous;
    return plan;
  }
  plan.kernel = ByteKernel::strided;
  // Blocking pays when the inner loop reads far apart (a new cache line per
  // element) while another dim reads close together: reading a tile along
  // that dim reuses each src line for several dst rows.
  constexpr int64_t cache_line = 64;
  const int64_t inner_src = std::llabs(dims.inner().src);
  if (dims.ndim >= 2 && plan.elem <= 16 && inner_src > cache_line) {
    int32_t best = -1;
    for (int32_t d = 0; d + 1 < dims.ndim; ++d) {
      const int64_t s = std::llabs(dims.dim[d].src);
      if (s != 0 && s < inner_src &&
          (best < 0 || s < std::llabs(dims.dim[best].src)))
        best = d;
    }
    if (best >= 0 && std::llabs(dims.dim[best].src) <= cache_line) {
      // Move it next to the innermost dim, keeping the others in order.
      std::rotate(dims.dim + best, dims.dim + best + 1, dims.dim + dims.ndim - 1);
      plan.kernel = ByteKernel::blocked;
    }
  }
  return plan;
}

}  // namespace dlbridge::detail
