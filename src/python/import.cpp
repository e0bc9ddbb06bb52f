// from_dlpack / to_dlpack / empty, and import_object: reading any array-like
// object into a dlbridge.Tensor, in one order for every caller (bindings.hpp).
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <string>

#include <dlbridge/exchange/plan_import.hpp>

#include "array_like.hpp"
#include "bindings.hpp"
#include "devices.hpp"
#include "dlpack_protocol.hpp"
#include "entry_points.hpp"
#include "libraries/libraries.hpp"
#include "sharing_seam.hpp"
#include "state_lock.hpp"

namespace dlbridge::python {

namespace {

// Applies what the producer could not, by the consumer rules of the core
// (plan_import): a move to another device, the copy that copy=True
// promises, or a copy=False refusal.
Tensor finish_import(Tensor t, const ExchangeRequest& request, bool copied_by_producer) {
  // plan_import's identity case, skipped: from_dlpack(x) of a tensor.
  if (asks_nothing(request)) return t;
  const ExchangePlan plan = plan_import(t.view(), request, copied_by_producer);
  return carry_out_plan(std::move(t), plan, request.stream);
}

// The imports under way: a producer whose __dlpack__ (or C exchange API)
// asks dlbridge to import that same object again, in the same thread, would
// recurse in C until the stack ran out. The guards form one list through the
// stack frames of the imports under way in every thread, each marked with
// its thread, under the state lock: a thread_local list would cost a call on
// each access in a dlopen'ed module, three per import (bench/callgrind.py).
// A guard may leave the list out of order (another
// thread's import can begin while a producer's Python code runs), so the
// list is doubly linked.
class ImportingGuard {
 public:
  explicit ImportingGuard(PyObject* x) : x_(x), thread_(PyThreadState_Get()) {
    StateLock lock(mutex_);
    for (const ImportingGuard* g = head_; g != nullptr; g = g->next_)
      if (g->x_ == x && g->thread_ == thread_)
        detail::fail(ErrorCode::producer_refused,
                     "The producer asked dlbridge to import the same object while dlbridge was importing it "
                     "(its __dlpack__ or C exchange API calls back into dlbridge).",
                     "Export the data in __dlpack__ itself (return a capsule) instead of importing self again.");
    next_ = head_;
    if (next_ != nullptr) next_->prev_ = this;
    head_ = this;
  }
  ~ImportingGuard() {
    StateLock lock(mutex_);
    (prev_ != nullptr ? prev_->next_ : head_) = next_;
    if (next_ != nullptr) next_->prev_ = prev_;
  }
  ImportingGuard(const ImportingGuard&) = delete;
  ImportingGuard& operator=(const ImportingGuard&) = delete;

 private:
  PyObject* x_;
  PyThreadState* thread_;
  ImportingGuard* prev_ = nullptr;
  ImportingGuard* next_ = nullptr;
  static ImportingGuard* head_;
  static StateMutex mutex_;
};
ImportingGuard* ImportingGuard::head_ = nullptr;
StateMutex ImportingGuard::mutex_;

// What a producer's refusal says; its type's name where its __str__ raises
// or gives no text (a producer's exception is not ours to trust).
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

// import_producer's answer once x's producer raised `refusal` (while it is
// the exception being handled). KeyboardInterrupt, SystemExit and
// dlbridge's own coded errors go on as they are. A BufferError may be
// NumPy's refusal of what dlbridge reads another way (an extension dtype, a
// read-only array before NumPy 2.1) or refuses with the fix (the other byte order). Every other exception of
// the producer is its refusal, raised again as the coded error it stands
// for (its library's rules first, ProducerError when dlbridge cannot tell),
// with the producer's exception as __cause__.
Tensor after_producer_refusal(nb::handle x, const ProducerType& known, const ExchangeRequest& request,
                              nb::python_error& refusal) {
  if (!refusal.matches(PyExc_Exception) || is_dlpack_error(refusal)) throw;
  if (refusal.matches(PyExc_BufferError)) {
    if (std::optional<Tensor> read = numpy::tensor_from_extension_dtype(x))
      return finish_import(std::move(*read), request, false);
    if (std::optional<Tensor> read = numpy::tensor_from_read_only_array(x))
      return finish_import(std::move(*read), request, false);
    numpy::check_byte_order(x);
  }
  const std::string message =
      std::string(nb::inst_name(x).c_str()) + ".__dlpack__ refused the export: " + exception_text(refusal.value());
  if (known.family == ProducerFamily::torch) torch::raise_known_refusal(x, message, refusal);
  raise_caused_by(Error(ErrorCode::producer_refused, message,
                        "The producer's reason is above; change the tensor (dtype, layout, device) as it asks, "
                        "or copy the data into a plain array first."),
                  refusal);
}

// How import_object keeps what it read: the one difference between its
// callers, a parameter of the one function that reads (read_object).
enum class Keep : bool { tensor, producer_struct };

// The producer case of read_object: its library's lazy state, its tensor
// (through ask_producer), what its library states of its legacy capsules,
// and the request applied; a refusal mapped by after_producer_refusal.
template <Keep keep>
Tensor import_producer(nb::handle x, ProducerType& known, const ExchangeRequest& request, HeldRead* held) {
  try {
    const ImportingGuard guard(x.ptr());
    TakenStruct taken;
    bool asked = false;
    if (known.family == ProducerFamily::torch) {
      torch::LazyBits bits = torch::read_lazy_bits(x);
      if (!bits.any()) {
        // The conjugate bit exists on complex dtypes only: the export says the dtype.
        try {
          taken = ask_producer(x, known, request);
          asked = true;
        } catch (nb::python_error& refusal) {
          // torch's __dlpack__ (a subclass's route) refuses a conjugate view,
          // which is resolved below as one the C exchange API exported.
          if (!refusal.matches(PyExc_Exception) || !torch::is_conjugate(x)) throw;
        }
        if (!asked || (torch::may_be_conjugate(taken.dl_tensor()) && torch::is_conjugate(x))) {
          taken = TakenStruct();
          asked = false;
          bits.conj = true;
        }
      }
      if (bits.any()) {
        const torch::LazyState lazy = torch::resolve_lazy_state(x, request, bits);
        if (lazy.replacement.is_valid()) {
          Tensor t = import_object(lazy.replacement, ExchangeRequest{});
          // What the resolve made is a copy, and says so (a writable caster argument refuses it).
          const uint64_t marks = (lazy.read_only ? DLBRIDGE_FLAG_READ_ONLY : 0) |
                                 (lazy.copied ? DLBRIDGE_FLAG_IS_COPIED : 0);
          if (marks != 0) t = t.with_view(t.view().with_flags(t.view().flags() | marks));
          if (lazy.copied) t.set_lazy_view_resolved();
          return finish_import(std::move(t), request, lazy.copied);
        }
      }
    }
    if (!known.export_keeps_memory && PyObject_CheckBuffer(x.ptr())) {
      // Its capsules' memory dies with the array: the buffer's view holds the
      // array itself, read-only as its legacy capsules would be.
      Tensor t = tensor_from_buffer(x);
      t = t.with_view(t.view().with_flags(t.view().flags() | DLBRIDGE_FLAG_READ_ONLY));
      return finish_import(std::move(t), request, false);
    }
    if (!asked) taken = ask_producer(x, known, request);
    // The library states what its legacy capsule could not: the memory may be written.
    const bool stated_writable = known.legacy_writable && !taken.is_versioned();
    // A caller that keeps the producer's struct asks nothing of the import.
    if (keep == Keep::producer_struct || asks_nothing(request)) {
      if (keep == Keep::producer_struct && taken.readable_in_place()) {
        // A copy the producer made stays marked: a writable caster argument refuses it.
        held->flags = stated_writable ? 0
                                      : imported_flags(taken.is_versioned(), taken.flags()) |
                                            (taken.flags() & DLBRIDGE_FLAG_IS_COPIED);
        held->taken = std::move(taken);
        return Tensor();
      }
      if (!stated_writable) return tensor_from_struct(std::move(taken));
      return tensor_from_struct(std::move(taken)).known_writable();
    }
    const bool copied = (taken.flags() & DLBRIDGE_FLAG_IS_COPIED) != 0;
    Tensor t = tensor_from_struct(std::move(taken));
    if (stated_writable) t = t.known_writable();
    return finish_import(std::move(t), request, copied);
  } catch (nb::python_error& refusal) {
    return after_producer_refusal(x, known, request, refusal);
  }
}

PyObject* from_dlpack_entry(PyObject*, PyObject* const* args, Py_ssize_t nargsf,
                            PyObject* kwnames) noexcept {
  return python_boundary<PyObject*>(nullptr, [&]() -> PyObject* {
    static PyObject* const names[] = {interned("device"), interned("copy")};
    const Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs != 1)
      throw nb::type_error(("from_dlpack() takes exactly one positional argument (" +
                            std::to_string(nargs) + " given).")
                               .c_str());
    PyObject* values[2] = {Py_None, Py_None};
    if (kwnames != nullptr) match_keywords("from_dlpack", names, 2, args + 1, kwnames, values);
    // Filled only where given: a std::optional returned and copied is
    // stored a byte at a time and read back whole, a store-forwarding stall
    // that the common call need not pay.
    ExchangeRequest request;
    if (values[0] != Py_None) request.device = dl_device_from_python(values[0]);
    if (values[1] != Py_None) request.copy = copy_from_python(values[1]);
    return wrap_tensor(import_object(args[0], request)).release().ptr();
  });
}

PyMethodDef from_dlpack_def = {
    "from_dlpack",
    reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(from_dlpack_entry)),
    METH_FASTCALL | METH_KEYWORDS,
    "from_dlpack(x, /, *, device=None, copy=None)\n--\n\n"
    "Import x (a DLPack producer, a DLPack capsule, or any object with the buffer "
    "protocol, __array_interface__ or __cuda_array_interface__) as a dlbridge.Tensor, "
    "zero-copy whenever the request allows. copy=True never aliases; copy=False never "
    "copies."};

// import_object: x read in the one order, what was read kept as `keep` says.
template <Keep keep>
Tensor read_object(nb::handle x, const ExchangeRequest& request, const char* entry, HeldRead* held) {
  try {
    ProducerType* known = recent_producer(Py_TYPE(x.ptr()));
    if (known == nullptr) {
      if (const Tensor* t = as_tensor(x)) return finish_import(*t, request, false);
      if (PyObject_TypeCheck(x.ptr(), tensor_type()))
        throw nb::type_error("This dlbridge.Tensor was never initialised (made by Tensor.__new__); "
                             "it holds no tensor.");
      if (PyCapsule_CheckExact(x.ptr()))
        return finish_import(tensor_from_capsule(x), request, false);
      known = find_producer(x);
    }
    if (known != nullptr) return import_producer<keep>(x, *known, request, held);
    // An object with both views is read through __array_interface__, which
    // names the element type: NumPy's datetime64 scalar exports its buffer as
    // eight 'B' bytes. Python's own byte containers have no such attribute.
    const bool byte_container = PyBytes_CheckExact(x.ptr()) || PyByteArray_CheckExact(x.ptr()) ||
                                PyMemoryView_Check(x.ptr());
    nb::object interface = byte_container ? nb::none() : attribute_or_none(x, "__array_interface__");
    if (interface.is_none() && PyObject_CheckBuffer(x.ptr()))
      return finish_import(tensor_from_buffer(x), request, false);
    if (!interface.is_none())
      return finish_import(tensor_from_array_interface(x, interface), request, false);
    nb::object cuda_interface = attribute_or_none(x, "__cuda_array_interface__");
    if (!cuda_interface.is_none())
      return finish_import(tensor_from_cuda_array_interface(x, cuda_interface), request, false);
    throw nb::type_error((std::string(entry) + " cannot read a " +
                          nb::inst_name(x).c_str() +
                          ": it has no __dlpack__, buffer protocol or __array_interface__.")
                             .c_str());
  } catch (...) {
    return second_look::after_failure(x, request);
  }
}

}  // namespace

Tensor import_object(nb::handle x, const ExchangeRequest& request, const char* entry) {
  return read_object<Keep::tensor>(x, request, entry, nullptr);
}

void import_object(nb::handle x, const char* entry, HeldRead& out) {
  Tensor read = read_object<Keep::producer_struct>(x, ExchangeRequest{}, entry, &out);
  if (!out.taken) out.tensor.emplace(std::move(read));
}

void bind_import(nb::module_& m) {
  add_function(m, &from_dlpack_def);
  m.def("to_dlpack",
        [](nb::handle x, nb::handle stream, nb::handle max_version, nb::handle dl_device,
           nb::handle copy) {
          Tensor t = import_object(x, ExchangeRequest{}, "dlbridge.to_dlpack");
          ExchangeRequest request{max_version_from_python(max_version),
                                  dl_device_from_python(dl_device), copy_from_python(copy),
                                  stream_from_python(stream), {}};
          return export_capsule(t, request);
        },
        nb::sig("def to_dlpack(x: object, /, *, stream: int | None = None, "
                "max_version: tuple[int, int] | None = None, dl_device: object | None = None, "
                "copy: bool | None = None) -> types.CapsuleType"),
        nb::arg(), nb::kw_only(), nb::arg("stream") = nb::none(),
        nb::arg("max_version") = nb::none(), nb::arg("dl_device") = nb::none(),
        nb::arg("copy") = nb::none(),
        "Export any array-like object as a DLPack capsule with the DLPack producer rules.");
  m.def("empty",
        [](nb::handle shape, nb::handle dtype, nb::handle device, bool shared) {
          Device target = device_from_python(device);
          (void)served_backend(target);
          std::vector<int64_t> dims;
          // An int is a 1-d shape, checked like a tuple's entries (a huge
          // one is a ValueError, not a failed cast).
          dims = ints_from_python(PyLong_Check(shape.ptr()) ? nb::make_tuple(shape) : shape, "shape");
          if (shared) return wrap_tensor(empty_shared_through_seam(dims, dtype_from_python(dtype), target));
          // Allocated on the target by its backend: nothing is uploaded.
          return wrap_tensor(tensor_from_managed(empty_on(target, dtype_from_python(dtype), dims)));
        },
        nb::arg("shape"), nb::arg("dtype") = "float32", nb::arg("device") = "cpu", nb::kw_only(),
        nb::arg("shared") = false,
        nb::sig("def empty(shape: int | tuple[int, ...] | list[int], dtype: object = 'float32', "
                "device: object = 'cpu', *, shared: bool = False) -> Tensor"),
        "A new, writable, compact tensor with uninitialised contents; shared=True places it "
        "in POSIX shared memory (zero-filled), or for device=\"cuda:N\" in CUDA memory "
        "exported with CUDA IPC, that pickles pass to other processes by name.");
}

}  // namespace dlbridge::python
