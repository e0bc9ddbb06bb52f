// Tensors laid over a plain byte buffer: what a tensor sends when its bytes
// travel on their own (a pickle's out-of-band buffer, a shared-memory
// segment), and the validation a receiver applies before it trusts a
// description that arrived with those bytes. Nothing in the description is
// trusted: it may come from another machine, or from an attacker.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "error.hpp"
#include "layout.hpp"
#include "tensor_view.hpp"

namespace dlbridge {

// A tensor's layout relative to the first byte of a buffer.
struct BufferLayout {
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // in elements, one per dim
  int64_t byte_offset = 0;       // of element 0 from the buffer's start
  uint64_t flags = 0;            // READ_ONLY and IS_SUBBYTE_TYPE_PADDED only
};

// The flags a layout may carry over a buffer: IS_COPIED describes one
// exchange, not the data, so it never travels.
inline constexpr uint64_t buffer_layout_flags =
    DLBRIDGE_FLAG_READ_ONLY | DLBRIDGE_FLAG_IS_SUBBYTE_TYPE_PADDED;

// The bytes a view touches, when they hold its elements and nothing else:
// the view's extent is exactly a compact copy's size, so the bytes can be
// sent as they are, with the view's own strides. True for C order, Fortran
// order, any permutation of dims and negative strides. Packed sub-byte views
// qualify only in C order, where element 0 starts its byte.
inline std::optional<ByteExtent> dense_extent(const TensorView& v) {
  if (v.size() == 0) return ByteExtent{0, 0};
  if (v.packed()) {
    if (!v.is_c_contiguous()) return std::nullopt;
    return ByteExtent{0, v.nbytes()};
  }
  if (v.extent().bytes() != v.nbytes()) return std::nullopt;
  // As many bytes as elements could still hide an overlap beside a gap;
  // dense means the dims, by |stride|, nest like a compact layout.
  std::vector<std::pair<int64_t, int64_t>> dims;  // (|stride|, extent)
  for (int32_t d = 0; d < v.ndim(); ++d)
    if (v.shape(d) != 1) dims.emplace_back(v.stride(d) < 0 ? -v.stride(d) : v.stride(d), v.shape(d));
  std::sort(dims.begin(), dims.end());
  int64_t expected = 1;
  for (const auto& [stride, extent] : dims) {
    if (stride != expected) return std::nullopt;
    expected *= extent;  // cannot overflow: the product is the element count
  }
  return v.extent();
}

// The layout of a view whose dense extent is sent as a buffer starting at
// data() + extent.low.
inline BufferLayout buffer_layout_of(const TensorView& v, ByteExtent extent) {
  BufferLayout out;
  out.dtype = v.dtype();
  out.shape.assign(v.shape(), v.shape() + v.ndim());
  out.strides.assign(v.strides(), v.strides() + v.ndim());
  out.byte_offset = -extent.low;
  out.flags = v.flags() & buffer_layout_flags;
  return out;
}

namespace detail {
[[noreturn]] inline void bad_buffer_layout(const std::string& what) {
  fail(ErrorCode::invalid_tensor, "Invalid tensor layout for the received buffer: " + what,
       "The data was damaged or forged in transit; send the tensor again from a "
       "trusted source.");
}
}  // namespace detail

// A validated view of layout over the buffer [base, base + length). Refused
// with invalid_tensor: unknown flags, a shape or strides of the wrong
// length, negative dims, an offset outside the buffer, or any element (with
// any stride, negative ones included) outside the buffer; with
// unsupported_dtype: a dtype code DLPack does not define.
inline TensorView view_in_buffer(void* base, int64_t length, const BufferLayout& layout,
                                 Device device = {}) {
  if (length < 0) detail::bad_buffer_layout("negative buffer length.");
  if (uint64_t unknown = layout.flags & ~buffer_layout_flags)
    detail::bad_buffer_layout("flag bits " + std::to_string(unknown) +
                              " cannot describe data in a buffer.");
  if (layout.shape.size() > size_t(max_ndim))
    detail::bad_buffer_layout("ndim " + std::to_string(layout.shape.size()) + " exceeds " +
                              std::to_string(max_ndim) + ".");
  if (layout.strides.size() != layout.shape.size())
    detail::bad_buffer_layout(std::to_string(layout.strides.size()) + " strides for " +
                              std::to_string(layout.shape.size()) + " dims.");
  if (layout.byte_offset < 0 || layout.byte_offset > length)
    detail::bad_buffer_layout("element 0 at byte " + std::to_string(layout.byte_offset) +
                              " of a " + std::to_string(length) + "-byte buffer.");
  abi::DLTensor t{};
  t.data = base;
  t.device = device.to_dl();
  t.ndim = int32_t(layout.shape.size());
  t.dtype = layout.dtype.to_dl();
  t.shape = const_cast<int64_t*>(layout.shape.data());
  t.strides = const_cast<int64_t*>(layout.strides.data());
  t.byte_offset = uint64_t(layout.byte_offset);
  // Shape, strides and dtype get the checks of any foreign DLTensor first:
  // after them the extent below is known not to overflow.
  TensorView view = TensorView::from_dltensor(t, layout.flags);
  const ByteExtent reach = view.extent();
  if (view.size() > 0 &&
      (reach.low < -layout.byte_offset || reach.high > length - layout.byte_offset))
    detail::bad_buffer_layout(
        "its elements reach bytes [" + std::to_string(reach.low) + ", " +
        std::to_string(reach.high) + ") around element 0 at byte " +
        std::to_string(layout.byte_offset) + ", outside a buffer of " + std::to_string(length) +
        " bytes.");
  return view;
}

}  // namespace dlbridge
