// A small per-thread free list for the one block that std::allocate_shared
// makes for each imported tensor (the ManagedTensor and its counts). malloc
// and free of that block are a measurable part of an import
// (bench/callgrind.py); a pooled block is reused without either.
#pragma once

#include <cstddef>
#include <memory>

namespace dlbridge::python {

template <typename T>
class StoragePoolAllocator {
 public:
  using value_type = T;

  StoragePoolAllocator() noexcept = default;
  template <typename U>
  StoragePoolAllocator(const StoragePoolAllocator<U>&) noexcept {}

  T* allocate(std::size_t n) {
    List& list = free_list;  // one thread_local lookup per call: each is a call in a dlopen'ed module
    if (n == 1 && list.head != nullptr) {
      Node* node = list.head;
      list.head = node->next;
      --list.count;
      return reinterpret_cast<T*>(node);
    }
    return std::allocator<T>().allocate(n);
  }

  // A block freed on another thread than it was made on joins that
  // thread's list: the lists hold plain memory, so either is fine.
  void deallocate(T* p, std::size_t n) noexcept {
    List& list = free_list;
    if (n == 1 && list.count < capacity && list.state != State::closed) {
      if (list.state == State::unused) {
        list.state = State::open;
        (void)&closer;  // its first use registers ~Closer for this thread's exit
      }
      Node* node = reinterpret_cast<Node*>(p);
      node->next = list.head;
      list.head = node;
      ++list.count;
      return;
    }
    std::allocator<T>().deallocate(p, n);
  }

  template <typename U>
  bool operator==(const StoragePoolAllocator<U>&) const noexcept { return true; }
  template <typename U>
  bool operator!=(const StoragePoolAllocator<U>&) const noexcept { return false; }

 private:
  // Enough for a loop that keeps a few tensors alive at a time.
  static constexpr int capacity = 8;

  union Node {
    Node* next;
    alignas(T) unsigned char bytes[sizeof(T)];
  };

  enum class State : unsigned char { unused, open, closed };

  // Trivially destructible: reading it needs no guard, and it stays
  // readable while the thread's thread_local destructors run, so a block
  // freed after ~Closer (by another such destructor) bypasses the list.
  struct List {
    Node* head;
    int count;
    State state;
  };

  // Hands the listed blocks back when the thread ends.
  struct Closer {
    ~Closer() {
      List& list = free_list;
      list.state = State::closed;
      while (list.head != nullptr) {
        Node* node = list.head;
        list.head = node->next;
        std::allocator<T>().deallocate(reinterpret_cast<T*>(node), 1);
      }
      list.count = 0;
    }
  };

  static thread_local List free_list;
  static thread_local Closer closer;
};

template <typename T>
thread_local typename StoragePoolAllocator<T>::List StoragePoolAllocator<T>::free_list{nullptr, 0, StoragePoolAllocator<T>::State::unused};
template <typename T>
thread_local typename StoragePoolAllocator<T>::Closer StoragePoolAllocator<T>::closer;

}  // namespace dlbridge::python
