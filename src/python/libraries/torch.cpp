// torch's C++-side rules (libraries.hpp; the reasons are in
// docs/boundary.md): which exchange table is trusted, the lazy state
// dlbridge resolves itself, and what torch's refusals stand for.
#include <nanobind/stl/string.h>

#include <string>

#include "../entry_points.hpp"
#include "libraries.hpp"

namespace dlbridge::python::torch {

namespace {

bool truth(nb::handle value) {
  const int result = PyObject_IsTrue(value.ptr());
  if (result < 0) throw nb::python_error();
  return result != 0;
}

bool attribute_truth(nb::handle x, const char* name) { return truth(x.attr(name)); }

// The names asked on every import of a torch tensor, interned once. A name
// made from C text is decoded and hashed on each lookup, and misses the
// type's attribute cache (which takes interned names only), so each lookup
// walks torch.Tensor's MRO.
struct LazyStateNames {
  PyObject* requires_grad = interned("requires_grad");
  PyObject* is_conj = interned("is_conj");
  PyObject* is_neg = interned("is_neg");
};

const LazyStateNames& lazy_state_names() {
  static const LazyStateNames* names = new LazyStateNames();  // never destroyed: imports run at exit too
  return *names;
}

bool interned_attribute_truth(nb::handle x, PyObject* name) {
  PyObject* value = PyObject_GetAttr(x.ptr(), name);
  if (value == nullptr) throw nb::python_error();
  return truth(nb::steal(value));
}

// x.name() as a method call: no bound method is made (PyObject_VectorcallMethod
// looks the method up on the type, so a subclass's override still answers).
bool method_truth(nb::handle x, PyObject* name) {
  PyObject* self = x.ptr();
  PyObject* value = PyObject_VectorcallMethod(name, &self, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr);
  if (value == nullptr) throw nb::python_error();
  return truth(nb::steal(value));
}

[[noreturn]] void raise_coded(ErrorCode code, const std::string& message, const char* hint,
                              nb::python_error& cause) {
  raise_caused_by(Error(code, message, hint), cause);
}

}  // namespace

const abi::DLPackExchangeAPI* trusted_exchange_api(nb::handle real_class) {
  if (!PyType_Check(real_class.ptr())) return nullptr;
  return find_exchange_api(reinterpret_cast<PyTypeObject*>(real_class.ptr()));
}

LazyBits read_lazy_bits(nb::handle x) {
  const LazyStateNames& names = lazy_state_names();
  LazyBits bits;
  bits.grad = interned_attribute_truth(x, names.requires_grad);
  bits.neg = method_truth(x, names.is_neg);
  return bits;
}

bool may_be_conjugate(const abi::DLTensor* exported) noexcept {
  // NULL: a struct of another major version, whose dtype may not be read.
  return exported == nullptr || exported->dtype.code == abi::kDLComplex;
}

bool is_conjugate(nb::handle x) { return method_truth(x, lazy_state_names().is_conj); }

LazyState resolve_lazy_state(nb::handle x, const ExchangeRequest& request, LazyBits bits) {
  LazyState out;
  // Asked here only where the fast path did not: is_conj is false on every real dtype.
  const bool conj = bits.conj || is_conjugate(x);
  const bool neg = bits.neg;
  const bool grad = bits.grad;
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

void raise_known_refusal(nb::handle x, const std::string& message, nb::python_error& refusal) {
  // Asked only after a failure, so successful imports pay nothing.
  if (attribute_truth(x, "is_quantized"))
    raise_coded(ErrorCode::unsupported_dtype, message,
                "DLPack has no quantized dtypes: pass x.dequantize(), or x.int_repr() for the raw integers.",
                refusal);
  if (!nb::bool_(x.attr("layout").equal(nb::module_::import_("torch").attr("strided"))))
    raise_coded(ErrorCode::unsupported_layout, message, "DLPack describes strided tensors only: pass x.to_dense().",
                refusal);
  if (attribute_truth(x, "is_meta"))
    raise_coded(ErrorCode::device_unavailable,
                message + " (a meta tensor has no data, so it is not available to any consumer)",
                "Materialise it on a real device first.", refusal);
}

}  // namespace dlbridge::python::torch
