// Pickling dlbridge.Tensor. The data travels as one buffer, the layout as a
// small tuple beside it:
//   protocol >= 5: a pickle.PickleBuffer over the tensor's own bytes when
//     they are dense (any order of dims), so an out-of-band consumer (Ray,
//     Dask, pickle.dumps with a buffer_callback) copies nothing here; a
//     tensor with gaps or overlaps sends a compact copy instead.
//   protocol < 5: the same bytes, copied into one bytes object.
//   shared memory: only the segment's name and a ticket (shared_memory.cpp).
// On load the tensor wraps the received buffer without copying it, read-only
// when the buffer is, after the core has checked the layout against the
// buffer's length (view_in_buffer): a pickle may come from anywhere.
#include <nanobind/stl/string.h>

#include "gil.hpp"
#include "pickling.hpp"

#include <cstring>
#include <string>

namespace dlbridge::python {

namespace {

// The wire format's version, first in every layout tuple: a future layout
// can be told apart and refused with a clear error.
constexpr int64_t layout_format = 1;

// The bytes of a tensor as a one-dimensional unsigned-byte buffer, for
// pickle.PickleBuffer; the Tensor keeps the memory alive while any view of
// the buffer exists.
struct TensorBytes {
  Tensor owner;
  void* data = nullptr;
  int64_t bytes = 0;
  bool readonly = false;
};

int tensor_bytes_getbuffer(PyObject* self, Py_buffer* view, int flags) {
  const TensorBytes& b = *nb::inst_ptr<TensorBytes>(self);
  return PyBuffer_FillInfo(view, self, b.data, Py_ssize_t(b.bytes), b.readonly ? 1 : 0, flags);
}

PyType_Slot tensor_bytes_slots[] = {
    {Py_bf_getbuffer, reinterpret_cast<void*>(tensor_bytes_getbuffer)},
    {0, nullptr},
};

nb::tuple layout_to_python(const BufferLayout& layout) {
  nb::list shape, strides;
  for (int64_t extent : layout.shape) shape.append(extent);
  for (int64_t stride : layout.strides) strides.append(stride);
  const DType t = layout.dtype;
  return nb::make_tuple(layout_format, nb::make_tuple(t.code, t.bits, t.lanes), nb::tuple(shape),
                        nb::tuple(strides), layout.byte_offset, layout.flags);
}

[[noreturn]] void bad_layout(const std::string& what) {
  detail::fail(ErrorCode::invalid_tensor, "Invalid pickled tensor layout: " + what,
               "The data was damaged or forged in transit; pickle the tensor again.");
}

[[noreturn]] void bad_field(const std::string& what) {
  detail::fail(ErrorCode::invalid_tensor, "Invalid pickled tensor: " + what,
               "The data was damaged or forged in transit; pickle the tensor again.");
}

// The fields of a reconstructor's call, as pickle passes them: between
// `least` and `most` positional values.
void check_field_count(const nb::args& fields, size_t least, size_t most, const char* what) {
  if (fields.size() < least || fields.size() > most)
    bad_field(std::string(what) + " takes " + std::to_string(least) + " to " +
              std::to_string(most) + " fields, not " + std::to_string(fields.size()) + ".");
}

// A flag of the pickle: True or False itself, nothing that merely converts.
bool field_flag(const nb::args& fields, size_t index, const char* what) {
  if (index >= fields.size()) return false;
  PyObject* value = fields[index].ptr();
  if (value == Py_True) return true;
  if (value == Py_False) return false;
  bad_field(std::string(what) + " is not True or False.");
}

std::string field_name(nb::handle value) {
  if (!PyUnicode_Check(value.ptr())) bad_field("the shared-memory name is not a str.");
  try {
    return utf8_of(value);
  } catch (const nb::python_error&) {
    bad_field("the shared-memory name is not valid text.");
  }
}

int64_t layout_int(nb::handle value, const char* what, int64_t low, int64_t high) {
  int64_t n = 0;
  const IntRead read = read_int64(value.ptr(), n);
  if (read == IntRead::not_an_int) bad_layout(std::string(what) + " is not an int.");
  if (read == IntRead::too_big || n < low || n > high)
    bad_layout(std::string(what) + " is outside " + std::to_string(low) + ".." +
               std::to_string(high) + ".");
  return n;
}

nb::tuple layout_tuple(nb::handle value, const char* what, Py_ssize_t size_or_any) {
  if (!PyTuple_Check(value.ptr())) bad_layout(std::string(what) + " is not a tuple.");
  nb::tuple t = nb::borrow<nb::tuple>(value);
  if (size_or_any >= 0 && Py_ssize_t(t.size()) != size_or_any)
    bad_layout(std::string(what) + " has " + std::to_string(t.size()) + " entries, not " +
               std::to_string(size_or_any) + ".");
  if (Py_ssize_t(t.size()) > max_ndim) bad_layout(std::string(what) + " has too many entries.");
  return t;
}

BufferLayout layout_from_python(nb::handle value) {
  nb::tuple fields = layout_tuple(value, "the layout", 6);
  if (const int64_t format = layout_int(fields[0], "the format", INT64_MIN, INT64_MAX);
      format != layout_format)
    detail::fail(ErrorCode::unsupported_version,
                 "The tensor was pickled in layout format " + std::to_string(format) +
                     "; this dlbridge reads format " +
                     std::to_string(layout_format) + ".",
                 "Load it with the dlbridge version that pickled it.");
  nb::tuple dtype = layout_tuple(fields[1], "the dtype", 3);
  BufferLayout out;
  out.dtype = DType{uint8_t(layout_int(dtype[0], "the dtype code", 0, 255)),
                    uint8_t(layout_int(dtype[1], "the dtype bits", 0, 255)),
                    uint16_t(layout_int(dtype[2], "the dtype lanes", 0, 65535))};
  for (nb::handle extent : layout_tuple(fields[2], "the shape", -1))
    out.shape.push_back(layout_int(extent, "a shape entry", INT64_MIN, INT64_MAX));
  for (nb::handle stride : layout_tuple(fields[3], "the strides", -1))
    out.strides.push_back(layout_int(stride, "a stride", INT64_MIN, INT64_MAX));
  out.byte_offset = layout_int(fields[4], "the byte offset", INT64_MIN, INT64_MAX);
  out.flags = uint64_t(layout_int(fields[5], "the flags", 0, INT64_MAX));
  return out;
}

// Keeps the object that delivered a pickle's buffer alive, with its buffer
// exported, for as long as the tensor over it lives.
struct ReceivedBuffer {
  Py_buffer buffer{};
  bool exported = false;

  ~ReceivedBuffer() {
    if (!exported || !Py_IsInitialized() || python_is_finalizing()) return;
    PyGILState_STATE state = ensure_gil();
    PyBuffer_Release(&buffer);
    PyGILState_Release(state);
  }
};

// The alignment element 0 must have for typed access: the largest power of
// two that divides the element's width, at most 16.
uint64_t needed_alignment(DType t) {
  uint64_t bytes = t.element_bytes(), alignment = 1;
  while (alignment < 16 && bytes % (alignment * 2) == 0) alignment *= 2;
  return alignment;
}

// _share._rebuild_tensor(buffer, layout, private_bytes=False,
// writability_unknown=False), which every buffer pickle reaches through
// dlbridge._pickle. private_bytes marks bytes made for this pickle alone
// (protocol < 5 of a writable tensor, or any pickle of a tensor whose
// writability is unknown): when they arrive read-only (pickle's immutable
// bytes), the tensor gets a writable copy of them. writability_unknown: the
// tensor came from a legacy capsule, and may leave as one again.
nb::object rebuild_tensor(nb::args fields) {
  check_field_count(fields, 2, 4, "a pickled tensor");
  BufferLayout layout = layout_from_python(fields[1]);
  const bool private_bytes = field_flag(fields, 2, "private_bytes");
  const bool writability_unknown = field_flag(fields, 3, "writability_unknown");
  auto received = std::make_shared<ReceivedBuffer>();
  if (PyObject_GetBuffer(fields[0].ptr(), &received->buffer, PyBUF_RECORDS_RO) != 0) {
    // Whatever the payload's exporter raised (a released memoryview's
    // ValueError, a TypeError, a BufferError) says the same: no buffer.
    // KeyboardInterrupt and SystemExit are no answer about the payload.
    nb::python_error refused;
    if (!refused.matches(PyExc_Exception)) throw refused;
    std::string kind;
    try {
      kind = " (" + nb::cast<std::string>(refused.type().attr("__name__")) + ")";
    } catch (...) {
    }
    bad_field("its payload is not a buffer" + kind + ".");
  }
  received->exported = true;
  const Py_buffer& b = received->buffer;
  if (!PyBuffer_IsContiguous(&b, 'C'))
    bad_layout("its buffer is not contiguous.");
  const bool buffer_readonly = b.readonly != 0;
  TensorView view = view_in_buffer(b.buf, int64_t(b.len), layout);
  const bool aligned =
      reinterpret_cast<uintptr_t>(view.data()) % needed_alignment(view.dtype()) == 0;
  // Writable memory is what a tensor of unknown writability needs: a legacy
  // export of it claims nothing about the memory.
  const bool needs_writable = !view.readonly() || writability_unknown;
  const bool copied = (private_bytes && buffer_readonly && needs_writable) || !aligned;
  Tensor out;
  if (copied) {
    // The bytes as they are, with the same layout, in memory of our own.
    std::shared_ptr<void> copy = detail::allocate_host(int64_t(b.len));
    std::memcpy(copy.get(), b.buf, size_t(b.len));
    view = view_in_buffer(copy.get(), int64_t(b.len), layout);
    out = tensor_from_managed(
        ManagedTensor::adopt(make_versioned(view, std::move(copy), layout.flags)));
  } else {
    const uint64_t flags = layout.flags | (buffer_readonly ? DLBRIDGE_FLAG_READ_ONLY : 0);
    out = tensor_from_managed(
        ManagedTensor::adopt(make_versioned(view.with_flags(flags), std::move(received), flags)));
  }
  // Memory that arrived read-only and was not copied is read-only for sure.
  if (writability_unknown && out.view().readonly() && (copied || !buffer_readonly))
    out.set_writability_unknown();
  return wrap_tensor(std::move(out));
}

// (name, ticket, layout[, writability_unknown]) of a shared pickle, checked;
// a damaged layout gives the ticket back before it is refused.
struct SharedFields {
  std::string name;
  uint64_t ticket = 0;
  BufferLayout layout;
  bool writability_unknown = false;
};

SharedFields shared_fields(const nb::args& fields, const char* what) {
  check_field_count(fields, 3, 4, what);
  SharedFields out;
  out.name = field_name(fields[0]);
  out.ticket = uint64_t(layout_int(fields[1], "the ticket", 0, INT64_MAX));
  try {
    out.layout = layout_from_python(fields[2]);
    out.writability_unknown = field_flag(fields, 3, "writability_unknown");
  } catch (...) {
    return_shared_ticket(out.name, out.ticket);
    throw;
  }
  return out;
}

nb::object wrap_with_state(Tensor t, bool writability_unknown) {
  if (writability_unknown && t.view().readonly()) t.set_writability_unknown();
  return wrap_tensor(std::move(t));
}

nb::object rebuild_shared_tensor(nb::args fields) {
  SharedFields f = shared_fields(fields, "a pickled shared tensor");
  return wrap_with_state(open_shared_tensor(f.name, f.ticket, f.layout), f.writability_unknown);
}

nb::object rebuild_cuda_tensor(nb::args fields) {
  SharedFields f = shared_fields(fields, "a pickled CUDA tensor");
  return wrap_with_state(open_device_share(f.name, f.ticket, f.layout), f.writability_unknown);
}

// The arguments of a reconstructor call: the fields, then the tensor's
// "writability unknown" state when it has it (absent otherwise, so that
// other pickles keep the form older releases read).
nb::tuple reconstructor_args(std::initializer_list<nb::object> fields, const Tensor& t) {
  nb::list out;
  for (const nb::object& field : fields) out.append(field);
  if (t.writability_unknown()) out.append(true);
  return nb::tuple(out);
}

nb::object reduce_ex(nb::handle self, int protocol) {
  const Tensor& t = initialised_tensor(self, "__reduce_ex__");
  const TensorView& v = t.view();
  // Pickle names a reconstructor by module and name, which a function of
  // the extension lacks: dlbridge._pickle forwards to the ones below.
  nb::module_ reconstructors = nb::module_::import_("dlbridge._pickle");
  if (std::optional<DeviceShareTicket> share = device_share_ticket(v))
    return nb::make_tuple(reconstructors.attr("rebuild_cuda_tensor"),
                          reconstructor_args({nb::cast(share->name), nb::cast(share->ticket),
                                              layout_to_python(share->layout)},
                                             t));
  if (!is_host_accessible(v.device().type))
    detail::fail(ErrorCode::device_unavailable,
                 "A tensor on " + to_string(v.device()) +
                     " cannot be pickled: its memory is not available to the host, and dlbridge "
                     "never moves data between devices silently.",
                 v.device().type == abi::kDLCUDA
                     ? "Share it with processes on this machine (pickle t.share_memory()), or copy "
                       "it to the host: pickle.dumps(t.copy(device='cpu'))."
                     : "Copy it to the host first: pickle.dumps(t.copy(device='cpu')).");
  if (std::shared_ptr<SharedSegment> segment = find_shared_segment(v)) {
    BufferLayout layout = buffer_layout_of(v, ByteExtent{});
    layout.byte_offset = int64_t(reinterpret_cast<uintptr_t>(v.data()) -
                                 reinterpret_cast<uintptr_t>(segment->data()));
    const uint64_t ticket = issue_tracked_ticket(*segment);
    return nb::make_tuple(reconstructors.attr("rebuild_shared_tensor"),
                          reconstructor_args({nb::cast(segment->name()), nb::cast(ticket),
                                              layout_to_python(layout)},
                                             t));
  }
  TensorBytes bytes;
  BufferLayout layout;
  if (std::optional<ByteExtent> extent = dense_extent(v)) {
    bytes.owner = t;
    bytes.data = static_cast<char*>(v.data()) + extent->low;
    bytes.bytes = extent->bytes();
    layout = buffer_layout_of(v, *extent);
  } else {
    ManagedTensor compact;
    {
      GilReleased unlocked;
      compact = copy_to_compact(v.with_device(Device{}));
    }
    bytes.owner = tensor_from_managed(std::move(compact));
    bytes.data = bytes.owner.view().data();
    bytes.bytes = bytes.owner.view().nbytes();
    layout = buffer_layout_of(bytes.owner.view(), ByteExtent{0, bytes.bytes});
    layout.flags = v.flags() & buffer_layout_flags;
  }
  bytes.readonly = v.readonly();
  // Bytes the receiver may have to copy into memory it can write: a
  // writable tensor's below protocol 5 (they arrive as immutable bytes), and
  // any pickle's of a tensor whose writability is unknown.
  const bool private_bytes = t.writability_unknown() || (protocol < 5 && !bytes.readonly);
  nb::object rebuild = reconstructors.attr("rebuild_tensor");
  nb::object payload;
  if (protocol >= 5) {
    nb::object exporter = nb::cast(std::move(bytes));
    payload = nb::steal(py::pickle_buffer(exporter.ptr()));
  } else {
    payload = nb::steal(
        PyBytes_FromStringAndSize(static_cast<const char*>(bytes.data), Py_ssize_t(bytes.bytes)));
  }
  if (!payload.is_valid()) throw nb::python_error();
  if (!private_bytes) return nb::make_tuple(rebuild, nb::make_tuple(payload, layout_to_python(layout)));
  return nb::make_tuple(rebuild, reconstructor_args({payload, layout_to_python(layout),
                                                     nb::bool_(true)},
                                                    t));
}

// copy.deepcopy: new memory with the same values, shape, dtype and state
// (compact strides, as copy() gives).
nb::object deep_copy(const Tensor& t) {
  return wrap_tensor(with_state_of(t, copy_tensor(t, t.view().device())));
}

}  // namespace

void bind_pickling(nb::module_& m, SharingHooks& hooks) {
  nb::class_<TensorBytes>(m, "_TensorBytes", nb::type_slots(tensor_bytes_slots),
                          "The bytes of a dlbridge.Tensor as a flat buffer, for pickle.PickleBuffer.");
  // The fields arrive as pickle passes them, positionally, and each is
  // checked here: a forged pickle gets InvalidTensorError, not a binding's
  // signature.
  m.def("_rebuild_tensor", &rebuild_tensor,
        nb::sig("def _rebuild_tensor(*fields: object) -> dlbridge._core.Tensor"),
        "Rebuilds a pickled dlbridge.Tensor over its buffer: (buffer, layout[, private_bytes[, "
        "writability_unknown]]) (used by pickle).");
  m.def("_rebuild_shared_tensor", &rebuild_shared_tensor,
        nb::sig("def _rebuild_shared_tensor(*fields: object) -> dlbridge._core.Tensor"),
        "Rebuilds a pickled shared-memory dlbridge.Tensor: (name, ticket, layout[, "
        "writability_unknown]) (used by pickle).");
  m.def("_rebuild_cuda_tensor", &rebuild_cuda_tensor,
        nb::sig("def _rebuild_cuda_tensor(*fields: object) -> dlbridge._core.Tensor"),
        "Rebuilds a pickled CUDA dlbridge.Tensor shared through CUDA IPC: (name, ticket, "
        "layout[, writability_unknown]) (used by pickle).");
  // dlbridge.Tensor's __reduce_ex__, __copy__ and __deepcopy__ (bound by
  // the core, sharing_seam.cpp).
  hooks.reduce_ex = &reduce_ex;
  hooks.copy = [](const Tensor& t) { return wrap_tensor(t); };
  hooks.deep_copy = &deep_copy;
  bind_shared_memory(m, hooks);
}

}  // namespace dlbridge::python
