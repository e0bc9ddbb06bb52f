// TensorView: a validated, non-owning description of a strided tensor. No
// field of a foreign DLTensor is trusted before TensorView::from_dltensor has
// checked it; afterwards every query is plain arithmetic that cannot overflow.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "abi.hpp"
#include "device.hpp"
#include "dtype.hpp"
#include "error.hpp"
#include "layout.hpp"

namespace dlbridge {

// Requirements a consumer places on an import, as data: each one that fails
// is reported with its own code and a fix, instead of an ad-hoc `if`.
struct ImportPolicy {
  bool require_c_contiguous = false;  // else ErrorCode::unsupported_layout
  bool require_writable = false;      // else ErrorCode::read_only
  bool require_host_accessible = false;  // else ErrorCode::device_unavailable
  uint64_t min_alignment = 1;  // of element 0; else unsupported_layout
};

class TensorView {
 public:
  TensorView() = default;

  // Validates t without reading past what its own fields promise. flags are
  // the DLBRIDGE_FLAG_* bits of the managed tensor (0 for a legacy import, where
  // read-only-ness cannot be known). NULL strides mean compact row-major:
  // legal before DLPack 1.2, and unambiguous after it, so accepted always.
  static TensorView from_dltensor(const abi::DLTensor& t, uint64_t flags = 0,
                                  const ImportPolicy& policy = {}) {
    TensorView view;
    view.assign(t, flags, policy);
    return view;
  }

  // from_dltensor into an existing view, which saves a move where views
  // live inside other objects (ManagedTensor); on failure *this is left
  // in an unspecified but destructible state.
  void assign(const abi::DLTensor& t, uint64_t flags = 0, const ImportPolicy& policy = {}) {
    if (!assign_plain(t, flags)) assign_general(t, flags);
    check(policy);
  }

  // from_dltensor without the one-pass reading of common tensors: every
  // rule checked in its own step. from_dltensor gives the same view, or
  // the same error, for every input (tests/cpp/test_tensor_view_random.cpp
  // holds the two side by side); this is that test's reference.
  static TensorView from_dltensor_general(const abi::DLTensor& t, uint64_t flags = 0,
                                          const ImportPolicy& policy = {}) {
    TensorView view;
    view.assign_general(t, flags);
    view.check(policy);
    return view;
  }

  // The one-pass reading alone: the view when from_dltensor takes t without
  // the general reading, std::nullopt when it hands t over to it.
  static std::optional<TensorView> from_dltensor_plain(const abi::DLTensor& t,
                                                       uint64_t flags = 0) {
    TensorView view;
    if (!view.assign_plain(t, flags)) return std::nullopt;
    return view;
  }

  // A view of C++-owned memory. Empty strides mean compact row-major.
  static TensorView from_data(void* data, DType dtype,
                              const std::vector<int64_t>& shape,
                              const std::vector<int64_t>& strides = {},
                              Device device = {}, uint64_t flags = 0) {
    if (!strides.empty() && strides.size() != shape.size())
      detail::fail(ErrorCode::invalid_argument,
                   "strides has " + std::to_string(strides.size()) +
                       " entries but shape has " +
                       std::to_string(shape.size()) + ".",
                   "Pass one stride per dimension, or none for row-major.");
    if (shape.size() > size_t(max_ndim))
      detail::fail(ErrorCode::invalid_tensor,
                   "ndim " + std::to_string(shape.size()) + " exceeds " +
                       std::to_string(max_ndim) + ".",
                   "Reshape to at most " + std::to_string(max_ndim) +
                       " dimensions.");
    abi::DLTensor t{};
    t.data = data;
    t.device = device.to_dl();
    t.ndim = int32_t(shape.size());
    t.dtype = dtype.to_dl();
    t.shape = const_cast<int64_t*>(shape.data());
    t.strides = strides.empty() ? nullptr : const_cast<int64_t*>(strides.data());
    return from_dltensor(t, flags);
  }

  // Whether check(policy) would pass, without throwing: a consumer plans a
  // copy for what fails it.
  bool meets(const ImportPolicy& policy) const noexcept {
    return !(policy.require_writable && readonly()) &&
           !(policy.require_host_accessible && !is_host_accessible(device_.type)) &&
           !(policy.require_c_contiguous && !is_c_contiguous()) &&
           !(policy.min_alignment > 1 && has_direct_address(device_.type) &&
             reinterpret_cast<uintptr_t>(data()) % policy.min_alignment != 0);
  }

  // Raises the first requirement of policy that this view misses.
  void check(const ImportPolicy& policy) const {
    // Small enough to inline where the usual case (met) is decided; the
    // messages are built out of line.
    if (!meets(policy)) refuse(policy);
  }

 private:
  // Raises the first requirement of policy that this view misses.
  void refuse(const ImportPolicy& policy) const {
    if (policy.require_writable && readonly())
      detail::fail(ErrorCode::read_only,
                   "The tensor is read-only but a writable tensor was requested.",
                   "Request a copy (copy=True) or import it read-only.");
    if (policy.require_host_accessible && !is_host_accessible(device_.type))
      detail::fail(ErrorCode::device_unavailable,
                   "The tensor lives on " + to_string(device_) +
                       ", which the host cannot read directly.",
                   "Copy it to the CPU first (dl_device=(1, 0) or device='cpu').");
    if (policy.require_c_contiguous && !is_c_contiguous())
      detail::fail(ErrorCode::unsupported_layout,
                   "The tensor is not C-contiguous (strides " +
                       dims_text(strides_) + " for shape " + dims_text(shape_) +
                       ").",
                   "Allow a copy (copy=None or copy=True) to get a compact tensor.");
    // Alignment is a property of addresses; an opaque handle has none.
    if (policy.min_alignment > 1 && has_direct_address(device_.type) &&
        reinterpret_cast<uintptr_t>(data()) % policy.min_alignment != 0)
      detail::fail(ErrorCode::unsupported_layout,
                   "The data address is not aligned to " +
                       std::to_string(policy.min_alignment) + " bytes.",
                   "Allow a copy so that dlbridge can allocate aligned memory.");
  }

 public:

  // Address of element 0: data + byte_offset. Added as integers because a
  // size-0 tensor may pair data == NULL with any offset, and NULL + offset is
  // undefined as pointer arithmetic.
  void* data() const noexcept {
    return reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(data_) +
                                   uintptr_t(byte_offset_));
  }
  // The producer's data pointer and offset, as they were given.
  void* base_data() const noexcept { return data_; }
  uint64_t byte_offset() const noexcept { return byte_offset_; }

  Device device() const noexcept { return device_; }
  DType dtype() const noexcept { return dtype_; }
  int32_t ndim() const noexcept { return shape_.size(); }
  const int64_t* shape() const noexcept { return shape_.data(); }
  // Never NULL for ndim > 0: NULL strides from the producer are filled in.
  const int64_t* strides() const noexcept { return strides_.data(); }
  int64_t shape(int32_t d) const noexcept { return shape_[d]; }
  int64_t stride(int32_t d) const noexcept { return strides_[d]; }
  int64_t size() const noexcept { return size_; }
  // Bytes of a compact copy of this tensor.
  int64_t nbytes() const noexcept { return nbytes_; }
  // Bytes touched, relative to data(); low is negative for negative strides.
  ByteExtent extent() const noexcept { return extent_; }

  uint64_t flags() const noexcept { return flags_; }
  bool readonly() const noexcept { return (flags_ & DLBRIDGE_FLAG_READ_ONLY) != 0; }
  bool subbyte_padded() const noexcept {
    return (flags_ & DLBRIDGE_FLAG_IS_SUBBYTE_TYPE_PADDED) != 0;
  }
  // True when elements are packed several to a byte.
  bool packed() const noexcept { return dtype_.is_subbyte() && !subbyte_padded(); }

  bool is_contiguous(Order order) const noexcept {
    return dlbridge::is_contiguous(ndim(), shape(), strides(), order);
  }
  bool is_c_contiguous() const noexcept { return is_contiguous(Order::c); }
  bool is_f_contiguous() const noexcept { return is_contiguous(Order::f); }

  // A DLTensor describing this view; its shape and strides point into the
  // view, so it is valid while the view lives and is not moved.
  abi::DLTensor dltensor() const noexcept {
    abi::DLTensor t{};
    t.data = data_;
    t.device = device_.to_dl();
    t.ndim = ndim();
    t.dtype = dtype_.to_dl();
    t.shape = ndim() ? const_cast<int64_t*>(shape()) : nullptr;
    t.strides = ndim() ? const_cast<int64_t*>(strides()) : nullptr;
    t.byte_offset = byte_offset_;
    return t;
  }

  // The same memory described with compact strides; only valid when
  // is_c_contiguous() holds (size-1 dims may have carried any stride).
  TensorView with_compact_strides() const {
    TensorView out = *this;
    compact_strides(ndim(), shape(), out.strides_.data());
    return out;
  }

  // The same memory seen from another device, for memory that both reach
  // (pinned or managed memory exported to a kDLCPU request).
  TensorView with_device(Device device) const {
    TensorView out = *this;
    out.device_ = device;
    return out;
  }

  TensorView with_flags(uint64_t flags) const {
    TensorView out = *this;
    out.flags_ = flags;
    return out;
  }

 private:
  static std::string dims_text(const detail::SmallDims& dims) {
    return dlbridge::dims_text(dims.size(), dims.data());
  }

  [[noreturn]] static void malformed(const std::string& what) {
    detail::fail(ErrorCode::invalid_tensor, "Malformed DLTensor: " + what,
                 "The producer exported an invalid tensor; report it to the "
                 "producing library, or copy the data there first.");
  }

  void assign_general(const abi::DLTensor& t, uint64_t flags) {
    read_header(t, flags);
    read_dims(t);
    check_memory();
  }

  // The tensors nearly every import sees, read and checked in one pass:
  // explicit strides, at most SmallDims::inline_capacity dims, a valid
  // dtype of whole bytes, memory with addresses. It accepts only what
  // assign_general accepts, filling every field with the same value; on
  // anything else (every malformed tensor, any overflow, NULL strides)
  // it returns false and assign_general reads t again from the start, so
  // every refusal and its message come from the general code alone.
  bool assign_plain(const abi::DLTensor& t, uint64_t flags) noexcept {
    const int32_t ndim = t.ndim;
    if (ndim < 0 || ndim > detail::SmallDims::inline_capacity) return false;
    if (ndim > 0 && (t.shape == nullptr || t.strides == nullptr)) return false;
    // A known type whose data is an address: the wrap-around check below applies.
    const int device = detail::device_type_index(t.device.device_type);
    if (device < 0 || !device_type_table[device].direct_address || t.device.device_id < 0)
      return false;
    const DType dtype = DType::from_dl(t.dtype);
    if (!dtype_valid(dtype) || dtype.is_subbyte()) return false;
    if (t.byte_offset > uint64_t(INT64_MAX)) return false;
    const int64_t unit = int64_t(dtype.element_bytes());
    // read_dims and byte_extent's arithmetic, fused: the element count,
    // and the reach of the strides in elements on either side of element 0.
    int64_t* shape = shape_.assign_inline(ndim);
    int64_t* strides = strides_.assign_inline(ndim);
    int64_t count = 1, low = 0, high = 0;
    for (int32_t d = 0; d < ndim; ++d) {
      const int64_t extent = t.shape[d], step = t.strides[d];
      shape[d] = extent;
      strides[d] = step;
      if (extent < 0 || detail::mul_overflow(count, extent, count)) return false;
      if (extent > 1) {
        int64_t reach = 0;
        if (detail::mul_overflow(step, extent - 1, reach)) return false;
        // Two plain branches, not a reference to low or high: a reference
        // keeps both in memory through the loop.
        if (reach < 0 ? detail::add_overflow(low, reach, low)
                      : detail::add_overflow(high, reach, high))
          return false;
      }
    }
    int64_t nbytes = 0;
    if (detail::mul_overflow(count, unit, nbytes)) return false;
    ByteExtent extent{};
    if (count != 0) {  // a size-0 tensor reads nothing: data may be anything
      if (t.data == nullptr) return false;
      int64_t width = 0;
      if (detail::mul_overflow(low, unit, extent.low) ||
          detail::mul_overflow(high, unit, extent.high) ||
          detail::add_overflow(extent.high, unit, extent.high) ||
          detail::sub_overflow(extent.high, extent.low, width))
        return false;
      const uint64_t base = reinterpret_cast<uintptr_t>(t.data);
      uint64_t first = 0, last = 0;
      if (detail::add_overflow(base, t.byte_offset, first) ||
          (extent.low < 0 && first < uint64_t(-extent.low)) ||
          detail::add_overflow(first, uint64_t(extent.high), last))
        return false;
    }
    data_ = t.data;
    byte_offset_ = t.byte_offset;
    device_ = Device::from_dl(t.device);
    dtype_ = dtype;
    flags_ = flags;
    size_ = count;
    nbytes_ = nbytes;
    extent_ = extent;
    return true;
  }

  void read_header(const abi::DLTensor& t, uint64_t flags) {
    if (t.ndim < 0 || t.ndim > max_ndim)
      malformed("ndim = " + std::to_string(t.ndim) + " is outside 0.." +
                std::to_string(max_ndim) + ".");
    if (t.ndim > 0 && t.shape == nullptr)
      malformed("shape is NULL with ndim = " + std::to_string(t.ndim) + ".");
    if (!is_known_device_type(t.device.device_type))
      detail::fail(ErrorCode::unsupported_device_type,
                   unsupported_device_sentence(t.device.device_type) +
                       " The producer handed over a tensor on it, which is not a "
                       "DLPack 1.3 device type.",
                   "Ask the producer for a DLPack 1.3 device type (dl_device=(1, 0) "
                   "for the CPU), or pass dl_device=None where you export it.");
    if (t.device.device_id < 0)
      malformed("device_id = " + std::to_string(t.device.device_id) +
                " is negative.");
    dtype_ = DType::from_dl(t.dtype);
    validate_dtype(dtype_);
    device_ = Device::from_dl(t.device);
    data_ = t.data;
    byte_offset_ = t.byte_offset;
    flags_ = flags;
  }

  void read_dims(const abi::DLTensor& t) {
    shape_.assign(t.shape, t.ndim);
    for (int32_t d = 0; d < t.ndim; ++d)
      if (shape_[d] < 0)
        malformed("shape[" + std::to_string(d) + "] = " +
                  std::to_string(shape_[d]) + " is negative.");
    auto count = element_count(t.ndim, shape_.data());
    if (!count)
      malformed("the element count of shape " + dims_text(shape_) +
                " overflows int64.");
    size_ = *count;
    auto bytes = compact_nbytes(size_, dtype_, subbyte_padded());
    if (!bytes)
      malformed("the byte size of shape " + dims_text(shape_) + " with dtype " +
                dtype_name(dtype_) + " overflows int64.");
    nbytes_ = *bytes;
    if (t.strides != nullptr) {
      strides_.assign(t.strides, t.ndim);
    } else {
      strides_.assign(nullptr, t.ndim);
      compact_strides(t.ndim, shape_.data(), strides_.data());
    }
  }

  void check_memory() {
    extent_ = ByteExtent{};  // assign() may reuse a view that described another tensor
    if (byte_offset_ > uint64_t(INT64_MAX))
      malformed("byte_offset = " + std::to_string(byte_offset_) +
                " exceeds INT64_MAX.");
    if (size_ == 0) return;  // nothing is read, so data may be anything
    if (data_ == nullptr)
      malformed("data is NULL but the tensor has " + std::to_string(size_) +
                " elements.");
    auto range = byte_extent(ndim(), shape(), strides(), dtype_,
                             subbyte_padded(), size_);
    if (!range)
      malformed("strides " + dims_text(strides_) + " with shape " +
                dims_text(shape_) + " address more than int64 bytes.");
    extent_ = *range;
    // An opaque handle is not an address: nothing to wrap around.
    if (!has_direct_address(device_.type)) return;
    // Element 0 and both ends of the touched range must be real addresses.
    const uint64_t base = reinterpret_cast<uintptr_t>(data_);
    uint64_t first = 0, high = 0;
    if (detail::add_overflow(base, byte_offset_, first) ||
        (extent_.low < 0 && first < uint64_t(-extent_.low)) ||
        detail::add_overflow(first, uint64_t(extent_.high), high))
      malformed("data + byte_offset + strides wrap around the address space.");
  }

  void* data_ = nullptr;
  uint64_t byte_offset_ = 0;
  Device device_{};
  DType dtype_{};
  uint64_t flags_ = 0;
  detail::SmallDims shape_;
  detail::SmallDims strides_;
  int64_t size_ = 1;
  int64_t nbytes_ = 0;
  ByteExtent extent_{};
};

}  // namespace dlbridge
