// What the core asks of the operating system and of GCC or Clang, in one
// place: loading a shared library (the CUDA runtime), listing a directory
// (where pip puts that runtime), advising huge pages, and which vector sets
// the CPU runs. dlbridge's backends and copy engine support POSIX systems
// with GCC or Clang (README.md, "Supported platforms"); anything else stops
// here, at compile time, rather than deep inside a header. The tensor model
// below them (dtypes, devices, layouts, views, managed tensors) does not
// include this header and compiles on any C++17 compiler (../compiler.hpp).
#pragma once

#if !defined(__unix__) && !defined(__APPLE__)
#error "dlbridge needs a POSIX system (Linux; macOS untested): see README.md, Supported platforms."
#endif
#if !defined(__GNUC__)
#error "dlbridge's backends and copy engine need GCC or Clang (vector-set attributes): see README.md."
#endif

#include <dirent.h>
#include <dlfcn.h>

#include "../compiler.hpp"

// Kernels for a wider vector set than the build's are compiled for it alone
// and chosen at run time, so that one build runs on every x86-64 CPU.
// -DDLBRIDGE_NO_AVX512 leaves out the AVX-512 ones, -DDLBRIDGE_NO_AVX2 both
// (the sub-byte kernels then run their portable 64-bit form).
#if defined(__x86_64__) && !defined(DLBRIDGE_NO_AVX2)
#define DLBRIDGE_AVX2_KERNELS 1
#define DLBRIDGE_TARGET_AVX2 __attribute__((target("avx2")))
#endif
#if defined(DLBRIDGE_AVX2_KERNELS) && !defined(DLBRIDGE_NO_AVX512)
#define DLBRIDGE_AVX512_KERNELS 1
#define DLBRIDGE_TARGET_AVX512 __attribute__((target("avx512f")))
#define DLBRIDGE_TARGET_AVX512BW __attribute__((target("avx512f,avx512bw")))
#endif

#if defined(__linux__)
#include <sched.h>
#include <sys/mman.h>
#endif

#include <cstddef>
#include <string>
#include <thread>
#include <vector>

namespace dlbridge::detail::platform {

// A shared library opened with its own symbols kept private (RTLD_LOCAL: a
// runtime loaded here must not replace symbols another library of the
// process resolved from its own copy); NULL with the loader's reason.
inline void* open_library(const std::string& path, std::string& why) {
  void* library = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* error = ::dlerror();
    why = error ? error : "cannot be opened";
  }
  return library;
}

inline void* find_symbol(void* library, const char* name) { return ::dlsym(library, name); }

inline void close_library(void* library) { ::dlclose(library); }

// The names in dir (without "." and ".."); empty when it cannot be read.
inline std::vector<std::string> directory_entries(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return names;
  while (const dirent* entry = ::readdir(d)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(d);
  return names;
}

// The compiler's checks include the OS's: that it saves the registers.
#if defined(DLBRIDGE_AVX2_KERNELS)
inline bool cpu_has_avx2() noexcept { return __builtin_cpu_supports("avx2") != 0; }
#endif
#if defined(DLBRIDGE_AVX512_KERNELS)
inline bool cpu_has_avx512f() noexcept { return __builtin_cpu_supports("avx512f") != 0; }
inline bool cpu_has_avx512bw() noexcept {
  return cpu_has_avx512f() && __builtin_cpu_supports("avx512bw") != 0;
}
#endif

// The CPUs this thread may run on (its affinity mask: a process pinned with
// taskset or os.sched_setaffinity gets fewer than the machine has); where
// that cannot be asked, the hardware's count; at least 1.
inline unsigned usable_cpus() noexcept {
#if defined(__linux__)
  cpu_set_t set;
  if (::sched_getaffinity(0, sizeof set, &set) == 0) {
    const int count = CPU_COUNT(&set);
    if (count > 0) return unsigned(count);
  }
#endif
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : hw;
}

// Asks the kernel to back a large buffer with huge pages (a hint; a no-op
// where there is no such advice).
inline void advise_huge_pages(void* data, size_t size) noexcept {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  ::madvise(data, size, MADV_HUGEPAGE);
#else
  (void)data;
  (void)size;
#endif
}

}  // namespace dlbridge::detail::platform
