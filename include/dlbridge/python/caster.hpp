// The one type caster of dlbridge's parameter types, written once for both
// binding frameworks: nanobind.hpp and pybind11.hpp only adapt it to their
// framework's caster protocol. TensorCaster<Value, Glue> for
//
//   dlbridge::TensorView            borrowed for the call, validated
//   dlbridge::TensorArg<require...> the same, plus the requirements in its type
//   dlbridge::ManagedTensor         owned: the function may keep it
//
// reads the argument through the installed dlbridge (bridge.hpp), so it
// accepts and refuses exactly what dlbridge.from_dlpack does, and names what
// it accepts in signatures as nb::ndarray does ("ArrayLike[dtype=float32,
// order='C', device='cpu', writable=True]").
//
// Glue, the framework's side:
//   [[noreturn]] static void raise();   // throws the framework's exception
//                                       // for the Python error that is set
//   template <size_t N> static constexpr auto text(const char (&)[N]);
//   template <size_t V> static constexpr auto number();   // "V" as text
//   template <size_t N1, size_t N2>
//   static constexpr auto io_text(const char (&in)[N1], const char (&out)[N2]);
// the last three returning the framework's signature descriptors.
#pragma once

#include <Python.h>

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>

#include "../device.hpp"
#include "../dtype.hpp"
#include "../managed_tensor.hpp"
#include "../tensor_view.hpp"
#include "bridge.hpp"
#include "tensor_arg.hpp"

namespace dlbridge::python {

namespace signature {

// A table's name as a character array, which the frameworks' descriptors
// are built from.
template <size_t N>
struct Literal {
  char text[N + 1] = {};
  constexpr explicit Literal(std::string_view name) {
    for (size_t i = 0; i < N; ++i) text[i] = name[i];
  }
};

template <uint8_t Code>
struct DTypePrefix {
  static_assert(Code < dtype_code_count, "TensorArg: a dtype code that DLPack does not define");
  static constexpr std::string_view name = dtype_code_table[Code].name;
  static constexpr Literal<name.size()> literal{name};
};

template <int32_t Type>
struct DeviceName {
  static_assert(detail::device_type_index(Type) >= 0, "TensorArg: a device type that DLPack does not define");
  static constexpr std::string_view name = device_type_table[detail::device_type_index(Type)].short_name;
  static constexpr Literal<name.size()> literal{name};
};

template <typename Glue, uint16_t Lanes>
constexpr auto lanes_text() {
  if constexpr (Lanes == 1)
    return Glue::text("");
  else
    return Glue::text("x") + Glue::template number<Lanes>();
}

// dtype_name's spelling ("float32", "bool", "float8_e4m3fn", "float32x4").
template <typename Glue, uint8_t Code, uint8_t Bits, uint16_t Lanes>
constexpr auto dtype_text() {
  constexpr auto prefix = Glue::text(DTypePrefix<Code>::literal.text);
  if constexpr (dtype_code_table[Code].fixed_bits != 0)
    return prefix + lanes_text<Glue, Lanes>();
  else
    return prefix + Glue::template number<Bits>() + lanes_text<Glue, Lanes>();
}

// "*, *, *" for N dimensions, nb::ndarray's notation for a free extent.
template <typename Glue, int32_t N>
constexpr auto extents_text() {
  if constexpr (N == 0)
    return Glue::text("");
  else if constexpr (N == 1)
    return Glue::text("*");
  else
    return Glue::text("*, ") + extents_text<Glue, N - 1>();
}

// What one requirement tag adds to the signature; nothing for a tag it does
// not know.
template <typename Glue, typename Tag>
struct Part {
  static constexpr auto text() { return Glue::text(""); }
};
template <typename Glue, typename T>
struct Part<Glue, require::dtype<T>> {
  static constexpr auto text() {
    constexpr DType type = dtype_of<T>();
    return Glue::text("dtype=") + dtype_text<Glue, type.code, type.bits, type.lanes>();
  }
};
template <typename Glue, int32_t N>
struct Part<Glue, require::ndim<N>> {
  static constexpr auto text() { return Glue::text("shape=(") + extents_text<Glue, N>() + Glue::text(")"); }
};
template <typename Glue>
struct Part<Glue, require::c_contiguous> {
  static constexpr auto text() { return Glue::text("order='C'"); }
};
template <typename Glue>
struct Part<Glue, require::writable> {
  static constexpr auto text() { return Glue::text("writable=True"); }
};
template <typename Glue>
struct Part<Glue, require::host_accessible> {
  static constexpr auto text() { return Glue::text("host_accessible=True"); }
};
template <typename Glue, abi::DLDeviceType Type>
struct Part<Glue, require::device<Type>> {
  static constexpr auto text() {
    return Glue::text("device='") + Glue::text(DeviceName<Type>::literal.text) + Glue::text("'");
  }
};

template <typename Descriptor>
inline constexpr bool is_empty_text = sizeof(decltype(Descriptor::text)) == 1;

// The non-empty parts, separated by ", ".
template <typename Glue>
constexpr auto join() {
  return Glue::text("");
}
template <typename Glue, typename First, typename... Rest>
constexpr auto join(const First& first, const Rest&... rest) {
  if constexpr (is_empty_text<First>)
    return join<Glue>(rest...);
  else if constexpr ((is_empty_text<Rest> && ...))
    return first;
  else
    return first + Glue::text(", ") + join<Glue>(rest...);
}

// nanobind's notation for array-API objects (nb::ndarray<nb::array_api>), so
// that its stub generator writes typing.Annotated[typing.Any, dict(...)].
template <typename Glue, typename... Requirements>
constexpr auto array_like() {
  return Glue::text("ArrayLike[") + join<Glue>(Part<Glue, Requirements>::text()...) + Glue::text("]");
}

}  // namespace signature

// What the three casters share: the import into a hold that lives as long
// as the caster (the call), and the framework's exception for refusals.
template <typename Glue>
class CasterBase {
 protected:
  // true with view filled and validated; false for an object that is no
  // array-like at all (the framework tries its next overload); raises for
  // a refusal.
  bool load_view(PyObject* source, TensorView& view) {
    table_ = bridge::api();
    if (table_ == nullptr) Glue::raise();
    abi::DLTensor tensor{};
    uint64_t flags = 0;
    const int result = hold_.import(table_, source, tensor, flags);
    if (result == caster_not_a_tensor) return false;
    if (result != caster_imported && result != caster_imported_pending) {
      if (!PyErr_Occurred())
        PyErr_SetString(PyExc_SystemError, "dlbridge's caster interface answered an import it does not define.");
      Glue::raise();
    }
    pending_ = result == caster_imported_pending;
    assign(view, tensor, flags);
    return true;
  }

  // Called when the framework passes the argument on, i.e. the overload
  // is taken: a capsule that load_view only looked at is consumed now. True
  // when view now describes what was taken (to be checked again).
  bool commit(TensorView& view) {
    if (!pending_) return false;
    pending_ = false;
    abi::DLTensor tensor{};
    uint64_t flags = 0;
    if (hold_.commit(tensor, flags) != 0) Glue::raise();
    assign(view, tensor, flags);
    return true;
  }

  // Runs check; a dlbridge::Error it throws is raised as dlbridge's coded
  // Python exception.
  template <typename Check>
  void checked(Check&& check) {
    try {
      check();
    } catch (...) {
      bridge::set_current_error(table_);
      Glue::raise();
    }
  }

  bridge::CallHold hold_;

 private:
  void assign(TensorView& view, const abi::DLTensor& tensor, uint64_t flags) {
    checked([&] { view.assign(tensor, flags); });
  }

  const CasterApi* table_ = nullptr;
  bool pending_ = false;
};

template <typename Value, typename Glue>
class TensorCaster;

template <typename Glue>
class TensorCaster<TensorView, Glue> : CasterBase<Glue> {
 public:
  static constexpr auto name() { return signature::array_like<Glue>(); }

  bool load(PyObject* source) { return this->load_view(source, value_); }
  TensorView& committed() {
    this->commit(value_);
    return value_;
  }

 private:
  TensorView value_;
};

template <typename Glue, typename... Requirements>
class TensorCaster<TensorArg<Requirements...>, Glue> : CasterBase<Glue> {
  using Access = detail::TensorArgAccess;

 public:
  static constexpr auto name() { return signature::array_like<Glue, Requirements...>(); }

  bool load(PyObject* source) {
    if (!this->load_view(source, Access::unchecked_view(value_))) return false;
    this->checked([&] { Access::check(value_); });
    return true;
  }
  TensorArg<Requirements...>& committed() {
    if (this->commit(Access::unchecked_view(value_))) this->checked([&] { Access::check(value_); });
    return value_;
  }

 private:
  TensorArg<Requirements...> value_;
};

template <typename Glue>
class TensorCaster<ManagedTensor, Glue> : CasterBase<Glue> {
 public:
  static constexpr auto name() { return Glue::io_text("ArrayLike[]", "dlbridge.Tensor"); }

  bool load(PyObject* source) { return this->load_view(source, view_); }
  // The tensor, owned from here on, sharing the memory of what was read.
  ManagedTensor& committed() {
    if (taken_) return value_;
    taken_ = true;
    this->commit(view_);
    abi::DLManagedTensorVersioned* taken = nullptr;
    if (this->hold_.take(taken) != 0) Glue::raise();
    this->hold_.release();
    this->checked([&] { value_ = ManagedTensor::adopt(taken); });
    return value_;
  }

  // A new dlbridge.Tensor owning tensor (left empty); NULL with a Python
  // error set, after the tensor's deleter ran.
  static PyObject* to_python(ManagedTensor&& tensor) noexcept {
    const CasterApi* table = bridge::api();
    if (table == nullptr) return nullptr;
    abi::DLManagedTensorVersioned* released = nullptr;
    try {
      released = tensor.release_versioned();
    } catch (...) {
      bridge::set_current_error(table);
      return nullptr;
    }
    if (released == nullptr) {
      table->set_error("invalid_argument", "An empty dlbridge::ManagedTensor cannot be returned to Python.",
                       "Return a tensor that holds data (e.g. from dlbridge::allocate_compact).");
      return nullptr;
    }
    return table->to_python(released);
  }

 private:
  TensorView view_;
  ManagedTensor value_;
  bool taken_ = false;
};

// Loads the installed dlbridge now: false with one ImportError set (saying
// how to install it) when it is missing or does not match these headers.
// Extensions call it at module import through their framework's
// dlbridge::python::require_dlbridge(module) (nanobind.hpp, pybind11.hpp).
inline bool load_dlbridge() noexcept { return bridge::api() != nullptr; }

}  // namespace dlbridge::python
