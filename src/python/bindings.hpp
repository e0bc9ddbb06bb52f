// Shared declarations of the dlbridge._core extension. The exchange logic is
// in include/dlbridge/; these files translate between it and Python.
#pragma once

#include <nanobind/nanobind.h>
// In every file, not only where a cast is written: a file without it would
// instantiate nb::cast<std::string> with nanobind's class caster (always a
// cast_error), and the linker keeps one instantiation for the whole module,
// whichever file it comes from.
#include <nanobind/stl/string.h>

#include <dlbridge/dlbridge.hpp>
#include <dlbridge/copy/copy.hpp>
#include <dlbridge/exchange_api.hpp>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "py_compat.hpp"

namespace dlbridge::python {

namespace nb = nanobind;

// dlbridge.Tensor: shared ownership of an imported or allocated tensor, so
// every export of it costs one small allocation and no Python. Its view is
// the storage's own unless it differs (a relabelled device, dropped flags):
// an import then copies no shape or strides.
class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<const ManagedTensor> storage) : storage_(std::move(storage)) {}
  Tensor(std::shared_ptr<const ManagedTensor> storage, TensorView view)
      : storage_(std::move(storage)), view_(std::make_shared<const TensorView>(std::move(view))) {}

  const TensorView& view() const noexcept { return view_ ? *view_ : storage_->view(); }
  // Exports owned by the storage may borrow its view's shape and strides.
  ExportDims export_dims() const noexcept {
    return view_ ? ExportDims::copy : ExportDims::borrow_from_owner;
  }
  const std::shared_ptr<const ManagedTensor>& storage() const noexcept { return storage_; }

  // A legacy capsule cannot say whether its memory may be written (JAX's
  // arrays are immutable), so such a tensor is read-only to every view and
  // versioned export, yet may leave again as a legacy capsule, which says
  // no more than what came in (docs/boundary.md).
  bool writability_unknown() const noexcept { return writability_unknown_; }
  void set_writability_unknown() noexcept { writability_unknown_ = true; }
  // What the planners read (plan_export, plan_convert).
  Writability writability() const noexcept {
    if (writability_unknown_) return Writability::unknown;
    return view().readonly() ? Writability::read_only : Writability::writable;
  }
  // Its memory is a copy the import made of a lazy view (torch's conjugate
  // or negative bit resolved): new, private and writable, the one copy a
  // request may make.
  bool lazy_view_resolved() const noexcept { return lazy_view_resolved_; }
  void set_lazy_view_resolved() noexcept { lazy_view_resolved_ = true; }
  // The same tensor, its memory known to be writable after all (a library
  // states it of its legacy capsules: python/dlbridge/libraries/).
  Tensor known_writable() const {
    const TensorView& v = view();
    return Tensor(storage_, v.with_flags(v.flags() & ~uint64_t(DLBRIDGE_FLAG_READ_ONLY)));
  }
  // The same tensor seen through another view of its storage.
  Tensor with_view(TensorView view) const {
    Tensor out(storage_, std::move(view));
    out.writability_unknown_ = writability_unknown_;
    out.lazy_view_resolved_ = lazy_view_resolved_;
    return out;
  }

 private:
  std::shared_ptr<const ManagedTensor> storage_;
  std::shared_ptr<const TensorView> view_;
  bool writability_unknown_ = false;
  bool lazy_view_resolved_ = false;
};

// What a caller of __dlpack__ / from_dlpack asks for, once parsed, is the
// core's dlbridge::ExchangeRequest (request.hpp): one type for both sides.

// --- errors.cpp
void register_error_translator(nb::module_& m);
// The one boundary for C entry points: sets the Python error that the C++
// exception stands for. Used by raw slots and C function pointers, which
// return -1 instead of letting an exception cross.
void set_python_error(std::exception_ptr error) noexcept;
// A raw Python slot or C entry point: body's result, or `failed` with the
// Python error set (detail::error_boundary with set_python_error).
template <typename Result, typename Body>
Result python_boundary(Result failed, Body&& body) noexcept {
  return detail::error_boundary(failed, &set_python_error, std::forward<Body>(body));
}
// Raises error as the Python class of its code, as every coded error is
// raised, with `cause` (a producer's own exception) as its __cause__.
[[noreturn]] void raise_caused_by(const Error& error, nb::python_error& cause);
// getattr(x, name, None) as Python defines it: only an AttributeError means
// "absent"; any other exception raised by a property (KeyboardInterrupt
// included) propagates.
nb::object attribute_or_none(nb::handle x, const char* name);
// Whether a caught Python exception is a dlbridge.DLPackError (coded).
bool is_dlpack_error(const nb::python_error& error);
// The UTF-8 text of a str; a str that has none (lone surrogates) raises
// UnicodeEncodeError, a ValueError, instead of nanobind's bare cast_error.
std::string utf8_of(nb::handle text);

// --- types.cpp
void bind_types(nb::module_& m);
Device device_from_python(nb::handle value);
// What owner.__dlpack_device__() returned, checked: a TypeError unless it
// is a (device_type, device_id) tuple of ints.
Device device_from_dlpack_device(nb::handle result, nb::handle owner);
DType dtype_from_python(nb::handle value);
std::optional<abi::DLPackVersion> max_version_from_python(nb::handle value);
std::optional<Device> dl_device_from_python(nb::handle value);
std::optional<bool> copy_from_python(nb::handle value);
// The one reader of a Python int argument: a plain int (bool excluded,
// though Python counts it as one) that fits in int64 lands in out. Each
// caller turns the other outcomes into the error its own argument calls for.
enum class IntRead { ok, not_an_int, too_big };
IntRead read_int64(PyObject* value, int64_t& out) noexcept;
// A tuple or list of ints; what names it in the TypeError otherwise.
std::vector<int64_t> ints_from_python(nb::handle value, const std::string& what);
nb::object device_type_to_python(DeviceType type);

// --- capsule.cpp
// The struct a producer handed over -- from a "dltensor_versioned" or
// "dltensor" capsule, taken exactly once (the capsule renamed used_*), or
// from its C exchange API -- owned: its deleter runs when this goes, unless
// it was handed on first.
class TakenStruct {
 public:
  TakenStruct() noexcept = default;
  // Past another major version no field but the version may be read.
  explicit TakenStruct(abi::DLManagedTensorVersioned* m) noexcept
      : struct_(m),
        tensor_(m != nullptr && m->version.major == DLBRIDGE_DLPACK_MAJOR ? &m->dl_tensor : nullptr),
        versioned_(true) {}
  explicit TakenStruct(abi::DLManagedTensor* m) noexcept
      : struct_(m), tensor_(m != nullptr ? &m->dl_tensor : nullptr) {}
  TakenStruct(TakenStruct&& other) noexcept
      : struct_(std::exchange(other.struct_, nullptr)),
        tensor_(std::exchange(other.tensor_, nullptr)),
        versioned_(other.versioned_) {}
  TakenStruct& operator=(TakenStruct&& other) noexcept {
    if (this != &other) {
      if (struct_ != nullptr) drop();
      struct_ = std::exchange(other.struct_, nullptr);
      tensor_ = std::exchange(other.tensor_, nullptr);
      versioned_ = other.versioned_;
    }
    return *this;
  }
  TakenStruct(const TakenStruct&) = delete;
  TakenStruct& operator=(const TakenStruct&) = delete;
  // One test for the moved-from and handed-on ones: they pass on every import.
  ~TakenStruct() {
    if (struct_ != nullptr) drop();
  }

  explicit operator bool() const noexcept { return struct_ != nullptr; }
  bool is_versioned() const noexcept { return versioned_; }
  // Its tensor, or NULL where no field but the version may be read: a
  // versioned struct of another major version (or a NULL struct).
  const abi::DLTensor* dl_tensor() const noexcept { return tensor_; }
  // Whether a caller may read it in place as it is: ManagedTensor::adopt
  // refuses nothing before looking at the tensor (another major version,
  // flag bits DLPack does not define).
  bool readable_in_place() const noexcept {
    return tensor_ != nullptr && (!versioned_ || (versioned()->flags & ~known_flags) == 0);
  }
  // The flags it carries (a legacy struct carries none).
  uint64_t flags() const noexcept { return versioned_ && struct_ != nullptr ? versioned()->flags : 0; }
  // The struct, now the caller's.
  abi::DLManagedTensorVersioned* release_versioned() noexcept {
    tensor_ = nullptr;
    return static_cast<abi::DLManagedTensorVersioned*>(std::exchange(struct_, nullptr));
  }
  abi::DLManagedTensor* release_legacy() noexcept {
    tensor_ = nullptr;
    return static_cast<abi::DLManagedTensor*>(std::exchange(struct_, nullptr));
  }
  // Validated and owned as a ManagedTensor (a legacy one carrying the flags
  // the caller knows of it, assumed_flags); a refusal is raised after the
  // deleter ran.
  ManagedTensor adopt(uint64_t assumed_flags = 0) && {
    if (versioned_) return ManagedTensor::adopt(release_versioned());
    return ManagedTensor::adopt(release_legacy(), assumed_flags);
  }

 private:
  abi::DLManagedTensorVersioned* versioned() const noexcept {
    return static_cast<abi::DLManagedTensorVersioned*>(struct_);
  }
  abi::DLManagedTensor* legacy() const noexcept { return static_cast<abi::DLManagedTensor*>(struct_); }
  void drop() noexcept {
    if (versioned_) {
      if (auto* m = release_versioned(); m->deleter != nullptr) m->deleter(m);
    } else if (auto* m = release_legacy(); m->deleter != nullptr) {
      m->deleter(m);
    }
  }

  void* struct_ = nullptr;  // an abi::DLManagedTensorVersioned or an abi::DLManagedTensor
  abi::DLTensor* tensor_ = nullptr;  // its tensor where it may be read (read on every import)
  bool versioned_ = false;
};
// The struct of a "dltensor_versioned" or "dltensor" capsule, taken exactly
// once; every refusal of the capsule itself (not a capsule, another name,
// consumed, NULL) is raised here.
TakenStruct take_capsule(nb::handle capsule);
// The capsule's tensor: tensor_from_struct(take_capsule(capsule)), with the
// same refusals.
Tensor tensor_from_capsule(nb::handle capsule);
nb::object make_capsule(const Tensor& tensor, ExportFormat format,
                        uint64_t extra_flags);
// A new versioned struct over the tensor's memory, owned by the caller.
abi::DLManagedTensorVersioned* export_versioned(const Tensor& tensor, uint64_t extra_flags);
nb::dict inspect_capsule(nb::handle capsule);
void bind_capsules(nb::module_& m);

// --- tensor.cpp
void bind_tensor(nb::module_& m);
nb::object wrap_tensor(Tensor tensor);
PyTypeObject* tensor_type() noexcept;
// The Tensor inside a dlbridge.Tensor object (or a subclass), else NULL.
const Tensor* as_tensor(nb::handle object) noexcept;
// The tensor of a method's self, or TypeError naming the method when self was
// made by Tensor.__new__ alone and holds none.
const Tensor& initialised_tensor(nb::handle self, const char* method);
Tensor tensor_from_managed(ManagedTensor&& managed);
// The flags a dlbridge.Tensor shows for a producer's struct carrying flags
// (a legacy struct: the flags assumed for it): a legacy tensor is read-only,
// its writability being unknown (docs/boundary.md); IS_COPIED is dropped.
uint64_t imported_flags(bool versioned, uint64_t flags) noexcept;
// tensor_from_managed(ManagedTensor::adopt(m)), with m adopted in the
// tensor's storage itself: its view is built where it stays.
Tensor tensor_adopting(abi::DLManagedTensorVersioned* m);
// A producer's struct as a Tensor: a versioned one adopted in place
// (tensor_adopting), a legacy one with no flags assumed (so read-only, its
// writability unknown: imported_flags). Refusals are ManagedTensor::adopt's.
Tensor tensor_from_struct(TakenStruct&& taken);
// A tensor over view's memory, which owner keeps alive: the core's
// export_tensor, held as a dlbridge.Tensor.
Tensor tensor_over(const TensorView& view, std::shared_ptr<void> owner);
// A compact copy on target; a copy to a device is queued on consumer_stream
// (a DLPack stream value; absent: the device's default stream).
Tensor copy_tensor(const Tensor& source, Device target, StreamArg consumer_stream = {});
// The core's carry_out for a dlbridge.Tensor: the copy (large ones without
// the GIL), or the tensor itself relabelled to plan.target.
Tensor carry_out_plan(Tensor source, const ExchangePlan& plan, StreamArg stream);
nb::object export_capsule(const Tensor& tensor, const ExchangeRequest& request);
// A stream argument of __dlpack__ / to_dlpack: None or an int.
StreamArg stream_from_python(nb::handle stream);

// --- host_views.cpp
// Py_bf_getbuffer / Py_bf_releasebuffer for dlbridge.Tensor.
extern PyType_Slot tensor_buffer_slots[];
// NumPy's array interface (version 3) of a host tensor.
nb::dict array_interface(const Tensor& t);

// --- import.cpp
// x read as dlbridge.from_dlpack reads it, in one order for every caller:
// a dlbridge.Tensor, a capsule, a producer (its C exchange API or
// __dlpack__, its library's rules, its refusal as a coded error), the buffer
// protocol, __array_interface__, __cuda_array_interface__; then, after any
// failure, pyarrow's second look. entry names the public function for the
// TypeError of an unreadable x.
Tensor import_object(nb::handle x, const ExchangeRequest& request, const char* entry = "dlbridge.from_dlpack");
// What import_object read for a caller that validates a producer's struct
// in place (the C++ casters, caster_api.cpp): the struct as it came, instead
// of adopted into a Tensor's storage, where it can be read in place
// (TakenStruct::readable_in_place); else the Tensor.
struct HeldRead {
  TakenStruct taken;
  uint64_t flags = 0;  // with taken: the flags its Tensor would show (imported_flags, or the library's statement)
  std::optional<Tensor> tensor;
};
// import_object(x, {}, entry), the difference above its one parameter.
void import_object(nb::handle x, const char* entry, HeldRead& out);
void bind_import(nb::module_& m);

// --- exchange.cpp
const abi::DLPackExchangeAPI* dlbridge_exchange_api() noexcept;
// The usable exchange API table of a producer type, or NULL.
const abi::DLPackExchangeAPI* find_exchange_api(PyTypeObject* type);
void bind_exchange_api(nb::module_& m);

// --- caster_api.cpp
// dlbridge._core._caster_api, the C table of the C++ type casters.
void bind_caster_api(nb::module_& m);

// --- convert.cpp
void bind_convert(nb::module_& m);

// --- testing.cpp
void bind_testing(nb::module_& m);

// True while the interpreter shuts down: deleters must not touch Python then.
bool python_is_finalizing() noexcept;

}  // namespace dlbridge::python
