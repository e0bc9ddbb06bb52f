// src/python/storage_pool.hpp: the per-thread free list of the blocks that
// back imported tensors. It needs no Python, so it is tested here, where
// the sanitizer build (scripts/test) reports any block a thread leaves behind.
#include <gtest/gtest.h>

#include <memory>
#include <thread>
#include <vector>

#include "storage_pool.hpp"

namespace {

using dlbridge::python::StoragePoolAllocator;

struct Block {
  long words[24] = {};
};

std::shared_ptr<Block> pooled_block() {
  return std::allocate_shared<Block>(StoragePoolAllocator<Block>());
}

TEST(StoragePool, FreedBlockIsReusedNotReturnedToMalloc) {
  auto first = pooled_block();
  const void* address = first.get();
  first.reset();
  // Without the pool, malloc would hand this same-sized request the block
  // just freed; with it, the block waits on the list for the next tensor.
  auto plain = std::make_shared<Block>();
  EXPECT_NE(static_cast<const void*>(plain.get()), address);
  auto second = pooled_block();
  EXPECT_EQ(static_cast<const void*>(second.get()), address);
}

TEST(StoragePool, ListHoldsAtMostItsCapacity) {
  std::vector<std::shared_ptr<Block>> blocks;
  for (int i = 0; i < 20; ++i) blocks.push_back(pooled_block());
  std::vector<const void*> addresses;
  for (auto& b : blocks) addresses.push_back(b.get());
  blocks.clear();  // the first 8 freed stay listed, the rest go to malloc
  std::vector<std::shared_ptr<Block>> again;
  for (int i = 0; i < 8; ++i) again.push_back(pooled_block());
  // Listed blocks come back newest first: the 8th freed, ..., the 1st.
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(static_cast<const void*>(again[i].get()), addresses[7 - i]) << i;
}

TEST(StoragePool, ThreadExitHandsListedBlocksBack) {
  // The sanitizer build fails this test with a leak report if a finished
  // thread's list is not emptied.
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([] {
      std::vector<std::shared_ptr<Block>> blocks;
      for (int i = 0; i < 12; ++i) blocks.push_back(pooled_block());
    });
  for (auto& t : threads) t.join();
}

TEST(StoragePool, BlockMayBeFreedOnAnotherThread) {
  std::shared_ptr<Block> made_elsewhere;
  std::thread([&] { made_elsewhere = pooled_block(); }).join();
  const void* address = made_elsewhere.get();
  const void* reused = nullptr;
  // A fresh thread, whose list is empty (this one's may be full).
  std::thread([&] {
    made_elsewhere.reset();  // joins this thread's list
    reused = pooled_block().get();
  }).join();
  EXPECT_EQ(reused, address);
}

}  // namespace
