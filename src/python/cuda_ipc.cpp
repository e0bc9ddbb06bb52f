// CUDA device memory that other processes on the machine open (CUDA IPC),
// behind t.share_memory() and empty(..., device="cuda:N", shared=True).
//
// The exporter copies the tensor into an allocation of its own (so the
// handle names a cudaMalloc base, and nothing else lives there) and writes a
// record of it into a small POSIX shared-memory segment: the 64-byte memory
// handle, an interprocess event's handle, the device, the size and its pid.
// The size is the exporter's claim: a receiver sizes the memory by what its
// runtime reports for the opened allocation, and refuses a record that
// claims more.
// A pickle carries only that segment's name, a ticket and the layout, as a
// host share does (shared_memory.cpp), so the segment's reference count is
// also the count of processes that may still use the device memory.
//
// Lifetime:
// - each receiving process opens the handle once per pickle it loads and
//   closes it (cudaIpcCloseMemHandle) when the last tensor over that open
//   dies, then gives back its segment reference;
// - the exporter frees the allocation only when the count is zero: when its
//   own last tensor dies first, the allocation is parked and freed at the
//   next share, pickle or exit that finds the count at zero;
// - at exit the exporter gives back its references and waits, at most
//   DLBRIDGE_CUDA_IPC_EXIT_WAIT seconds (default 5), for other processes to
//   close what it shared: CUDA frees a process's memory when it exits. If
//   they do not, it says so on stderr, and their tensors are invalid.
// Ordering: the event is recorded on the exporter's legacy default stream
// (where dlbridge's device data is ready) at every pickle; the receiver's
// legacy default stream waits for it, so the host blocks on neither side.
#include <nanobind/stl/string.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include <dlbridge/backend/cuda_ipc.hpp>
#include <dlbridge/copy/transfer.hpp>

#include "gil.hpp"
#include "pickling.hpp"

namespace dlbridge::python {

namespace {

namespace ipc = backend::cuda_ipc;
namespace cuda = backend::cuda;

// The data of an export's segment.
struct ShareRecord {
  static constexpr uint64_t magic_value = 0x3143504955434c44ull;  // "DLCUIPC1"
  uint64_t magic;  // written last
  int64_t bytes;   // of the allocation, as the exporter claims it
  int32_t device;
  int32_t pid;  // the exporter
  cuda::ipc_mem_handle memory;
  cuda::ipc_event_handle event;
};

// An allocation this process exported, owned by the tensors over it.
struct DeviceExport {
  std::shared_ptr<SharedSegment> segment;
  std::shared_ptr<void> reference;  // this process's count in the segment
  std::shared_ptr<void> memory;     // the allocation; freed by its backend
  Device device;
  void* base = nullptr;
  int64_t bytes = 0;
  cuda::cuda_event event = nullptr;
  pid_t pid = ::getpid();

  ~DeviceExport();
};

// Allocations whose exporter let go while other processes had them open.
struct Parked {
  std::shared_ptr<SharedSegment> segment;
  std::shared_ptr<void> memory;
  cuda::cuda_event event;
};

// An open of another process's allocation, owned by the tensors over it.
// It may be sent on: a pickle of it names the same segment (and so the
// exporter's handle), for a third process to open.
struct DeviceImport {
  std::mutex mutex;
  bool open = true;
  std::shared_ptr<SharedSegment> segment;
  std::shared_ptr<void> reference;
  Device device;
  void* base = nullptr;
  int64_t bytes = 0;
  pid_t pid = ::getpid();

  // Closes the handle, then gives back the reference, once.
  void close() {
    std::shared_ptr<void> reference_out;
    std::lock_guard<std::mutex> lock(mutex);
    if (!open || pid != ::getpid()) return;
    open = false;
    ipc::close_memory(device.id, base);
    reference_out = std::move(reference);
  }
  ~DeviceImport() { close(); }
};

struct Shares {
  std::mutex mutex;
  std::vector<std::weak_ptr<DeviceExport>> exports;
  std::vector<std::weak_ptr<DeviceImport>> imports;
  std::vector<Parked> parked;
};

Shares& shares() {
  static auto* s = new Shares;  // never destroyed: tensors die at exit too
  return *s;
}

template <typename T>
void prune(std::vector<std::weak_ptr<T>>& list) {
  list.erase(std::remove_if(list.begin(), list.end(), [](const auto& w) { return w.expired(); }),
             list.end());
}

// Frees parked allocations that no process has open any more.
void collect_parked() {
  std::vector<Parked> done;
  {
    std::lock_guard<std::mutex> lock(shares().mutex);
    auto& parked = shares().parked;
    for (auto it = parked.begin(); it != parked.end();) {
      if (it->segment->references() == 0) {
        done.push_back(std::move(*it));
        it = parked.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (Parked& p : done) ipc::destroy_event(p.event);
}

DeviceExport::~DeviceExport() {
  if (pid != ::getpid()) return;  // a forked child: the allocation is the parent's
  reference.reset();
  if (segment && segment->references() > 0) {
    std::lock_guard<std::mutex> lock(shares().mutex);
    shares().parked.push_back(Parked{segment, std::move(memory), event});
    return;
  }
  ipc::destroy_event(event);
  memory.reset();
}

// The live entries of one of the lists, of this process. The list is
// copied under the lock and the entries locked outside it: the last owner of
// an entry may drop it here, and its destructor takes the lock (and the GIL).
template <typename T>
std::vector<std::shared_ptr<T>> live(std::vector<std::weak_ptr<T>> Shares::*list) {
  std::vector<std::weak_ptr<T>> copy;
  {
    std::lock_guard<std::mutex> lock(shares().mutex);
    copy = shares().*list;
  }
  std::vector<std::shared_ptr<T>> out;
  for (const auto& weak : copy)
    if (auto entry = weak.lock(); entry && entry->pid == ::getpid()) out.push_back(entry);
  return out;
}

template <typename T>
void remember(std::vector<std::weak_ptr<T>> Shares::*list, const std::shared_ptr<T>& entry) {
  std::lock_guard<std::mutex> lock(shares().mutex);
  auto& entries = shares().*list;
  prune(entries);
  entries.push_back(entry);
}

// The entry whose memory holds all of v's elements.
template <typename T>
std::shared_ptr<T> find_share(const TensorView& v, std::vector<std::weak_ptr<T>> Shares::*list) {
  if (v.device().type != abi::kDLCUDA) return nullptr;
  const ByteExtent extent = v.extent();
  const auto first = reinterpret_cast<uintptr_t>(v.data()) + uintptr_t(extent.low);
  for (auto& entry : live(list)) {
    const auto base = reinterpret_cast<uintptr_t>(entry->base);
    if (entry->device == v.device() && first >= base && first - base <= uint64_t(entry->bytes) &&
        uint64_t(extent.bytes()) <= uint64_t(entry->bytes) - (first - base))
      return entry;
  }
  return nullptr;
}

std::shared_ptr<DeviceExport> find_export(const TensorView& v) { return find_share(v, &Shares::exports); }
std::shared_ptr<DeviceImport> find_import(const TensorView& v) { return find_share(v, &Shares::imports); }

std::shared_ptr<DeviceExport> find_export_named(const std::string& name) {
  for (auto& e : live(&Shares::exports))
    if (e->segment->name() == name) return e;
  return nullptr;
}

// A tensor over `memory`, a compact device tensor that this process
// allocated, exported to other processes.
Tensor exported_device_tensor(ManagedTensor memory, uint64_t flags) {
  prepare_process();
  collect_parked();
  const TensorView view = memory.view();
  auto e = std::make_shared<DeviceExport>();
  e->device = view.device();
  e->base = view.data();
  e->bytes = view.nbytes();
  e->memory = std::make_shared<ManagedTensor>(std::move(memory));
  e->segment = create_tracked_segment(int64_t(sizeof(ShareRecord)));
  e->reference = hold_segment(e->segment);
  ShareRecord record{};
  record.bytes = e->bytes;
  record.device = e->device.id;
  record.pid = int32_t(e->pid);
  record.memory = ipc::export_memory(e->device.id, e->base);
  e->event = ipc::create_event(e->device.id);
  record.event = ipc::record_event(e->device.id, e->event);
  auto* out = static_cast<ShareRecord*>(e->segment->data());
  std::memcpy(reinterpret_cast<char*>(out) + sizeof(uint64_t),
              reinterpret_cast<const char*>(&record) + sizeof(uint64_t),
              sizeof record - sizeof(uint64_t));
  // Published last: a reader that sees the magic sees the whole record.
  __atomic_store_n(&out->magic, ShareRecord::magic_value, __ATOMIC_RELEASE);
  remember(&Shares::exports, e);
  return tensor_over(view.with_flags(flags), std::move(e));
}

double exit_wait_seconds() {
  const char* text = std::getenv("DLBRIDGE_CUDA_IPC_EXIT_WAIT");
  if (text == nullptr || *text == '\0') return 5.0;
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  return (*end == '\0' && value >= 0) ? value : 5.0;
}

}  // namespace

std::shared_ptr<SharedSegment> device_share_segment(const TensorView& v) {
  if (auto e = find_export(v)) return e->segment;
  if (auto i = find_import(v)) return i->segment;
  return nullptr;
}

nb::object share_device_memory(nb::handle self) {
  const Tensor& t = initialised_tensor(self, "share_memory");
  const TensorView& v = t.view();
  if (find_export(v) || find_import(v)) return nb::borrow(self);
  TransferOptions options;
  options.flags = 0;
  ManagedTensor copy;
  {
    GilReleased unlocked;
    copy = copy_to_device(v, v.device(), options);
  }
  const uint64_t flags = copy.view().flags();
  return wrap_tensor(with_state_of(t, exported_device_tensor(std::move(copy), flags)));
}

Tensor empty_shared_device(const std::vector<int64_t>& shape, DType dtype, Device device) {
  return exported_device_tensor(empty_on(device, dtype, shape), 0);
}

std::optional<DeviceShareTicket> device_share_ticket(const TensorView& v) {
  std::shared_ptr<SharedSegment> segment;
  const void* base = nullptr;
  if (std::shared_ptr<DeviceExport> e = find_export(v)) {
    collect_parked();
    // Whatever this process queued on the tensor so far is what the
    // receiver waits for.
    ipc::record_event(e->device.id, e->event);
    segment = e->segment;
    base = e->base;
  } else if (std::shared_ptr<DeviceImport> i = find_import(v)) {
    // Sent on: the event is the exporter's, so this process's own work on
    // the memory is finished here, on the host, before it goes.
    ipc::synchronize_default_stream(i->device.id);
    segment = i->segment;
    base = i->base;
  } else {
    return std::nullopt;
  }
  DeviceShareTicket out{segment->name(), 0, buffer_layout_of(v, ByteExtent{})};
  out.layout.byte_offset =
      int64_t(reinterpret_cast<uintptr_t>(v.data()) - reinterpret_cast<uintptr_t>(base));
  out.ticket = issue_tracked_ticket(*segment);
  return out;
}

Tensor open_device_share(const std::string& name, uint64_t ticket, const BufferLayout& layout) {
  std::shared_ptr<SharedSegment> segment = open_tracked_segment(name, ticket);
  // Held before anything is checked, so that a refusal gives it back.
  std::shared_ptr<void> reference = hold_segment(segment);
  const auto* shared = static_cast<const ShareRecord*>(segment->data());
  if (segment->data_bytes() != int64_t(sizeof(ShareRecord)) ||
      __atomic_load_n(&shared->magic, __ATOMIC_ACQUIRE) != ShareRecord::magic_value)
    detail::fail(ErrorCode::invalid_tensor,
                 "Invalid pickled CUDA tensor: shared memory " + name +
                     " holds no record of shared device memory.",
                 "The data was damaged or forged in transit; pickle the tensor again.");
  ShareRecord record;
  std::memcpy(&record, shared, sizeof record);
  if (record.bytes < 0 || record.device < 0)
    detail::fail(ErrorCode::invalid_tensor,
                 "Invalid pickled CUDA tensor: shared memory " + name + " holds a damaged record.",
                 "The data was damaged or forged in transit; pickle the tensor again.");
  const Device device{abi::kDLCUDA, record.device};
  if (record.pid == int32_t(::getpid())) {
    // Loaded where it was made (CUDA opens handles only in other
    // processes): the exporter's own memory.
    std::shared_ptr<DeviceExport> e = find_export_named(name);
    if (!e)
      detail::fail(ErrorCode::device_unavailable,
                   "The CUDA memory this pickle names was shared by this process, which has "
                   "freed it.",
                   "Keep the shared tensor alive until every pickle of it is loaded.");
    const TensorView view = view_in_buffer(e->base, e->bytes, layout, device);
    auto owner = std::make_shared<std::pair<std::shared_ptr<void>, std::shared_ptr<DeviceExport>>>(
        std::move(reference), std::move(e));
    return tensor_over(view, std::move(owner));
  }
  (void)served_backend(device);
  auto import = std::make_shared<DeviceImport>();
  import->device = device;
  import->segment = segment;
  import->base = ipc::open_memory(device.id, record.memory);
  import->reference = std::move(reference);
  remember(&Shares::imports, import);
  // The opened allocation's extent, from the runtime: the record's size is
  // only what the exporter (or a forger) says.
  const ipc::AllocationRange range = ipc::allocation_range(device.id, import->base);
  const auto opened = reinterpret_cast<uintptr_t>(import->base);
  const auto first = reinterpret_cast<uintptr_t>(range.base);
  if (opened < first || opened - first > range.bytes || range.bytes - (opened - first) > size_t(INT64_MAX))
    detail::fail(ErrorCode::device_unavailable,
                 "The CUDA runtime placed the opened memory outside the allocation it reports.",
                 "Check the device with nvidia-smi.");
  import->bytes = int64_t(range.bytes - (opened - first));
  if (record.bytes > import->bytes)
    detail::fail(ErrorCode::invalid_tensor,
                 "Invalid pickled CUDA tensor: shared memory " + name + " claims an allocation of " +
                     std::to_string(record.bytes) + " bytes; the CUDA runtime reports " +
                     std::to_string(import->bytes) + ".",
                 "The data was damaged or forged in transit; pickle the tensor again.");
  ipc::wait_for_event(device.id, record.event);
  const TensorView view = view_in_buffer(import->base, import->bytes, layout, device);
  return tensor_from_managed(
      ManagedTensor::adopt(make_versioned(view, std::move(import), view.flags())));
}

void release_device_shares() {
  std::vector<std::shared_ptr<DeviceImport>> imports = live(&Shares::imports);
  std::vector<std::shared_ptr<DeviceExport>> exports = live(&Shares::exports);
  std::vector<std::shared_ptr<SharedSegment>> waiting;
  {
    std::lock_guard<std::mutex> lock(shares().mutex);
    for (const Parked& p : shares().parked) waiting.push_back(p.segment);
  }
  for (auto& i : imports) i->close();
  for (auto& e : exports) {
    e->reference.reset();
    waiting.push_back(e->segment);
  }
  if (waiting.empty()) return;
  GilReleased unlocked;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration<double>(exit_wait_seconds());
  size_t open = 0;
  for (;;) {
    open = 0;
    for (const auto& segment : waiting) open += segment->references() > 0;
    if (open == 0 || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (open > 0)
    std::fprintf(stderr,
                 "dlbridge: this process exits while other processes still have %zu CUDA "
                 "allocation(s) it shared open; CUDA frees them now, and the tensors over them "
                 "in those processes are invalid. Keep the sharing process alive until they "
                 "are done (see docs/distributed.md).\n",
                 open);
}

}  // namespace dlbridge::python
