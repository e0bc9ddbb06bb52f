// Per-producer rules; see producer_policy.hpp and docs/boundary.md.
#include "producer_policy.hpp"

#include <nanobind/stl/string.h>

#include <string>

namespace dlbridge::python {

namespace {

// torch.Tensor in type's MRO, or NULL.
PyObject* torch_tensor_base(PyTypeObject* type) {
  nb::object mro_ref = py::type_mro(type);
  PyObject* mro = mro_ref.ptr();
  if (mro == nullptr || !PyTuple_Check(mro)) return nullptr;
  for (Py_ssize_t i = 0; i < py::tuple_size(mro); ++i) {
    PyObject* base = py::tuple_item(mro, i);
    if (py::type_name(reinterpret_cast<PyTypeObject*>(base)) != "Tensor") continue;
    nb::object module = attribute_or_none(base, "__module__");
    if (PyUnicode_Check(module.ptr()) && utf8_of(module) == "torch") return base;
  }
  return nullptr;
}

bool method_truth(nb::handle x, const char* method) {
  nb::object value = x.attr(method)();
  const int result = PyObject_IsTrue(value.ptr());
  if (result < 0) throw nb::python_error();
  return result != 0;
}

// The refusal as an instance of dlbridge.errors' class for code, chained
// to the producer's exception.
[[noreturn]] void raise_coded(const char* code, const std::string& message,
                              const std::string& hint, nb::python_error& cause) {
  ErrorCode known = ErrorCode::producer_refused;
  find_error_code(code, known);
  nb::handle cls = python_error_class(known);
  nb::object error = cls(message, hint);
  PyException_SetCause(error.ptr(), Py_NewRef(cause.value().ptr()));
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error.ptr())), error.ptr());
  throw nb::python_error();
}

bool attribute_truth(nb::handle x, const char* name) {
  const int result = PyObject_IsTrue(x.attr(name).ptr());
  if (result < 0) throw nb::python_error();
  return result != 0;
}

}  // namespace

ProducerPolicy policy_for_type(PyTypeObject* type) {
  ProducerPolicy policy;
  PyObject* torch_tensor = torch_tensor_base(type);
  if (torch_tensor == nullptr) return policy;  // generic: __dlpack__ only
  policy.family = ProducerFamily::torch;
  // A subclass that replaces __dlpack__ has checks of its own that the
  // exchange API would skip.
  nb::object own = attribute_or_none(reinterpret_cast<PyObject*>(type), "__dlpack__");
  nb::object torch_own = attribute_or_none(torch_tensor, "__dlpack__");
  policy.trust_exchange_api = own.ptr() == torch_own.ptr();
  return policy;
}

nb::object resolve_lazy_state(nb::handle x, const ProducerPolicy& policy,
                              const ExchangeRequest& request) {
  if (policy.family != ProducerFamily::torch) return nb::none();
  const bool conj = method_truth(x, "is_conj"), neg = method_truth(x, "is_neg");
  if (!conj && !neg) return nb::none();
  const std::string what = conj ? "conjugate" : "negative";
  if (request.copy == false)
    detail::fail(ErrorCode::copy_required,
                 "The torch tensor has its " + what + " bit set: its memory holds the values "
                 "before the lazy " + (conj ? "conjugation" : "negation") +
                     ", so only a copy holds what the tensor means, and copy=False forbids one.",
                 "Pass copy=None, or call x.resolve_conj().resolve_neg() first.");
  return x.attr("resolve_conj")().attr("resolve_neg")();
}

void raise_producer_refusal(nb::handle x, const ProducerPolicy& policy,
                            nb::python_error& refusal) {
  const std::string producer = std::string(nb::inst_name(x).c_str());
  const std::string reason = utf8_of(nb::str(refusal.value()));
  const std::string message = producer + ".__dlpack__ refused the export: " + reason;
  if (policy.family == ProducerFamily::torch) {
    // Asked only after a failure, so successful imports pay nothing.
    if (attribute_truth(x, "is_quantized"))
      raise_coded("unsupported_dtype", message, "DLPack has no quantized dtypes: pass "
                  "x.dequantize(), or x.int_repr() for the raw integers.", refusal);
    if (!nb::bool_(x.attr("layout").equal(nb::module_::import_("torch").attr("strided"))))
      raise_coded("unsupported_layout", message,
                  "DLPack describes strided tensors only: pass x.to_dense().", refusal);
    if (attribute_truth(x, "is_meta"))
      raise_coded("device_unavailable", message + " (a meta tensor has no data, so it is not "
                  "available to any consumer)", "Materialise it on a real device first.",
                  refusal);
    if (attribute_truth(x, "requires_grad"))
      raise_coded("producer_refused", message, "Pass x.detach() to export the values "
                  "without the autograd graph.", refusal);
  }
  raise_coded("producer_refused", message,
              "The producer's reason is above; change the tensor (dtype, layout, device) as it "
              "asks, or copy the data into a plain array first.", refusal);
}

}  // namespace dlbridge::python
