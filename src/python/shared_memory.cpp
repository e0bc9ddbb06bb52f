// Tensors in POSIX shared memory (include/dlbridge/shared_memory.hpp) and
// their ties to Python's process machinery:
// - each process gives its references back when it exits normally, through
//   a multiprocessing finaliser that runs last (after Queue feeder threads
//   have pickled what they still hold, and in multiprocessing's children,
//   which leave through os._exit and skip atexit);
// - the creator registers the name with multiprocessing's resource tracker,
//   which unlinks it if the program ends with references that were never
//   given back (a killed process, a pickle never loaded); whoever unlinks
//   it normally unregisters it again when it shares that tracker.
#include <nanobind/stl/string.h>

#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "pickling.hpp"

namespace dlbridge::python {

namespace {

// (st_dev, st_ino) of this process's resource-tracker pipe: the same in
// every process of one multiprocessing program, so it names the tracker.
// Starts the tracker when start is true; (0, 0) when there is none.
std::pair<uint64_t, uint64_t> tracker_tag(bool start) {
  nb::module_ tracker = nb::module_::import_("multiprocessing.resource_tracker");
  int fd = -1;
  if (start) {
    fd = nb::cast<int>(tracker.attr("getfd")());
  } else {
    // Asking getfd() would start a tracker in a process that has none.
    nb::object fd_object = nb::getattr(tracker.attr("_resource_tracker"), "_fd", nb::none());
    if (fd_object.is_none()) return {0, 0};
    fd = nb::cast<int>(fd_object);
  }
  struct stat info {};
  if (::fstat(fd, &info) != 0) return {0, 0};
  return {uint64_t(info.st_dev), uint64_t(info.st_ino)};
}

void forget_unlinked(const SharedSegment& segment) {
  const auto tag = segment.cleanup_tag();
  if (tag.first == 0 && tag.second == 0) return;
  if (tracker_tag(false) != tag) return;  // another program's tracker: it cannot be told
  nb::module_::import_("multiprocessing.resource_tracker")
      .attr("unregister")(segment.name(), "shared_memory");
}

// Releases this process's reference to a segment when the last tensor over
// it dies, and tells the tracker when that unlinked the name.
struct SegmentOwner {
  std::shared_ptr<SharedSegment> segment;

  ~SegmentOwner() {
    if (!segment->holds_reference()) return;
    if (!Py_IsInitialized() || python_is_finalizing()) {
      segment->release();
      return;
    }
    PyGILState_STATE state = PyGILState_Ensure();
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    try {
      if (segment->release()) forget_unlinked(*segment);
    } catch (...) {
      PyErr_Clear();  // the name is unlinked; only the tracker's note is left behind
    }
    PyErr_Restore(type, value, traceback);
    PyGILState_Release(state);
  }
};

}  // namespace

// Registers the exit-time release once per process (a forked child
// inherits the flag but not the finaliser, so the pid is what counts).
void prepare_process() {
  static pid_t prepared_for = 0;
  if (prepared_for == ::getpid()) return;
  nb::module_ core = nb::module_::import_("dlbridge._core");
  nb::module_::import_("multiprocessing.util")
      .attr("Finalize")(nb::none(), core.attr("_release_shared_memory"),
                        nb::arg("exitpriority") = -100);
  prepared_for = ::getpid();
}

std::shared_ptr<void> hold_segment(std::shared_ptr<SharedSegment> segment) {
  auto owner = std::make_shared<SegmentOwner>();
  owner->segment = std::move(segment);
  return owner;
}

std::shared_ptr<SharedSegment> create_tracked_segment(int64_t bytes) {
  prepare_process();
  std::shared_ptr<SharedSegment> segment = SharedSegment::create(bytes);
  const auto tag = tracker_tag(true);
  nb::module_::import_("multiprocessing.resource_tracker")
      .attr("register")(segment->name(), "shared_memory");
  segment->set_cleanup_tag(tag.first, tag.second);
  return segment;
}

namespace {

Tensor tensor_in_segment(std::shared_ptr<SharedSegment> segment, const TensorView& view) {
  SharedSegmentRegistry::instance().add(segment);
  auto owner = std::make_shared<SegmentOwner>();
  owner->segment = std::move(segment);
  return tensor_from_managed(
      ManagedTensor::adopt(make_versioned(view, std::move(owner), view.flags())));
}

// A new compact host tensor in a new segment, zero-filled; flags as given.
Tensor allocate_shared(DType dtype, const std::vector<int64_t>& shape, uint64_t flags) {
  // The core computes the size and validates dtype and shape, as for empty().
  BufferLayout layout;
  layout.dtype = dtype;
  layout.shape = shape;
  layout.strides.resize(shape.size());
  for (int64_t extent : shape)
    if (extent < 0)
      detail::fail(ErrorCode::invalid_argument,
                   "shape entries must be >= 0, got " + std::to_string(extent) + ".");
  validate_dtype(dtype);
  if (shape.size() > size_t(max_ndim))
    detail::fail(ErrorCode::invalid_argument, "ndim " + std::to_string(shape.size()) +
                                                  " exceeds " + std::to_string(max_ndim) + ".");
  compact_strides(int32_t(shape.size()), shape.data(), layout.strides.data());
  layout.flags = flags & buffer_layout_flags;
  const auto count = element_count(int32_t(shape.size()), shape.data());
  const auto bytes = count ? compact_nbytes(*count, dtype, flags & DLBRIDGE_FLAG_IS_SUBBYTE_TYPE_PADDED)
                           : std::nullopt;
  if (!bytes)
    detail::fail(ErrorCode::invalid_argument,
                 "The requested tensor is larger than the address space.");
  std::shared_ptr<SharedSegment> segment = create_tracked_segment(*bytes);
  TensorView view = view_in_buffer(segment->data(), segment->data_bytes(), layout);
  return tensor_in_segment(std::move(segment), view);
}

nb::object share_memory(nb::handle self) {
  const Tensor& t = initialised_tensor(self, "share_memory");
  const TensorView& v = t.view();
  if (v.device().type == abi::kDLCUDA) return share_device_memory(self);
  if (!is_host_accessible(v.device().type))
    detail::fail(ErrorCode::device_unavailable,
                 "share_memory() shares host memory and CUDA device memory; this tensor is on " +
                     to_string(v.device()) + ", which no process-sharing mechanism serves.",
                 "Share a host copy: t.copy(device='cpu').share_memory().");
  if (find_shared_segment(v)) return nb::borrow(self);
  const uint64_t padded = v.flags() & DLBRIDGE_FLAG_IS_SUBBYTE_TYPE_PADDED;
  Tensor out = allocate_shared(v.dtype(), std::vector<int64_t>(v.shape(), v.shape() + v.ndim()),
                               padded);
  {
    nb::gil_scoped_release unlocked;
    copy_into(v.with_device(Device{}), out.view());
  }
  if (v.readonly())
    out = Tensor(out.storage(), out.view().with_flags(out.view().flags() | DLBRIDGE_FLAG_READ_ONLY));
  return wrap_tensor(std::move(out));
}

// At exit: every reference this process still holds goes back.
void release_shared_memory() {
  release_device_shares();
  for (const auto& segment : SharedSegmentRegistry::instance().release_all())
    forget_unlinked(*segment);
}

}  // namespace

std::shared_ptr<SharedSegment> find_shared_segment(const TensorView& v) {
  const ByteExtent extent = v.extent();
  const void* begin = static_cast<const char*>(v.data()) + extent.low;
  return SharedSegmentRegistry::instance().find(begin, extent.bytes());
}

Tensor empty_shared(const std::vector<int64_t>& shape, DType dtype, Device device) {
  if (device.type == abi::kDLCUDA) return empty_shared_device(shape, dtype, device);
  if (device != Device{})
    detail::fail(ErrorCode::device_unavailable,
                 "shared=True places tensors in host shared memory or CUDA device memory, not on " +
                     to_string(device) + ".",
                 "Pass device='cpu' or device='cuda:N' with shared=True.");
  return allocate_shared(dtype, shape, 0);
}

Tensor open_shared_tensor(const std::string& name, uint64_t ticket, const BufferLayout& layout) {
  prepare_process();
  std::shared_ptr<SharedSegment> segment = SharedSegment::open(name, ticket);
  // Owned before the layout is checked, so that a refused layout gives the
  // ticket's reference back.
  auto owner = std::make_shared<SegmentOwner>();
  owner->segment = segment;
  TensorView view = view_in_buffer(segment->data(), segment->data_bytes(), layout);
  SharedSegmentRegistry::instance().add(segment);
  return tensor_from_managed(
      ManagedTensor::adopt(make_versioned(view, std::move(owner), view.flags())));
}

void return_shared_ticket(const std::string& name, uint64_t ticket) noexcept {
  try {
    // Mapping redeems the ticket; the mapping's own reference goes when it closes.
    SharedSegment::open(name, ticket);
  } catch (...) {
    // A name or ticket that cannot be opened holds no reference to give back.
  }
}

void bind_shared_memory(nb::module_& m) {
  auto cls = nb::borrow<nb::class_<Tensor>>(nb::handle(reinterpret_cast<PyObject*>(tensor_type())));
  cls.def("share_memory", &share_memory,
          nb::sig("def share_memory(self) -> Tensor"),
          "This tensor if it already lives in shared memory, else a copy in a new POSIX "
          "shared-memory segment (compact, same flags); for a CUDA tensor, a device copy "
          "exported with CUDA IPC. Pickles of it carry a segment's name, so other processes on "
          "this machine map the same pages (or open the same device memory).")
      .def_prop_ro("is_shared",
                   [](const Tensor& t) {
                     return find_shared_segment(t.view()) != nullptr ||
                            device_share_segment(t.view()) != nullptr;
                   },
                   "True when the tensor's memory is a shared-memory segment, or CUDA memory "
                   "exported for other processes, that pickles pass by name.");
  m.def("_release_shared_memory", &release_shared_memory,
        "Gives back every shared-memory reference this process holds (run at exit).");
  m.def("_shared_memory_info",
        [](const Tensor& t) -> nb::object {
          std::shared_ptr<SharedSegment> segment = find_shared_segment(t.view());
          if (!segment) segment = device_share_segment(t.view());
          if (!segment) return nb::none();
          return nb::make_tuple(segment->name(), segment->references());
        },
        "(segment name, reference count) of a shared tensor (for CUDA memory: of the segment "
        "that counts its openers), else None; for tests.");
}

}  // namespace dlbridge::python
