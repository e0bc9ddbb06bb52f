// The views of a host tensor that NumPy-style consumers read without DLPack:
// the buffer protocol (memoryview, numpy.asarray) and __array_interface__
// for dtypes the buffer protocol cannot describe.
#include <nanobind/stl/string.h>

#include <cstring>
#include <string>

#include <dlbridge/platform/platform.hpp>

#include "bindings.hpp"

namespace dlbridge::python {

namespace {

// The struct-module format of a dtype, or NULL when the buffer protocol has
// no way to describe it (bfloat16, float8, packed sub-byte types, lanes).
const char* buffer_format(DType t) {
  if (t.lanes != 1) return nullptr;
  switch (t.code) {
    case abi::kDLBool: return "?";
    case abi::kDLInt:
      switch (t.bits) {
        case 8: return "b";
        case 16: return "h";
        case 32: return "i";
        case 64: return "q";
      }
      return nullptr;
    case abi::kDLUInt:
      switch (t.bits) {
        case 8: return "B";
        case 16: return "H";
        case 32: return "I";
        case 64: return "Q";
      }
      return nullptr;
    case abi::kDLFloat:
      switch (t.bits) {
        case 16: return "e";
        case 32: return "f";
        case 64: return "d";
      }
      return nullptr;
    case abi::kDLComplex:
      switch (t.bits) {
        case 64: return "Zf";
        case 128: return "Zd";
      }
      return nullptr;
  }
  return nullptr;
}

// The byte stride of dimension d for the buffer protocol and the array
// interface. Strides that are stepped along fit (the validated extent
// bounds them); a size-1 dimension, or any of a tensor without elements,
// may carry any stride, and one whose byte value overflows is reported as
// 0, which describes the same memory.
Py_ssize_t byte_stride(const TensorView& v, int32_t d) {
  int64_t bytes = 0;
  if (detail::mul_overflow(v.stride(d), int64_t(v.dtype().element_bytes()), bytes) ||
      bytes < PY_SSIZE_T_MIN || bytes > PY_SSIZE_T_MAX)
    return 0;
  return Py_ssize_t(bytes);
}

void check_buffer_request(const TensorView& v, int flags) {
  if (!is_host_accessible(v.device().type))
    detail::fail(ErrorCode::device_unavailable,
                 "The buffer protocol reaches host memory only; this tensor is on " +
                     to_string(v.device()) + ".",
                 "Copy it first: t.copy(device='cpu').");
  if ((flags & PyBUF_WRITABLE) && v.readonly())
    detail::fail(ErrorCode::read_only,
                 "A writable buffer was requested from a read-only tensor.",
                 "Request a read-only buffer, or use t.copy() for a writable one.");
  if (buffer_format(v.dtype()) == nullptr || v.packed())
    detail::fail(ErrorCode::unsupported_dtype,
                 "The buffer protocol cannot describe dtype " + dtype_name(v.dtype()) + ".",
                 "Exchange it through DLPack instead (numpy.from_dlpack(t), "
                 "torch.from_dlpack(t)).");
  const bool c = v.is_c_contiguous(), f = v.is_f_contiguous();
  const bool wants_strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES;
  if ((!wants_strides && !c) ||
      ((flags & PyBUF_C_CONTIGUOUS) == PyBUF_C_CONTIGUOUS && !c) ||
      ((flags & PyBUF_F_CONTIGUOUS) == PyBUF_F_CONTIGUOUS && !f) ||
      ((flags & PyBUF_ANY_CONTIGUOUS) == PyBUF_ANY_CONTIGUOUS && !c && !f))
    detail::fail(ErrorCode::unsupported_layout,
                 "The buffer consumer asked for a contiguous buffer, but the "
                 "tensor is strided.",
                 "Use t.copy() for a compact tensor.");
}

// A raw buffer slot: errors go through python_boundary like every other slot.
// The protocol wants view->obj NULL on failure, so it is set only once
// nothing can throw any more.
int tensor_getbuffer(PyObject* self, Py_buffer* view, int flags) noexcept {
  view->obj = nullptr;
  return python_boundary(-1, [&] {
    const Tensor* t = as_tensor(nb::handle(self));
    if (t == nullptr) throw nb::type_error("This dlbridge.Tensor was never initialised.");
    const TensorView& v = t->view();
    check_buffer_request(v, flags);
    const int64_t itemsize = v.dtype().element_bytes();
    auto* dims = new Py_ssize_t[size_t(2 * v.ndim() + 1)];
    for (int32_t d = 0; d < v.ndim(); ++d) {
      dims[d] = Py_ssize_t(v.shape(d));
      dims[v.ndim() + d] = byte_stride(v, d);
    }
    view->buf = v.data();
    view->obj = Py_NewRef(self);
    view->len = Py_ssize_t(v.size() * itemsize);
    view->itemsize = Py_ssize_t(itemsize);
    view->readonly = v.readonly() ? 1 : 0;
    view->ndim = v.ndim();
    view->format = (flags & PyBUF_FORMAT) ? const_cast<char*>(buffer_format(v.dtype())) : nullptr;
    view->shape = (flags & PyBUF_ND) ? dims : nullptr;
    view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? dims + v.ndim() : nullptr;
    view->suboffsets = nullptr;
    view->internal = dims;
    return 0;
  });
}

void tensor_releasebuffer(PyObject*, Py_buffer* view) {
  delete[] static_cast<Py_ssize_t*>(view->internal);
}

// The __array_interface__ typestr: NumPy's own code for the dtypes the
// buffer protocol also describes, else opaque bytes of the element's width,
// which a consumer that knows the dtype (NumPy with ml_dtypes) can view as it.
std::string array_typestr(DType t) {
  static const char endian = [] {
    const uint16_t probe = 1;
    unsigned char first;
    std::memcpy(&first, &probe, 1);
    return first == 1 ? '<' : '>';
  }();
  const std::string bytes = std::to_string(t.element_bytes());
  if (buffer_format(t) == nullptr) return "|V" + bytes;
  if (t.code == abi::kDLBool) return "|b1";
  const char kind = t.code == abi::kDLInt    ? 'i'
                    : t.code == abi::kDLUInt ? 'u'
                    : t.code == abi::kDLFloat ? 'f'
                                              : 'c';
  return std::string(1, t.bits == 8 ? '|' : endian) + kind + bytes;
}

// Version 3 of NumPy's array interface for host tensors. numpy.asarray tries
// the buffer protocol first and falls back to this only when the buffer is
// refused, so it changes nothing for dtypes the buffer protocol describes and
// reaches the rest (bfloat16, float8, padded sub-byte) as raw elements. The
// array's base is this Tensor, which keeps the memory alive.
}  // namespace

nb::dict array_interface(const Tensor& t) {
  const TensorView& v = t.view();
  if (!is_host_accessible(v.device().type))
    detail::fail(ErrorCode::device_unavailable,
                 "__array_interface__ describes host memory, and this tensor's memory on " +
                     to_string(v.device()) + " is not available to the host.",
                 "Copy it first: t.copy(device='cpu').");
  if (v.packed())
    detail::fail(ErrorCode::unsupported_dtype,
                 "__array_interface__ cannot describe packed " + dtype_name(v.dtype()) +
                     " elements, which share bytes.",
                 "Use dlbridge.convert(x, 'numpy'), or t.copy_unpacked() for one element "
                 "per byte.");
  nb::list shape, strides;
  for (int32_t d = 0; d < v.ndim(); ++d) {
    shape.append(v.shape(d));
    strides.append(byte_stride(v, d));
  }
  const std::string typestr = array_typestr(v.dtype());
  nb::list descr;
  descr.append(nb::make_tuple("", typestr));
  nb::dict out;
  out["shape"] = nb::tuple(shape);
  out["typestr"] = typestr;
  out["descr"] = descr;
  // NumPy reads address 0 as "allocate for me" and then drops the read-only
  // bit, so a size-0 tensor with NULL data points at a byte no element uses.
  alignas(16) static const unsigned char nothing[16] = {};
  const void* data = v.data() != nullptr ? v.data() : nothing;
  out["data"] = nb::make_tuple(reinterpret_cast<uintptr_t>(data), v.readonly());
  out["strides"] = nb::tuple(strides);
  out["version"] = 3;
  return out;
}

PyType_Slot tensor_buffer_slots[] = {
    {Py_bf_getbuffer, reinterpret_cast<void*>(tensor_getbuffer)},
    {Py_bf_releasebuffer, reinterpret_cast<void*>(tensor_releasebuffer)},
    {0, nullptr},
};


}  // namespace dlbridge::python
