// Planning a conversion: handing a validated tensor to another library (the
// target) with the least work the target accepts. The one place that decides
// "hand over as it is, make one copy, or refuse"; dlbridge.convert, its
// route explanation (dlbridge.plan_convert), the doctor and C++ callers all
// carry out what plan_convert returns.
//
// The copy argument has the array API's meaning:
//   copy=nullopt  reuse the memory when that is safe and possible, otherwise
//                 make exactly one copy;
//   copy=true     always a private, writable copy (exactly one);
//   copy=false    never a copy: refuse with the coded error that names the
//                 way out.
// "Safe" means nothing can be written through the result into memory that
// must not change: read-only data, or data whose writability is unknown (a
// legacy capsule), reaches a target that cannot see READ_ONLY only as a
// private copy.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "../backend/device_support.hpp"
#include "../backend/registry.hpp"
#include "../device.hpp"
#include "../dtype.hpp"
#include "../error.hpp"
#include "../layout.hpp"
#include "../tensor_view.hpp"
#include "byte_order.hpp"  // carries out ConvertPlan::swap_bytes
#include "plan.hpp"

namespace dlbridge {

// What a target does with DLPack's READ_ONLY flag.
enum class ReadOnlyRule : uint8_t {
  honoured,   // reads the flag (a versioned capsule) and refuses writes
  immutable,  // never writes through what it imports, so no flag is needed
  ignored,    // may write through the result: read-only data must not reach it
};

// A set of dtypes, as a target lists them. Membership costs a few
// instructions for the single-lane dtypes of whole bytes (one bit each, by
// code and width: every dtype a library lists today) and a scan of the
// rest; a conversion asks it on every call.
class DTypeSet {
 public:
  DTypeSet() = default;
  DTypeSet(std::initializer_list<DType> dtypes) {
    for (DType d : dtypes) insert(d);
  }
  template <typename Range, typename = decltype(std::begin(std::declval<const Range&>()))>
  explicit DTypeSet(const Range& dtypes) {
    for (DType d : dtypes) insert(d);
  }

  void insert(DType d) {
    if (contains(d)) return;
    ++size_;
    int bit = 0;
    if (bit_of(d, bit)) mask_[bit / 64] |= uint64_t(1) << (bit % 64);
    else others_.push_back(d);
  }
  bool contains(DType d) const noexcept {
    int bit = 0;
    if (bit_of(d, bit)) return (mask_[bit / 64] >> (bit % 64)) & 1;
    for (DType o : others_)
      if (o == d) return true;
    return false;
  }
  bool empty() const noexcept { return size_ == 0; }
  size_t size() const noexcept { return size_; }

 private:
  // code * 5 + log2(bytes) for 1-16 bytes of one lane, codes below 25.
  static bool bit_of(DType d, int& bit) noexcept {
    if (d.lanes != 1 || d.code >= 25) return false;
    int width = -1;
    switch (d.bits) {
      case 8: width = 0; break;
      case 16: width = 1; break;
      case 32: width = 2; break;
      case 64: width = 3; break;
      case 128: width = 4; break;
      default: return false;
    }
    bit = d.code * 5 + width;
    return true;
  }

  uint64_t mask_[2] = {0, 0};
  std::vector<DType> others_;
  size_t size_ = 0;
};

// What one consumer library accepts, as measured against its pinned
// version (each module of python/dlbridge/libraries/ states every field for
// Python's targets). An empty list means "any".
struct ConvertTarget {
  std::string name;                      // in messages: "torch"
  ReadOnlyRule read_only = ReadOnlyRule::ignored;
  StrideRule strides = StrideRule::any;  // layouts its importer reads correctly
  std::vector<int32_t> devices;          // DLDeviceType numbers it imports
  DTypeSet dtypes;                       // dtypes its importer holds as they are
  // Single-lane dtypes it holds only through an extension package (NumPy
  // through ml_dtypes), and whether that package stores sub-byte values and
  // vector lanes one per byte (then packed data needs an unpacking copy).
  DTypeSet extension_dtypes;
  std::string extension;                 // the package, for messages
  bool extension_one_per_byte = false;
  // Dtypes it holds only in a layout of its own that its hand-over builds
  // by copying (Arrow's bit-packed booleans).
  DTypeSet copied_dtypes;
  bool copies_on_import = false;         // every import is a copy (MLX on the CPU)
  uint32_t alignment = 1;                // below this address alignment it copies on import
  bool zero_dim = true;                  // holds 0-d arrays
  int64_t max_extent = std::numeric_limits<int64_t>::max();  // the largest dimension it holds
  // Host-accessible memory of a device (pinned, managed) goes over labelled
  // kDLCPU, which a CPU consumer reads without a stream; false keeps the
  // source's label (dlbridge itself, whose tensors say where they live).
  bool host_memory_as_cpu = true;
  // Its importer asks for legacy capsules only, which carry no flags: data
  // whose sub-byte values are stored one per byte (IS_SUBBYTE_TYPE_PADDED)
  // cannot reach it in any form.
  bool legacy_capsules_only = false;
  // Dtypes it holds only while one of its settings is on (JAX's 64-bit
  // types): the setting is read (setting_on) on every plan for one of
  // them, since it can change at run time; off, they are refused with
  // setting_hint, never handed over to be narrowed.
  DTypeSet setting_dtypes;
  std::function<bool()> setting_on;
  std::string setting_hint;
};

// What the source is beyond its view: what it says about writes, and the
// work its import already did or could not do.
struct ConvertSource {
  Writability writability = Writability::writable;
  // CopyReason bits of a copy the import already made (copy_for_device,
  // copy_by_producer, copy_for_lazy_view): the tensor is then a new,
  // private buffer, and that copy is the one copy.
  uint32_t copied = 0;
  // The view's bytes are those of each element in the byte order this
  // machine does not use (NumPy's '>' data), its dtype the native one: only
  // a copy that swaps them holds the values.
  bool other_byte_order = false;
};

// What the caller asks besides copy.
struct ConvertOptions {
  std::optional<bool> copy;
  // Whether the caller accepts that read-only (or writability-unknown) data
  // reaches a target that cannot see READ_ONLY zero-copy, exactly as the
  // target's own from_dlpack would hand it over: true/false as given, or
  // (nullopt) what alias_scope answers (asked only where it matters; absent:
  // false).
  std::optional<bool> alias_readonly;
  bool (*alias_scope)() = nullptr;
};

enum class ConvertAction : uint8_t {
  hand_over,            // the target's importer gets the tensor (or dlbridge's copy of it)
  hand_over_extension,  // the target gets it through the extension's dtype
};

enum class CopyBy : uint8_t {
  none,      // zero-copy: the target aliases the source's memory
  dlbridge,  // dlbridge makes the one copy, then hands it over
  target,    // the target's own import makes the one copy
};

// Why a copy is made; several may hold at once.
enum CopyReason : uint32_t {
  copy_requested = 1u << 0,        // copy=true
  copy_for_read_only = 1u << 1,    // read-only or unknown writability, target cannot see READ_ONLY
  copy_for_layout = 1u << 2,       // strides outside the target's rule
  copy_for_unpacking = 1u << 3,    // sub-byte values or lanes stored one per byte
  copy_by_target_import = 1u << 4, // the target copies every import, or this dtype
  copy_for_alignment = 1u << 5,    // the target copies data below its alignment
  // Copies the import made (ConvertSource::copied) or the byte order needs:
  copy_for_device = 1u << 6,       // device= moved the data
  copy_by_producer = 1u << 7,      // the producer delivered a copy (IS_COPIED)
  copy_for_lazy_view = 1u << 8,    // a lazy view (torch's conjugate/negative bit) resolved into a copy
  copy_for_byte_order = 1u << 9,   // dlbridge's copy swaps the bytes into native order
};
constexpr uint32_t copies_by_import = copy_for_device | copy_by_producer | copy_for_lazy_view;

struct ConvertPlan {
  ConvertAction action = ConvertAction::hand_over;
  CopyBy copy = CopyBy::none;
  bool unpack = false;      // dlbridge's copy is copy_unpacked (one value per byte)
  bool swap_bytes = false;  // dlbridge's copy swaps each element's bytes into native order
  // Protected data handed over zero-copy to a target that cannot see
  // READ_ONLY, as the caller accepted (ConvertOptions::alias_readonly): it
  // leaves looking writable, as the target's own from_dlpack would take it.
  bool alias_readonly = false;
  bool host_alias = false;  // host-accessible memory handed over labelled kDLCPU
  // Data that must not change reaches a target that never writes through
  // what it receives (it is immutable, or its import copies): it may leave
  // as a legacy capsule, which cannot carry READ_ONLY.
  bool legacy_capsule_ok = false;
  uint32_t reasons = 0;     // CopyReason bits; convert_plan_why() puts them in words
};

namespace detail {

inline bool device_listed(const std::vector<int32_t>& list, int32_t type) noexcept {
  for (int32_t d : list)
    if (d == type) return true;
  return false;
}

inline std::string device_list_text(const std::vector<int32_t>& devices) {
  std::string text;
  for (int32_t d : devices) text += (text.empty() ? "" : ", ") + device_type_label(d);
  return text;
}

inline std::string stride_rule_words(StrideRule rule) {
  switch (rule) {
    case StrideRule::any: return "any";
    case StrideRule::nonnegative: return "nonnegative";
    case StrideRule::row_major: return "row-major (C-contiguous)";
    case StrideRule::permuted_compact: return "compact (in any axis order)";
  }
  return "other";
}

inline bool copies_dtype(const ConvertTarget& target, DType dtype) noexcept {
  return (target.dtypes.empty() || !target.dtypes.contains(dtype)) && target.copied_dtypes.contains(dtype);
}

}  // namespace detail

// The plan for handing `view` (validated; its READ_ONLY flag as the source
// set it) to `target` under `copy`. Refusals, in the order checked:
//   unsupported_device_type  the target imports no memory of view's device
//                            (host-accessible memory goes as kDLCPU instead);
//   unsupported_dtype        no type of the target holds view's dtype;
//   unsupported_layout       0-d or a dimension beyond what the target holds,
//                            or (copy=false) strides outside its rule;
//   copy_required            copy=false where unpacking, the target's own
//                            import or its alignment rule makes a copy;
//   read_only                copy=false with read-only (or unknown) data for
//                            a target that cannot see READ_ONLY;
//   device_unavailable       dlbridge's copy would be made on a device that
//                            is absent here (asked of `registry`).
inline ConvertPlan plan_convert(const TensorView& view, const ConvertSource& source,
                                const ConvertTarget& target, const ConvertOptions& options,
                                backend::Registry& registry = backend::default_registry()) {
  ConvertPlan plan;
  const Writability writability = source.copied != 0 ? Writability::writable : source.writability;
  // A copy the import made is the one copy: private and writable.
  const std::optional<bool> copy = source.copied != 0 && options.copy == true ? std::nullopt : options.copy;
  plan.reasons |= source.copied & copies_by_import;
  const std::string& name = target.name;
  const int32_t device = view.device().type;
  const bool takes_cpu = target.devices.empty() || detail::device_listed(target.devices, abi::kDLCPU);
  if (device != abi::kDLCPU && is_host_alias(view.device(), Device{}) && takes_cpu &&
      target.host_memory_as_cpu) {
    plan.host_alias = true;
  } else if (!target.devices.empty() && !detail::device_listed(target.devices, device)) {
    detail::fail(ErrorCode::unsupported_device_type,
                 unsupported_device_sentence(device) + " " + name + " imports " +
                     detail::device_list_text(target.devices) + ".",
                 "Pass device= one of those (e.g. device='cpu') to convert.");
  }

  const DType dtype = view.dtype();
  bool target_copies_dtype = false;
  if (!target.dtypes.empty() && !target.dtypes.contains(dtype)) {
    const DType scalar{dtype.code, dtype.bits, 1};
    if (target.extension_dtypes.contains(scalar)) {
      plan.action = ConvertAction::hand_over_extension;
      plan.unpack = target.extension_one_per_byte && (dtype.lanes > 1 || view.packed());
    } else if (detail::copies_dtype(target, dtype)) {
      target_copies_dtype = true;
    } else {
      std::string hint = "Cast in the source library first (e.g. to float32), or choose a target that holds it.";
      if (!target.extension.empty())
        hint = name + " holds some dtypes only through " + target.extension +
               ", which does not hold this one: " + hint;
      detail::fail(ErrorCode::unsupported_dtype, name + " cannot hold dtype " + dtype_name(dtype) + ".", hint);
    }
  }

  if (target.setting_on && target.setting_dtypes.contains(dtype) && !target.setting_on())
    detail::fail(ErrorCode::unsupported_dtype,
                 name + " holds " + dtype_name(dtype) + " only with a setting that is off now (" +
                     target.setting_hint + "); handed over, it would be narrowed silently.",
                 "Turn the setting on (" + target.setting_hint + "), or cast in the source library first.");
  if (target.legacy_capsules_only && view.subbyte_padded())
    detail::fail(ErrorCode::unsupported_layout,
                 name + " asks for legacy DLPack capsules only, which cannot say that the " + dtype_name(dtype) +
                     " values are stored one per byte (IS_SUBBYTE_TYPE_PADDED).",
                 "Cast to int8 (or float16) in the source library first, or choose a target that reads "
                 "versioned capsules.");

  if (view.ndim() == 0 && !target.zero_dim)
    detail::fail(ErrorCode::unsupported_layout,
                 name + " arrays have at least one dimension, so a 0-d tensor cannot be handed over.",
                 "Reshape to (1,) in the source library first.");
  for (int32_t d = 0; d < view.ndim(); ++d)
    if (view.shape(d) > target.max_extent)
      detail::fail(ErrorCode::unsupported_layout,
                   name + " holds dimensions up to " + std::to_string(target.max_extent) +
                       ", and dimension " + std::to_string(d) + " of shape " +
                       dims_text(view.ndim(), view.shape()) + " is larger.",
                   "Reshape in the source library first (fewer elements per dimension).");

  // The copies a hand-over makes whatever else holds: the byte swap or
  // unpacking (ours), or the target's own import.
  if (source.other_byte_order) {
    if (copy == false)
      detail::fail(ErrorCode::unsupported_dtype,
                   "The data is in the byte order this machine does not use, and DLPack has no byte order: "
                   "only a byte-swapped copy holds its values, and copy=False forbids the copy.",
                   "Pass copy=None to let dlbridge make the one byte-swapped copy.");
    plan.copy = CopyBy::dlbridge;
    plan.swap_bytes = true;
    plan.reasons |= copy_for_byte_order;
  }
  if (plan.unpack) {
    if (copy == false)
      detail::fail(ErrorCode::copy_required,
                   target.extension + " stores " + dtype_name(dtype) +
                       " one value per byte, so the packed data must be unpacked into a copy, "
                       "and copy=False forbids the copy.",
                   "Pass copy=None to let dlbridge make the one unpacking copy.");
    plan.copy = CopyBy::dlbridge;
    plan.reasons |= copy_for_unpacking;
  }
  if (target.copies_on_import || target_copies_dtype) {
    if (copy == false)
      detail::fail(ErrorCode::copy_required,
                   name + (target_copies_dtype ? " holds " + dtype_name(dtype) + " only in a copy of its own"
                                               : " copies every array it imports") +
                       ", and copy=False forbids the copy.",
                   "Pass copy=None: the copy " + name + " makes is the only one.");
    plan.copy = CopyBy::target;
    plan.reasons |= copy_by_target_import;
  }

  if (plan.copy == CopyBy::none && !strides_fit(view.ndim(), view.shape(), view.strides(), target.strides)) {
    if (copy == false)
      detail::fail(ErrorCode::unsupported_layout,
                   name + " cannot represent strides " + dims_text(view.ndim(), view.strides()) +
                       " for shape " + dims_text(view.ndim(), view.shape()) + " (it needs " +
                       detail::stride_rule_words(target.strides) +
                       " strides), and copy=False forbids the re-layout.",
                   "Pass copy=None to let dlbridge make one compact copy.");
    plan.copy = CopyBy::dlbridge;
    plan.reasons |= copy_for_layout;
  }

  const bool protected_data = writability != Writability::writable;
  if (protected_data && plan.copy == CopyBy::none && target.read_only == ReadOnlyRule::ignored &&
      copy != true) {
    const bool accepted = options.alias_readonly ? *options.alias_readonly
                          : options.alias_scope  ? options.alias_scope()
                                                 : false;
    if (accepted) plan.alias_readonly = true;
  }
  if (protected_data && plan.copy == CopyBy::none && !plan.alias_readonly) {
    if (target.read_only == ReadOnlyRule::ignored) {
      if (copy == false)
        detail::fail(ErrorCode::read_only,
                     std::string(writability == Writability::read_only
                                     ? "The data is read-only"
                                     : "The data came as a legacy DLPack capsule, which cannot say whether it "
                                       "may be written,") +
                         " and " + name + " cannot see the READ_ONLY flag, so a write through the result "
                         "could change memory that must not change; copy=False forbids the private copy.",
                     "Pass copy=None to hand over one private, writable copy, or alias_readonly=True to "
                     "hand it over zero-copy as the target's own from_dlpack would (never write through it).");
      plan.copy = CopyBy::dlbridge;
      plan.reasons |= copy_for_read_only;
    }
  }

  if (copy == true && plan.copy == CopyBy::none) {
    plan.copy = CopyBy::dlbridge;
    plan.reasons |= copy_requested;
  }

  // The target copies data below its alignment itself (JAX: even size 0):
  // that copy is the one copy=None allows, and copy=False forbids.
  if (plan.copy == CopyBy::none && target.alignment > 1 &&
      reinterpret_cast<uintptr_t>(view.data()) % target.alignment != 0) {
    if (copy == false)
      detail::fail(ErrorCode::copy_required,
                   name + " copies data that is not aligned to " + std::to_string(target.alignment) +
                       " bytes, and copy=False forbids the copy.",
                   "Pass copy=None, or allocate the source aligned.");
    plan.copy = CopyBy::target;
    plan.reasons |= copy_for_alignment;
  }
  // dlbridge's copy lands on the source's device (or the CPU, host_alias):
  // a device whose runtime is absent here is refused now, not mid-way.
  if (plan.copy == CopyBy::dlbridge && !plan.host_alias && device != abi::kDLCPU)
    (void)served_backend(view.device(), registry);
  plan.legacy_capsule_ok = protected_data && !plan.alias_readonly &&
                          (plan.copy == CopyBy::target ||
                                              (plan.copy == CopyBy::none && target.read_only == ReadOnlyRule::immutable));
  return plan;
}

// plan_convert for a source its import did not copy and no options but copy.
inline ConvertPlan plan_convert(const TensorView& view, Writability writability,
                                const ConvertTarget& target, std::optional<bool> copy,
                                backend::Registry& registry = backend::default_registry()) {
  ConvertSource source;
  source.writability = writability;
  ConvertOptions options;
  options.copy = copy;
  return plan_convert(view, source, target, options, registry);
}

// The reasons of a plan in words, "" without a copy: asked for explanations
// only, so that planning itself allocates nothing.
inline std::string convert_plan_why(const ConvertPlan& plan, const TensorView& view, Writability writability,
                                    const ConvertTarget& target) {
  const std::string& name = target.name;
  std::string why;
  const auto add = [&](uint32_t bit, const std::string& words) {
    if (plan.reasons & bit) why += (why.empty() ? "" : "; ") + words;
  };
  add(copy_for_device, "device= moved the data, which is a copy");
  add(copy_by_producer, "the producer delivered a copy");
  add(copy_for_lazy_view, "the tensor is a lazy view (conjugate or negative bit): its values exist only in a "
                          "resolved copy");
  add(copy_for_byte_order, "the source is in the byte order this machine does not use: one byte-swapped copy");
  add(copy_for_unpacking, target.extension + " stores sub-byte values and lanes one per byte");
  add(copy_by_target_import, detail::copies_dtype(target, view.dtype())
                                 ? name + " holds " + dtype_name(view.dtype()) + " only in a copy of its own"
                                 : name + " copies every array it imports");
  add(copy_for_layout, name + " needs " + detail::stride_rule_words(target.strides) + " strides");
  add(copy_for_read_only, writability == Writability::read_only
                              ? "the data is read-only and " + name + " cannot see READ_ONLY"
                              : "the data's writability is unknown (a legacy capsule) and " + name +
                                    " cannot see READ_ONLY");
  add(copy_requested, "copy=True asks for a private copy");
  add(copy_for_alignment, name + " copies data not aligned to " + std::to_string(target.alignment) + " bytes");
  if (plan.alias_readonly)
    why += std::string(why.empty() ? "" : "; ") + "alias_readonly: the " +
           (writability == Writability::read_only ? "read-only" : "writability-unknown") +
           " data is handed over zero-copy, as " + name +
           "'s own from_dlpack would; a write through the result would change it";
  return why;
}

}  // namespace dlbridge
