// The reference count of a shared-memory segment decides when its name is
// unlinked: these tests follow the count through tickets, repeated loads,
// releases and a forked child, and check /dev/shm for what is left.
#include <gtest/gtest.h>

#include "support/error_of.hpp"

#include <dlbridge/shared_memory.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>

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

}  // namespace
