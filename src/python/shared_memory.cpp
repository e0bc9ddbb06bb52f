// Tensors in POSIX shared memory (include/dlbridge/platform/shared_memory.hpp) and
// their ties to Python's process machinery:
// - each process gives its references back when it exits normally, through
//   a multiprocessing finaliser that runs last (after Queue feeder threads
//   have pickled what they still hold, and in multiprocessing's children,
//   which leave through os._exit and skip atexit);
// - a program's cleanup service is multiprocessing's resource tracker: every
//   process of one program shares it, so the tracker's pipe names the
//   program. The core tells it when the program starts and stops holding a
//   segment; the tracker removes, when its program ends, only names the
//   program still held (a killed process's, a pickle never loaded).
#include <nanobind/stl/string.h>

#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <mutex>
#include <set>
#include <string>

#include "gil.hpp"
#include "pickling.hpp"

namespace dlbridge::python {

namespace {

bool python_usable() noexcept { return Py_IsInitialized() && !python_is_finalizing(); }

// Runs body with the GIL, from any thread; nothing once the interpreter is
// finalizing. body runs Python code, so interpreter exit may end the thread
// inside it: it holds raw references only (no destructor of ours touches
// Python on the way out) and the thread parks in calling_python. Python
// errors are cleared: a tracker call that fails costs only the cleanup
// record.
template <typename Body>
void with_gil(Body&& body) noexcept {
  if (!python_usable()) return;
  const PyGILState_STATE state = ensure_gil();  // nests when this thread holds it already
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  calling_python(body);
  PyErr_Clear();
  PyErr_Restore(type, value, traceback);
  PyGILState_Release(state);
}

// multiprocessing.resource_tracker.<function>(name, "shared_memory"),
// with raw references: true when it returned. Call inside with_gil. Not
// noexcept, as neither is tracker_key: the unwind of a thread that exit ends
// in the call must reach calling_python, and a noexcept frame on its way
// would end the process instead.
bool tell_tracker(const char* function, const std::string& name) {
  PyObject* tracker = PyImport_ImportModule("multiprocessing.resource_tracker");
  if (tracker == nullptr) return false;
  PyObject* result = PyObject_CallMethod(tracker, function, "ss", name.c_str(), "shared_memory");
  Py_DECREF(tracker);
  Py_XDECREF(result);
  return result != nullptr;
}

// The program's key: (st_dev, st_ino) of this process's resource-tracker
// pipe, the same in every process of one multiprocessing program; 0 when
// there is none. Starts the tracker when the process has none. Call inside
// with_gil.
uint64_t tracker_key() {
  PyObject* tracker = PyImport_ImportModule("multiprocessing.resource_tracker");
  if (tracker == nullptr) return 0;
  PyObject* fd_object = PyObject_CallMethod(tracker, "getfd", nullptr);
  Py_DECREF(tracker);
  if (fd_object == nullptr) return 0;
  const long fd = PyLong_Check(fd_object) ? PyLong_AsLong(fd_object) : -1;
  Py_DECREF(fd_object);
  struct stat info {};
  if (fd < 0 || fd > INT_MAX || ::fstat(int(fd), &info) != 0) return 0;
  const uint64_t key = uint64_t(info.st_dev) * 0x9e3779b97f4a7c15ull ^ uint64_t(info.st_ino);
  return key != 0 ? key : 1;
}

class PythonTracker final : public ProgramTracker {
 public:
  // The lock is never held across a Python call: the call may release the
  // GIL, and a thread that holds the GIL and waits for the lock would then
  // never let the first one finish.
  uint64_t program() noexcept override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (key_pid_ == ::getpid()) return key_;
    }
    uint64_t key = 0;
    with_gil([&] { key = tracker_key(); });
    if (key == 0) return 0;  // no tracker (yet): asked again next time
    std::lock_guard<std::mutex> lock(mutex_);
    key_ = key;
    key_pid_ = ::getpid();
    return key_;
  }

  bool hold(const std::string& name) noexcept override {
    bool held = false;
    with_gil([&] { held = tell_tracker("register", name); });
    return held;
  }

  void let_go(const std::string& name) noexcept override {
    with_gil([&] { tell_tracker("unregister", name); });
  }

  void settle_later(const std::string& name) noexcept override {
    try {
      std::lock_guard<std::mutex> lock(mutex_);
      if (pending_pid_ != ::getpid()) {  // a forked child: the parent's list is the parent's
        pending_.clear();
        pending_pid_ = ::getpid();
      }
      pending_.insert(name);
    } catch (...) {
      // Out of memory: the tracker may then warn about this name at exit.
    }
  }

  // The names to settle again, taken out of the list.
  std::set<std::string> take_pending() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (pending_pid_ != ::getpid()) return {};
    return std::move(pending_);
  }

  size_t pending_count() {
    std::lock_guard<std::mutex> lock(mutex_);
    return pending_pid_ == ::getpid() ? pending_.size() : 0;
  }

 private:
  std::mutex mutex_;
  pid_t key_pid_ = 0;
  uint64_t key_ = 0;
  pid_t pending_pid_ = 0;
  std::set<std::string> pending_;
};

PythonTracker& tracker() {
  static auto* t = new PythonTracker;  // never destroyed: segments use it at exit
  return *t;
}

// Settles every pending name now; keeps none (a name still held by this
// program comes back with its holder's next release).
void settle_pending() {
  ProcessSharesLock locked;
  for (const std::string& name : tracker().take_pending()) SharedSegment::settle(name, tracker());
}

// Releases this process's reference to a segment when the last tensor over
// it dies.
struct SegmentOwner {
  std::shared_ptr<SharedSegment> segment;

  ~SegmentOwner() {
    if (!segment->holds_reference()) return;
    if (!python_usable()) {
      segment->release();  // the tracker is not told: it cannot be, now
      return;
    }
    PyGILState_STATE state = ensure_gil();
    {
      ProcessSharesLock locked;
      segment->release();
    }
    // A long-lived process that passes many names on settles them as it
    // goes, not all at exit.
    if (tracker().pending_count() > 1024) settle_pending();
    PyGILState_Release(state);
  }
};

}  // namespace

ProcessSharesLock::ProcessSharesLock() {
  if (mutex().try_lock()) return;
  if (python_usable()) {
    GilReleased unlocked;
    mutex().lock();
  } else {
    mutex().lock();
  }
}

ProcessSharesLock::~ProcessSharesLock() { mutex().unlock(); }

std::recursive_mutex& ProcessSharesLock::mutex() {
  static auto* m = new std::recursive_mutex;  // never destroyed: used at exit
  return *m;
}

// Registers the exit-time release once per process (a forked child
// inherits the flag but not the finaliser, so the pid is what counts).
void prepare_process() {
  static pid_t prepared_for = 0;
  if (prepared_for == ::getpid()) return;
  // multiprocessing.util.Finalize(None, _share._release_shared_memory,
  // exitpriority=-100), with raw references (see with_gil).
  const bool done = calling_python([] {
    PyObject* core = PyImport_ImportModule("dlbridge._share");
    PyObject* util = PyImport_ImportModule("multiprocessing.util");
    PyObject* release = core ? PyObject_GetAttrString(core, "_release_shared_memory") : nullptr;
    PyObject* finalize = util ? PyObject_GetAttrString(util, "Finalize") : nullptr;
    PyObject* args = release ? PyTuple_Pack(2, Py_None, release) : nullptr;
    PyObject* priority = PyLong_FromLong(-100);
    PyObject* keywords = priority ? PyDict_New() : nullptr;
    const bool ready = args && finalize && keywords &&
                       PyDict_SetItemString(keywords, "exitpriority", priority) == 0;
    PyObject* result = ready ? PyObject_Call(finalize, args, keywords) : nullptr;
    for (PyObject* o : {core, util, release, finalize, args, priority, keywords, result}) Py_XDECREF(o);
    return result != nullptr;
  });
  if (!done) throw nb::python_error();
  prepared_for = ::getpid();
}

std::shared_ptr<void> hold_segment(std::shared_ptr<SharedSegment> segment) {
  auto owner = std::make_shared<SegmentOwner>();
  owner->segment = std::move(segment);
  return owner;
}

std::shared_ptr<SharedSegment> create_tracked_segment(int64_t bytes) {
  prepare_process();
  return SharedSegment::create(bytes, &tracker());
}

std::shared_ptr<SharedSegment> open_tracked_segment(const std::string& name, uint64_t ticket) {
  prepare_process();
  ProcessSharesLock locked;
  return SharedSegment::open(name, ticket, &tracker());
}

uint64_t issue_tracked_ticket(SharedSegment& segment) {
  prepare_process();  // a forked child that sends on must also settle at its exit
  ProcessSharesLock locked;
  return segment.issue_ticket();
}

namespace {

Tensor tensor_in_segment(std::shared_ptr<SharedSegment> segment, const TensorView& view) {
  SharedSegmentRegistry::instance().add(segment);
  return tensor_over(view, hold_segment(std::move(segment)));
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
    GilReleased unlocked;
    copy_into(v.with_device(Device{}), out.view());
  }
  return wrap_tensor(with_state_of(t, std::move(out)));
}

// At exit: every reference this process still holds goes back, then the
// names it passed on are settled.
void release_shared_memory() {
  release_device_shares();
  {
    ProcessSharesLock locked;
    SharedSegmentRegistry::instance().release_all();
  }
  settle_pending();
}

}  // namespace

Tensor with_state_of(const Tensor& source, Tensor copy) {
  if (!source.view().readonly()) return copy;
  const TensorView& v = copy.view();
  Tensor out(copy.storage(), v.with_flags(v.flags() | DLBRIDGE_FLAG_READ_ONLY));
  if (source.writability_unknown()) out.set_writability_unknown();
  return out;
}

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
  std::shared_ptr<SharedSegment> segment = open_tracked_segment(name, ticket);
  // Owned before the layout is checked, so that a refused layout gives the
  // ticket's reference back.
  std::shared_ptr<void> owner = hold_segment(segment);
  TensorView view = view_in_buffer(segment->data(), segment->data_bytes(), layout);
  SharedSegmentRegistry::instance().add(segment);
  return tensor_from_managed(
      ManagedTensor::adopt(make_versioned(view, std::move(owner), view.flags())));
}

void return_shared_ticket(const std::string& name, uint64_t ticket) noexcept {
  try {
    // Mapping redeems the ticket; the mapping's own reference goes at once.
    std::shared_ptr<SharedSegment> segment = open_tracked_segment(name, ticket);
    ProcessSharesLock locked;
    segment->release();
  } catch (...) {
    // A name or ticket that cannot be opened holds no reference to give back.
  }
}

void bind_shared_memory(nb::module_& m, SharingHooks& hooks) {
  // dlbridge.Tensor's share_memory and is_shared (bound by the core,
  // sharing_seam.cpp), and empty(shared=True).
  hooks.share_memory = &share_memory;
  hooks.is_shared = [](const Tensor& t) {
    return find_shared_segment(t.view()) != nullptr || device_share_segment(t.view()) != nullptr;
  };
  hooks.empty_shared = &empty_shared;
  m.def("_release_shared_memory", &release_shared_memory,
        "Gives back every shared-memory reference this process holds (run at exit).");
  m.def("_shared_memory_info",
        [](nb::handle tensor) -> nb::object {
          const Tensor& t = initialised_tensor(tensor, "_shared_memory_info");
          std::shared_ptr<SharedSegment> segment = find_shared_segment(t.view());
          if (!segment) segment = device_share_segment(t.view());
          if (!segment) return nb::none();
          return nb::make_tuple(segment->name(), segment->references(),
                                segment->program_references());
        },
        "(segment name, reference count, this program's share of it) of a shared tensor (for "
        "CUDA memory: of the segment that counts its openers), else None; for tests.");
}

}  // namespace dlbridge::python
