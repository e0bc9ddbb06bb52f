// DeviceType, Device and DType as Python values, and the parsing of the
// arguments that name them (strings, tuples, other libraries' objects).
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <cstring>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "py_compat.hpp"

namespace dlbridge::python {

namespace {

[[noreturn]] void bad_argument(const std::string& message) {
  throw nb::type_error(message.c_str());
}

int64_t int_from(nb::handle value, const char* what) {
  int64_t v = 0;
  switch (read_int64(value.ptr(), v)) {
    case IntRead::ok: break;
    case IntRead::not_an_int:
      bad_argument(std::string(what) + " must be an int, got " +
                   nb::inst_name(value).c_str() + ".");
    case IntRead::too_big:
      detail::fail(ErrorCode::invalid_argument,
                   std::string(what) + " does not fit in 64 bits.");
  }
  return v;
}

int32_t int32_from(nb::handle value, const char* what) {
  int64_t v = int_from(value, what);
  if (v < INT32_MIN || v > INT32_MAX)
    detail::fail(ErrorCode::invalid_argument,
                 std::string(what) + " = " + std::to_string(v) +
                     " does not fit in int32.");
  return int32_t(v);
}

Device device_from_pair(nb::handle type, nb::handle id) {
  Device d{DeviceType(int32_from(type, "device type")),
           int32_from(id, "device id")};
  if (d.id < 0)
    detail::fail(ErrorCode::invalid_argument,
                 "device id " + std::to_string(d.id) + " is negative.");
  return d;
}

// The items a tuple or list really holds. A subclass may override __len__
// or __getitem__ and lie; the object's own storage cannot.
std::vector<nb::object> exact_items(nb::handle value) {
  std::vector<nb::object> out;
  if (PyTuple_Check(value.ptr())) {
    for (Py_ssize_t i = 0; i < py::tuple_size(value.ptr()); ++i)
      out.push_back(nb::borrow(py::tuple_item(value.ptr(), i)));
  } else if (PyList_Check(value.ptr())) {
    for (Py_ssize_t i = 0; i < py::list_size(value.ptr()); ++i) {
      PyObject* item = py::list_item_ref(value.ptr(), i);
      if (item == nullptr) throw nb::python_error();  // shortened meanwhile by another thread
      out.push_back(nb::steal(item));
    }
  }
  return out;
}

// A Device or DType made by __new__ alone holds no value.
nb::handle initialised(nb::handle value) {
  if (!nb::inst_ready(value))
    bad_argument(std::string("This ") + nb::inst_name(value).c_str() +
                 " was never initialised (made by __new__).");
  return value;
}

// torch reports its FP4 type by a name with an underscore before the lanes.
std::string normalise_dtype_name(std::string name) {
  const std::string torch_prefix = "torch.";
  if (name.compare(0, torch_prefix.size(), torch_prefix) == 0)
    name = name.substr(torch_prefix.size());
  if (name == "float4_e2m1fn_x2") return "float4_e2m1fnx2";
  return name;
}

}  // namespace

DLBRIDGE_HOT IntRead read_int64(PyObject* value, int64_t& out) noexcept {
  if (!PyLong_Check(value) || PyBool_Check(value)) return IntRead::not_an_int;
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
  if (overflow != 0) return IntRead::too_big;
  out = v;
  return IntRead::ok;
}

std::vector<int64_t> ints_from_python(nb::handle value, const std::string& what) {
  if (!PyTuple_Check(value.ptr()) && !PyList_Check(value.ptr()))
    throw nb::type_error((what + " must be a tuple of ints, got " +
                          nb::inst_name(value).c_str() + ".").c_str());
  std::vector<int64_t> out;
  for (const nb::object& item : exact_items(value)) out.push_back(int_from(item, what.c_str()));
  return out;
}

Device device_from_dlpack_device(nb::handle result, nb::handle owner) {
  // Read by index only after the size is known from the tuple itself: a
  // producer's answer is untrusted, and a list or a short tuple must not be
  // read past its end.
  auto is_int = [&](Py_ssize_t i) {
    PyObject* item = py::tuple_item(result.ptr(), i);
    return PyLong_Check(item) && !PyBool_Check(item);
  };
  if (!PyTuple_Check(result.ptr()) || py::tuple_size(result.ptr()) != 2 || !is_int(0) ||
      !is_int(1))
    bad_argument(std::string(nb::inst_name(owner).c_str()) +
                 ".__dlpack_device__() must return a (device_type, device_id) tuple of ints, got " +
                 nb::inst_name(result).c_str() + ".");
  return device_from_pair(py::tuple_item(result.ptr(), 0), py::tuple_item(result.ptr(), 1));
}

nb::object device_type_to_python(DeviceType type) {
  if (!is_known_device_type(type)) return nb::int_(int32_t(type));
  return nb::cast(type);
}

Device device_from_python(nb::handle value) {
  if (nb::isinstance<Device>(value)) return nb::cast<Device>(initialised(value));
  if (PyUnicode_Check(value.ptr())) return parse_device(utf8_of(value));
  if (PyTuple_Check(value.ptr()) || PyList_Check(value.ptr())) {
    std::vector<nb::object> items = exact_items(value);
    if (items.size() != 2)
      bad_argument("A device tuple must be (device_type, device_id).");
    return device_from_pair(items[0], items[1]);
  }
  if (PyLong_Check(value.ptr())) return device_from_pair(value, nb::int_(0));
  // Other libraries' device objects (torch.device, jax devices) print as
  // "cpu" / "cuda:0" or similar.
  nb::object dlpack_device = attribute_or_none(value, "__dlpack_device__");
  if (!dlpack_device.is_none()) return device_from_dlpack_device(dlpack_device(), value);
  try {
    return parse_device(utf8_of(nb::str(value)));
  } catch (const Error&) {
    bad_argument(std::string("Cannot read a device from ") +
                 nb::inst_name(value).c_str() +
                 "; pass 'cpu', 'cuda:1', (device_type, device_id) or a "
                 "dlbridge.Device.");
  }
}

DType dtype_from_python(nb::handle value) {
  if (nb::isinstance<DType>(value)) return nb::cast<DType>(initialised(value));
  if (PyUnicode_Check(value.ptr())) return parse_dtype(normalise_dtype_name(utf8_of(value)));
  if (PyTuple_Check(value.ptr())) {
    std::vector<nb::object> t = exact_items(value);
    if (t.size() != 3) bad_argument("A dtype tuple must be (code, bits, lanes).");
    int64_t code = int_from(t[0], "dtype code"), bits = int_from(t[1], "dtype bits"),
            lanes = int_from(t[2], "dtype lanes");
    if (code < 0 || code > 255 || bits < 0 || bits > 255 || lanes < 0 || lanes > 65535)
      detail::fail(ErrorCode::invalid_argument,
                   "dtype (code, bits, lanes) out of range for uint8/uint8/uint16.");
    DType t3{uint8_t(code), uint8_t(bits), uint16_t(lanes)};
    validate_dtype(t3);
    return t3;
  }
  // numpy / ml_dtypes / torch / jax dtypes and scalar types: their names.
  nb::object named = nb::borrow(value);
  if (PyType_Check(value.ptr())) {
    try {
      named = nb::module_::import_("numpy").attr("dtype")(value);
    } catch (const nb::python_error&) {
    }
  }
  // getattr(named, "name", None): a property that raises anything but
  // AttributeError propagates (hasattr would swallow it, and Python 3.13
  // prints it as "Exception ignored").
  nb::object name = PyType_Check(named.ptr()) ? nb::none() : attribute_or_none(named, "name");
  if (name.is_none()) name = nb::str(named);
  if (!PyUnicode_Check(name.ptr()))
    bad_argument(std::string("Cannot read a dtype from ") + nb::inst_name(value).c_str());
  return parse_dtype(normalise_dtype_name(utf8_of(name)));
}

std::optional<abi::DLPackVersion> max_version_from_python(nb::handle value) {
  if (value.is_none()) return std::nullopt;
  std::vector<nb::object> t;
  if (PyTuple_Check(value.ptr())) t = exact_items(value);
  if (t.size() != 2)
    bad_argument("max_version must be None or a (major, minor) tuple of ints.");
  int64_t major = int_from(t[0], "max_version major"),
          minor = int_from(t[1], "max_version minor");
  if (major < 0 || minor < 0 || major > UINT32_MAX || minor > UINT32_MAX)
    detail::fail(ErrorCode::invalid_argument,
                 "max_version components must be in 0..2**32-1.");
  return abi::DLPackVersion{uint32_t(major), uint32_t(minor)};
}

std::optional<Device> dl_device_from_python(nb::handle value) {
  if (value.is_none()) return std::nullopt;
  return device_from_python(value);
}

namespace {

// numpy.bool_ is NumPy's bool (what `a[i] > 0` and `np.all` return), so it is taken as one;
// its type is named "numpy.bool" from NumPy 2 on and "numpy.bool_" before.
bool is_numpy_bool(nb::handle value) {
  const std::string name = py::type_name_of(value.ptr());
  return name == "numpy.bool" || name == "numpy.bool_";
}

}  // namespace

std::optional<bool> copy_from_python(nb::handle value) {
  if (value.is_none()) return std::nullopt;
  if (is_numpy_bool(value)) {
    const int truth = PyObject_IsTrue(value.ptr());
    if (truth < 0) throw nb::python_error();
    return truth == 1;
  }
  if (!PyBool_Check(value.ptr()))
    bad_argument(std::string("copy must be True, False or None, got ") +
                 nb::inst_name(value).c_str() + ".");
  return value.ptr() == Py_True;
}

namespace {

StrideRule stride_rule_from_name(const std::string& name) {
  if (name == "any") return StrideRule::any;
  if (name == "nonnegative") return StrideRule::nonnegative;
  if (name == "row_major") return StrideRule::row_major;
  if (name == "permuted_compact") return StrideRule::permuted_compact;
  throw nb::value_error(("unknown stride rule '" + name +
                         "'; use any, nonnegative, row_major or permuted_compact").c_str());
}

}  // namespace

void bind_types(nb::module_& m) {
  m.def("strides_fit",
        [](nb::handle shape, nb::handle strides, const std::string& rule) {
          std::vector<int64_t> dims = ints_from_python(shape, "shape");
          std::vector<int64_t> steps = ints_from_python(strides, "strides");
          if (dims.size() != steps.size())
            throw nb::value_error("shape and strides must have the same length.");
          return dlbridge::strides_fit(int32_t(dims.size()), dims.data(), steps.data(),
                                       stride_rule_from_name(rule));
        },
        nb::arg("shape"), nb::arg("strides"), nb::arg("rule"),
        nb::sig("def strides_fit(shape: tuple[int, ...], strides: tuple[int, ...], rule: str) -> bool"),
        "Whether a layout (strides in elements) is one a consumer's rule admits: any, "
        "nonnegative, row_major or permuted_compact. Size-1 dims take any stride.");
  auto device_type = nb::enum_<DeviceType>(m, "DeviceType", nb::is_arithmetic(),
                                           "DLPack 1.3 device types (DLDeviceType).");
  for (const auto& info : device_type_table)
    device_type.value(std::string(info.dl_name).c_str(), info.type);

  nb::class_<Device>(m, "Device",
                     "An immutable (device_type, device_id) pair: Device('cpu'), "
                     "Device('cuda:1'), Device((2, 1)), Device(DeviceType.kDLCUDA, 1).")
      .def("__init__",
           [](Device* self, nb::handle spec, nb::handle id) {
             Device d = id.is_none() ? device_from_python(spec)
                                     : device_from_pair(spec, id);
             new (self) Device(d);
           },
           nb::arg("spec"), nb::arg("id") = nb::none())
      .def_prop_ro("type", [](const Device& d) { return device_type_to_python(d.type); })
      .def_prop_ro("id", [](const Device& d) { return d.id; })
      .def("__iter__",
           [](const Device& d) {
             return nb::iter(nb::make_tuple(device_type_to_python(d.type), d.id));
           })
      .def("__len__", [](const Device&) { return 2; })
      .def("__getitem__",
           [](const Device& d, int i) -> nb::object {
             if (i == 0 || i == -2) return device_type_to_python(d.type);
             if (i == 1 || i == -1) return nb::int_(d.id);
             throw nb::index_error("Device has two items: type and id.");
           })
      .def("__str__", [](const Device& d) { return to_string(d); })
      .def("__repr__", [](const Device& d) { return "Device('" + to_string(d) + "')"; })
      // Hashes like its string, which it equals ("cuda:1"), so sets and
      // dicts keyed by names find it.
      .def("__hash__", [](const Device& d) { return nb::hash(nb::str(to_string(d).c_str())); })
      .def("__eq__",
           [](const Device& d, nb::handle other) {
             try {
               return d == device_from_python(other);
             } catch (const std::exception&) {
               return false;
             }
           })
      .def("__ne__", [](const Device& d, nb::handle other) {
        try {
          return d != device_from_python(other);
        } catch (const std::exception&) {
          return true;
        }
      });

  nb::class_<DType>(m, "DType",
                    "An immutable DLPack dtype (code, bits, lanes): DType('float32'), "
                    "DType((2, 32, 1)), DType(numpy.float32), DType(torch.bfloat16).")
      .def("__init__", [](DType* self, nb::handle spec) { new (self) DType(dtype_from_python(spec)); },
           nb::arg("spec"))
      .def_prop_ro("code", [](const DType& t) { return t.code; })
      .def_prop_ro("bits", [](const DType& t) { return t.bits; })
      .def_prop_ro("lanes", [](const DType& t) { return t.lanes; })
      .def_prop_ro("name", [](const DType& t) { return dtype_name(t); })
      .def_prop_ro("itemsize", [](const DType& t) { return t.element_bytes(); },
                   "Bytes per element when not packed (ceil(bits * lanes / 8)).")
      .def("__iter__", [](const DType& t) { return nb::iter(nb::make_tuple(t.code, t.bits, t.lanes)); })
      .def("__str__", [](const DType& t) { return dtype_name(t); })
      .def("__repr__", [](const DType& t) { return "DType('" + dtype_name(t) + "')"; })
      // Hashes like its name, which it equals ("float32").
      .def("__hash__", [](const DType& t) { return nb::hash(nb::str(dtype_name(t).c_str())); })
      .def("__eq__",
           [](const DType& t, nb::handle other) {
             try {
               return t == dtype_from_python(other);
             } catch (const std::exception&) {
               return false;
             } catch (...) {
               return false;
             }
           })
      .def("__ne__", [](const DType& t, nb::handle other) {
        try {
          return t != dtype_from_python(other);
        } catch (...) {
          return true;
        }
      });
}

}  // namespace dlbridge::python
