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
    return out;
  }

 private:
  std::shared_ptr<const ManagedTensor> storage_;
  std::shared_ptr<const TensorView> view_;
  bool writability_unknown_ = false;
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
// getattr(x, name, None) as Python defines it: only an AttributeError means
// "absent"; any other exception raised by a property (KeyboardInterrupt
// included) propagates.
nb::object attribute_or_none(nb::handle x, const char* name);
// Whether a caught Python exception is a dlbridge.DLPackError (coded).
bool is_dlpack_error(const nb::python_error& error);
// The Python class of a code: the one the package registered, or the
// built-in one (a plain BufferError before registration).
PyObject* python_error_class(ErrorCode code) noexcept;
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
// The struct of a "dltensor_versioned" or "dltensor" capsule, taken (the
// capsule renamed used_*) exactly once and now owned by the caller; every
// refusal of the capsule itself (not a capsule, another name, consumed,
// NULL) is raised here. One of the two is set.
struct CapsuleStruct {
  abi::DLManagedTensorVersioned* versioned = nullptr;
  abi::DLManagedTensor* legacy = nullptr;
};
CapsuleStruct take_capsule(nb::handle capsule);
// Consumes a "dltensor" / "dltensor_versioned" capsule exactly once.
ManagedTensor consume_capsule(nb::handle capsule, uint64_t legacy_flags = 0);
// tensor_from_managed(consume_capsule(capsule)): the same tensor, or the
// same refusal, with a versioned tensor adopted in place (tensor_adopting).
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
// entry names the public function for the TypeError of an unreadable x.
Tensor import_object(nb::handle x, const ExchangeRequest& request,
                     const char* entry = "dlbridge.from_dlpack");
void bind_import(nb::module_& m);

// --- fast_calls.cpp
// Whether objects of `type` come from the module `top` or one below it ("pyarrow").
bool type_from_module(PyTypeObject* type, const char* top);

// --- exchange.cpp
const abi::DLPackExchangeAPI* dlbridge_exchange_api() noexcept;
// The usable exchange API table of a producer type, or NULL.
const abi::DLPackExchangeAPI* find_exchange_api(PyTypeObject* type);
void bind_exchange_api(nb::module_& m);

// --- caster_api.cpp
// dlbridge._core._caster_api, the C table of the C++ type casters.
void bind_caster_api(nb::module_& m);

// --- testing.cpp
void bind_testing(nb::module_& m);

// True while the interpreter shuts down: deleters must not touch Python then.
bool python_is_finalizing() noexcept;

}  // namespace dlbridge::python
