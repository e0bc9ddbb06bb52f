// The buffer protocol and the array interfaces as dlbridge tensors: the
// memory stays where it is, owned by the object that described it.
#include <nanobind/stl/string.h>

#include <string>

#include "array_like.hpp"
#include "gil.hpp"

namespace dlbridge::python {

namespace {

// Keeps a Python object alive for as long as a tensor borrows its memory.
// The last reference may drop on any thread, or during shutdown, when
// touching Python is no longer allowed.
struct PythonOwner {
  PyObject* object;
  Py_buffer buffer{};
  bool has_buffer = false;

  ~PythonOwner() {
    if (!Py_IsInitialized() || python_is_finalizing()) return;
    PyGILState_STATE state = ensure_gil();
    if (has_buffer) PyBuffer_Release(&buffer);
    Py_XDECREF(object);
    PyGILState_Release(state);
  }
};

}  // namespace

void fail_byte_order(const std::string& what) {
  detail::fail(ErrorCode::unsupported_dtype,
               "The dtype " + what + " is in the byte order this machine does not use, "
               "and DLPack has no byte order: every consumer would read the bytes swapped.",
               "Swap the bytes first: x.astype(x.dtype.newbyteorder('=')) in NumPy, or let "
               "dlbridge.convert do it (it byte-swaps whenever a copy is allowed).");
}

namespace {

[[noreturn]] void unsupported_format(const std::string& what) {
  detail::fail(ErrorCode::unsupported_dtype,
               "dlbridge cannot represent the element type " + what + " in DLPack.",
               "Convert the data to a standard numeric dtype first.");
}

// A struct-module format with one element ("<f", "=q", "Zd") as a DType.
DType dtype_from_buffer_format(const char* format, int64_t itemsize) {
  std::string f = format ? format : "B";
  if (!f.empty() && (f[0] == '@' || f[0] == '=' || f[0] == '<')) f = f.substr(1);
  else if (!f.empty() && (f[0] == '>' || f[0] == '!'))
    fail_byte_order("'" + f + "' (big-endian)");
  const auto bits = uint8_t(itemsize * 8);
  if (f == "?") return DType{abi::kDLBool, 8, 1};
  if (f == "b" || f == "h" || f == "i" || f == "l" || f == "q" || f == "n")
    return DType{abi::kDLInt, bits, 1};
  if (f == "B" || f == "H" || f == "I" || f == "L" || f == "Q" || f == "N" || f == "c")
    return DType{abi::kDLUInt, bits, 1};
  if (f == "e" || f == "f" || f == "d") return DType{abi::kDLFloat, bits, 1};
  if (f == "Zf" || f == "Zd") return DType{abi::kDLComplex, bits, 1};
  unsupported_format("'" + f + "' (buffer format)");
}

// "<f4", "|b1", "<c8" as a DType.
DType dtype_from_typestr(const std::string& typestr) {
  if (typestr.size() < 3) unsupported_format("'" + typestr + "'");
  const char order = typestr[0], kind = typestr[1];
  if (order == '>') fail_byte_order("'" + typestr + "' (big-endian)");
  int64_t itemsize = 0;
  for (size_t i = 2; i < typestr.size(); ++i) {
    if (typestr[i] < '0' || typestr[i] > '9' || itemsize > 1024)
      unsupported_format("'" + typestr + "'");
    itemsize = itemsize * 10 + (typestr[i] - '0');
  }
  const auto bits = uint8_t(itemsize * 8);
  if (itemsize <= 0 || itemsize > 16) unsupported_format("'" + typestr + "'");
  switch (kind) {
    case 'b':
      if (itemsize != 1) unsupported_format("'" + typestr + "'");
      return DType{abi::kDLBool, 8, 1};
    case 'i': return DType{abi::kDLInt, bits, 1};
    case 'u': return DType{abi::kDLUInt, bits, 1};
    case 'f': return DType{abi::kDLFloat, bits, 1};
    case 'c': return DType{abi::kDLComplex, bits, 1};
  }
  unsupported_format("'" + typestr + "'");
}

// Byte strides as element strides. A dimension that is never stepped along
// (size 1, or any dimension of a tensor without elements) may carry any
// byte stride, as NumPy and memoryview accept; one that is not a multiple
// of the item size becomes 0, which describes the same memory.
std::vector<int64_t> element_strides(const std::vector<int64_t>& byte_strides, int64_t itemsize,
                                     const std::vector<int64_t>& shape) {
  bool empty = false;
  for (int64_t n : shape) empty = empty || n == 0;
  std::vector<int64_t> out;
  for (size_t d = 0; d < byte_strides.size(); ++d) {
    const int64_t s = byte_strides[d];
    const bool never_stepped = empty || (d < shape.size() && shape[d] == 1);
    if (s % itemsize != 0 && never_stepped) {
      out.push_back(0);
      continue;
    }
    if (s % itemsize != 0)
      detail::fail(ErrorCode::unsupported_layout,
                   "A byte stride of " + std::to_string(s) +
                       " is not a multiple of the item size " + std::to_string(itemsize) +
                       "; DLPack counts strides in elements.",
                   "Copy the data into a regular array first.");
    out.push_back(s / itemsize);
  }
  return out;
}

// The data pointer of an array interface: an int in 0 .. 2**64-1.
uintptr_t address_from(nb::handle value, const char* name) {
  if (!PyLong_Check(value.ptr()) || PyBool_Check(value.ptr()))
    throw nb::type_error((std::string(name) + " data pointer must be an int, got " +
                          nb::inst_name(value).c_str() + ".")
                             .c_str());
  const unsigned long long address = PyLong_AsUnsignedLongLong(value.ptr());
  if (address == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
    PyErr_Clear();
    detail::fail(ErrorCode::invalid_argument,
                 std::string(name) + " data pointer " +
                     utf8_of(nb::repr(value)) + " is not an address (0 .. 2**64-1).");
  }
  return uintptr_t(address);
}

Tensor tensor_over_memory(std::shared_ptr<PythonOwner> owner, void* data, DType dtype,
                          const std::vector<int64_t>& shape, const std::vector<int64_t>& strides, Device device,
                          uint64_t flags) {
  return tensor_over(TensorView::from_data(data, dtype, shape, strides, device, flags), std::move(owner));
}

}  // namespace

ArrayInterface read_array_interface(nb::handle interface, const char* name,
                                    std::optional<DType> dtype_override) {
  if (!PyDict_Check(interface.ptr()))
    throw nb::type_error((std::string(name) + " must be a dict.").c_str());
  nb::dict d = nb::borrow<nb::dict>(interface);
  if (!d.contains("shape") || !d.contains("typestr") || !d.contains("data") || d["data"].is_none())
    throw nb::type_error(
        (std::string(name) + " needs 'shape', 'typestr' and a 'data' tuple.").c_str());
  nb::handle data = d["data"];
  if (!PyTuple_Check(data.ptr()) || py::tuple_size(data.ptr()) != 2)
    throw nb::type_error((std::string(name) + " 'data' must be a (pointer, read_only) tuple.").c_str());
  ArrayInterface out;
  if (!PyUnicode_Check(d["typestr"].ptr()))
    throw nb::type_error((std::string(name) + " 'typestr' must be a str, got " +
                          nb::inst_name(d["typestr"]).c_str() + ".")
                             .c_str());
  const std::string typestr = utf8_of(d["typestr"]);
  if (dtype_override) {
    out.dtype = *dtype_override;
    // ml_dtypes describes its types as opaque bytes, or as 'f' for some
    // float8 types; only the item size has to agree.
    if (typestr.size() < 3 || (typestr[1] != 'V' && typestr[1] != 'f') ||
        typestr.substr(2) != std::to_string(out.dtype.element_bytes()))
      unsupported_format("'" + typestr + "' as " + dtype_name(out.dtype));
    // A sub-byte type with one element per byte (ml_dtypes' float4/float6).
    if (out.dtype.is_subbyte()) out.flags = DLBRIDGE_FLAG_IS_SUBBYTE_TYPE_PADDED;
  } else {
    out.dtype = dtype_from_typestr(typestr);
  }
  out.address = address_from(py::tuple_item(data.ptr(), 0), name);
  // NumPy reads the flag by its truth value; so does dlbridge.
  const int readonly = PyObject_IsTrue(py::tuple_item(data.ptr(), 1));
  if (readonly < 0) throw nb::python_error();
  out.readonly = readonly != 0;
  if (out.readonly) out.flags |= DLBRIDGE_FLAG_READ_ONLY;
  out.shape = ints_from_python(d["shape"], std::string(name) + " 'shape'");
  if (d.contains("strides") && !d["strides"].is_none())
    out.strides = element_strides(ints_from_python(d["strides"], std::string(name) + " 'strides'"),
                                  int64_t(out.dtype.element_bytes()), out.shape);
  return out;
}

Tensor tensor_over_object(nb::handle x, const ArrayInterface& fields, Device device) {
  auto owner = std::make_shared<PythonOwner>();
  owner->object = nb::borrow(x).release().ptr();
  return tensor_over_memory(std::move(owner), reinterpret_cast<void*>(fields.address), fields.dtype, fields.shape,
                            fields.strides, device, fields.flags);
}

Tensor tensor_from_buffer(nb::handle x) {
  auto owner = std::make_shared<PythonOwner>();
  if (PyObject_GetBuffer(x.ptr(), &owner->buffer, PyBUF_RECORDS_RO) != 0) throw nb::python_error();
  owner->has_buffer = true;
  const Py_buffer& b = owner->buffer;
  DType dtype = dtype_from_buffer_format(b.format, b.itemsize);
  if (int64_t(dtype.element_bytes()) != b.itemsize)
    unsupported_format(std::string("'") + (b.format ? b.format : "B") + "' of itemsize " +
                       std::to_string(b.itemsize));
  std::vector<int64_t> shape(b.shape, b.shape + b.ndim), byte_strides;
  if (b.strides) byte_strides.assign(b.strides, b.strides + b.ndim);
  return tensor_over_memory(owner, b.buf, dtype, shape, element_strides(byte_strides, b.itemsize, shape), Device{},
                            b.readonly ? DLBRIDGE_FLAG_READ_ONLY : 0);
}

Tensor tensor_from_array_interface(nb::handle x, nb::handle interface) {
  // The dict may own the memory: a NumPy scalar's interface describes a
  // temporary array that only the dict's '__ref' keeps alive.
  return tensor_over_object(nb::make_tuple(x, interface),
                            read_array_interface(interface, "__array_interface__"), Device{});
}

}  // namespace dlbridge::python
