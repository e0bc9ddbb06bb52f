// Tensors that leave the process: pickling (protocol 5 out-of-band buffers,
// in-band bytes below 5), copy.copy / copy.deepcopy, and tensors in shared
// memory that other processes on the machine map by name: the sources of
// the dlbridge._share extension (share_module.cpp), which the core reaches
// only through sharing_seam.hpp.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <dlbridge/buffer_view.hpp>
#include <dlbridge/platform/shared_memory.hpp>

#include "bindings.hpp"
#include "sharing_seam.hpp"

namespace dlbridge::python {

// Adds the reconstructors that pickles name to the module, and sets the
// hooks behind dlbridge.Tensor's pickling and sharing methods.
void bind_pickling(nb::module_& m, SharingHooks& hooks);

// --- shared_memory.cpp
// Sets the sharing hooks (share_memory, is_shared, empty(shared=True)) and
// adds the module's functions for tests and exit.
void bind_shared_memory(nb::module_& m, SharingHooks& hooks);
// The segment of this process that holds all of v's elements, or NULL.
std::shared_ptr<SharedSegment> find_shared_segment(const TensorView& v);
// dlbridge.empty(..., shared=True): a zero-filled compact tensor in a new
// segment; device must be the CPU.
Tensor empty_shared(const std::vector<int64_t>& shape, DType dtype, Device device);
// A tensor over a segment that a pickle named; redeems the pickle's ticket.
Tensor open_shared_tensor(const std::string& name, uint64_t ticket, const BufferLayout& layout);
// Redeems a ticket whose pickle cannot be loaded (its layout is damaged), so
// the refused load still gives the ticket's reference back; never throws.
void return_shared_ticket(const std::string& name, uint64_t ticket) noexcept;
// Registers the exit-time release of shared memory in this process (once).
void prepare_process();
// A new segment, held for this program in its resource tracker.
std::shared_ptr<SharedSegment> create_tracked_segment(int64_t bytes);
// SharedSegment::open for this program (the tracker told), and a ticket of a
// segment this process maps.
std::shared_ptr<SharedSegment> open_tracked_segment(const std::string& name, uint64_t ticket);
uint64_t issue_tracked_ticket(SharedSegment& segment);
// Held around every change of a segment's counts in this process: the
// tracker calls made under a segment's header lock may release the GIL, and
// another thread must then wait here, without the GIL, rather than spin on
// the header lock with it. Taken with the GIL held (it waits without it).
class ProcessSharesLock {
 public:
  ProcessSharesLock();
  ~ProcessSharesLock();
  ProcessSharesLock(const ProcessSharesLock&) = delete;
  ProcessSharesLock& operator=(const ProcessSharesLock&) = delete;

 private:
  static std::recursive_mutex& mutex();
};
// A copy of source (new memory) given source's state: READ_ONLY when source
// is read-only, and "writability unknown" when source's is.
Tensor with_state_of(const Tensor& source, Tensor copy);
// Holds one reference of this process to a segment: released (and the
// tracker told, when that unlinked the name) when the holder dies.
std::shared_ptr<void> hold_segment(std::shared_ptr<SharedSegment> segment);

// --- cuda_ipc.cpp: CUDA device memory shared with other processes
// t.share_memory() for a kDLCUDA tensor: itself when it is shared already,
// else a device copy in an allocation exported for CUDA IPC.
nb::object share_device_memory(nb::handle self);
// dlbridge.empty(..., device="cuda:N", shared=True).
Tensor empty_shared_device(const std::vector<int64_t>& shape, DType dtype, Device device);
// The segment that counts the openers of the exported allocation of this
// process that v lies in, or NULL.
std::shared_ptr<SharedSegment> device_share_segment(const TensorView& v);
// What a pickle of a tensor in an exported allocation carries: the
// segment's name, a ticket, and the layout with byte_offset counted from
// the allocation's base. The exporter's work on it so far is recorded for
// the receiver to wait on. nullopt when v is in no exported allocation.
struct DeviceShareTicket {
  std::string name;
  uint64_t ticket;
  BufferLayout layout;
};
std::optional<DeviceShareTicket> device_share_ticket(const TensorView& v);
// The receiving end: a tensor over the memory a pickle's segment names.
Tensor open_device_share(const std::string& name, uint64_t ticket, const BufferLayout& layout);
// At exit: closes what this process opened and waits (a bounded time) for
// other processes to close what it exported.
void release_device_shares();

}  // namespace dlbridge::python
