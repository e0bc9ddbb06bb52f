// Host memory that other processes on the same machine map by name: a POSIX
// shared-memory segment whose first page holds a reference count, so that
// the last process to let go of it removes the name.
//
// Lifetime. A segment's count is the number of live mappings (one per
// SharedSegment object, in any process) plus the number of tickets issued
// and not yet redeemed. A ticket is what a sender hands over with the name
// (a pickle carries one): it keeps the name alive while the message is in
// flight, even if the sender lets go or exits before the receiver opens it.
// Any mapping of a name that is still counted may issue one, a forked
// child's inherited mapping included. Opening with a ticket turns the
// ticket into the new mapping's reference; a ticket already redeemed (the
// same message loaded twice) adds one instead. Releasing a mapping's
// reference drops the count; whoever drops it to zero unlinks the name.
// Pages stay valid in every process that still maps them, as POSIX promises
// for unlinked segments.
//
// What the count cannot see: a process killed while it holds a reference,
// or a ticket whose message is never loaded. For those, each program (the
// processes that share one cleanup service, a ProgramTracker; in Python,
// multiprocessing's resource tracker) registers the name with its service
// while it holds the segment and withdraws it once it no longer does; the
// service removes the names still registered when its program ends. The
// header counts each program's mappings and unredeemed tickets, so a program
// that ends normally never removes a name another program still holds. A
// program's entry is given back once it holds nothing and has withdrawn its
// registration, so the table bounds the programs holding a segment at once,
// not the programs that ever held it.
//
// Nothing read from the header is trusted twice: the data size is checked
// once, at open, and kept in the process (another process may rewrite the
// header at any time); the counts are only incremented and decremented and
// never address memory, and the lock word is waited on for a bounded time.
#pragma once

#if !defined(__unix__) && !defined(__APPLE__)
#error "dlbridge/platform/shared_memory.hpp needs POSIX shared memory (shm_open)."
#endif

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../error.hpp"

namespace dlbridge {

// The cleanup service of the program this process belongs to. A segment
// tells it when the program starts and stops holding the name; every call
// is made with the segment's header locked, so that the service hears the
// holds and let-gos of one program in the order they happened.
class ProgramTracker {
 public:
  virtual ~ProgramTracker() = default;
  // A nonzero key shared by every process of this program; 0 when the
  // process has no service (its holds are then counted only in the total).
  virtual uint64_t program() noexcept = 0;
  // The program now holds the name: register it. False when it could not.
  virtual bool hold(const std::string& name) noexcept = 0;
  // The program holds the name no longer: withdraw it.
  virtual void let_go(const std::string& name) noexcept = 0;
  // This process let go while other holds of its program remain. When the
  // last of them is a ticket that another program redeems, that program
  // cannot tell this one's service: SharedSegment::settle(name) must be
  // called again before this process exits.
  virtual void settle_later(const std::string& name) noexcept { (void)name; }
};

namespace detail {

// One program's share of a segment.
struct ProgramShare {
  uint64_t key;         // ProgramTracker::program(); 0: a free entry. Changed under the lock
  int64_t count;        // its mappings plus its unredeemed tickets; atomic
  uint64_t registered;  // 1 while its service holds the name; changed under the lock
};

// The first page of every segment; the data starts on the next page, so it
// is page-aligned in every process that maps it.
struct SegmentHeader {
  // "DLBSHM03": the program entries are given back (a process of the "02" rule
  // keeps an entry's index for good, so the two must not share a segment).
  static constexpr uint64_t magic_value = 0x33304d4853424c44ull;
  static constexpr int32_t ticket_words = 256;   // 16384 tickets in flight
  static constexpr int32_t program_slots = 16;   // programs holding it at once

  uint64_t magic;
  int64_t data_bytes;
  int64_t references;    // mappings + unredeemed tickets; atomic
  uint64_t next_ticket;  // atomic
  uint64_t lock;         // pid of the process changing a program's share; 0: free
  ProgramShare programs[program_slots];
  uint64_t tickets[ticket_words];  // bit set: ticket issued, not yet redeemed; atomic
};

inline constexpr int64_t segment_header_bytes = 4096;
static_assert(sizeof(SegmentHeader) <= size_t(segment_header_bytes));

inline constexpr char segment_prefix[] = "/dlbridge-";

// A ticket is the bit it set, with the issuing program's entry + 1 above it
// (0: a program with no entry), so that redeeming it moves the hold from the
// issuer's program to the receiver's.
inline constexpr int ticket_program_shift = 32;
inline constexpr uint64_t ticket_bits = uint64_t(64) * SegmentHeader::ticket_words;

[[noreturn]] inline void fail_errno(ErrorCode code, const std::string& what, int error,
                                    std::string hint = {}) {
  fail(code, what + ": " + std::strerror(error) + ".", std::move(hint));
}

inline long read_proc_number(const char* path) {
  long value = -1;
  if (std::FILE* f = std::fopen(path, "r")) {
    if (std::fscanf(f, "%ld", &value) != 1) value = -1;
    std::fclose(f);
  }
  return value;
}

inline long count_mappings() {
  long lines = -1;
  if (std::FILE* f = std::fopen("/proc/self/maps", "r")) {
    lines = 0;
    for (int c; (c = std::fgetc(f)) != EOF;) lines += c == '\n';
    std::fclose(f);
  }
  return lines;
}

// What an mmap refusal means. Linux answers ENOMEM both when memory runs
// out and when the process has as many mappings as vm.max_map_count allows
// (each live shared tensor holds one): the second is what ~65,000 shared
// tensors meet with /dev/shm far from full, so it is named when it holds,
// as a limit of this process on shared memory (device_unavailable), not as
// memory that ran out.
struct MapFailure {
  ErrorCode code;
  std::string why;
  std::string hint;
};
inline MapFailure map_failure_text(int error, long mappings, long limit) {
  if (error == ENOMEM && limit > 0 && mappings >= limit - 16)
    return {ErrorCode::device_unavailable,
            "this process has " + std::to_string(mappings) +
                " memory mappings, the most that vm.max_map_count (" + std::to_string(limit) +
                ") allows",
            "Each shared tensor alive in a process holds one mapping: let go of shared tensors "
            "you no longer need, share fewer and larger ones, or raise the limit "
            "(sysctl -w vm.max_map_count=" + std::to_string(limit * 4) + ")."};
  if (error == ENOMEM)
    return {ErrorCode::out_of_memory,
            std::strerror(error) + std::string(" (no room in the address space or memory)"),
            "Free memory or share a smaller tensor."};
  return {ErrorCode::device_unavailable, std::strerror(error),
          "Check that /dev/shm is mounted and writable."};
}

[[noreturn]] inline void fail_map(const std::string& what, int error) {
  const MapFailure text = map_failure_text(error, count_mappings(),
                                           read_proc_number("/proc/sys/vm/max_map_count"));
  fail(text.code, what + ": " + text.why + ".", text.hint);
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

// Serialises changes of the program shares (and the tracker calls that go
// with them) between processes. A holder that died, a lock word that is no
// pid at all, or this process's own pid while no thread of it holds a header
// lock (a forged or stale word) is taken over; a live holder is waited for
// one second at most, after which the change goes ahead unlocked: a
// program's cleanup record may then be wrong, which is better than a hang.
class HeaderLock {
 public:
  explicit HeaderLock(SegmentHeader* header) noexcept
      : word_(&header->lock), me_(uint64_t(::getpid())) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    for (int round = 0;; ++round) {
      uint64_t owner = 0;
      if (__atomic_compare_exchange_n(word_, &owner, me_, false, __ATOMIC_ACQ_REL,
                                      __ATOMIC_ACQUIRE) ||
          (abandoned(owner) && __atomic_compare_exchange_n(word_, &owner, me_, false,
                                                           __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))) {
        held_ = true;
        held_here().fetch_add(1);
        return;
      }
      if (std::chrono::steady_clock::now() >= deadline) return;
      std::this_thread::sleep_for(std::chrono::microseconds(round < 20 ? 50 : 1000));
    }
  }
  ~HeaderLock() {
    if (!held_) return;
    held_here().fetch_sub(1);
    uint64_t mine = me_;
    __atomic_compare_exchange_n(word_, &mine, 0, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
  }
  HeaderLock(const HeaderLock&) = delete;
  HeaderLock& operator=(const HeaderLock&) = delete;

 private:
  // Header locks held by the threads of this process (a forked child starts
  // with its parent's count of a thread it does not have: it is reset there).
  static std::atomic<int>& held_here() {
    static std::atomic<int> count{0};
    static pid_t counted_for = ::getpid();
    if (counted_for != ::getpid()) {
      count = 0;
      counted_for = ::getpid();
    }
    return count;
  }

  bool abandoned(uint64_t owner) const noexcept {
    if (owner > uint64_t(INT_MAX) || owner == 0) return owner != 0;
    if (owner == me_) return held_here().load() == 0;
    return ::kill(pid_t(owner), 0) != 0 && errno == ESRCH;
  }

  uint64_t* word_;
  uint64_t me_;
  bool held_ = false;
};

// The entry of `key` in the header, claimed when it has none; -1 when the
// table is full or key is 0. Called with the header locked: an entry may be
// given back (give_back_entry) whenever the lock is free, so its index is
// looked up again for every change, never kept.
inline int program_entry(SegmentHeader* h, uint64_t key, bool claim) noexcept {
  if (key == 0) return -1;
  // Its own entry first: a free one may lie before it (entries are given back).
  for (int i = 0; i < SegmentHeader::program_slots; ++i)
    if (__atomic_load_n(&h->programs[i].key, __ATOMIC_ACQUIRE) == key) return i;
  if (!claim) return -1;
  for (int i = 0; i < SegmentHeader::program_slots; ++i) {
    uint64_t seen = 0;
    if (__atomic_compare_exchange_n(&h->programs[i].key, &seen, key, false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE) ||
        seen == key)
      return i;
  }
  return -1;
}

inline bool valid_entry(int entry) noexcept {
  return entry >= 0 && entry < SegmentHeader::program_slots;
}

// Frees `entry` for another program once its program holds nothing and has
// withdrawn its registration; called with the header locked after every
// change that may leave it so. A program whose count is zero but whose
// registration is still there (its last hold was a ticket another program
// redeemed) keeps its entry until it settles (SharedSegment::settle).
inline void give_back_entry(SegmentHeader* h, int entry) noexcept {
  if (!valid_entry(entry)) return;
  ProgramShare& share = h->programs[entry];
  if (__atomic_load_n(&share.count, __ATOMIC_ACQUIRE) > 0 ||
      __atomic_load_n(&share.registered, __ATOMIC_ACQUIRE) != 0)
    return;
  __atomic_store_n(&share.count, 0, __ATOMIC_RELEASE);
  __atomic_store_n(&share.key, 0, __ATOMIC_RELEASE);
}

}  // namespace detail

class SharedSegment {
 public:
  SharedSegment(const SharedSegment&) = delete;
  SharedSegment& operator=(const SharedSegment&) = delete;
  ~SharedSegment() {
    release();
    ::munmap(base_, size_t(mapped_bytes_));
  }

  // A new segment with room for data_bytes, zero-filled, holding one
  // reference: this mapping's, counted for tracker's program. The program
  // holds the name before it exists: a thread stopped between the two (the
  // interpreter's exit ends daemon threads wherever they wait) leaves a name
  // its service removes, never one that no one would. Space is reserved up
  // front, so a full /dev/shm fails here (out_of_memory) instead of killing
  // the process with SIGBUS on first touch.
  static std::shared_ptr<SharedSegment> create(int64_t data_bytes,
                                               ProgramTracker* tracker = nullptr) {
    if (data_bytes < 0 || data_bytes > INT64_MAX - detail::segment_header_bytes)
      detail::fail(ErrorCode::invalid_argument,
                   "Shared memory of " + std::to_string(data_bytes) + " bytes cannot exist.");
    const int64_t size = detail::segment_header_bytes + data_bytes;
    std::string name;
    bool registered = false;
    int fd = -1;
    for (int attempt = 0; fd < 0; ++attempt) {
      name = detail::new_segment_name();
      registered = tracker != nullptr && tracker->hold(name);
      fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
      const int error = errno;
      if (fd < 0 && registered) tracker->let_go(name);
      if (fd < 0 && (error != EEXIST || attempt == 8))
        detail::fail_errno(ErrorCode::device_unavailable,
                           "Shared memory is not available: could not create " + name, error,
                           error == EMFILE || error == ENFILE
                               ? "Too many files are open: close some, or raise the limit "
                                 "(ulimit -n)."
                               : "Check that /dev/shm is mounted and writable.");
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
      if (registered) tracker->let_go(name);
      const std::string what =
          "Could not reserve " + std::to_string(data_bytes) + " bytes of shared memory";
      if (reserved == 0) detail::fail_map(what, error);
      detail::fail_errno(ErrorCode::out_of_memory, what, error,
                         "Free space in /dev/shm or share a smaller tensor.");
    }
    auto* h = static_cast<detail::SegmentHeader*>(base);
    h->data_bytes = data_bytes;
    h->references = 1;
    h->next_ticket = 0;
    std::shared_ptr<SharedSegment> segment(new SharedSegment(std::move(name), base, size,
                                                             data_bytes, tracker));
    // No other process sees the header before the magic: no lock is needed.
    const int entry = detail::program_entry(h, segment->program_, true);
    if (detail::valid_entry(entry)) {
      h->programs[entry].count = 1;
      h->programs[entry].registered = registered ? 1 : 0;
      segment->in_program_share_ = true;
    } else if (registered) {
      tracker->let_go(segment->name_);  // no entry to record it in: counted in the total only
    }
    // Published last: an opener that sees the magic sees a whole header.
    __atomic_store_n(&h->magic, detail::SegmentHeader::magic_value, __ATOMIC_RELEASE);
    return segment;
  }

  // Maps the segment a sender named and redeems the ticket it sent. Fails
  // with device_unavailable when the name is gone (every holder let go, or
  // the tensor came from another machine), invalid_tensor when the name or
  // the segment is not one of dlbridge's, out_of_memory when it cannot be
  // mapped.
  static std::shared_ptr<SharedSegment> open(const std::string& name, uint64_t ticket,
                                             ProgramTracker* tracker = nullptr) {
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
    if (::fstat(fd, &info) != 0 || info.st_size < detail::segment_header_bytes) {
      ::close(fd);
      fail_not_ours(name);
    }
    const int64_t size = int64_t(info.st_size);
    void* base = map(fd, size);
    const int error = errno;
    ::close(fd);
    if (base == MAP_FAILED) detail::fail_map("Could not map shared memory " + name, error);
    auto* h = static_cast<detail::SegmentHeader*>(base);
    // The one read of the size: from here on the process keeps its own copy.
    const int64_t data_bytes = __atomic_load_n(&h->data_bytes, __ATOMIC_RELAXED);
    if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != detail::SegmentHeader::magic_value ||
        data_bytes < 0 || data_bytes > size - detail::segment_header_bytes) {
      ::munmap(base, size_t(size));
      fail_not_ours(name);
    }
    // Only the checked size stays mapped, whatever the file says.
    const int64_t kept = detail::segment_header_bytes + data_bytes;
    if (size > kept) ::munmap(static_cast<char*>(base) + kept, size_t(size - kept));
    std::shared_ptr<SharedSegment> segment(new SharedSegment(name, base, kept, data_bytes, tracker));
    segment->redeem(ticket);
    return segment;
  }

  // Gives back what this program's record of a name needs once the name may
  // have passed to other programs (see ProgramTracker::settle_later): the
  // registration, when the program holds nothing any more, and the name,
  // when the count is zero and no other program's registration keeps it.
  // Never throws; a name that is gone or not dlbridge's is left alone.
  static void settle(const std::string& name, ProgramTracker& tracker) noexcept {
    if (!detail::is_segment_name(name)) return;
    const int fd = ::shm_open(name.c_str(), O_RDWR, 0);
    if (fd < 0) return;
    struct stat info {};
    void* base = MAP_FAILED;
    if (::fstat(fd, &info) == 0 && info.st_size >= detail::segment_header_bytes)
      base = map(fd, detail::segment_header_bytes);
    ::close(fd);
    if (base == MAP_FAILED) return;
    auto* h = static_cast<detail::SegmentHeader*>(base);
    if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) == detail::SegmentHeader::magic_value) {
      detail::HeaderLock lock(h);
      const int entry = detail::program_entry(h, tracker.program(), false);
      if (detail::valid_entry(entry) &&
          __atomic_load_n(&h->programs[entry].count, __ATOMIC_ACQUIRE) <= 0) {
        withdraw(h, entry, name, tracker);
        detail::give_back_entry(h, entry);
      }
      if (__atomic_load_n(&h->references, __ATOMIC_ACQUIRE) <= 0 && !registered_elsewhere(h, -1))
        ::shm_unlink(name.c_str());
    }
    ::munmap(base, size_t(detail::segment_header_bytes));
  }

  const std::string& name() const noexcept { return name_; }
  void* data() const noexcept { return static_cast<char*>(base_) + detail::segment_header_bytes; }
  // The size checked when this process mapped the segment (never re-read).
  int64_t data_bytes() const noexcept { return data_bytes_; }
  bool contains(const void* begin, int64_t bytes) const noexcept {
    const auto first = reinterpret_cast<uintptr_t>(data());
    const auto p = reinterpret_cast<uintptr_t>(begin);
    return p >= first && bytes >= 0 && p - first <= uint64_t(data_bytes_) &&
           uint64_t(bytes) <= uint64_t(data_bytes_) - (p - first);
  }
  // The count of mappings and unredeemed tickets, for tests and reports.
  int64_t references() const noexcept {
    return __atomic_load_n(&header()->references, __ATOMIC_ACQUIRE);
  }
  // This program's share of the count, or -1 when it has no entry; for tests.
  int64_t program_references() const noexcept {
    detail::SegmentHeader* h = header();
    detail::HeaderLock lock(h);
    const int entry = detail::program_entry(h, program_, false);
    return detail::valid_entry(entry) ? __atomic_load_n(&h->programs[entry].count, __ATOMIC_ACQUIRE)
                                      : -1;
  }
  bool holds_reference() const noexcept { return !released_ && holder_pid_ == ::getpid(); }

  // A ticket for one receiver. It counts as a reference until redeemed, so
  // it is issued only while the count is above zero: a name whose holders
  // all let go is being unlinked, and a ticket must not revive it.
  uint64_t issue_ticket() {
    detail::SegmentHeader* h = header();
    detail::HeaderLock lock(h);
    const int entry = detail::program_entry(h, program_, true);
    add_program_share(entry);  // the ticket's hold, registered before anything else is taken
    if (!add_if_counted(&h->references)) {
      drop_hold(h, entry);
      detail::fail(ErrorCode::device_unavailable,
                   "Shared memory " + name_ + " is no longer available: every process that held "
                   "it let go.",
                   "Keep a tensor over it alive in some process until the receiver has loaded it.");
    }
    // A slot whose ticket is still in flight is skipped: its bit must stay
    // set until that ticket is redeemed.
    for (uint64_t tries = 0; tries < detail::ticket_bits; ++tries) {
      const uint64_t id =
          __atomic_fetch_add(&h->next_ticket, 1, __ATOMIC_ACQ_REL) % detail::ticket_bits;
      uint64_t& word = h->tickets[id / 64];
      const uint64_t bit = uint64_t(1) << (id % 64);
      if ((__atomic_fetch_or(&word, bit, __ATOMIC_ACQ_REL) & bit) == 0)
        return id | (uint64_t(entry + 1) << detail::ticket_program_shift);
    }
    __atomic_sub_fetch(&h->references, 1, __ATOMIC_ACQ_REL);
    drop_hold(h, entry);
    detail::fail(ErrorCode::out_of_memory,
                 "Shared memory " + name_ + " has " + std::to_string(detail::ticket_bits) +
                     " messages in flight that no process has loaded.",
                 "Load the tensors already sent before sending more.");
  }

  // Drops this mapping's reference once (never in a forked child, which
  // inherited the mapping but not the reference). True when this call
  // unlinked the name: it dropped the count to zero, and no other program's
  // registration is waiting to settle it. The pages stay mapped until the
  // object dies.
  bool release() noexcept {
    if (!holds_reference()) return false;
    released_ = true;
    detail::SegmentHeader* h = header();
    detail::HeaderLock lock(h);
    const int64_t left = __atomic_sub_fetch(&h->references, 1, __ATOMIC_ACQ_REL);
    // The program's entry holds this mapping's share, so it is still there.
    const int entry = in_program_share_ ? detail::program_entry(h, program_, false) : -1;
    bool unlinked = false;
    if (left == 0 && !registered_elsewhere(h, entry)) {
      ::shm_unlink(name_.c_str());
      unlinked = true;
    }
    if (detail::valid_entry(entry)) {
      if (drop_program_share(h, entry))
        withdraw(h, entry, name_, *tracker_);
      else if (left > 0)
        tracker_->settle_later(name_);
      detail::give_back_entry(h, entry);
    }
    return unlinked;
  }

 private:
  SharedSegment(std::string name, void* base, int64_t mapped_bytes, int64_t data_bytes,
                ProgramTracker* tracker)
      : name_(std::move(name)),
        base_(base),
        mapped_bytes_(mapped_bytes),
        data_bytes_(data_bytes),
        holder_pid_(::getpid()),
        tracker_(tracker),
        program_(tracker != nullptr ? tracker->program() : 0) {}

  static void* map(int fd, int64_t size) {
    return ::mmap(nullptr, size_t(size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }

  [[noreturn]] static void fail_not_ours(const std::string& name) {
    detail::fail(ErrorCode::invalid_tensor, "Invalid shared memory " + name + ": no dlbridge header.",
                 "Another program created it under dlbridge's prefix; remove it.");
  }

  detail::SegmentHeader* header() const noexcept {
    return static_cast<detail::SegmentHeader*>(base_);
  }

  // Adds one to a count that is above zero; false when it is not.
  static bool add_if_counted(int64_t* count) noexcept {
    int64_t seen = __atomic_load_n(count, __ATOMIC_ACQUIRE);
    while (seen > 0)
      if (__atomic_compare_exchange_n(count, &seen, seen + 1, false, __ATOMIC_ACQ_REL,
                                      __ATOMIC_ACQUIRE))
        return true;
    return false;
  }

  // Whether a program other than `entry`'s still has the name registered.
  static bool registered_elsewhere(detail::SegmentHeader* h, int entry) noexcept {
    for (int i = 0; i < detail::SegmentHeader::program_slots; ++i)
      if (i != entry && __atomic_load_n(&h->programs[i].registered, __ATOMIC_ACQUIRE) != 0)
        return true;
    return false;
  }

  // One more hold of this program. The name is registered first: a hold
  // counted before its registration could be the one a stopped thread never
  // gives back (see create).
  void add_program_share(int entry) noexcept {
    if (!detail::valid_entry(entry)) return;
    detail::ProgramShare& share = header()->programs[entry];
    if (__atomic_load_n(&share.registered, __ATOMIC_ACQUIRE) == 0 && tracker_->hold(name_))
      __atomic_store_n(&share.registered, 1, __ATOMIC_RELEASE);
    __atomic_add_fetch(&share.count, 1, __ATOMIC_ACQ_REL);
  }

  // One hold fewer for a program; true when that was its last.
  static bool drop_program_share(detail::SegmentHeader* h, int entry) noexcept {
    if (!detail::valid_entry(entry)) return false;
    int64_t* count = &h->programs[entry].count;
    int64_t seen = __atomic_load_n(count, __ATOMIC_ACQUIRE);
    while (seen > 0)
      if (__atomic_compare_exchange_n(count, &seen, seen - 1, false, __ATOMIC_ACQ_REL,
                                      __ATOMIC_ACQUIRE))
        return seen == 1;
    return false;
  }

  static void withdraw(detail::SegmentHeader* h, int entry, const std::string& name,
                       ProgramTracker& tracker) noexcept {
    uint64_t registered = 1;
    if (__atomic_compare_exchange_n(&h->programs[entry].registered, &registered, 0, false,
                                    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
      tracker.let_go(name);
  }

  // Gives back one hold of this program (a ticket not issued, a mapping not
  // made): its registration and its entry go with its last.
  void drop_hold(detail::SegmentHeader* h, int entry) noexcept {
    if (drop_program_share(h, entry)) withdraw(h, entry, name_, *tracker_);
    detail::give_back_entry(h, entry);
  }

  void redeem(uint64_t ticket) {
    detail::SegmentHeader* h = header();
    detail::HeaderLock lock(h);
    const uint64_t id = (ticket & ((uint64_t(1) << detail::ticket_program_shift) - 1)) %
                        detail::ticket_bits;
    uint64_t& word = h->tickets[id / 64];
    const uint64_t bit = uint64_t(1) << (id % 64);
    const int entry = detail::program_entry(h, program_, true);
    add_program_share(entry);  // this mapping's hold, registered before the ticket is spent
    in_program_share_ = detail::valid_entry(entry);
    if (__atomic_fetch_and(&word, ~bit, __ATOMIC_ACQ_REL) & bit) {
      // The ticket's reference is ours now: its program holds one less. Another
      // program's registration is its own to withdraw (it settles); its entry
      // is given back here when that is done already.
      const int issuer = int((ticket >> detail::ticket_program_shift) & 0xff) - 1;
      if (drop_program_share(h, issuer) && issuer == entry) withdraw(h, issuer, name_, *tracker_);
      detail::give_back_entry(h, issuer);
      return;
    }
    // Spent already: a new reference, but never one that revives a count
    // that reached zero (its name is being unlinked).
    if (add_if_counted(&h->references)) return;
    drop_hold(h, entry);
    in_program_share_ = false;
    released_ = true;  // nothing to give back
    detail::fail(ErrorCode::device_unavailable,
                 "Shared memory " + name_ + " is no longer available: every process that held it let go.",
                 "Keep the sender's tensor alive until every receiver has loaded it.");
  }

  std::string name_;
  void* base_;
  int64_t mapped_bytes_;  // what this process mapped, for munmap
  int64_t data_bytes_;    // checked once, at create or open
  pid_t holder_pid_;
  ProgramTracker* tracker_;  // outlives the segment; NULL: no program record
  uint64_t program_;         // tracker_->program(), whose entry is looked up under the lock
  bool in_program_share_ = false;  // this mapping's hold is counted in its program's entry
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
  // names this unlinked. The releases run outside the registry's lock: they
  // call the program's tracker, which may need locks of its own.
  std::vector<std::shared_ptr<SharedSegment>> release_all() {
    std::vector<std::shared_ptr<SharedSegment>> live;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (const auto& weak : segments_)
        if (auto segment = weak.lock()) live.push_back(std::move(segment));
    }
    std::vector<std::shared_ptr<SharedSegment>> unlinked;
    for (auto& segment : live)
      if (segment->release()) unlinked.push_back(segment);
    return unlinked;
  }

 private:
  SharedSegmentRegistry() = default;
  mutable std::mutex mutex_;
  std::vector<std::weak_ptr<SharedSegment>> segments_;
};

}  // namespace dlbridge
