// Per-producer rules; see producer_policy.hpp and docs/boundary.md.
#include "producer_policy.hpp"

#include <nanobind/stl/string.h>

#include <string>

namespace dlbridge::python {

namespace {

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

namespace {
PyObject* producer_facts = nullptr;  // held for the process, as the package is
}

void install_producer_facts(nb::object facts) { py::replace(producer_facts, facts.release().ptr()); }

ProducerPolicy policy_for_type(PyTypeObject* type) {
  ProducerPolicy policy;
  if (producer_facts == nullptr) return policy;
  PyObject* args[] = {reinterpret_cast<PyObject*>(type)};
  nb::object facts = nb::steal(PyObject_Vectorcall(producer_facts, args, 1, nullptr));
  if (!facts.is_valid()) throw nb::python_error();
  if (facts.is_none()) return policy;  // generic: __dlpack__ only
  nb::tuple f = nb::borrow<nb::tuple>(facts);
  policy.legacy_writable = nb::cast<bool>(f[2]);
  if (utf8_of(f[0]) == "torch") {
    policy.family = ProducerFamily::torch;
    // The real torch.Tensor's table: a subclass (or a class calling itself
    // torch.Tensor, which the facts never name) that sets another table,
    // dlbridge's own included, is not asked.
    if (PyType_Check(f[1].ptr())) policy.exchange_api = find_exchange_api(reinterpret_cast<PyTypeObject*>(f[1].ptr()));
  }
  return policy;
}

LazyState resolve_lazy_state(nb::handle x, const ProducerPolicy& policy, const ExchangeRequest& request) {
  LazyState out;
  if (policy.family != ProducerFamily::torch) return out;
  const bool grad = attribute_truth(x, "requires_grad");
  const bool conj = method_truth(x, "is_conj"), neg = method_truth(x, "is_neg");
  if (!conj && !neg) {
    if (!grad) return out;
    // The same memory without the autograd graph, which torch's export
    // refuses to carry; read-only, since a write would change a tensor
    // autograd tracks without its knowledge.
    out.replacement = x.attr("detach")();
    out.read_only = true;
    return out;
  }
  const std::string what = conj ? "conjugate" : "negative";
  if (request.copy == false)
    detail::fail(ErrorCode::copy_required,
                 "The torch tensor has its " + what + " bit set: its memory holds the values "
                 "before the lazy " + (conj ? "conjugation" : "negation") +
                     ", so only a copy holds what the tensor means, and copy=False forbids one.",
                 "Pass copy=None, or call x.resolve_conj().resolve_neg() first.");
  nb::object values = grad ? x.attr("detach")() : nb::borrow(x);
  out.replacement = values.attr("resolve_conj")().attr("resolve_neg")();
  out.copied = true;
  return out;
}

namespace {

// What an exception says; its type's name where its __str__ raises or
// gives no text (a producer's exception is not ours to trust).
std::string exception_text(nb::handle exc) {
  PyObject* text = PyObject_Str(exc.ptr());
  if (text != nullptr) {
    Py_ssize_t size = 0;
    const char* data = PyUnicode_AsUTF8AndSize(text, &size);
    if (data != nullptr) {
      std::string out(data, size_t(size));
      Py_DECREF(text);
      return out;
    }
    Py_DECREF(text);
  }
  PyErr_Clear();
  return std::string(nb::inst_name(exc).c_str()) + " (its message could not be read)";
}

}  // namespace

void raise_producer_refusal(nb::handle x, const ProducerPolicy& policy,
                            nb::python_error& refusal) {
  const std::string producer = std::string(nb::inst_name(x).c_str());
  const std::string reason = exception_text(refusal.value());
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
  }
  raise_coded("producer_refused", message,
              "The producer's reason is above; change the tensor (dtype, layout, device) as it "
              "asks, or copy the data into a plain array first.", refusal);
}

}  // namespace dlbridge::python
