// Export of memory that C++ owns as DLPack managed tensors, and the version
// negotiation rule a producer applies to a consumer's max_version.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>

#include "abi.hpp"
#include "compiler.hpp"
#include "managed_tensor.hpp"
#include "tensor_view.hpp"

namespace dlbridge {

enum class ExportFormat { legacy, versioned };

// Where an export's shape and strides live: copied into the export, or
// borrowed from the view when the owner keeps that view alive (a view held
// by the ManagedTensor that is itself the owner), which saves the copy.
enum class ExportDims { copy, borrow_from_owner };

// The producer rule: no max_version, or a major below 1, gets the legacy
// struct; any major >= 1 gets a versioned struct carrying dlbridge's own
// (1, 3), even when the consumer asked for more.
constexpr ExportFormat negotiate_format(
    const std::optional<abi::DLPackVersion>& max_version) noexcept {
  return (max_version && max_version->major >= 1) ? ExportFormat::versioned
                                                  : ExportFormat::legacy;
}

namespace detail {

// Everything one exported tensor needs, in one allocation: the managed
// struct, its shape and strides, and the owner of the memory.
template <typename Managed>
struct ExportContext {
  Managed managed;  // every field is assigned by make() and its callers
  SmallDims shape;
  SmallDims strides;
  std::shared_ptr<void> owner;

  DLBRIDGE_HOT static void destroy(Managed* self) noexcept {
    delete static_cast<ExportContext*>(self->manager_ctx);
  }

  DLBRIDGE_HOT static Managed* make(const TensorView& view, std::shared_ptr<void> owner,
                                    ExportDims dims) {
    // Held by unique_ptr until complete: the dims may allocate and throw.
    // Default-initialised, not value-initialised (make_unique): that would
    // zero all ~200 bytes first, a `rep stos` that cost about a tenth of an
    // export's time although every field read is assigned below.
    std::unique_ptr<ExportContext> ctx(new ExportContext);
    const bool borrow = dims == ExportDims::borrow_from_owner;
    if (!borrow) {
      ctx->shape.assign(view.shape(), view.ndim());
      ctx->strides.assign(view.strides(), view.ndim());
    }
    ctx->owner = std::move(owner);
    ctx->managed.manager_ctx = ctx.get();
    ctx->managed.deleter = &destroy;
    abi::DLTensor& t = ctx->managed.dl_tensor;
    t = view.dltensor();
    if (!borrow) {
      t.shape = view.ndim() ? ctx->shape.data() : nullptr;
      t.strides = view.ndim() ? ctx->strides.data() : nullptr;
    }
    return &ctx.release()->managed;
  }
};

}  // namespace detail

// A new versioned struct (version (1, 3)) over view's memory; owner is kept
// alive until the deleter runs. The caller owns the result.
DLBRIDGE_HOT inline abi::DLManagedTensorVersioned* make_versioned(
    const TensorView& view, std::shared_ptr<void> owner, uint64_t flags,
    ExportDims dims = ExportDims::copy) {
  auto* m = detail::ExportContext<abi::DLManagedTensorVersioned>::make(
      view, std::move(owner), dims);
  m->version = dlpack_version;
  m->flags = flags;
  return m;
}

// A new legacy struct over view's memory. Legacy structs carry no flags, so
// READ_ONLY and IS_SUBBYTE_TYPE_PADDED are refused.
inline abi::DLManagedTensor* make_legacy(const TensorView& view,
                                         std::shared_ptr<void> owner,
                                         uint64_t flags,
                                         ExportDims dims = ExportDims::copy) {
  detail::check_legacy_can_carry(flags);
  return detail::ExportContext<abi::DLManagedTensor>::make(view, std::move(owner), dims);
}

// Exports C++-owned memory. The owner may be any object whose destruction
// frees the memory, or a shared_ptr with a custom deleter as the callback.
inline ManagedTensor export_tensor(const TensorView& view,
                                   std::shared_ptr<void> owner, uint64_t flags,
                                   ExportFormat format = ExportFormat::versioned) {
  if (format == ExportFormat::legacy)
    return ManagedTensor::adopt(make_legacy(view, std::move(owner), flags), flags);
  return ManagedTensor::adopt(make_versioned(view, std::move(owner), flags));
}

}  // namespace dlbridge
