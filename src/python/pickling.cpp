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
    PyGILState_STATE state = PyGILState_Ensure();
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

// _core._rebuild_tensor(buffer, layout, private_bytes=False), which every
// buffer pickle reaches through dlbridge._pickle. private_bytes marks bytes made for
// this pickle alone (protocol < 5) of a writable tensor: they arrive as an
// immutable bytes object, and the tensor gets a writable copy of them.
nb::object rebuild_tensor(nb::handle payload, nb::handle layout_value, bool private_bytes) {
  BufferLayout layout = layout_from_python(layout_value);
  auto received = std::make_shared<ReceivedBuffer>();
  if (PyObject_GetBuffer(payload.ptr(), &received->buffer, PyBUF_RECORDS_RO) != 0)
    throw nb::python_error();
  received->exported = true;
  const Py_buffer& b = received->buffer;
  if (!PyBuffer_IsContiguous(&b, 'C'))
    bad_layout("its buffer is not contiguous.");
  const bool buffer_readonly = b.readonly != 0;
  TensorView view = view_in_buffer(b.buf, int64_t(b.len), layout);
  const bool aligned =
      reinterpret_cast<uintptr_t>(view.data()) % needed_alignment(view.dtype()) == 0;
  if ((private_bytes && buffer_readonly && !view.readonly()) || !aligned) {
    // The bytes as they are, with the same layout, in memory of our own.
    std::shared_ptr<void> copy = detail::allocate_host(int64_t(b.len));
    std::memcpy(copy.get(), b.buf, size_t(b.len));
    view = view_in_buffer(copy.get(), int64_t(b.len), layout);
    return wrap_tensor(tensor_from_managed(
        ManagedTensor::adopt(make_versioned(view, std::move(copy), layout.flags))));
  }
  const uint64_t flags = layout.flags | (buffer_readonly ? DLBRIDGE_FLAG_READ_ONLY : 0);
  return wrap_tensor(tensor_from_managed(
      ManagedTensor::adopt(make_versioned(view.with_flags(flags), std::move(received), flags))));
}

nb::object rebuild_shared_tensor(const std::string& name, nb::handle ticket, nb::handle layout) {
  const uint64_t number = uint64_t(layout_int(ticket, "the ticket", 0, INT64_MAX));
  BufferLayout parsed;
  try {
    parsed = layout_from_python(layout);
  } catch (...) {
    return_shared_ticket(name, number);
    throw;
  }
  return wrap_tensor(open_shared_tensor(name, number, parsed));
}

nb::object rebuild_cuda_tensor(const std::string& name, nb::handle ticket, nb::handle layout) {
  const uint64_t number = uint64_t(layout_int(ticket, "the ticket", 0, INT64_MAX));
  BufferLayout parsed;
  try {
    parsed = layout_from_python(layout);
  } catch (...) {
    return_shared_ticket(name, number);  // the record's segment carries the ticket
    throw;
  }
  return wrap_tensor(open_device_share(name, number, parsed));
}

nb::object reduce_ex(nb::handle self, int protocol) {
  const Tensor& t = initialised_tensor(self, "__reduce_ex__");
  const TensorView& v = t.view();
  // Pickle names a reconstructor by module and name, which a function of
  // the extension lacks: dlbridge._pickle forwards to the ones below.
  if (std::optional<DeviceShareTicket> share = device_share_ticket(v))
    return nb::make_tuple(nb::module_::import_("dlbridge._pickle").attr("rebuild_cuda_tensor"),
                          nb::make_tuple(share->name, share->ticket,
                                         layout_to_python(share->layout)));
  if (!is_host_accessible(v.device().type))
    detail::fail(ErrorCode::device_unavailable,
                 "A tensor on " + to_string(v.device()) +
                     " cannot be pickled: its memory is not available to the host, and dlbridge "
                     "never moves data between devices silently.",
                 v.device().type == abi::kDLCUDA
                     ? "Share it with processes on this machine (pickle t.share_memory()), or copy "
                       "it to the host: pickle.dumps(t.copy(device='cpu'))."
                     : "Copy it to the host first: pickle.dumps(t.copy(device='cpu')).");
  nb::module_ reconstructors = nb::module_::import_("dlbridge._pickle");
  if (std::shared_ptr<SharedSegment> segment = find_shared_segment(v)) {
    BufferLayout layout = buffer_layout_of(v, ByteExtent{});
    layout.byte_offset = int64_t(reinterpret_cast<uintptr_t>(v.data()) -
                                 reinterpret_cast<uintptr_t>(segment->data()));
    const uint64_t ticket = segment->issue_ticket();
    return nb::make_tuple(reconstructors.attr("rebuild_shared_tensor"),
                          nb::make_tuple(segment->name(), ticket, layout_to_python(layout)));
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
      nb::gil_scoped_release unlocked;
      compact = copy_to_compact(v.with_device(Device{}));
    }
    bytes.owner = tensor_from_managed(std::move(compact));
    bytes.data = bytes.owner.view().data();
    bytes.bytes = bytes.owner.view().nbytes();
    layout = buffer_layout_of(bytes.owner.view(), ByteExtent{0, bytes.bytes});
    layout.flags = v.flags() & buffer_layout_flags;
  }
  bytes.readonly = v.readonly();
  nb::object rebuild = reconstructors.attr("rebuild_tensor");
  if (protocol >= 5) {
    nb::object exporter = nb::cast(std::move(bytes));
    nb::object buffer = nb::steal(py::pickle_buffer(exporter.ptr()));
    if (!buffer.is_valid()) throw nb::python_error();
    return nb::make_tuple(rebuild, nb::make_tuple(buffer, layout_to_python(layout)));
  }
  nb::object copy = nb::steal(
      PyBytes_FromStringAndSize(static_cast<const char*>(bytes.data), Py_ssize_t(bytes.bytes)));
  if (!copy.is_valid()) throw nb::python_error();
  return nb::make_tuple(rebuild,
                        nb::make_tuple(copy, layout_to_python(layout), !bytes.readonly));
}

// copy.deepcopy: new memory with the same values, shape, dtype and flags
// (compact strides, as copy() gives).
nb::object deep_copy(const Tensor& t) {
  Tensor out = copy_tensor(t, t.view().device());
  if (t.view().readonly())
    out = Tensor(out.storage(), out.view().with_flags(out.view().flags() | DLBRIDGE_FLAG_READ_ONLY));
  return wrap_tensor(std::move(out));
}

}  // namespace

void bind_pickling(nb::module_& m) {
  nb::class_<TensorBytes>(m, "_TensorBytes", nb::type_slots(tensor_bytes_slots),
                          "The bytes of a dlbridge.Tensor as a flat buffer, for pickle.PickleBuffer.");
  m.def("_rebuild_tensor", &rebuild_tensor, nb::arg("buffer"), nb::arg("layout"),
        nb::arg("private_bytes") = false,
        "Rebuilds a pickled dlbridge.Tensor over its buffer (used by pickle).");
  m.def("_rebuild_shared_tensor", &rebuild_shared_tensor, nb::arg("name"), nb::arg("ticket"),
        nb::arg("layout"),
        "Rebuilds a pickled shared-memory dlbridge.Tensor (used by pickle).");
  m.def("_rebuild_cuda_tensor", &rebuild_cuda_tensor, nb::arg("name"), nb::arg("ticket"),
        nb::arg("layout"),
        "Rebuilds a pickled CUDA dlbridge.Tensor shared through CUDA IPC (used by pickle).");
  auto cls = nb::borrow<nb::class_<Tensor>>(nb::handle(reinterpret_cast<PyObject*>(tensor_type())));
  cls.def("__reduce_ex__", &reduce_ex, nb::arg("protocol"),
          nb::sig("def __reduce_ex__(self, protocol: int) -> tuple[object, tuple[object, ...]]"),
          "Pickle support: protocol 5 sends the data as one out-of-band buffer, without a "
          "copy when the tensor is dense; older protocols send one bytes copy; a shared tensor "
          "(share_memory(), host or CUDA) sends only its segment's name.")
      .def("__copy__", [](const Tensor& t) { return wrap_tensor(t); },
           "A new Tensor object over the same memory.")
      .def("__deepcopy__", [](const Tensor& t, nb::handle) { return deep_copy(t); },
           nb::arg("memo").none(), "A new tensor with its own copy of the data and the same flags.");
  bind_shared_memory(m);
}

}  // namespace dlbridge::python
