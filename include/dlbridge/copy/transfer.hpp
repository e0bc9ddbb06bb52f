// copy_to_device: a compact copy of any tensor on any device that a backend
// serves. Layout work happens on the host with the CPU copy engine; device
// backends move contiguous bytes or rows of bytes. Ordering follows the
// DLPack stream rules: the copy into a device is queued on the consumer's
// stream (so the data is ready there without the host waiting), and only a
// copy whose target is host memory blocks until it is done.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "../allocate.hpp"
#include "../backend/device_support.hpp"
#include "../backend/registry.hpp"
#include "../export.hpp"
#include "../managed_tensor.hpp"
#include "../request.hpp"
#include "../tensor_view.hpp"
#include "copy.hpp"

namespace dlbridge {

struct TransferOptions {
  // The consumer's stream on the target device, as __dlpack__ receives it.
  StreamArg stream;
  // Where the source's data is ready (a DLPack stream value on the
  // source's device); absent: its family's default stream, where a
  // producer asked with stream=None (or 1) put it.
  StreamArg source_stream;
  // Flags of the new tensor. READ_ONLY is always cleared (the copy is the
  // caller's, writable); IS_SUBBYTE_TYPE_PADDED is taken from the source.
  uint64_t flags = DLBRIDGE_FLAG_IS_COPIED;
  CopyOptions host;
};

namespace detail {

// src as rows of contiguous bytes a constant pitch apart, when it is that
// simple (the common slice of a matrix); nullopt otherwise. Size-1 dims are
// ignored: their stride never moves the address.
inline std::optional<backend::Rows> as_rows(const TensorView& v) {
  const int64_t bytes = v.nbytes();
  if (v.is_c_contiguous() || v.size() <= 1) return backend::Rows{bytes, 1, bytes, bytes};
  if (v.packed()) return std::nullopt;
  std::vector<int64_t> shape, stride;
  for (int32_t d = 0; d < v.ndim(); ++d)
    if (v.shape(d) != 1) {
      shape.push_back(v.shape(d));
      stride.push_back(v.stride(d));
    }
  // Trailing dims that are compact among themselves form one row.
  size_t d = shape.size();
  int64_t row = 1;
  while (d > 0 && stride[d - 1] == row) row *= shape[--d];
  if (d == 0) return backend::Rows{bytes, 1, bytes, bytes};
  // The rest must be compact among themselves in units of the pitch.
  const int64_t pitch = stride[d - 1];
  if (row == 1 || pitch < row) return std::nullopt;
  int64_t rows = 1;
  for (size_t k = d; k-- > 0;) {
    if (stride[k] != pitch * rows) return std::nullopt;
    rows *= shape[k];
  }
  const int64_t element = int64_t(v.dtype().element_bytes());
  return backend::Rows{row * element, rows, pitch * element, row * element};
}

struct DeviceMemory {
  std::shared_ptr<void> owner;
  void* data;
};

inline DeviceMemory allocate_on(const std::shared_ptr<backend::DeviceBackend>& b,
                                Device device, int64_t bytes) {
  void* data = b->allocate(device, bytes);
  std::shared_ptr<void> owner(data, [b, device](void* p) { b->free(device, p); });
  return {std::move(owner), data};
}

// Orders `consumer`, a stream of `target`, after `ready`, a stream of
// `source`, both of backend b. wait_for names one device for both streams,
// and a stream value such as CUDA's 1 (the legacy default stream) means a
// different queue on each device, so only a same-device pair is ordered
// without blocking; otherwise the host waits for `ready`. (Managed memory
// is labelled device 0 whatever device last wrote it, so it always waits.)
inline void order_after(backend::DeviceBackend& b, Device source, backend::Stream ready,
                        Device target, backend::Stream consumer) {
  if (source == target)
    b.wait_for(source, ready, consumer);
  else
    b.synchronize(source, ready);
}

// Orders `consumer_stream` on `device` after the device's default stream,
// where dlbridge's device data is ready, without blocking the host; b is
// ready_backend's answer for them.
inline void order_after_default_stream(backend::DeviceBackend& b, Device device,
                                       StreamArg consumer_stream) {
  b.wait_for(device, backend::resolve_stream(device, StreamArg{}),
             backend::resolve_stream(device, consumer_stream));
}

// Whether the runtime of b reads host memory at p before a copy call
// returns: memory it does not know (or calls unregistered) is pageable.
inline bool is_pageable(backend::DeviceBackend& b, const void* p) {
  const std::optional<backend::PointerInfo> info = b.pointer_info(p);
  return !info || info->device.type == abi::kDLCPU;
}

// A staging buffer: compact host memory shaped like a tensor (its dtype,
// shape and sub-byte padding), and the view to copy through. Nobody
// receives it, so it is an owner and a view, not a DLPack managed tensor.
struct HostScratch {
  std::shared_ptr<void> owner;
  TensorView view;
};

inline HostScratch host_scratch(const TensorView& like) {
  HostScratch s;
  s.owner = allocate_host(like.nbytes());
  s.view = TensorView::from_data(s.owner.get(), like.dtype(),
                                 std::vector<int64_t>(like.shape(), like.shape() + like.ndim()),
                                 {}, Device{}, like.flags() & DLBRIDGE_FLAG_IS_SUBBYTE_TYPE_PADDED);
  return s;
}

// Copies src (device memory, of backend b) into the compact host buffer dst.
// Blocks until done: the target is the host. Layouts that are not rows go
// through a host copy of every byte src spans, then the CPU engine.
inline void device_to_host(backend::DeviceBackend& b, const TensorView& src,
                           backend::Stream ready, const TensorView& dst,
                           const CopyOptions& options) {
  const Device host{};
  if (auto rows = as_rows(src)) {
    b.copy(dst.data(), dst.device(), src.data(), src.device(), *rows, ready);
    b.synchronize(src.device(), ready);
    return;
  }
  const ByteExtent span = src.extent();
  const int64_t bytes = span.high - span.low;
  auto staging = allocate_host(bytes);
  const auto* first = static_cast<const char*>(src.data()) + span.low;
  b.copy(staging.get(), host, first, src.device(), backend::Rows{bytes, 1, bytes, bytes}, ready);
  b.synchronize(src.device(), ready);
  const TensorView staged = TensorView::from_data(
      static_cast<char*>(staging.get()) - span.low, src.dtype(),
      std::vector<int64_t>(src.shape(), src.shape() + src.ndim()),
      std::vector<int64_t>(src.strides(), src.strides() + src.ndim()), host,
      src.flags() & DLBRIDGE_FLAG_IS_SUBBYTE_TYPE_PADDED);
  copy_into(staged, dst, options);
}

// The copy of src to target through backends already asked: `to` serves
// target, `from` is source_backend(src.device()). Nothing here asks a
// device whether it is present again.
inline ManagedTensor copy_along(const TensorView& src, Device target,
                                const std::shared_ptr<backend::DeviceBackend>& to,
                                const std::shared_ptr<backend::DeviceBackend>& from,
                                const TransferOptions& options) {
  const Device source = src.device();
  const backend::Stream consumer = backend::resolve_stream(target, options.stream);
  const uint64_t flags = (options.flags & ~uint64_t(DLBRIDGE_FLAG_READ_ONLY)) |
                         (src.flags() & DLBRIDGE_FLAG_IS_SUBBYTE_TYPE_PADDED);
  const int64_t bytes = src.nbytes();
  DeviceMemory memory = allocate_on(to, target, bytes);
  const TensorView dst = TensorView::from_data(
      memory.data, src.dtype(), std::vector<int64_t>(src.shape(), src.shape() + src.ndim()), {},
      target, flags);
  auto finish = [&] {
    return ManagedTensor::adopt(make_versioned(dst, std::move(memory.owner), flags));
  };
  if (src.size() == 0) return finish();

  const bool src_host = is_host_accessible(source.type);
  const bool dst_host = is_host_accessible(target.type);
  // Managed memory is host-readable but may still be written by queued
  // device work: its backend (`from`) orders that work first.
  backend::Stream ready;
  if (backend::stream_family(source.type) != backend::StreamFamily::host)
    ready = backend::resolve_stream(source, options.source_stream);
  // A compact host copy of device memory src, for paths that stage through
  // the host; blocks until it is there.
  auto to_host = [&] {
    HostScratch host = host_scratch(src);
    device_to_host(*from, src, ready, host.view, options.host);
    return host;
  };
  if (src_host && dst_host) {
    if (from) from->synchronize(source, ready);
    copy_into(src, dst, options.host);
    return finish();
  }
  if (src_host) {
    if (from == to) order_after(*from, source, ready, target, consumer);
    else if (from) from->synchronize(source, ready);  // no stream spans two families
    // Into device memory from the host: compact on the host first (the CPU
    // engine does any layout), then one transfer on the consumer's stream.
    HostScratch staged;
    const TensorView* host_src = &src;
    if (!src.is_c_contiguous()) {
      staged = host_scratch(src);
      copy_into(src, staged.view, options.host);
      host_src = &staged.view;
    }
    to->copy(dst.data(), target, host_src->data(), Device{},
             backend::Rows{bytes, 1, bytes, bytes}, consumer);
    // The runtime reads pageable memory (ours or the caller's) before the
    // call returns, but pinned or managed memory later, when the caller
    // may already have freed it; only then the host waits. A kDLCPU label
    // does not make memory pageable (pinned buffers are exported as CPU
    // memory too), so the runtime is asked.
    if (!staged.owner && (source.type != abi::kDLCPU || !is_pageable(*to, src.data())))
      to->synchronize(target, consumer);
    return finish();
  }
  if (dst_host) {
    device_to_host(*from, src, ready, dst, options.host);
    return finish();
  }
  if (from != to) {
    // Two device families: through the host, which blocks, as no stream
    // spans both.
    HostScratch host = to_host();
    TransferOptions onward = options;
    onward.source_stream = {};
    return copy_along(host.view, target, to, nullptr, onward);
  }
  // One family: order the consumer's stream after the producer's, then
  // queue the copy there; the host does not wait (unless the two ends are
  // different devices, see order_after).
  order_after(*from, source, ready, target, consumer);
  if (auto rows = as_rows(src)) {
    to->copy(dst.data(), target, src.data(), source, *rows, consumer);
    return finish();
  }
  HostScratch host = to_host();
  to->copy(dst.data(), target, host.view.data(), Device{},
           backend::Rows{bytes, 1, bytes, bytes}, consumer);
  // `host` is pageable memory the runtime has read by now (see above).
  return finish();
}

}  // namespace detail

// A new, compact, writable copy of src on `target`, owned by the result
// (freed by the target's backend). Errors: unsupported_device_type (no
// backend of registry serves a type), device_unavailable (backend or device
// id absent here; a runtime failure), invalid_stream, out_of_memory. Each
// device is asked once whether it is here.
inline ManagedTensor copy_to_device(const TensorView& src, Device target,
                                    const TransferOptions& options = {},
                                    backend::Registry& registry = backend::default_registry()) {
  auto to = served_backend(target, registry);
  (void)backend::resolve_stream(target, options.stream);  // refused before the source is asked
  auto from = source_backend(src.device(), registry);
  return detail::copy_along(src, target, to, from, options);
}

// A new, compact, writable tensor of dtype and shape on `target` with
// uninitialised contents, allocated there by its backend: no host buffer
// is made, and nothing is copied. Errors: those of allocate_compact, and
// unsupported_device_type, device_unavailable, out_of_memory.
inline ManagedTensor empty_on(Device target, DType dtype, const std::vector<int64_t>& shape,
                              backend::Registry& registry = backend::default_registry()) {
  if (target == Device{}) return allocate_compact(dtype, shape);
  const int64_t bytes = detail::checked_compact_nbytes(dtype, shape, 0);
  detail::DeviceMemory memory =
      detail::allocate_on(served_backend(target, registry), target, bytes);
  const TensorView view = TensorView::from_data(memory.data, dtype, shape, {}, target);
  return ManagedTensor::adopt(make_versioned(view, std::move(memory.owner), 0));
}

// Zero-copy export of device memory: dlbridge's own device data is ready on
// its family's default stream (imports ask producers for it, copies are
// queued on it), so a consumer that names another stream is made to wait
// for that one without blocking the host. Host memory and stream -1
// ("do not synchronise") need nothing; neither does a family without a usable
// backend here, since then no runtime in this process can have queued work.
inline void make_ready_on(const TensorView& view, StreamArg consumer_stream,
                          backend::Registry& registry = backend::default_registry()) {
  if (auto b = ready_backend(view.device(), consumer_stream, registry))
    detail::order_after_default_stream(*b, view.device(), consumer_stream);
}

}  // namespace dlbridge
