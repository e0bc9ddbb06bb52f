// What the stream argument of the DLPack Python spec (StreamArg, part of a
// request: request.hpp) means per device family. The integer a consumer
// passes is interpreted here once, so that the producer's validation and the
// backends' copies agree on its meaning.
#pragma once

#include <cstdint>
#include <string>

#include "../device.hpp"
#include "../error.hpp"
#include "../request.hpp"

namespace dlbridge::backend {

enum class StreamKind {
  host,            // the target has no streams: nothing is queued
  no_sync,         // -1: the consumer synchronises itself
  default_stream,  // the family's default (CUDA: legacy, ROCm: null stream)
  per_thread,      // CUDA 2: the per-thread default stream
  handle,          // a stream pointer owned by the consumer
};

// A resolved stream: the kind, and the native handle a runtime call takes.
// CUDA's cudaStreamLegacy and cudaStreamPerThread are the handles 0x1 and
// 0x2, exactly the DLPack values 1 and 2, so CUDA handles pass through.
struct Stream {
  StreamKind kind = StreamKind::host;
  uintptr_t handle = 0;

  friend bool operator==(Stream a, Stream b) noexcept {
    return a.kind == b.kind && a.handle == b.handle;
  }
  friend bool operator!=(Stream a, Stream b) noexcept { return !(a == b); }
};

inline constexpr uintptr_t cuda_legacy_stream = 0x1;
inline constexpr uintptr_t cuda_per_thread_stream = 0x2;

enum class StreamFamily { host, cuda, rocm, other };

// Which stream convention a device type follows. Pinned memory
// (kDLCUDAHost, kDLROCMHost) is read by the host, which has no streams, so
// it keeps the host rule. Managed memory (kDLCUDAManaged) is host-readable
// too, but device work queued on it must be ordered before a read, so the
// spec's CUDA values apply to it as to kDLCUDA.
constexpr StreamFamily stream_family(DeviceType type) noexcept {
  switch (type) {
    case abi::kDLCPU:
    case abi::kDLCUDAHost:
    case abi::kDLROCMHost:
      return StreamFamily::host;
    case abi::kDLCUDA:
    case abi::kDLCUDAManaged:
      return StreamFamily::cuda;
    case abi::kDLROCM:
      return StreamFamily::rocm;
    default:
      return StreamFamily::other;
  }
}

// The stream value a consumer passes to a producer on a device of `type`
// to have the data ready on the family's default stream, which every
// blocking stream is ordered after: CUDA's legacy default (1), ROCm's
// default (0). Absent for host memory, where the spec gives streams no
// meaning, and for families without a spec.
constexpr StreamArg default_stream_arg(DeviceType type) noexcept {
  switch (stream_family(type)) {
    case StreamFamily::cuda: return {true, int64_t(cuda_legacy_stream)};
    case StreamFamily::rocm: return {true, 0};
    case StreamFamily::host:
    case StreamFamily::other: break;
  }
  return {};
}

// The stream a consumer on `target` asked for, or invalid_stream with the
// values that would have been valid:
//   CUDA: None/1 legacy default, 2 per-thread default, >2 pointer, -1 no
//         sync, 0 invalid (ambiguous between the two defaults);
//   ROCm: None/0 default, >2 pointer, -1 no sync, 1 and 2 invalid;
//   host: None, or -1 (nothing to synchronise either way);
//   other families: no spec; None is the default, any integer a handle.
inline Stream resolve_stream(Device target, StreamArg stream) {
  const int64_t s = stream.value;
  auto refuse = [&](const std::string& why, const std::string& fix) {
    detail::fail(ErrorCode::invalid_stream,
                 "stream=" + std::to_string(s) + " is invalid for " +
                     device_type_label(target.type) + ": " + why,
                 fix);
  };
  switch (stream_family(target.type)) {
    case StreamFamily::host:
      if (stream.given && s != -1)
        refuse("host memory has no stream.",
               "Pass stream=None (or -1) for CPU tensors.");
      return {StreamKind::host, 0};
    case StreamFamily::cuda:
      if (!stream.given || s == 1) return {StreamKind::default_stream, cuda_legacy_stream};
      if (s == 0)
        refuse("0 is ambiguous between the legacy and per-thread default streams.",
               "Pass 1 (legacy default), 2 (per-thread default), a stream "
               "pointer, or -1 to skip synchronisation.");
      if (s == -1) return {StreamKind::no_sync, 0};
      if (s < -1)
        refuse("negative stream values other than -1 are undefined.",
               "Pass None, 1, 2, a stream pointer, or -1.");
      if (s == 2) return {StreamKind::per_thread, cuda_per_thread_stream};
      return {StreamKind::handle, uintptr_t(s)};
    case StreamFamily::rocm:
      if (!stream.given || s == 0) return {StreamKind::default_stream, 0};
      if (s == 1 || s == 2)
        refuse("1 and 2 are CUDA-only values.",
               "Pass None or 0 for the default stream, a stream pointer, or -1.");
      if (s == -1) return {StreamKind::no_sync, 0};
      if (s < -1)
        refuse("negative stream values other than -1 are undefined.",
               "Pass None or 0, a stream pointer, or -1.");
      return {StreamKind::handle, uintptr_t(s)};
    case StreamFamily::other:
      break;
  }
  if (!stream.given) return {StreamKind::default_stream, 0};
  if (s == -1) return {StreamKind::no_sync, 0};
  return {StreamKind::handle, uintptr_t(s)};
}

}  // namespace dlbridge::backend
