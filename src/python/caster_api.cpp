// dlbridge._core._caster_api: the table through which the C++ type casters
// of <dlbridge/python/nanobind.hpp> and <dlbridge/python/pybind11.hpp>, built
// into other extensions, read their arguments (the interface is in
// include/dlbridge/python/caster_api.hpp). An argument is read as
// dlbridge.from_dlpack reads it -- the same producer registry, trust policy,
// torch rules, refusals and error classes -- by the same functions, with one
// difference: a plain producer's struct is handed to the caster as it came,
// to be validated in place once, where from_dlpack adopts it into a Tensor's
// storage (the ~450 instructions of that storage and a second validation
// would make a caster cost 1.5x nb::ndarray; bench/callgrind.py).
#include <cstring>
#include <new>
#include <optional>
#include <utility>

#include <dlbridge/python/caster_api.hpp>

#include "bindings.hpp"
#include "dlpack_protocol.hpp"
#include "fast_calls.hpp"

namespace dlbridge::python {

namespace {

// What one call's argument keeps alive, placed in the caster's own space:
// a plain producer's struct (owned), the tensor import_object read, or a
// raw capsule looked at and not yet consumed.
struct CallHold {
  abi::DLManagedTensorVersioned* versioned = nullptr;
  abi::DLManagedTensor* legacy = nullptr;
  bool legacy_writable = false;  // the producer's library states its legacy memory writable
  Tensor tensor;
  nb::object capsule;

  CallHold() = default;
  CallHold(const CallHold&) = delete;
  CallHold& operator=(const CallHold&) = delete;
  ~CallHold() { drop_struct(); }

  void drop_struct() noexcept {
    if (auto* m = std::exchange(versioned, nullptr); m != nullptr && m->deleter != nullptr) m->deleter(m);
    if (auto* m = std::exchange(legacy, nullptr); m != nullptr && m->deleter != nullptr) m->deleter(m);
  }
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
  return std::make_pair(tensor, flags);
}

// Takes a plain producer's capsule as import_dlpack_tensor does, except that
// a struct the caster can validate in place is held as it is.
int take_plain(CallHold& held, nb::handle x, ProducerType& known, nb::handle capsule, abi::DLTensor* view,
               uint64_t* flags) {
  const CapsuleStruct taken = take_capsule(capsule);
  if (taken.versioned != nullptr) {
    abi::DLManagedTensorVersioned* m = taken.versioned;
    // What ManagedTensor::adopt refuses before looking at the tensor: its
    // refusal is raised (after the deleter ran).
    if (m->version.major != DLBRIDGE_DLPACK_MAJOR || (m->flags & ~known_flags) != 0)
      return describe(held.tensor = tensor_from_managed(ManagedTensor::adopt(m)), view, flags);
    held.versioned = m;
    *view = m->dl_tensor;
    *flags = imported_flags(true, m->flags);
  } else {
    held.legacy = taken.legacy;
    *view = taken.legacy->dl_tensor;
    // As import_from_producer: the library may state that its legacy capsules carry writable memory.
    *flags = policy_of(known).legacy_writable ? 0 : imported_flags(false, 0);
    held.legacy_writable = policy_of(known).legacy_writable;
  }
  // Device memory after all, as import_dlpack_tensor handles it: a
  // malformed tensor is refused first, then the type is asked again.
  const StreamArg stream = backend::default_stream_arg(view->device.device_type);
  if (!stream.given) return caster_imported;
  ManagedTensor first = held.versioned != nullptr ? ManagedTensor::adopt(std::exchange(held.versioned, nullptr))
                                                  : ManagedTensor::adopt(std::exchange(held.legacy, nullptr));
  first.reset();
  held.tensor = tensor_from_managed(ask_again_with_stream(x, known, ExchangeRequest{}, stream));
  return describe(held.tensor, view, flags);
}

// x's producer as import_object finds it, without learning anything about
// the types it reads otherwise (dlbridge.Tensor and capsules).
ProducerType* producer_of(nb::handle x) {
  PyTypeObject* type = Py_TYPE(x.ptr());
  if (ProducerType* known = recent_producer(type)) return known;
  if (PyCapsule_CheckExact(x.ptr()) || PyObject_TypeCheck(x.ptr(), tensor_type())) return nullptr;
  return find_producer(x);
}

// object read as dlbridge.from_dlpack(object) reads it (import_object, then
// pyarrow's second look), or caster_not_a_tensor when it is no array-like
// at all (import_object's TypeError for an object without any protocol).
int read_argument(CallHold& held, PyObject* object, abi::DLTensor* view, uint64_t* flags) {
  nb::handle x(object);
  try {
    try {
      // import_object's producer case with nothing asked (import_from_producer)
      // for a generic producer, which has no lazy state to resolve
      // (producer_policy.hpp): its plain capsule, and every refusal mapped
      // by after_producer_refusal. Everything else is import_object's.
      ProducerType* known = producer_of(x);
      if (known != nullptr && policy_of(*known).family == ProducerFamily::generic) {
        const ExchangeRequest request{};
        try {
          if (nb::object capsule = plain_capsule(x, *known, request))
            return take_plain(held, x, *known, capsule, view, flags);
        } catch (nb::python_error& e) {
          return describe(held.tensor = after_producer_refusal(x, *known, request, e), view, flags);
        }
      }
      return describe(held.tensor = import_object(x, ExchangeRequest{}, "a tensor parameter"), view, flags);
    } catch (...) {
      return describe(held.tensor = after_import_failure(x, ExchangeRequest{}), view, flags);
    }
  } catch (const nb::builtin_exception& e) {
    if (e.type() != nb::exception_type::type_error) throw;
    return caster_not_a_tensor;
  }
}

int import_view(PyObject* object, void* space, abi::DLTensor* view, uint64_t* flags) noexcept {
  return python_boundary<int>(caster_failed, [&] {
    CallHold* held = new (space) CallHold();
    try {
      if (PyCapsule_CheckExact(object)) {
        if (auto looked = look_at_capsule(object)) {
          held->capsule = nb::borrow(object);
          *view = looked->first;
          *flags = looked->second;
          return caster_imported_pending;
        }
      }
      const int result = read_argument(*held, object, view, flags);
      if (result == caster_not_a_tensor) held->~CallHold();
      return result;
    } catch (...) {
      held->~CallHold();
      throw;
    }
  });
}

int commit(void* space, abi::DLTensor* view, uint64_t* flags) noexcept {
  return python_boundary<int>(caster_failed, [&] {
    CallHold& held = hold_of(space);
    if (held.capsule.is_valid()) {
      held.tensor = tensor_from_capsule(held.capsule);
      held.capsule.reset();
    }
    return describe(held.tensor, view, flags);
  });
}

void release(void* space) noexcept { hold_of(space).~CallHold(); }

int take(void* space, abi::DLManagedTensorVersioned** out) noexcept {
  return python_boundary<int>(caster_failed, [&] {
    CallHold& held = hold_of(space);
    if (held.capsule.is_valid())
      throw nb::type_error("dlbridge caster: take before commit (a bug in the caster header).");
    if (held.versioned != nullptr) {
      *out = std::exchange(held.versioned, nullptr);
    } else if (held.legacy != nullptr) {
      const uint64_t legacy_flags = held.legacy_writable ? 0 : imported_flags(false, 0);
      *out = ManagedTensor::adopt(std::exchange(held.legacy, nullptr), legacy_flags).release_versioned();
    } else {
      *out = export_versioned(held.tensor, 0);
    }
    return 0;
  });
}

PyObject* to_python(abi::DLManagedTensorVersioned* tensor) noexcept {
  return python_boundary<PyObject*>(
      nullptr, [&] { return wrap_tensor(tensor_from_managed(ManagedTensor::adopt(tensor))).release().ptr(); });
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
