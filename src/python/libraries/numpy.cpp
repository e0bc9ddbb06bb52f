// NumPy's C++-side rules (libraries.hpp): data in the other byte order,
// which DLPack cannot describe, and arrays of extension dtypes (ml_dtypes),
// which NumPy refuses to export.
#include <nanobind/stl/string.h>

#include <string>

#include "../array_like.hpp"
#include "libraries.hpp"

namespace dlbridge::python::numpy {

void check_byte_order(nb::handle x) {
  nb::object interface = attribute_or_none(x, "__array_interface__");
  if (!PyDict_Check(interface.ptr())) return;
  nb::object typestr = py::dict_item_ref(interface.ptr(), "typestr");
  if (!typestr.is_valid() || !PyUnicode_Check(typestr.ptr())) return;
  const std::string text = utf8_of(typestr);
  if (!text.empty() && text[0] == '>') fail_byte_order("'" + text + "'");
}

std::optional<Tensor> other_byte_order_tensor(nb::handle x) {
  nb::object numpy = py::dict_item_ref(PyImport_GetModuleDict(), "numpy");
  if (!numpy.is_valid()) return std::nullopt;  // not imported: x is no NumPy array
  nb::object ndarray = numpy.attr("ndarray");
  if (!PyObject_TypeCheck(x.ptr(), reinterpret_cast<PyTypeObject*>(ndarray.ptr()))) return std::nullopt;
  nb::object dtype = x.attr("dtype");
  const std::string order = utf8_of(nb::str(dtype.attr("byteorder")));
  if (order != ">") return std::nullopt;  // dlbridge's hosts are little-endian (platform.hpp)
  // The same description with the native byte order's typestr ('<'); x
  // keeps the memory alive.
  nb::object described = x.attr("__array_interface__");
  if (!PyDict_Check(described.ptr())) return std::nullopt;
  nb::dict interface = nb::steal<nb::dict>(PyDict_Copy(described.ptr()));
  if (!interface.is_valid()) throw nb::python_error();
  std::string typestr = utf8_of(nb::str(interface["typestr"]));
  typestr[0] = '<';
  interface["typestr"] = nb::str(typestr.c_str());
  return tensor_over_object(nb::make_tuple(x, interface), read_array_interface(interface, "__array_interface__"),
                            Device{});
}

// NumPy exports only its built-in dtypes through DLPack. An array of an
// extension dtype still names its dtype, and its memory is described by
// __array_interface__.
std::optional<Tensor> tensor_from_extension_dtype(nb::handle x) {
  nb::object interface = attribute_or_none(x, "__array_interface__");
  nb::object dtype = attribute_or_none(x, "dtype");
  if (interface.is_none() || dtype.is_none()) return std::nullopt;
  std::optional<DType> parsed;
  try {
    parsed = dtype_from_python(dtype);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  const bool numpy_exports_it = !parsed->is_subbyte() &&
                                (parsed->code == abi::kDLInt || parsed->code == abi::kDLUInt ||
                                 parsed->code == abi::kDLFloat || parsed->code == abi::kDLComplex ||
                                 parsed->code == abi::kDLBool);
  if (!numpy_exports_it)
    return tensor_over_object(nb::make_tuple(x, interface),
                              read_array_interface(interface, "__array_interface__", parsed), Device{});
  return std::nullopt;  // refused for another reason: keep that error
}

// NumPy before 2.1 exports no read-only array ("signalling readonly is
// unsupported by DLPack"); its __array_interface__ describes the same memory
// and says it is read-only, which the tensor keeps.
std::optional<Tensor> tensor_from_read_only_array(nb::handle x) {
  nb::object interface = attribute_or_none(x, "__array_interface__");
  if (!PyDict_Check(interface.ptr())) return std::nullopt;
  nb::object data = py::dict_item_ref(interface.ptr(), "data");
  if (!data.is_valid() || !PyTuple_Check(data.ptr()) || py::tuple_size(data.ptr()) != 2) return std::nullopt;
  const int readonly = PyObject_IsTrue(py::tuple_item(data.ptr(), 1));
  if (readonly < 0) throw nb::python_error();
  if (readonly == 0) return std::nullopt;  // refused for another reason: keep that error
  check_byte_order(x);
  return tensor_over_object(nb::make_tuple(x, interface), read_array_interface(interface, "__array_interface__"),
                            Device{});
}

}  // namespace dlbridge::python::numpy
