// The CUDA runtime, loaded when first needed with dlopen: dlbridge has no
// build-time CUDA dependency, and a machine without CUDA pays nothing and
// sees no error until a CUDA device is actually requested. Only the handful
// of entry points below are declared, with the types of the public CUDA
// runtime API (cudaError_t is an int-sized enum; streams and events are
// opaque pointers).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../platform/platform.hpp"

namespace dlbridge::backend::cuda {

using cuda_error = int;  // cudaError_t; 0 is cudaSuccess
using cuda_stream = void*;
using cuda_event = void*;

inline constexpr cuda_error success = 0;
inline constexpr cuda_error insufficient_driver = 35;  // cudaErrorInsufficientDriver
inline constexpr int memcpy_default = 4;          // cudaMemcpyDefault: UVA infers the direction
inline constexpr unsigned event_disable_timing = 2;  // cudaEventDisableTiming
inline constexpr unsigned mem_attach_global = 1;     // cudaMemAttachGlobal

// cudaMemoryType
inline constexpr int memory_unregistered = 0;
inline constexpr int memory_host = 1;
inline constexpr int memory_device = 2;
inline constexpr int memory_managed = 3;

// cudaPointerAttributes as laid out since CUDA 11 (the oldest runtime we
// load). The tail is room for fields a later runtime might append, so that
// it never writes past our object.
struct pointer_attributes {
  int type;
  int device;
  void* device_pointer;
  void* host_pointer;
  unsigned char reserved[64];
};

// cudaIpcMemHandle_t and cudaIpcEventHandle_t: CUDA_IPC_HANDLE_SIZE (64)
// opaque bytes, passed by value.
inline constexpr size_t ipc_handle_size = 64;
struct ipc_mem_handle {
  char reserved[ipc_handle_size];
};
struct ipc_event_handle {
  char reserved[ipc_handle_size];
};
inline constexpr unsigned ipc_mem_lazy_enable_peer_access = 1;  // cudaIpcMemLazyEnablePeerAccess
inline constexpr unsigned event_interprocess = 4;                // cudaEventInterprocess

struct Runtime {
  std::string path;  // the file that was loaded, for messages
  cuda_error (*get_device_count)(int*) = nullptr;
  cuda_error (*get_device)(int*) = nullptr;
  cuda_error (*set_device)(int) = nullptr;
  cuda_error (*malloc_device)(void**, size_t) = nullptr;
  cuda_error (*free_device)(void*) = nullptr;
  cuda_error (*malloc_host)(void**, size_t) = nullptr;
  cuda_error (*free_host)(void*) = nullptr;
  cuda_error (*malloc_managed)(void**, size_t, unsigned) = nullptr;
  cuda_error (*memcpy_async)(void*, const void*, size_t, int, cuda_stream) = nullptr;
  cuda_error (*memcpy_2d_async)(void*, size_t, const void*, size_t, size_t, size_t, int,
                                cuda_stream) = nullptr;
  cuda_error (*stream_synchronize)(cuda_stream) = nullptr;
  cuda_error (*event_create_with_flags)(cuda_event*, unsigned) = nullptr;
  cuda_error (*event_record)(cuda_event, cuda_stream) = nullptr;
  cuda_error (*stream_wait_event)(cuda_stream, cuda_event, unsigned) = nullptr;
  cuda_error (*event_destroy)(cuda_event) = nullptr;
  cuda_error (*pointer_get_attributes)(pointer_attributes*, const void*) = nullptr;
  const char* (*get_error_string)(cuda_error) = nullptr;
  cuda_error (*get_last_error)() = nullptr;
  // Interprocess handles (cuda_ipc.hpp). Optional: a runtime without them
  // still loads, and only sharing device memory between processes fails.
  cuda_error (*ipc_get_mem_handle)(ipc_mem_handle*, void*) = nullptr;
  cuda_error (*ipc_open_mem_handle)(void**, ipc_mem_handle, unsigned) = nullptr;
  cuda_error (*ipc_close_mem_handle)(void*) = nullptr;
  cuda_error (*ipc_get_event_handle)(ipc_event_handle*, cuda_event) = nullptr;
  cuda_error (*ipc_open_event_handle)(cuda_event*, ipc_event_handle) = nullptr;
  // The driver's entry points by name (CUDA >= 11.3; ByVersion since 12.5),
  // for what only the driver answers: an allocation's extent (cuda_ipc.hpp).
  // Optional. CUDA 11 declares no last argument; passing NULL there is harmless.
  cuda_error (*get_driver_entry_point)(const char*, void**, unsigned long long, int*) = nullptr;
  cuda_error (*get_driver_entry_point_by_version)(const char*, void**, unsigned, unsigned long long,
                                                  int*) = nullptr;

  std::string error_text(cuda_error code) const {
    const char* text = get_error_string ? get_error_string(code) : nullptr;
    return (text ? std::string(text) : std::string("CUDA error")) + " (" +
           std::to_string(code) + ")";
  }
};

// The sonames users have: the unversioned developer link first, then each
// major version the API above is stable across (11.0 is that release's
// soname; 12 and 13 dropped the minor).
inline const std::vector<std::string>& default_cudart_names() {
  static const std::vector<std::string> names = {"libcudart.so", "libcudart.so.13",
                                                 "libcudart.so.12", "libcudart.so.11.0"};
  return names;
}

// Where nvidia-* wheels put the runtime below a site-packages directory:
// nvidia-cuda-runtime-cu11/cu12 use nvidia/cuda_runtime/lib, the CUDA 13
// wheels nvidia/cu13/lib.
inline const std::vector<std::string>& wheel_runtime_subdirs() {
  static const std::vector<std::string> dirs = {"nvidia/cuda_runtime/lib", "nvidia/cu13/lib"};
  return dirs;
}

// Files named libcudart.so* in dir, newest version first. Empty when dir
// does not exist.
inline std::vector<std::string> cudart_files_in(const std::string& dir) {
  std::vector<std::string> found;
  for (const std::string& name : detail::platform::directory_entries(dir))
    if (name.rfind("libcudart.so", 0) == 0) found.push_back(dir + "/" + name);
  // Reverse lexical order puts .so.13 before .so.12; good enough, since a
  // wheel directory holds one runtime.
  std::sort(found.rbegin(), found.rend());
  return found;
}

// Loads the runtime once, on first use, from the first candidate that opens
// and has every entry point. Thread-safe; a failed search is remembered (so
// an absent CUDA costs one search) until new search directories arrive.
class RuntimeLoader {
 public:
  // Directories to search (each for libcudart.so*), from a caller that
  // knows where runtimes live, e.g. the Python binding and sys.path.
  using HintProvider = std::function<std::vector<std::string>()>;

  // names: what dlopen tries after the environment hint and the hint
  // directories; tests pass names that cannot exist.
  explicit RuntimeLoader(std::vector<std::string> names = default_cudart_names(),
                         bool use_environment = true)
      : names_(std::move(names)), use_environment_(use_environment) {}
  RuntimeLoader(const RuntimeLoader&) = delete;
  RuntimeLoader& operator=(const RuntimeLoader&) = delete;

  // The loaded runtime, or NULL with *why saying what was tried.
  const Runtime* get(std::string* why = nullptr) {
    if (state_.load(std::memory_order_acquire) == loaded) return &runtime_;
    collect_hints();
    std::lock_guard<std::mutex> lock(mutex_);
    if (state_.load(std::memory_order_relaxed) == untried || retry_) {
      retry_ = false;
      state_.store(load() ? loaded : failed, std::memory_order_release);
    }
    if (state_.load(std::memory_order_relaxed) == loaded) return &runtime_;
    if (why) *why = reason_;
    return nullptr;
  }

  // Searched before the plain names; a previous failure is retried once.
  void add_search_dir(const std::string& dir) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (std::find(dirs_.begin(), dirs_.end(), dir) != dirs_.end()) return;
    dirs_.push_back(dir);
    if (state_.load(std::memory_order_relaxed) == failed) retry_ = true;
  }

  // Called once, outside any lock of ours (it may need an interpreter
  // lock that a thread waiting on us holds), before the first search.
  void set_hint_provider(HintProvider provider) {
    std::lock_guard<std::mutex> lock(mutex_);
    provider_ = std::move(provider);
    hints_collected_.store(false);
  }

 private:
  enum State { untried, loaded, failed };

  void collect_hints() {
    HintProvider provider;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!provider_ || hints_collected_.exchange(true)) return;
      provider = provider_;
    }
    std::vector<std::string> dirs;
    try {
      dirs = provider();
    } catch (...) {
      return;  // hints are an optimisation of the search, never an error
    }
    for (const std::string& dir : dirs) add_search_dir(dir);
  }

  std::vector<std::string> candidates() const {
    std::vector<std::string> out;
    if (use_environment_) {
      if (const char* env = std::getenv("DLBRIDGE_CUDART_PATH")) {
        // A file, or a directory holding libcudart.so*; ':'-separated.
        std::string list = env;
        size_t start = 0;
        while (start <= list.size()) {
          size_t end = list.find(':', start);
          if (end == std::string::npos) end = list.size();
          const std::string item = list.substr(start, end - start);
          if (!item.empty()) {
            std::vector<std::string> files = cudart_files_in(item);
            if (files.empty()) out.push_back(item);
            out.insert(out.end(), files.begin(), files.end());
          }
          start = end + 1;
        }
      }
    }
    for (const std::string& dir : dirs_)
      for (const std::string& file : cudart_files_in(dir)) out.push_back(file);
    out.insert(out.end(), names_.begin(), names_.end());
    return out;
  }

  template <typename F>
  static bool bind(void* library, const char* symbol, F& slot, std::string& missing) {
    void* address = detail::platform::find_symbol(library, symbol);
    if (address == nullptr) {
      if (missing.empty()) missing = symbol;
      return false;
    }
    slot = reinterpret_cast<F>(address);
    return true;
  }

  bool bind_all(void* library, Runtime& rt, std::string& missing) {
    bool ok = true;
    ok &= bind(library, "cudaGetDeviceCount", rt.get_device_count, missing);
    ok &= bind(library, "cudaGetDevice", rt.get_device, missing);
    ok &= bind(library, "cudaSetDevice", rt.set_device, missing);
    ok &= bind(library, "cudaMalloc", rt.malloc_device, missing);
    ok &= bind(library, "cudaFree", rt.free_device, missing);
    ok &= bind(library, "cudaMallocHost", rt.malloc_host, missing);
    ok &= bind(library, "cudaFreeHost", rt.free_host, missing);
    ok &= bind(library, "cudaMallocManaged", rt.malloc_managed, missing);
    ok &= bind(library, "cudaMemcpyAsync", rt.memcpy_async, missing);
    ok &= bind(library, "cudaMemcpy2DAsync", rt.memcpy_2d_async, missing);
    ok &= bind(library, "cudaStreamSynchronize", rt.stream_synchronize, missing);
    ok &= bind(library, "cudaEventCreateWithFlags", rt.event_create_with_flags, missing);
    ok &= bind(library, "cudaEventRecord", rt.event_record, missing);
    ok &= bind(library, "cudaStreamWaitEvent", rt.stream_wait_event, missing);
    ok &= bind(library, "cudaEventDestroy", rt.event_destroy, missing);
    ok &= bind(library, "cudaPointerGetAttributes", rt.pointer_get_attributes, missing);
    ok &= bind(library, "cudaGetErrorString", rt.get_error_string, missing);
    ok &= bind(library, "cudaGetLastError", rt.get_last_error, missing);
    if (ok) {
      std::string optional;  // absent IPC entry points are not a reason to pass over a runtime
      bind(library, "cudaIpcGetMemHandle", rt.ipc_get_mem_handle, optional);
      bind(library, "cudaIpcOpenMemHandle", rt.ipc_open_mem_handle, optional);
      bind(library, "cudaIpcCloseMemHandle", rt.ipc_close_mem_handle, optional);
      bind(library, "cudaIpcGetEventHandle", rt.ipc_get_event_handle, optional);
      bind(library, "cudaIpcOpenEventHandle", rt.ipc_open_event_handle, optional);
      bind(library, "cudaGetDriverEntryPoint", rt.get_driver_entry_point, optional);
      bind(library, "cudaGetDriverEntryPointByVersion", rt.get_driver_entry_point_by_version,
           optional);
    }
    return ok;
  }

  bool load() {
    std::string tried;
    std::optional<Runtime> fallback;
    for (const std::string& candidate : candidates()) {
      if (!tried.empty()) tried += "; ";
      // Opened RTLD_LOCAL: our cudart must not replace symbols another
      // library in the process resolved from its own runtime.
      std::string why;
      void* library = detail::platform::open_library(candidate, why);
      if (library == nullptr) {
        tried += candidate + " (" + why + ")";
        continue;
      }
      Runtime rt;
      std::string missing;
      if (!bind_all(library, rt, missing)) {
        detail::platform::close_library(library);
        tried += candidate + " (opened, but has no " + missing + ")";
        continue;
      }
      rt.path = candidate;
      // A runtime newer than the driver answers every call with
      // cudaErrorInsufficientDriver, while an older one further down the
      // list (a wheel's libcudart.so.12 under a CUDA 13 toolkit's
      // libcudart.so) would work: keep looking, and settle for the first
      // such runtime only when none is better, so that its error becomes
      // the reason CUDA is unavailable. A library we called into is never
      // closed (it may have registered exit handlers), nor is the one we
      // keep: memory and streams it handed out may outlive any owner we
      // could tie the handle to.
      int count = 0;
      if (rt.get_device_count(&count) == insufficient_driver) {
        rt.get_last_error();
        tried += candidate + " (newer than the installed driver)";
        if (!fallback) fallback = std::move(rt);
        continue;
      }
      runtime_ = std::move(rt);
      return true;
    }
    if (fallback) {
      runtime_ = std::move(*fallback);
      return true;
    }
    reason_ = "the CUDA runtime (libcudart) was not found; tried " + tried +
              ". Install a CUDA toolkit or the nvidia-cuda-runtime wheel, or set "
              "DLBRIDGE_CUDART_PATH to libcudart.so or its directory.";
    return false;
  }

  const std::vector<std::string> names_;
  const bool use_environment_;
  std::mutex mutex_;
  std::atomic<int> state_{untried};
  std::atomic<bool> hints_collected_{false};
  bool retry_ = false;
  std::vector<std::string> dirs_;
  HintProvider provider_;
  Runtime runtime_;
  std::string reason_;
};

// The process-wide loader the default CUDA backend uses.
inline RuntimeLoader& default_loader() {
  static RuntimeLoader* loader = new RuntimeLoader();  // never destroyed: used by late deleters
  return *loader;
}

}  // namespace dlbridge::backend::cuda
