// Host buffers: alignment, and the one freed large buffer kept for the next
// allocation of its size (KeptBuffer). A kept buffer is recognised by what
// was written into it: memory new from the kernel reads as zeros.
#include <dlbridge/platform/host_memory.hpp>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

namespace dlbridge::detail {
namespace {

constexpr int64_t kept_size = int64_t(16) << 20;

bool starts_with(const std::shared_ptr<void>& buffer, unsigned char value) {
  const auto* bytes = static_cast<const unsigned char*>(buffer.get());
  return bytes[0] == value && bytes[kept_size - 1] == value;
}

std::shared_ptr<void> filled(int64_t bytes, unsigned char value) {
  std::shared_ptr<void> buffer = allocate_host(bytes);
  std::memset(buffer.get(), value, size_t(bytes));
  return buffer;
}

TEST(HostMemory, LargeBuffersAreHugePageAlignedAndSmallOnesCacheLineAligned) {
  auto large = allocate_host(kept_size);
  auto small = allocate_host(100);
  auto empty = allocate_host(0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(large.get()) % (size_t(2) << 20), 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small.get()) % host_alignment, 0u);
  EXPECT_NE(empty.get(), nullptr);
}

TEST(KeptBuffer, KeepsOnlySizesFrom8MiBTo256MiB) {
  EXPECT_FALSE(KeptBuffer::keeps(rounded_host_size(int64_t(6) << 20)));
  EXPECT_TRUE(KeptBuffer::keeps(rounded_host_size(int64_t(8) << 20)));
  EXPECT_TRUE(KeptBuffer::keeps(rounded_host_size(int64_t(256) << 20)));
  EXPECT_FALSE(KeptBuffer::keeps(rounded_host_size((int64_t(256) << 20) + 1)));
}

TEST(KeptBuffer, TheLastFreedBufferComesBackForItsSize) {
  filled(kept_size, 0xA5).reset();
  EXPECT_TRUE(starts_with(allocate_host(kept_size), 0xA5));
}

TEST(KeptBuffer, AnotherSizeLeavesItKept) {
  filled(kept_size, 0x3C).reset();
  auto other = allocate_host(kept_size + (int64_t(2) << 20));
  EXPECT_TRUE(starts_with(allocate_host(kept_size), 0x3C));
}

TEST(KeptBuffer, ALiveBufferIsNeverHandedOutAgain) {
  filled(kept_size, 0x11).reset();
  auto first = allocate_host(kept_size);
  auto second = allocate_host(kept_size);
  EXPECT_NE(first.get(), second.get());
  EXPECT_TRUE(starts_with(first, 0x11));
  EXPECT_FALSE(starts_with(second, 0x11));
}

TEST(KeptBuffer, TheMostRecentlyFreedIsKeptAndTheOtherFreed) {
  auto older = filled(kept_size, 0x01);
  auto newer = filled(kept_size, 0x02);
  older.reset();
  newer.reset();
  EXPECT_TRUE(starts_with(allocate_host(kept_size), 0x02));
}

}  // namespace
}  // namespace dlbridge::detail
