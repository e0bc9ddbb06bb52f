// The reference count of a shared-memory segment decides when its name is
// unlinked: these tests follow the count through tickets, repeated loads,
// releases and a forked child, and check /dev/shm for what is left.
#include <gtest/gtest.h>

#include "support/error_of.hpp"

#include <dlbridge/platform/shared_memory.hpp>

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace {

using dlbridge::ErrorCode;
using dlbridge::SharedSegment;
using test_support::error_of;

bool name_exists(const std::string& name) {
  return ::access(("/dev/shm" + name).c_str(), F_OK) == 0;
}

TEST(SharedSegment, CreatedZeroFilledWithOneReference) {
  auto segment = SharedSegment::create(1000);
  EXPECT_EQ(segment->data_bytes(), 1000);
  EXPECT_EQ(segment->references(), 1);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(segment->data()) % 4096, 0u);
  const auto* bytes = static_cast<const unsigned char*>(segment->data());
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(bytes[i], 0);
  EXPECT_TRUE(name_exists(segment->name()));
}

TEST(SharedSegment, LastReleaseUnlinksTheName) {
  auto segment = SharedSegment::create(16);
  const std::string name = segment->name();
  segment.reset();
  EXPECT_FALSE(name_exists(name));
}

TEST(SharedSegment, TicketKeepsTheNameAfterTheSenderLetsGo) {
  auto sender = SharedSegment::create(16);
  std::memcpy(sender->data(), "hello", 6);
  const std::string name = sender->name();
  const uint64_t ticket = sender->issue_ticket();
  EXPECT_EQ(sender->references(), 2);
  sender.reset();  // the sender lets go before the receiver opens
  ASSERT_TRUE(name_exists(name));
  auto receiver = SharedSegment::open(name, ticket);
  EXPECT_STREQ(static_cast<const char*>(receiver->data()), "hello");
  EXPECT_EQ(receiver->references(), 1);  // the ticket became the receiver's reference
  EXPECT_TRUE(receiver->release());
  EXPECT_FALSE(name_exists(name));
}

TEST(SharedSegment, ASpentTicketAddsAReferenceInsteadOfTakingOne) {
  auto sender = SharedSegment::create(16);
  const uint64_t ticket = sender->issue_ticket();
  auto first = SharedSegment::open(sender->name(), ticket);
  auto second = SharedSegment::open(sender->name(), ticket);  // the same message, loaded twice
  EXPECT_EQ(sender->references(), 3);
  const std::string name = sender->name();
  sender.reset();
  first.reset();
  EXPECT_TRUE(name_exists(name));
  second.reset();
  EXPECT_FALSE(name_exists(name));
}

TEST(SharedSegment, OpeningAReleasedNameIsDeviceUnavailable) {
  auto segment = SharedSegment::create(16);
  const std::string name = segment->name();
  segment.reset();
  auto e = error_of([&] { SharedSegment::open(name, 0); });
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->code(), ErrorCode::device_unavailable);
}

TEST(SharedSegment, RefusesNamesThatAreNotDlbridgeSegments) {
  for (const char* name : {"/psm_1234", "/dlbridge-../../etc", "/dlbridge-", "dlbridge-1"}) {
    auto e = error_of([&] { SharedSegment::open(name, 0); });
    ASSERT_TRUE(e.has_value()) << name;
    EXPECT_EQ(e->code(), ErrorCode::invalid_tensor) << name;
  }
}

TEST(SharedSegment, RefusesASegmentWithoutTheHeader) {
  const std::string name = "/dlbridge-0-0-feedfacefeedface";
  const int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, 8192), 0);
  ::close(fd);
  auto e = error_of([&] { SharedSegment::open(name, 0); });
  ::shm_unlink(name.c_str());
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->code(), ErrorCode::invalid_tensor);
}

TEST(SharedSegment, AForkedChildNeverGivesBackItsParentsReference) {
  auto segment = SharedSegment::create(16);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    segment->release();  // a no-op: the reference belongs to the parent
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_EQ(segment->references(), 1);
  EXPECT_TRUE(segment->holds_reference());
}

TEST(SharedSegment, ContainsOnlyItsDataRange) {
  auto segment = SharedSegment::create(64);
  const char* data = static_cast<const char*>(segment->data());
  EXPECT_TRUE(segment->contains(data, 64));
  EXPECT_TRUE(segment->contains(data + 60, 4));
  EXPECT_FALSE(segment->contains(data + 60, 5));
  EXPECT_FALSE(segment->contains(data - 1, 1));
}

TEST(SharedSegmentRegistry, FindsTheSegmentHoldingARangeAndReleasesAll) {
  auto& registry = dlbridge::SharedSegmentRegistry::instance();
  auto segment = SharedSegment::create(64);
  registry.add(segment);
  EXPECT_EQ(registry.find(static_cast<char*>(segment->data()) + 8, 8), segment);
  int other = 0;
  EXPECT_EQ(registry.find(&other, sizeof other), nullptr);
  const std::string name = segment->name();
  auto unlinked = registry.release_all();
  ASSERT_EQ(unlinked.size(), 1u);
  EXPECT_FALSE(name_exists(name));
  EXPECT_FALSE(segment->holds_reference());
}

// Another process's view of a segment's header, to rewrite it as any process
// of this user may.
struct HeaderWriter {
  explicit HeaderWriter(const std::string& name) {
    const int fd = ::shm_open(name.c_str(), O_RDWR, 0);
    page = static_cast<dlbridge::detail::SegmentHeader*>(
        ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    ::close(fd);
  }
  ~HeaderWriter() { ::munmap(page, 4096); }
  dlbridge::detail::SegmentHeader* page;
};

// Runs body in a forked child; the child's exit status (a signal shows as
// 128 + its number).
template <typename Body>
int in_child(Body body) {
  const pid_t child = ::fork();
  if (child == 0) {
    body();
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(SharedSegment, ARewrittenHeaderSizeChangesNothingThisMappingUsesOrUnmaps) {
  // The teardown once unmapped header + data_bytes as the header said at
  // that moment: 2**40 bytes, this process's libraries with them.
  for (int64_t forged : {int64_t(1) << 40, int64_t(-1), int64_t(0)}) {
    EXPECT_EQ(in_child([&] {
                auto segment = SharedSegment::create(64);
                HeaderWriter(segment->name()).page->data_bytes = forged;
                if (segment->data_bytes() != 64) ::_exit(2);
                if (segment->contains(static_cast<char*>(segment->data()) + 64, 1)) ::_exit(3);
                segment.reset();
                std::string still_mapped = "the process's own code and heap";
                if (still_mapped.size() < 5) ::_exit(4);
              }),
              0)
        << forged;
  }
}

TEST(SharedSegment, AForkedChildIssuesATicketForItsInheritedMapping) {
  auto segment = SharedSegment::create(16);
  std::memcpy(segment->data(), "parent", 7);
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  EXPECT_EQ(in_child([&] {
              uint64_t ticket = segment->issue_ticket();  // no reference of its own: only a ticket
              if (::write(pipe_fds[1], &ticket, sizeof ticket) != ssize_t(sizeof ticket)) ::_exit(2);
            }),
            0);
  uint64_t ticket = 0;
  ASSERT_EQ(::read(pipe_fds[0], &ticket, sizeof ticket), ssize_t(sizeof ticket));
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
  EXPECT_EQ(segment->references(), 2);
  auto received = SharedSegment::open(segment->name(), ticket);
  EXPECT_STREQ(static_cast<const char*>(received->data()), "parent");
  EXPECT_EQ(received->references(), 2);
  const std::string name = segment->name();
  segment.reset();
  received.reset();
  EXPECT_FALSE(name_exists(name));
}

TEST(SharedSegment, NoTicketRevivesANameEveryHolderLetGo) {
  auto segment = SharedSegment::create(16);
  int ready[2], done[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(done), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    char go = 0;
    if (::read(ready[0], &go, 1) != 1) ::_exit(2);
    auto e = error_of([&] { segment->issue_ticket(); });
    ::_exit(e && e->code() == ErrorCode::device_unavailable ? 0 : 3);
  }
  const std::string name = segment->name();
  segment.reset();  // the only holder lets go: the child's inherited mapping is no holder
  EXPECT_FALSE(name_exists(name));
  ASSERT_EQ(::write(ready[1], "x", 1), 1);
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  for (int fd : {ready[0], ready[1], done[0], done[1]}) ::close(fd);
}

TEST(SharedSegment, ALockWordOfADeadProcessOrNoPidOrAStaleOwnPidIsTakenOver) {
  auto segment = SharedSegment::create(16);
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ::waitpid(dead, nullptr, 0);
  // This process's own pid while none of its threads holds a header lock is
  // a forged or stale word too.
  for (uint64_t word : {uint64_t(dead), uint64_t(1) << 40, uint64_t(::getpid())}) {
    HeaderWriter(segment->name()).page->lock = word;
    const auto start = std::chrono::steady_clock::now();
    auto received = SharedSegment::open(segment->name(), segment->issue_ticket());
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(500)) << word;
    EXPECT_EQ(received->references(), 2);
  }
}

TEST(SharedSegment, ALiveLockHolderIsWaitedForABoundedTime) {
  auto segment = SharedSegment::create(16);
  HeaderWriter(segment->name()).page->lock = uint64_t(::getppid());  // alive, and never lets go
  const auto start = std::chrono::steady_clock::now();
  const uint64_t ticket = segment->issue_ticket();
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, std::chrono::milliseconds(900));
  EXPECT_LT(waited, std::chrono::seconds(10));
  HeaderWriter(segment->name()).page->lock = 0;
  SharedSegment::open(segment->name(), ticket);
}

TEST(SharedSegment, AFullMappingTableIsNamedAsTheLimit) {
  const auto full = dlbridge::detail::map_failure_text(ENOMEM, 65530, 65530);
  EXPECT_EQ(full.code, ErrorCode::device_unavailable);
  EXPECT_NE(full.why.find("65530 memory mappings, the most that vm.max_map_count (65530)"),
            std::string::npos);
  EXPECT_NE(full.hint.find("sysctl -w vm.max_map_count="), std::string::npos);
  const auto memory = dlbridge::detail::map_failure_text(ENOMEM, 120, 65530);
  EXPECT_EQ(memory.code, ErrorCode::out_of_memory);
  EXPECT_EQ(memory.why.find("vm.max_map_count"), std::string::npos);
}

// A program's cleanup service, as the header sees it: which names it holds.
struct FakeTracker : dlbridge::ProgramTracker {
  explicit FakeTracker(uint64_t key) : key(key) {}
  uint64_t program() noexcept override { return key; }
  bool hold(const std::string& name) noexcept override {
    held[name] += 1;
    return true;
  }
  void let_go(const std::string& name) noexcept override { held[name] -= 1; }
  void settle_later(const std::string& name) noexcept override { later.push_back(name); }
  bool holds(const std::string& name) { return held[name] > 0; }
  uint64_t key;
  std::map<std::string, int> held;
  std::vector<std::string> later;
};

TEST(SharedSegmentPrograms, EachProgramHoldsTheNameWhileItHoldsTheSegment) {
  FakeTracker sender(11), receiver(22);
  auto sent = SharedSegment::create(16, &sender);
  const std::string name = sent->name();
  EXPECT_TRUE(sender.holds(name));
  auto received = SharedSegment::open(name, sent->issue_ticket(), &receiver);
  EXPECT_TRUE(receiver.holds(name));
  EXPECT_EQ(sent->program_references(), 1) << "the redeemed ticket left the sender's program";
  EXPECT_EQ(received->program_references(), 1);
  sent.reset();  // the sender's program ends normally: it no longer holds the name
  EXPECT_FALSE(sender.holds(name));
  EXPECT_TRUE(name_exists(name)) << "the receiver still holds it";
  received.reset();
  EXPECT_FALSE(receiver.holds(name));
  EXPECT_FALSE(name_exists(name));
  for (const auto& [n, count] : sender.held) EXPECT_EQ(count, 0) << n;
}

TEST(SharedSegmentPrograms, ATicketInFlightKeepsTheSendersHoldUntilItIsSettled) {
  FakeTracker sender(11), receiver(22);
  auto sent = SharedSegment::create(16, &sender);
  const std::string name = sent->name();
  const uint64_t ticket = sent->issue_ticket();
  sent.reset();  // let go before the receiver loads: the ticket still counts for the sender
  EXPECT_TRUE(sender.holds(name));
  ASSERT_EQ(sender.later, std::vector<std::string>{name});
  auto received = SharedSegment::open(name, ticket, &receiver);
  EXPECT_TRUE(sender.holds(name)) << "the receiver cannot tell the sender's service";
  SharedSegment::settle(name, sender);  // what the sender does before it exits
  EXPECT_FALSE(sender.holds(name));
  EXPECT_TRUE(name_exists(name));
  received.reset();
  EXPECT_FALSE(name_exists(name));
}

TEST(SharedSegmentPrograms, AnUnsettledHoldOfAnotherProgramKeepsTheNameForItToSettle) {
  FakeTracker sender(11), receiver(22);
  auto sent = SharedSegment::create(16, &sender);
  const std::string name = sent->name();
  const uint64_t ticket = sent->issue_ticket();
  sent.reset();
  auto received = SharedSegment::open(name, ticket, &receiver);
  received.reset();  // the count is zero, but the sender's service still holds the name
  EXPECT_TRUE(name_exists(name)) << "unlinked under a registration the sender must withdraw";
  SharedSegment::settle(name, sender);
  EXPECT_FALSE(sender.holds(name));
  EXPECT_FALSE(name_exists(name)) << "settling the last registration unlinks";
}

TEST(SharedSegmentPrograms, WithinOneProgramTheHoldPassesWithoutBeingWithdrawn) {
  FakeTracker program(7);
  auto worker = SharedSegment::create(16, &program);
  const std::string name = worker->name();
  const uint64_t ticket = worker->issue_ticket();
  worker.reset();
  auto parent = SharedSegment::open(name, ticket, &program);
  EXPECT_EQ(program.held[name], 1) << "registered once, never withdrawn in between";
  parent.reset();
  EXPECT_EQ(program.held[name], 0);
  EXPECT_FALSE(name_exists(name));
}

TEST(SharedSegmentPrograms, AProgramThatLetGoGivesItsEntryBackSoAChainOfProgramsIsAllRegistered) {
  // A segment handed along a chain of programs, never more than two holding it:
  // each program's entry comes back when it lets go (or settles), so the 50th
  // still has one, and its hold is registered where its service can see it.
  std::vector<std::unique_ptr<FakeTracker>> programs;
  programs.push_back(std::make_unique<FakeTracker>(1));
  auto held = SharedSegment::create(16, programs.back().get());
  const std::string name = held->name();
  for (uint64_t key = 2; key <= 50; ++key) {
    const uint64_t ticket = held->issue_ticket();
    FakeTracker& previous = *programs.back();
    if (key % 2 == 1) held.reset();  // every other one lets go with the ticket in flight
    programs.push_back(std::make_unique<FakeTracker>(key));
    auto next = SharedSegment::open(name, ticket, programs.back().get());
    held.reset();
    SharedSegment::settle(name, previous);  // what every program does as it exits
    EXPECT_FALSE(previous.holds(name)) << "program " << key - 1;
    ASSERT_TRUE(programs.back()->holds(name)) << "program " << key << " has no entry";
    EXPECT_EQ(next->program_references(), 1) << "program " << key;
    held = std::move(next);
  }
  held.reset();
  EXPECT_FALSE(name_exists(name));
}

TEST(SharedSegmentPrograms, SixteenProgramsHoldASegmentAtOnceAndTheSeventeenthIsCountedInTheTotal) {
  std::vector<std::unique_ptr<FakeTracker>> programs;
  std::vector<std::shared_ptr<SharedSegment>> holds;
  programs.push_back(std::make_unique<FakeTracker>(100));
  holds.push_back(SharedSegment::create(16, programs.back().get()));
  const std::string name = holds.back()->name();
  for (uint64_t key = 101; key < 117; ++key) {
    programs.push_back(std::make_unique<FakeTracker>(key));
    holds.push_back(SharedSegment::open(name, holds.front()->issue_ticket(), programs.back().get()));
  }
  for (size_t i = 0; i < 16; ++i) EXPECT_TRUE(programs[i]->holds(name)) << i;
  EXPECT_FALSE(programs[16]->holds(name)) << "a 17th program at once has no entry";
  EXPECT_EQ(holds[16]->program_references(), -1);
  holds[3].reset();  // one program lets go: its entry is free for the next
  EXPECT_EQ(holds[16]->program_references(), -1) << "a mapping made without an entry stays without";
  programs.push_back(std::make_unique<FakeTracker>(200));
  holds.push_back(SharedSegment::open(name, holds.front()->issue_ticket(), programs.back().get()));
  EXPECT_TRUE(programs.back()->holds(name));
  holds.clear();
  EXPECT_FALSE(name_exists(name));
}

}  // namespace
