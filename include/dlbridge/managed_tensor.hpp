// ManagedTensor: move-only ownership of a DLManagedTensorVersioned or a legacy
// DLManagedTensor. The deleter runs exactly once (never when it is NULL):
// when the ManagedTensor dies, or later by whoever took it with release_*().
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "abi.hpp"
#include "error.hpp"
#include "tensor_view.hpp"
#include "version.hpp"

namespace dlbridge {

inline constexpr abi::DLPackVersion dlpack_version{DLBRIDGE_DLPACK_MAJOR,
                                                   DLBRIDGE_DLPACK_MINOR};
inline constexpr uint64_t known_flags = DLBRIDGE_FLAG_READ_ONLY |
                                        DLBRIDGE_FLAG_IS_COPIED |
                                        DLBRIDGE_FLAG_IS_SUBBYTE_TYPE_PADDED;

namespace detail {

// A versioned struct that owns a legacy one (or the reverse): the outer
// struct borrows the inner's DLTensor, and its deleter releases the inner
// before freeing itself. No data is copied.
template <typename Outer, typename Inner>
struct Wrapper {
  Outer outer{};
  Inner* inner = nullptr;
  // Strides for an outer versioned struct when a legacy inner one has NULL:
  // DLPack >= 1.2 requires them whenever ndim != 0.
  SmallDims strides;

  static void destroy(Outer* self) noexcept {
    auto* wrapper = static_cast<Wrapper*>(self->manager_ctx);
    if (wrapper->inner->deleter != nullptr) wrapper->inner->deleter(wrapper->inner);
    delete wrapper;
  }
};

[[noreturn]] inline void refuse_read_only_legacy() {
  fail(ErrorCode::read_only,
       "The tensor is read-only, and a legacy (pre-1.0) DLPack capsule cannot "
       "carry the read-only flag.",
       "Request max_version=(1, 3), or pass copy=True to export a writable "
       "copy.");
}

// Padded sub-byte elements (one per byte) are read as packed by a consumer
// of a legacy struct, which has no flags: every value would be wrong.
inline void check_legacy_padding(uint64_t flags) {
  if (flags & DLBRIDGE_FLAG_IS_SUBBYTE_TYPE_PADDED)
    fail(ErrorCode::unsupported_layout,
         "The tensor's sub-byte elements are padded to one per byte, and a legacy "
         "(pre-1.0) DLPack capsule cannot say so: a consumer would read them as packed.",
         "Request max_version=(1, 3).");
}

// Refuses the flags a legacy struct cannot carry (it has no flags field),
// before one is built.
inline void check_legacy_can_carry(uint64_t flags) {
  check_legacy_padding(flags);
  if (flags & DLBRIDGE_FLAG_READ_ONLY) refuse_read_only_legacy();
}

}  // namespace detail

class ManagedTensor {
 public:
  ManagedTensor() noexcept = default;
  ManagedTensor(const ManagedTensor&) = delete;
  ManagedTensor& operator=(const ManagedTensor&) = delete;
  // Moves hand over the pointers and the view once; a swap would move the
  // view three times, and this sits on every import.
  ManagedTensor(ManagedTensor&& other) noexcept
      : versioned_(std::exchange(other.versioned_, nullptr)),
        legacy_(std::exchange(other.legacy_, nullptr)),
        assumed_flags_(other.assumed_flags_),
        view_(std::move(other.view_)) {}
  ManagedTensor& operator=(ManagedTensor&& other) noexcept {
    if (this != &other) {
      reset();
      versioned_ = std::exchange(other.versioned_, nullptr);
      legacy_ = std::exchange(other.legacy_, nullptr);
      assumed_flags_ = other.assumed_flags_;
      view_ = std::move(other.view_);
    }
    return *this;
  }
  ~ManagedTensor() { run_deleter(); }

  // Takes ownership of m. A major version other than 1 is refused after its
  // deleter has run and without reading any other field; so is anything
  // TensorView::from_dltensor or policy rejects.
  static ManagedTensor adopt(abi::DLManagedTensorVersioned* m,
                             const ImportPolicy& policy = {}) {
    return ManagedTensor(adopting, m, policy);
  }

  // adopt, as a constructor: the tensor can be adopted where it will stay
  // (std::allocate_shared), so that its view is built once and never moved.
  // m is set to NULL on entry: from then on this constructor owns it and
  // runs its deleter before any exception leaves, while a caller whose m is
  // still set after a failure (an allocation before this ran) still owns it.
  struct Adopting {};
  static constexpr Adopting adopting{};
  ManagedTensor(Adopting, abi::DLManagedTensorVersioned*& taken,
                const ImportPolicy& policy = {}) {
    abi::DLManagedTensorVersioned* m = std::exchange(taken, nullptr);
    if (m == nullptr)
      detail::fail(ErrorCode::invalid_tensor,
                   "The producer returned a NULL DLManagedTensorVersioned.",
                   "Report it to the producing library.");
    const abi::DLPackVersion version = m->version;
    if (version.major != DLBRIDGE_DLPACK_MAJOR) {
      if (m->deleter != nullptr) m->deleter(m);
      detail::fail(ErrorCode::unsupported_version,
                   "The producer exported DLPack " +
                       std::to_string(version.major) + "." +
                       std::to_string(version.minor) +
                       "; dlbridge understands major version " +
                       std::to_string(DLBRIDGE_DLPACK_MAJOR) + " only.",
                   version.major > DLBRIDGE_DLPACK_MAJOR
                       ? "Upgrade dlbridge, or ask the producer for "
                         "max_version=(1, 3)."
                       : "The producer is broken; report it there.");
    }
    versioned_ = m;  // owned from here on: any throw below runs the deleter
    try {
      if (uint64_t unknown = m->flags & ~known_flags)
        detail::fail(version.minor > DLBRIDGE_DLPACK_MINOR
                         ? ErrorCode::unsupported_version
                         : ErrorCode::invalid_tensor,
                     "The tensor carries flag bits 0x" + hex(unknown) +
                         " that DLPack " + std::to_string(DLBRIDGE_DLPACK_MAJOR) +
                         "." + std::to_string(DLBRIDGE_DLPACK_MINOR) +
                         " does not define.",
                     "Ask the producer for max_version=(1, 3).");
      view_.assign(m->dl_tensor, m->flags, policy);
    } catch (...) {
      // A constructor that throws runs no destructor: the deleter is run here.
      run_deleter();
      throw;
    }
  }

  // Takes ownership of a legacy tensor. It carries no flags: assumed_flags
  // says what the caller knows (READ_ONLY when the source was read-only).
  static ManagedTensor adopt(abi::DLManagedTensor* m, uint64_t assumed_flags = 0,
                             const ImportPolicy& policy = {}) {
    if (m == nullptr)
      detail::fail(ErrorCode::invalid_tensor,
                   "The producer returned a NULL DLManagedTensor.",
                   "Report it to the producing library.");
    ManagedTensor out;
    out.legacy_ = m;
    out.assumed_flags_ = assumed_flags;
    out.view_.assign(m->dl_tensor, assumed_flags, policy);
    return out;
  }

  explicit operator bool() const noexcept { return versioned_ || legacy_; }
  bool is_versioned() const noexcept { return versioned_ != nullptr; }
  // (0, 0) for a legacy tensor, which carries no version.
  abi::DLPackVersion version() const noexcept {
    return versioned_ ? versioned_->version : abi::DLPackVersion{0, 0};
  }
  uint64_t flags() const noexcept { return view_.flags(); }
  const TensorView& view() const noexcept { return view_; }

  // Hands the tensor over as a versioned struct; a legacy one is wrapped
  // without copying data. The caller owns the result and calls its deleter.
  abi::DLManagedTensorVersioned* release_versioned() {
    if (versioned_) return std::exchange(versioned_, nullptr);
    if (!legacy_) return nullptr;
    using W = detail::Wrapper<abi::DLManagedTensorVersioned, abi::DLManagedTensor>;
    auto wrapper = std::make_unique<W>();
    wrapper->outer.dl_tensor = legacy_->dl_tensor;
    if (wrapper->outer.dl_tensor.strides == nullptr && view_.ndim() > 0) {
      wrapper->strides.assign(view_.strides(), view_.ndim());
      wrapper->outer.dl_tensor.strides = wrapper->strides.data();
    }
    wrapper->inner = std::exchange(legacy_, nullptr);
    wrapper->outer.version = dlpack_version;
    wrapper->outer.manager_ctx = wrapper.get();
    wrapper->outer.deleter = &W::destroy;
    wrapper->outer.flags = assumed_flags_;
    return &wrapper.release()->outer;
  }

  // Hands the tensor over as a legacy struct. A read-only tensor is refused
  // (the legacy struct cannot say so, and a consumer would write to it), and
  // so are padded sub-byte elements; the tensor stays owned here then.
  abi::DLManagedTensor* release_legacy() {
    if (legacy_) {
      detail::check_legacy_can_carry(assumed_flags_);
      return std::exchange(legacy_, nullptr);
    }
    if (!versioned_) return nullptr;
    detail::check_legacy_can_carry(versioned_->flags);
    using W = detail::Wrapper<abi::DLManagedTensor, abi::DLManagedTensorVersioned>;
    auto* wrapper = new W;
    wrapper->inner = std::exchange(versioned_, nullptr);
    wrapper->outer.manager_ctx = wrapper;
    wrapper->outer.deleter = &W::destroy;
    wrapper->outer.dl_tensor = wrapper->inner->dl_tensor;
    return &wrapper->outer;
  }

  // Runs the deleter now (if any) and leaves this empty.
  void reset() noexcept {
    run_deleter();
    view_ = TensorView();
    assumed_flags_ = 0;
  }

  void swap(ManagedTensor& other) noexcept {
    std::swap(versioned_, other.versioned_);
    std::swap(legacy_, other.legacy_);
    std::swap(assumed_flags_, other.assumed_flags_);
    std::swap(view_, other.view_);
  }

 private:
  void run_deleter() noexcept {
    if (auto* m = std::exchange(versioned_, nullptr); m && m->deleter) m->deleter(m);
    if (auto* m = std::exchange(legacy_, nullptr); m && m->deleter) m->deleter(m);
  }

  static std::string hex(uint64_t value) {
    const char* digits = "0123456789abcdef";
    std::string text;
    do {
      text.insert(text.begin(), digits[value & 15]);
      value >>= 4;
    } while (value != 0);
    return text;
  }

  abi::DLManagedTensorVersioned* versioned_ = nullptr;
  abi::DLManagedTensor* legacy_ = nullptr;
  // What the caller knows of a legacy tensor, which carries no flags (see
  // adopt); the flags of the versioned struct release_versioned wraps it in.
  uint64_t assumed_flags_ = 0;
  TensorView view_;
};

}  // namespace dlbridge
