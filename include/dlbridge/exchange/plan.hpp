// One plan for both sides of an exchange: where the result lives and whether
// bytes move, decided from an ExchangeRequest (request.hpp) by plan_export
// (plan_export.hpp) or plan_import (plan_import.hpp). The plan keeps the
// device backends it asked, so that carrying it out (carry_out.hpp) asks no
// one again, and only the registry the plan was made with is ever asked.
#pragma once

#include <memory>

#include "../backend/backend.hpp"
#include "../backend/device_support.hpp"
#include "../backend/registry.hpp"
#include "../backend/stream.hpp"
#include "../device.hpp"
#include "../export.hpp"
#include "../request.hpp"

namespace dlbridge {

// What a tensor's source says about writes through its memory.
enum class Writability : uint8_t {
  writable,
  read_only,  // READ_ONLY is set
  unknown,    // a legacy capsule delivered it: it says nothing either way
};

struct ExchangePlan {
  ExportFormat format = ExportFormat::versioned;  // producer side only
  Device target{};
  bool copy = false;  // the result is a new buffer (IS_COPIED on export)
  // Legacy in, legacy out (producer side): memory whose writability is
  // unknown leaves as a legacy capsule without READ_ONLY, claiming no more
  // than the capsule that delivered it (a JAX -> dlbridge -> JAX round trip).
  bool drop_read_only = false;
  // The backends carrying the plan out uses, each asked once while planning.
  // With copy set and a device involved: `to` allocates on target and
  // `from` is the one whose queued work on the source must finish first
  // (NULL for memory no stream writes to); both NULL for a copy the host
  // makes alone. Without a copy: `to` is NULL and `from` is the backend
  // that orders the consumer's stream after the tensor's memory
  // (ready_backend; NULL when nothing needs ordering).
  std::shared_ptr<backend::DeviceBackend> to, from;
};

// The host-alias rule: memory the host reads directly (pinned, managed or
// plain host memory) reaches a request for the CPU as it is, relabelled
// kDLCPU:0, never copied. plan_export, plan_import and plan_convert apply it.
constexpr bool is_host_alias(Device source, Device target) noexcept {
  return target == Device{} && is_host_accessible(source.type);
}

// Whether a copy from source to target is the host's business alone: no
// backend allocates, moves or orders anything.
constexpr bool host_only_copy(Device source, Device target) noexcept {
  return target == Device{} &&
         backend::stream_family(source.type) == backend::StreamFamily::host;
}

// Stream values per the DLPack Python spec, interpreted for the device the
// consumer reads on; backend::resolve_stream holds the rules per family.
inline void validate_stream(Device target, StreamArg stream) {
  (void)backend::resolve_stream(target, stream);
}

namespace detail {

// Fills in the backends of a plan whose target and copy are decided, for a
// tensor on `source` and the consumer's `stream`; `to` may already have
// been asked while checking the request.
inline void plan_backends(ExchangePlan& plan, Device source, StreamArg stream,
                          backend::Registry& registry) {
  if (!plan.copy) {
    plan.to = nullptr;
    plan.from = ready_backend(source, stream, registry);
    return;
  }
  if (host_only_copy(source, plan.target)) return;
  if (!plan.to) plan.to = served_backend(plan.target, registry);
  plan.from = source_backend(source, registry);
}

}  // namespace detail
}  // namespace dlbridge
