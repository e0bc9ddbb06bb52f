// DLPack capsules: static names, consumption exactly once (rename to
// used_*), and destructors that run the deleter only for unconsumed ones.
#include <nanobind/stl/string.h>

#include <cstring>
#include <string>

#include "bindings.hpp"

namespace dlbridge::python {

namespace {

constexpr const char* versioned_name = "dltensor_versioned";
constexpr const char* legacy_name = "dltensor";
constexpr const char* used_versioned_name = "used_dltensor_versioned";
constexpr const char* used_legacy_name = "used_dltensor";

// The consumer renames a capsule when it takes the tensor, so a capsule that
// still has its name at destruction was never consumed and owns the tensor.
// dlbridge's capsules carry the tensor in their context too and are made
// with these very name pointers, so the check is a pointer comparison; a
// consumer's rename installs another pointer.
template <typename Managed>
void run_deleter_if_unconsumed(PyObject* capsule, const char* name) {
  if (PyCapsule_GetName(capsule) != name) return;
  auto* m = static_cast<Managed*>(PyCapsule_GetContext(capsule));
  if (m == nullptr || m->deleter == nullptr) return;
  // A deleter may call into Python; keep any exception being raised intact.
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  m->deleter(m);
  PyErr_Restore(type, value, traceback);
}

DLBRIDGE_HOT void versioned_capsule_destructor(PyObject* capsule) {
  run_deleter_if_unconsumed<abi::DLManagedTensorVersioned>(capsule, versioned_name);
}

void legacy_capsule_destructor(PyObject* capsule) {
  run_deleter_if_unconsumed<abi::DLManagedTensor>(capsule, legacy_name);
}

// A capsule that owns m and can find it again without a name lookup.
template <typename Managed>
PyObject* new_capsule(Managed* m, const char* name, PyCapsule_Destructor destructor) {
  PyObject* capsule = PyCapsule_New(m, name, destructor);
  if (capsule != nullptr && PyCapsule_SetContext(capsule, m) != 0) {
    Py_DECREF(capsule);  // the destructor runs the deleter
    return nullptr;
  }
  if (capsule == nullptr) m->deleter(m);
  return capsule;
}

// A capsule name for a message or a dict: any C string, with bytes that are
// not UTF-8 shown as \xNN escapes instead of failing to decode.
nb::str printable_name(const char* name) {
  PyObject* text = PyUnicode_DecodeUTF8(name, Py_ssize_t(std::strlen(name)), "backslashreplace");
  if (text == nullptr) throw nb::python_error();
  return nb::steal<nb::str>(text);
}

template <typename Managed>
Managed* take_pointer(PyObject* capsule, const char* name, const char* used_name) {
  auto* m = static_cast<Managed*>(PyCapsule_GetPointer(capsule, name));
  if (m == nullptr) {
    PyErr_Clear();
    detail::fail(ErrorCode::invalid_tensor,
                 std::string("The '") + name + "' capsule holds a NULL pointer.",
                 "Report it to the producing library.");
  }
  // Renamed before anything can fail: from here on the consumer owns it.
  if (PyCapsule_SetName(capsule, used_name) != 0) throw nb::python_error();
  return m;
}

nb::list dims_list(const int64_t* dims, int32_t ndim) {
  nb::list out;
  for (int32_t d = 0; d < ndim; ++d) out.append(dims[d]);
  return out;
}

void describe_dltensor(nb::dict& out, const abi::DLTensor& t, uint64_t flags) {
  out["device"] = nb::make_tuple(int32_t(t.device.device_type), t.device.device_id);
  out["dtype"] = nb::make_tuple(t.dtype.code, t.dtype.bits, t.dtype.lanes);
  out["ndim"] = t.ndim;
  out["data"] = reinterpret_cast<uintptr_t>(t.data);
  out["byte_offset"] = t.byte_offset;
  // Arrays are read only when ndim promises a sane length.
  const bool sane = t.ndim >= 0 && t.ndim <= max_ndim;
  out["shape"] = sane && t.shape ? nb::object(dims_list(t.shape, t.ndim)) : nb::none();
  out["strides"] = sane && t.strides ? nb::object(dims_list(t.strides, t.ndim)) : nb::none();
  try {
    TensorView::from_dltensor(t, flags);
    out["problem"] = nb::none();
  } catch (const Error& e) {
    out["problem"] = std::string(e.code_name()) + ": " + e.message();
  }
}

}  // namespace

TakenStruct take_capsule(nb::handle capsule) {
  PyObject* cap = capsule.ptr();
  if (!PyCapsule_CheckExact(cap))
    throw nb::type_error(("Expected a DLPack capsule, got " +
                          std::string(nb::inst_name(capsule).c_str()) + ".")
                             .c_str());
  const char* name = PyCapsule_GetName(cap);
  if (name != nullptr && std::strcmp(name, versioned_name) == 0)
    return TakenStruct(take_pointer<abi::DLManagedTensorVersioned>(cap, versioned_name, used_versioned_name));
  if (name != nullptr && std::strcmp(name, legacy_name) == 0)
    return TakenStruct(take_pointer<abi::DLManagedTensor>(cap, legacy_name, used_legacy_name));
  if (name != nullptr && (std::strcmp(name, used_versioned_name) == 0 ||
                          std::strcmp(name, used_legacy_name) == 0))
    detail::fail(ErrorCode::capsule_consumed,
                 std::string("This DLPack capsule ('") + name +
                     "') was already consumed; a capsule can be imported once.",
                 "Call x.__dlpack__() again for a new capsule, or pass the "
                 "array itself to from_dlpack.");
  throw nb::type_error((std::string("A capsule named '") +
                        (name ? utf8_of(printable_name(name)) : std::string("NULL")) +
                        "' is not a DLPack capsule; expected 'dltensor' or "
                        "'dltensor_versioned'.")
                           .c_str());
}

Tensor tensor_from_capsule(nb::handle capsule) { return tensor_from_struct(take_capsule(capsule)); }

namespace {

// What every export of a Tensor shares: the storage keeps the memory (and
// the view's dims) alive, and the tensor's own flags travel with it.
std::shared_ptr<void> export_owner(const Tensor& t) {
  return std::const_pointer_cast<ManagedTensor>(t.storage());
}

uint64_t export_flags(const Tensor& t, uint64_t extra_flags) {
  return (t.view().flags() & (DLBRIDGE_FLAG_READ_ONLY | DLBRIDGE_FLAG_IS_SUBBYTE_TYPE_PADDED)) |
         extra_flags;
}

}  // namespace

DLBRIDGE_HOT abi::DLManagedTensorVersioned* export_versioned(const Tensor& t, uint64_t extra_flags) {
  return make_versioned(t.view(), export_owner(t), export_flags(t, extra_flags), t.export_dims());
}

DLBRIDGE_HOT nb::object make_capsule(const Tensor& tensor, ExportFormat format, uint64_t extra_flags) {
  PyObject* capsule = nullptr;
  if (format == ExportFormat::versioned) {
    capsule = new_capsule(export_versioned(tensor, extra_flags), versioned_name,
                          versioned_capsule_destructor);
  } else {
    capsule = new_capsule(make_legacy(tensor.view(), export_owner(tensor),
                                      export_flags(tensor, extra_flags), tensor.export_dims()),
                          legacy_name, legacy_capsule_destructor);
  }
  if (capsule == nullptr) throw nb::python_error();
  return nb::steal(capsule);
}

nb::dict inspect_capsule(nb::handle capsule) {
  PyObject* cap = capsule.ptr();
  if (!PyCapsule_CheckExact(cap))
    throw nb::type_error("inspect_capsule expects a PyCapsule.");
  nb::dict out;
  const char* name = PyCapsule_GetName(cap);
  out["name"] = name ? nb::object(printable_name(name)) : nb::none();
  const bool versioned = name && std::strcmp(name, versioned_name) == 0;
  const bool legacy = name && std::strcmp(name, legacy_name) == 0;
  out["versioned"] = versioned;
  out["consumed"] = name && std::strncmp(name, "used_", 5) == 0;
  out["version"] = nb::none();
  out["flags"] = nb::none();
  if (!versioned && !legacy) return out;
  void* pointer = PyCapsule_GetPointer(cap, name);
  if (pointer == nullptr) {
    PyErr_Clear();
    return out;
  }
  if (versioned) {
    auto* m = static_cast<abi::DLManagedTensorVersioned*>(pointer);
    out["version"] = nb::make_tuple(m->version.major, m->version.minor);
    out["has_deleter"] = m->deleter != nullptr;
    // Past a major-version mismatch no other field may be read.
    if (m->version.major != DLBRIDGE_DLPACK_MAJOR) return out;
    out["flags"] = m->flags;
    describe_dltensor(out, m->dl_tensor, m->flags);
  } else {
    auto* m = static_cast<abi::DLManagedTensor*>(pointer);
    out["has_deleter"] = m->deleter != nullptr;
    describe_dltensor(out, m->dl_tensor, 0);
  }
  return out;
}

void bind_capsules(nb::module_& m) {
  m.def("inspect_capsule", &inspect_capsule, nb::arg("capsule"),
        "Describe a DLPack capsule without consuming it: name, version, "
        "flags, device, dtype, shape, strides, and the validation problem if any.");
}

}  // namespace dlbridge::python
