// The private C interface between dlbridge's type casters, which are compiled
// into other people's extensions, and the installed dlbridge._core, which
// reads every argument for them. _core publishes one CasterApi table in the
// capsule dlbridge._core._caster_api, which the casters take (bridge.hpp).
// So an extension built once reads tensors exactly as the installed
// dlbridge.from_dlpack does -- the same producer registry, trust policy,
// torch rules, refusals and error classes -- instead of carrying a second
// copy of those rules that ages with the extension.
//
// Plain C types only: the extension and _core may come from different
// compilers and dlbridge versions. A table keeps its major version while
// entries are only appended (the minor version counts them).
#pragma once

#include <Python.h>

#include <cstddef>
#include <cstdint>

#include "../abi.hpp"

namespace dlbridge::python {

inline constexpr const char* caster_api_module = "dlbridge._core";
inline constexpr const char* caster_api_attribute = "_caster_api";
inline constexpr const char* caster_api_capsule_name = "dlbridge._core._caster_api";
inline constexpr uint16_t caster_api_major = 1;
inline constexpr uint16_t caster_api_minor = 0;

// The caller-owned space in which _core keeps what a borrowed view needs
// alive for one call (its storage, or a capsule not yet taken): no
// allocation per call.
inline constexpr size_t call_hold_capacity = 96;
inline constexpr size_t call_hold_alignment = 16;

// Results of import_view.
inline constexpr int caster_imported = 0;
inline constexpr int caster_not_a_tensor = 1;      // no Python error set
inline constexpr int caster_imported_pending = 2;  // commit before use
inline constexpr int caster_failed = -1;           // a Python error set

struct CasterApi {
  uint16_t major;
  uint16_t minor;
  // Bytes of a hold that _core uses; at most call_hold_capacity.
  uint32_t hold_size;

  // Reads object as dlbridge.from_dlpack(object) would. caster_imported:
  // *view and *flags describe the validated tensor, whose memory and dims
  // stay alive until release(hold). caster_not_a_tensor: object has no
  // array protocol at all (a binding framework tries its next overload).
  // caster_failed: the refusal is set as dlbridge's coded Python error and
  // nothing is held. caster_imported_pending: a raw DLPack capsule, looked
  // at but not consumed, since the framework may still reject the call for
  // another argument; commit takes it.
  int (*import_view)(PyObject* object, void* hold, abi::DLTensor* view, uint64_t* flags);
  // The call is going ahead: the capsule of a caster_imported_pending
  // import is consumed now (ConsumedCapsuleError if something consumed it meanwhile).
  // 0 with *view and *flags describing what is held from now on (the caller
  // checks it again), or -1 with a Python error set; the hold stays live.
  int (*commit)(void* hold, abi::DLTensor* view, uint64_t* flags);
  // Lets go of what a successful import_view holds; once per import.
  void (*release)(void* hold);
  // After commit: a new owned struct sharing the held tensor's memory, for a
  // parameter that outlives the call; 0, or -1 with a Python error set.
  int (*take)(void* hold, abi::DLManagedTensorVersioned** out);
  // A new dlbridge.Tensor owning tensor (taken on success and on failure);
  // NULL with a Python error set.
  PyObject* (*to_python)(abi::DLManagedTensorVersioned* tensor);
  // Sets the Python exception that dlbridge raises for the error code named
  // code (an ErrorCode name, e.g. "read_only") with this message and hint:
  // the extension's own mapping from the error table, so that a caster's
  // refusal is the class from_dlpack would raise.
  void (*set_error)(const char* code, const char* message, const char* hint);
};

}  // namespace dlbridge::python
