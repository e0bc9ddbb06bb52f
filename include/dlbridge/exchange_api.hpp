// The DLPack 1.3 C exchange API: a static table of C function pointers that
// lets two frameworks exchange tensors without going through Python-level
// __dlpack__ calls. make_exchange_api<Provider>() builds a producer's table
// from a small C++ "provider"; import_with() is the consumer side.
//
// No C++ exception crosses a table entry: every entry is wrapped once by
// detail::c_boundary, which hands the exception to Provider::report_error
// (the Python binding turns it into a Python exception) and returns -1.
#pragma once

#include <exception>
#include <new>
#include <string>

#include "abi.hpp"
#include "allocate.hpp"
#include "error.hpp"
#include "managed_tensor.hpp"

namespace dlbridge {

namespace detail {

// A table entry's boundary: 0, or -1 with the exception handed to the
// provider (the Python binding sets the Python error it stands for).
template <typename Provider, typename Body>
int c_boundary(Body&& body) noexcept {
  return error_boundary(-1, &Provider::report_error, [&] {
    body();
    return 0;
  });
}

// The Python exception class name a SetError callback is given for a code:
// the built-in class a Python caller of dlbridge would have caught (every
// dlbridge.DLPackError is a BufferError), from the error table.
constexpr const char* python_error_kind(ErrorCode code) noexcept {
  return is_builtin_python_error(code) ? error_code_info(code).python_class.data()
                                       : "BufferError";
}

// What a SetError callback is told of an exception: the Python class name a
// Python caller would have caught, and the text.
inline void report_to(void* error_ctx,
                      void (*set_error)(void* error_ctx, const char* kind, const char* message),
                      std::exception_ptr error) noexcept {
  if (set_error == nullptr) return;
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    set_error(error_ctx, python_error_kind(e.code()), e.what());
  } catch (const std::bad_alloc&) {
    set_error(error_ctx, "MemoryError", "dlbridge allocator: out of memory");
  } catch (const std::exception& e) {
    set_error(error_ctx, "RuntimeError", e.what());
  } catch (...) {
    set_error(error_ctx, "RuntimeError", "dlbridge allocator: unknown error");
  }
}

inline std::vector<int64_t> prototype_shape(const abi::DLTensor* prototype) {
  if (prototype == nullptr)
    fail(ErrorCode::invalid_argument, "The allocator got a NULL prototype.");
  if (prototype->ndim < 0 || prototype->ndim > max_ndim ||
      (prototype->ndim > 0 && prototype->shape == nullptr))
    fail(ErrorCode::invalid_tensor, "The allocator prototype has an invalid ndim or shape.");
  return std::vector<int64_t>(prototype->shape, prototype->shape + prototype->ndim);
}

}  // namespace detail

// A Provider supplies, as static functions (each may throw dlbridge::Error):
//
//     abi::DLManagedTensorVersioned* to_managed(void* object);  // new, owned
//     void to_dltensor(void* object, abi::DLTensor* out);        // borrowed
//     void* from_managed(abi::DLManagedTensorVersioned* tensor); // takes it
//     void* current_stream(Device device);                      // may be NULL
//     void report_error(std::exception_ptr error) noexcept;
//
// The allocator is shared: new compact host tensors from allocate_compact.
template <typename Provider>
const abi::DLPackExchangeAPI* make_exchange_api() noexcept {
  struct Entries {
    static int allocator(abi::DLTensor* prototype, abi::DLManagedTensorVersioned** out,
                         void* error_ctx,
                         void (*set_error)(void* error_ctx, const char* kind,
                                           const char* message)) {
      // The allocator reports through set_error, not through report_error:
      // its caller may not be Python at all.
      auto report = [&](std::exception_ptr error) noexcept {
        detail::report_to(error_ctx, set_error, error);
      };
      return detail::error_boundary(-1, report, [&] {
        std::vector<int64_t> shape = detail::prototype_shape(prototype);
        if (prototype->device.device_type != abi::kDLCPU)
          detail::fail(ErrorCode::device_unavailable,
                       "The dlbridge allocator serves kDLCPU only, got " +
                           device_type_label(prototype->device.device_type) + ".");
        *out = allocate_compact(DType::from_dl(prototype->dtype), shape).release_versioned();
        return 0;
      });
    }
    static int from_object(void* object, abi::DLManagedTensorVersioned** out) {
      return detail::c_boundary<Provider>([&] { *out = Provider::to_managed(object); });
    }
    static int to_object(abi::DLManagedTensorVersioned* tensor, void** out) {
      return detail::c_boundary<Provider>([&] { *out = Provider::from_managed(tensor); });
    }
    static int borrow(void* object, abi::DLTensor* out) {
      return detail::c_boundary<Provider>([&] { Provider::to_dltensor(object, out); });
    }
    static int stream(abi::DLDeviceType type, int32_t id, void** out) {
      return detail::c_boundary<Provider>(
          [&] { *out = Provider::current_stream(Device{type, id}); });
    }
  };
  static const abi::DLPackExchangeAPI table = {
      {dlpack_version, nullptr},
      &Entries::allocator,
      &Entries::from_object,
      &Entries::to_object,
      &Entries::borrow,
      &Entries::stream,
  };
  return &table;
}

// The newest table in a chain that dlbridge can use: major version 1 with
// the managed-tensor entry filled in. NULL when none qualifies.
inline const abi::DLPackExchangeAPI* usable_exchange_api(const abi::DLPackExchangeAPIHeader* header) noexcept {
  for (int hops = 0; header != nullptr && hops < 16; ++hops, header = header->prev_api) {
    // Tables are at least as large as the 1.2 layout from 1.2 on.
    if (header->version.major != DLBRIDGE_DLPACK_MAJOR || header->version.minor < 2) continue;
    auto* api = reinterpret_cast<const abi::DLPackExchangeAPI*>(header);
    if (api->managed_tensor_from_py_object_no_sync != nullptr) return api;
  }
  return nullptr;
}

// Consumer side: an owned, validated tensor from object through api. The
// caller must have made the producer's work visible on its own stream (the
// _no_sync entries do not synchronise).
inline ManagedTensor import_with(const abi::DLPackExchangeAPI* api, void* object,
                                 const ImportPolicy& policy = {}) {
  abi::DLManagedTensorVersioned* out = nullptr;
  if (api->managed_tensor_from_py_object_no_sync(object, &out) != 0)
    detail::fail(ErrorCode::invalid_tensor,
                 "The producer's managed_tensor_from_py_object_no_sync failed.",
                 "See the producer's error for the reason.");
  return ManagedTensor::adopt(out, policy);
}

}  // namespace dlbridge
