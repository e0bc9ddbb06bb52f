// The C++-side rules of particular libraries, one file each, beside the
// Python-side facts of python/dlbridge/libraries/<name>.py. Only what must
// run inside an import lives here: the library's own checks that dlbridge
// makes itself, its refusals as coded errors, the repairs of its data.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "../bindings.hpp"

namespace dlbridge::python {

// --- torch.cpp
namespace torch {

// The library name the package's facts give torch.Tensor (libraries/torch.py: NAME).
inline constexpr std::string_view name = "torch";

// The C exchange API of torch's real Tensor class, which dlbridge trusts
// because it makes torch's own checks itself (resolve_lazy_state); NULL when
// the class publishes none. Never a table a subclass or a look-alike sets.
const abi::DLPackExchangeAPI* trusted_exchange_api(nb::handle real_class);

// What to import instead of a torch tensor whose meaning is not its plain
// memory: its conjugate and negative bits mark a view whose memory holds the
// unconjugated (or unnegated) values, which neither __dlpack__ (neg) nor the
// C exchange API (both) says, so a resolved copy is imported (copy=False is
// refused with CopyRequiredError); a tensor that requires grad is imported
// as its detached, read-only view (torch's __dlpack__ refuses it, since a
// write would change a tensor autograd tracks; docs/boundary.md).
struct LazyState {
  nb::object replacement;  // invalid: import x itself
  bool copied = false;     // replacement is a new buffer
  bool read_only = false;  // the import must refuse writes
};
// What decides a lazy view, read as cheaply as torch allows: requires_grad
// (a property) and is_neg (a method: the negative bit exists on every
// dtype, e.g. x.conj().imag) before the export; the conjugate bit exists on
// complex dtypes only (torch asserts it), so is_conj is asked after the
// export and only where its dtype is complex (may_be_conjugate).
struct LazyBits {
  bool grad = false;
  bool neg = false;
  bool conj = false;  // known set; false: not asked yet, or clear
  bool any() const noexcept { return grad || neg || conj; }
};
LazyBits read_lazy_bits(nb::handle x);
bool may_be_conjugate(const abi::DLTensor* exported) noexcept;
bool is_conjugate(nb::handle x);
// The replacement for a tensor with some of `bits` set (is_conj asked here
// unless bits.conj is already known).
LazyState resolve_lazy_state(nb::handle x, const ExchangeRequest& request, LazyBits bits);

// torch's refusal of x raised as the coded error it stands for (a quantized,
// non-strided or meta tensor), with `refusal` as its cause; returns when it
// stands for none of these.
void raise_known_refusal(nb::handle x, const std::string& message, nb::python_error& refusal);

}  // namespace torch

// --- numpy.cpp
namespace numpy {

// UnsupportedDTypeError naming the fix when x's __array_interface__ says
// big-endian (DLPack has no byte order); returns otherwise. Asked after a
// producer refused x with a BufferError (NumPy's bare one).
void check_byte_order(nb::handle x);
// A NumPy array in the byte order this machine does not use, read as it is
// (its __array_interface__) with the native dtype of the same kind: the
// bytes of each value are swapped, which convert's plan undoes in its one
// copy; std::nullopt when x is no such array.
std::optional<Tensor> other_byte_order_tensor(nb::handle x);
// A NumPy array of an extension dtype (ml_dtypes' bfloat16, float8, ...),
// which NumPy refuses to export through DLPack, read through its
// __array_interface__; std::nullopt when x is not one.
std::optional<Tensor> tensor_from_extension_dtype(nb::handle x);
// A read-only NumPy array, which NumPy before 2.1 refuses to export through
// DLPack, read through its __array_interface__ (read-only kept);
// std::nullopt when x is not one.
std::optional<Tensor> tensor_from_read_only_array(nb::handle x);

}  // namespace numpy

// --- second_look.cpp
namespace second_look {

// Called while a failure to read x is the exception being handled: the
// second look of the library x's class comes from (a library module's
// second_look: pyarrow, TensorFlow), else the failure rethrown.
Tensor after_failure(nb::handle x, const ExchangeRequest& request);
// dlbridge._core._install_second_looks.
void bind(nb::module_& m);

}  // namespace second_look

}  // namespace dlbridge::python
