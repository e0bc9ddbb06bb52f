// Host memory that other processes on the same machine map by name: a POSIX
// shared-memory segment whose first page holds a reference count, so that
// the last process to let go of it removes the name.
//
// Lifetime. A segment's count is the number of live mappings (one per
// SharedSegment object, in any process) plus the number of tickets issued
// and not yet redeemed. A ticket is what a sender hands over with the name
// (a pickle carries one): it keeps the name alive while the message is in
// flight, even if the sender lets go or exits before the receiver opens it.
// Opening with a ticket turns the ticket into the new mapping's reference;
// a ticket already redeemed (the same message loaded twice) adds one
// instead. Releasing a mapping's reference drops the count; whoever drops it
// to zero unlinks the name. Pages stay valid in every process that still
// maps them, as POSIX promises for unlinked segments.
//
// What the count cannot see: a process killed while it holds a reference,
// or a ticket whose message is never loaded. Their names stay until
// something outside the processes removes them; the Python layer registers
// every segment it creates with multiprocessing's resource tracker, which
// does that when the program's last process has exited.
#pragma once

#if !defined(__unix__) && !defined(__APPLE__)
#error "dlbridge/shared_memory.hpp needs POSIX shared memory (shm_open)."
#endif

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "error.hpp"

namespace dlbridge {

namespace detail {

// The first page of every segment; the data starts on the next page, so it
// is page-aligned in every process that maps it.
struct SegmentHeader {
  static constexpr uint64_t magic_value = 0x31304d4853424c44ull;  // "DLBSHM01"
  static constexpr int32_t ticket_words = 256;                   // 16384 tickets in flight

  uint64_t magic;
  int64_t data_bytes;
  int64_t references;  // mappings + unredeemed tickets; atomic
  uint64_t next_ticket;  // atomic
  // Who registered the name for cleanup after a crash: written once by the
  // creator, read by whoever unlinks (see SharedSegment::cleanup_tag).
  uint64_t cleanup_tag[2];
  uint64_t tickets[ticket_words];  // bit set: ticket issued, not yet redeemed; atomic
};

inline constexpr int64_t segment_header_bytes = 4096;
static_assert(sizeof(SegmentHeader) <= size_t(segment_header_bytes));

inline constexpr char segment_prefix[] = "/dlbridge-";

[[noreturn]] inline void fail_errno(ErrorCode code, const std::string& what, int error,
                                    std::string hint = {}) {
  fail(code, what + ": " + std::strerror(error) + ".", std::move(hint));
}

// Names this library creates, and so the only ones it opens: a pickle
// cannot point it at another program's segment or at a path.
inline bool is_segment_name(const std::string& name) {
  const size_t prefix = sizeof(segment_prefix) - 1;
  if (name.size() <= prefix || name.size() > 200 || name.compare(0, prefix, segment_prefix) != 0)
    return false;
  for (size_t i = prefix; i < name.size(); ++i) {
    const char c = name[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || c == '-')) return false;
  }
  return true;
}

inline std::string new_segment_name() {
  static std::atomic<uint64_t> counter{0};
  static thread_local std::mt19937_64 random{std::random_device{}()};
  char text[96];
  std::snprintf(text, sizeof text, "%s%lx-%llx-%016llx", segment_prefix,
                static_cast<unsigned long>(::getpid()),
                static_cast<unsigned long long>(counter.fetch_add(1)),
                static_cast<unsigned long long>(random()));
  return text;
}

}  // namespace detail

class SharedSegment {
 public:
  SharedSegment(const SharedSegment&) = delete;
  SharedSegment& operator=(const SharedSegment&) = delete;
  ~SharedSegment() {
    release();
    ::munmap(base_, size_t(detail::segment_header_bytes + header()->data_bytes));
  }

  // A new segment with room for data_bytes, zero-filled, holding one
  // reference: this mapping's. Space is reserved up front, so a full
  // /dev/shm fails here (out_of_memory) instead of killing the process with
  // SIGBUS on first touch.
  static std::shared_ptr<SharedSegment> create(int64_t data_bytes) {
    if (data_bytes < 0 || data_bytes > INT64_MAX - detail::segment_header_bytes)
      detail::fail(ErrorCode::invalid_argument,
                   "Shared memory of " + std::to_string(data_bytes) + " bytes cannot exist.");
    const int64_t size = detail::segment_header_bytes + data_bytes;
    std::string name;
    int fd = -1;
    for (int attempt = 0; fd < 0; ++attempt) {
      name = detail::new_segment_name();
      fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
      if (fd < 0 && (errno != EEXIST || attempt == 8))
        detail::fail_errno(ErrorCode::device_unavailable,
                           "Shared memory is not available: could not create " + name, errno,
                           "Check that /dev/shm is mounted and writable.");
    }
#if defined(__linux__)
    const int reserved = ::posix_fallocate(fd, 0, off_t(size));
#else  // no posix_fallocate (macOS): sized, not reserved
    const int reserved = ::ftruncate(fd, off_t(size)) == 0 ? 0 : errno;
#endif
    void* base = reserved == 0 ? map(fd, size) : MAP_FAILED;
    const int error = reserved != 0 ? reserved : errno;
    ::close(fd);
    if (base == MAP_FAILED) {
      ::shm_unlink(name.c_str());
      detail::fail_errno(ErrorCode::out_of_memory,
                         "Could not reserve " + std::to_string(data_bytes) +
                             " bytes of shared memory",
                         error, "Free space in /dev/shm or share a smaller tensor.");
    }
    auto* h = static_cast<detail::SegmentHeader*>(base);
    h->data_bytes = data_bytes;
    h->references = 1;
    h->next_ticket = 0;
    // Published last: an opener that sees the magic sees a whole header.
    __atomic_store_n(&h->magic, detail::SegmentHeader::magic_value, __ATOMIC_RELEASE);
    return std::shared_ptr<SharedSegment>(new SharedSegment(std::move(name), base));
  }

  // Maps the segment a sender named and redeems the ticket it sent. Fails
  // with device_unavailable when the name is gone (every holder let go, or
  // the tensor came from another machine) and invalid_tensor when the name
  // or the segment is not one of dlbridge's.
  static std::shared_ptr<SharedSegment> open(const std::string& name, uint64_t ticket) {
    if (!detail::is_segment_name(name))
      detail::fail(ErrorCode::invalid_tensor,
                   "Invalid shared-memory name '" + name + "': not one of dlbridge's segments.",
                   "The data was damaged or forged in transit; send the tensor again.");
    const int fd = ::shm_open(name.c_str(), O_RDWR, 0);
    if (fd < 0)
      detail::fail_errno(ErrorCode::device_unavailable,
                         "Shared memory " + name + " is not available on this machine", errno,
                         "A shared tensor reaches processes on the machine that made it, while "
                         "some process holds it: keep the sender's tensor alive until the "
                         "receiver has loaded it, or send t.copy() to another machine.");
    struct stat info {};
    void* base = MAP_FAILED;
    int64_t size = 0;
    if (::fstat(fd, &info) == 0 && info.st_size >= detail::segment_header_bytes) {
      size = int64_t(info.st_size);
      base = map(fd, size);
    }
    ::close(fd);
    if (base == MAP_FAILED)
      detail::fail(ErrorCode::invalid_tensor, "Invalid shared memory " + name + ": no dlbridge header.",
                   "Another program created it under dlbridge's prefix; remove it.");
    auto* h = static_cast<detail::SegmentHeader*>(base);
    const int64_t data_bytes = h->data_bytes;
    if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != detail::SegmentHeader::magic_value ||
        data_bytes < 0 || data_bytes > size - detail::segment_header_bytes) {
      ::munmap(base, size_t(size));
      detail::fail(ErrorCode::invalid_tensor, "Invalid shared memory " + name + ": no dlbridge header.",
                   "Another program created it under dlbridge's prefix; remove it.");
    }
    // Only the header's size is mapped from here on, whatever the file says.
    if (size > detail::segment_header_bytes + data_bytes)
      ::munmap(static_cast<char*>(base) + detail::segment_header_bytes + data_bytes,
               size_t(size - detail::segment_header_bytes - data_bytes));
    std::shared_ptr<SharedSegment> segment(new SharedSegment(name, base));
    segment->redeem(ticket);
    return segment;
  }

  const std::string& name() const noexcept { return name_; }
  void* data() const noexcept { return static_cast<char*>(base_) + detail::segment_header_bytes; }
  int64_t data_bytes() const noexcept { return header()->data_bytes; }
  bool contains(const void* begin, int64_t bytes) const noexcept {
    const auto first = reinterpret_cast<uintptr_t>(data());
    const auto p = reinterpret_cast<uintptr_t>(begin);
    return p >= first && bytes >= 0 && p - first <= uint64_t(data_bytes()) &&
           uint64_t(bytes) <= uint64_t(data_bytes()) - (p - first);
  }
  // The count of mappings and unredeemed tickets, for tests and reports.
  int64_t references() const noexcept {
    return __atomic_load_n(&header()->references, __ATOMIC_ACQUIRE);
  }
  bool holds_reference() const noexcept { return !released_ && holder_pid_ == ::getpid(); }

  // An identifier of whatever registered the name for crash cleanup, set by
  // the creator; the process that unlinks compares it with its own.
  void set_cleanup_tag(uint64_t a, uint64_t b) noexcept {
    header()->cleanup_tag[0] = a;
    header()->cleanup_tag[1] = b;
  }
  std::pair<uint64_t, uint64_t> cleanup_tag() const noexcept {
    return {header()->cleanup_tag[0], header()->cleanup_tag[1]};
  }

  // A ticket for one receiver. It counts as a reference until redeemed, so
  // only a mapping that still holds its reference may vouch for the name.
  uint64_t issue_ticket() {
    if (!holds_reference())
      detail::fail(ErrorCode::device_unavailable,
                   "Shared memory " + name_ + " is no longer available to this process: it released "
                   "it at exit.",
                   "Send tensors before the process starts to exit.");
    detail::SegmentHeader* h = header();
    __atomic_add_fetch(&h->references, 1, __ATOMIC_ACQ_REL);
    // A slot whose ticket is still in flight is skipped: its bit must stay
    // set until that ticket is redeemed.
    for (int32_t tries = 0; tries < 64 * detail::SegmentHeader::ticket_words; ++tries) {
      const uint64_t id = __atomic_fetch_add(&h->next_ticket, 1, __ATOMIC_ACQ_REL);
      uint64_t& word = h->tickets[(id / 64) % detail::SegmentHeader::ticket_words];
      const uint64_t bit = uint64_t(1) << (id % 64);
      if ((__atomic_fetch_or(&word, bit, __ATOMIC_ACQ_REL) & bit) == 0) return id;
    }
    __atomic_sub_fetch(&h->references, 1, __ATOMIC_ACQ_REL);
    detail::fail(ErrorCode::out_of_memory,
                 "Shared memory " + name_ + " has " +
                     std::to_string(64 * detail::SegmentHeader::ticket_words) +
                     " messages in flight that no process has loaded.",
                 "Load the tensors already sent before sending more.");
  }

  // Drops this mapping's reference once (never in a forked child, which
  // inherited the mapping but not the reference). True when this call
  // dropped the count to zero and so unlinked the name. The pages stay
  // mapped until the object dies.
  bool release() noexcept {
    if (!holds_reference()) return false;
    released_ = true;
    if (__atomic_sub_fetch(&header()->references, 1, __ATOMIC_ACQ_REL) != 0) return false;
    ::shm_unlink(name_.c_str());
    return true;
  }

 private:
  SharedSegment(std::string name, void* base)
      : name_(std::move(name)), base_(base), holder_pid_(::getpid()) {}

  static void* map(int fd, int64_t size) {
    return ::mmap(nullptr, size_t(size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }

  detail::SegmentHeader* header() const noexcept {
    return static_cast<detail::SegmentHeader*>(base_);
  }

  void redeem(uint64_t ticket) {
    detail::SegmentHeader* h = header();
    uint64_t& word = h->tickets[(ticket / 64) % detail::SegmentHeader::ticket_words];
    const uint64_t bit = uint64_t(1) << (ticket % 64);
    if (__atomic_fetch_and(&word, ~bit, __ATOMIC_ACQ_REL) & bit) return;  // the ticket's reference is ours now
    // Spent already: a new reference, but never one that revives a count
    // that reached zero (its name is being unlinked).
    int64_t count = __atomic_load_n(&h->references, __ATOMIC_ACQUIRE);
    while (count > 0)
      if (__atomic_compare_exchange_n(&h->references, &count, count + 1, false, __ATOMIC_ACQ_REL,
                                      __ATOMIC_ACQUIRE))
        return;
    released_ = true;  // nothing to give back
    detail::fail(ErrorCode::device_unavailable,
                 "Shared memory " + name_ + " is no longer available: every process that held it let go.",
                 "Keep the sender's tensor alive until every receiver has loaded it.");
  }

  std::string name_;
  void* base_;
  pid_t holder_pid_;
  bool released_ = false;
};

// Every segment this process maps, so that a tensor anywhere inside one is
// recognised as shared (and travels by name), and so that a process can give
// back all its references when it exits.
class SharedSegmentRegistry {
 public:
  static SharedSegmentRegistry& instance() {
    static auto* registry = new SharedSegmentRegistry;  // never destroyed: used at exit
    return *registry;
  }

  void add(const std::shared_ptr<SharedSegment>& segment) {
    std::lock_guard<std::mutex> lock(mutex_);
    segments_.erase(std::remove_if(segments_.begin(), segments_.end(),
                                   [](const auto& w) { return w.expired(); }),
                    segments_.end());
    segments_.push_back(segment);
  }

  // The live segment of this process whose data holds [begin, begin + bytes).
  std::shared_ptr<SharedSegment> find(const void* begin, int64_t bytes) const {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& weak : segments_)
      if (auto segment = weak.lock(); segment && segment->contains(begin, bytes)) return segment;
    return nullptr;
  }

  // Releases every reference this process holds; returns the segments whose
  // names this unlinked.
  std::vector<std::shared_ptr<SharedSegment>> release_all() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<std::shared_ptr<SharedSegment>> unlinked;
    for (const auto& weak : segments_)
      if (auto segment = weak.lock(); segment && segment->release()) unlinked.push_back(segment);
    return unlinked;
  }

 private:
  SharedSegmentRegistry() = default;
  mutable std::mutex mutex_;
  std::vector<std::weak_ptr<SharedSegment>> segments_;
};

}  // namespace dlbridge
