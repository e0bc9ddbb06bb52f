// dlbridge._core._caster_api: the table through which the C++ type casters
// of <dlbridge/python/nanobind.hpp> and <dlbridge/python/pybind11.hpp>, built
// into other extensions, read their arguments (the interface is in
// include/dlbridge/python/caster_api.hpp). An argument is read by
// import_object, as dlbridge.from_dlpack reads it -- the same producer
// registry, trust policy, library rules, refusals and error classes -- with
// one difference it takes as a parameter: a producer's struct is held as it
// came, to be validated in place once by the caster, where from_dlpack
// adopts it into a Tensor's storage (that storage and a second validation
// would make a caster cost clearly more than nb::ndarray's;
// bench/callgrind.py). Raw capsules are looked at without being consumed
// until the caster commits.
#include <cstring>
#include <new>
#include <optional>
#include <utility>

#include <dlbridge/python/caster_api.hpp>

#include "bindings.hpp"

namespace dlbridge::python {

namespace {

// What one call's argument keeps alive, placed in the caster's own space:
// a producer's struct as it came, the tensor import_object read, or a raw
// capsule looked at and not yet consumed. Only what is held is built: this
// is made and dropped on every call.
struct CallHold {
  HeldRead read;
  nb::object capsule;
};
static_assert(sizeof(CallHold) <= call_hold_capacity && alignof(CallHold) <= call_hold_alignment,
              "CallHold must fit the space that casters reserve for it");

CallHold& hold_of(void* space) { return *static_cast<CallHold*>(space); }

int describe(const Tensor& tensor, abi::DLTensor* view, uint64_t* flags) {
  *view = tensor.view().dltensor();
  *flags = tensor.view().flags();
  return caster_imported;
}

// A capsule that tensor_from_capsule would take, described without taking
// it; nullopt when tensor_from_capsule is to be asked at once (it consumes
// the capsule and raises from_dlpack's refusal). The description is
// provisional (a legacy struct's writability shows once it is taken);
// commit replaces it with what was taken.
std::optional<std::pair<abi::DLTensor, uint64_t>> look_at_capsule(PyObject* capsule) {
  const char* name = PyCapsule_GetName(capsule);
  if (name == nullptr) {
    PyErr_Clear();
    return std::nullopt;
  }
  const bool versioned = std::strcmp(name, "dltensor_versioned") == 0;
  if (!versioned && std::strcmp(name, "dltensor") != 0) return std::nullopt;
  void* pointer = PyCapsule_GetPointer(capsule, name);
  if (pointer == nullptr) {
    PyErr_Clear();
    return std::nullopt;
  }
  abi::DLTensor tensor{};
  uint64_t flags = 0;
  if (versioned) {
    const auto* m = static_cast<const abi::DLManagedTensorVersioned*>(pointer);
    // Past a major-version mismatch no other field may be read.
    if (m->version.major != DLBRIDGE_DLPACK_MAJOR || (m->flags & ~known_flags) != 0) return std::nullopt;
    tensor = m->dl_tensor;
    flags = m->flags;
  } else {
    tensor = static_cast<const abi::DLManagedTensor*>(pointer)->dl_tensor;
  }
  try {
    TensorView::from_dltensor(tensor, flags);
  } catch (const Error&) {
    return std::nullopt;
  }
  // A capsule passed as it is is the exchange itself: its IS_COPIED speaks of how the caller
  // got it, as from_dlpack(capsule, copy=False) reads it, and asks a writable argument nothing.
  return std::make_pair(tensor, flags & ~DLBRIDGE_FLAG_IS_COPIED);
}

// object read as dlbridge.from_dlpack(object) reads it, or
// caster_not_a_tensor when it is no array-like at all (import_object's
// TypeError for an object without any protocol).
int read_argument(CallHold& hold, PyObject* object, abi::DLTensor* view, uint64_t* flags) {
  try {
    import_object(object, "a tensor parameter", hold.read);
  } catch (const nb::builtin_exception& e) {
    if (e.type() != nb::exception_type::type_error) throw;
    return caster_not_a_tensor;
  }
  if (hold.read.tensor) return describe(*hold.read.tensor, view, flags);
  *view = *hold.read.taken.dl_tensor();
  *flags = hold.read.flags;
  return caster_imported;
}

int import_view(PyObject* object, void* space, abi::DLTensor* view, uint64_t* flags) noexcept {
  return python_boundary<int>(caster_failed, [&] {
    CallHold* hold = new (space) CallHold();
    try {
      if (PyCapsule_CheckExact(object)) {
        if (auto looked = look_at_capsule(object)) {
          hold->capsule = nb::borrow(object);
          *view = looked->first;
          *flags = looked->second;
          return caster_imported_pending;
        }
      }
      const int result = read_argument(*hold, object, view, flags);
      if (result == caster_not_a_tensor) hold->~CallHold();
      return result;
    } catch (...) {
      hold->~CallHold();
      throw;
    }
  });
}

int commit(void* space, abi::DLTensor* view, uint64_t* flags) noexcept {
  return python_boundary<int>(caster_failed, [&] {
    CallHold& hold = hold_of(space);
    if (hold.capsule.is_valid()) {
      hold.read.tensor.emplace(tensor_from_capsule(hold.capsule));
      hold.capsule.reset();
    }
    return describe(*hold.read.tensor, view, flags);
  });
}

void release(void* space) noexcept { hold_of(space).~CallHold(); }

int take(void* space, abi::DLManagedTensorVersioned** out) noexcept {
  return python_boundary<int>(caster_failed, [&] {
    CallHold& hold = hold_of(space);
    if (hold.capsule.is_valid())
      throw nb::type_error("dlbridge caster: take before commit (a bug in the caster header).");
    TakenStruct& taken = hold.read.taken;
    if (taken.is_versioned() && taken)
      *out = taken.release_versioned();
    else if (taken)
      *out = std::move(taken).adopt(hold.read.flags).release_versioned();
    else
      *out = export_versioned(*hold.read.tensor, 0);
    return 0;
  });
}

PyObject* to_python(abi::DLManagedTensorVersioned* tensor) noexcept {
  return python_boundary<PyObject*>(nullptr, [&] { return wrap_tensor(tensor_adopting(tensor)).release().ptr(); });
}

void set_error(const char* code, const char* message, const char* hint) noexcept {
  try {
    ErrorCode known = ErrorCode::invalid_argument;
    // A code this dlbridge does not know (headers newer than the package)
    // still raises, as a plain bad value.
    if (code == nullptr || !find_error_code(code, known)) known = ErrorCode::invalid_argument;
    throw Error(known, message != nullptr ? message : "", hint != nullptr ? hint : "");
  } catch (...) {
    set_python_error(std::current_exception());
  }
}

const CasterApi table = {
    caster_api_major, caster_api_minor, uint32_t(sizeof(CallHold)),
    &import_view,     &commit,          &release,
    &take,            &to_python,       &set_error,
};

}  // namespace

void bind_caster_api(nb::module_& m) {
  nb::object capsule =
      nb::steal(PyCapsule_New(const_cast<CasterApi*>(&table), caster_api_capsule_name, nullptr));
  if (!capsule.is_valid()) throw nb::python_error();
  m.attr("_caster_api") = capsule;
}

}  // namespace dlbridge::python
