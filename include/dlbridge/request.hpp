// What a consumer asks of an exchange, as data: one ExchangeRequest for both
// sides (__dlpack__'s max_version, dl_device, copy and stream when dlbridge
// produces; from_dlpack's device, copy, stream and requirements when it
// consumes). Every layer above reads it: the backends interpret its stream
// value (backend/stream.hpp), the copy engine orders a transfer on it
// (copy/transfer.hpp), and the plans of exchange/ decide from it.
#pragma once

#include <cstdint>
#include <optional>

#include "abi.hpp"
#include "device.hpp"
#include "tensor_view.hpp"

namespace dlbridge {

// A stream argument as the DLPack Python spec defines it: absent (None) or
// an integer whose meaning depends on the device type
// (backend::resolve_stream holds the rules per family).
struct StreamArg {
  bool given = false;
  int64_t value = 0;
};

struct ExchangeRequest {
  // Producer side only: the newest DLPack version the consumer reads.
  std::optional<abi::DLPackVersion> max_version;
  // dl_device / device=: where the result must live; nullopt keeps the
  // tensor's own device.
  std::optional<Device> device;
  std::optional<bool> copy;  // true: always, false: never, nullopt: if needed
  // Producer side: the consumer's stream. Consumer side: the stream the
  // caller reads on (absent: the device family's default).
  StreamArg stream;
  // Consumer side only: what the result must satisfy; an unmet requirement
  // is met by a copy unless copy=False forbids one.
  ImportPolicy require;
};

// Whether a consumer's request asks nothing of the result: no device, no
// copy decision, no requirement. plan_import then takes any tensor as it
// is (no copy, same device), so a hot path may skip planning.
inline bool asks_nothing(const ExchangeRequest& r) noexcept {
  const ImportPolicy& p = r.require;
  return !r.device && !r.copy && !p.require_c_contiguous && !p.require_writable &&
         !p.require_host_accessible && p.min_alignment <= 1;
}

}  // namespace dlbridge
