// The C exchange API as a foreign caller sees it: the allocator entry of
// dlbridge's table fed hostile prototypes, and usable_exchange_api walking
// hostile chains of tables.
//
// The allocator must return 0 with a compact, writable, exactly sized host
// tensor (the harness writes every byte of it; ASan checks the size), or -1
// with set_error called once with a Python exception name dlbridge documents
// and a message. No exception may cross the C boundary (it would terminate).
#include <fuzzer/FuzzedDataProvider.h>

#include <cstring>
#include <string>

#include "fuzz_support.hpp"

namespace {

using namespace dlbridge;

// Only the allocator is exercised; the other entries need a Python object.
struct NoObjects {
  static abi::DLManagedTensorVersioned* to_managed(void*) { return nullptr; }
  static void to_dltensor(void*, abi::DLTensor*) {}
  static void* from_managed(abi::DLManagedTensorVersioned*) { return nullptr; }
  static void* current_stream(Device) { return nullptr; }
  static void report_error(std::exception_ptr) noexcept {}
};

struct ErrorLog {
  int calls = 0;
  std::string kind, message;
};

void record_error(void* context, const char* kind, const char* message) {
  auto* log = static_cast<ErrorLog*>(context);
  ++log->calls;
  log->kind = kind;
  log->message = message;
}

// The largest tensor the harness lets the allocator actually allocate; the
// overflow and negative cases are refused long before that.
constexpr int64_t max_bytes = int64_t(1) << 20;

void fuzz_allocator(FuzzedDataProvider& in) {
  const int32_t ndim = in.ConsumeBool() ? in.ConsumeIntegralInRange<int32_t>(-1, 5)
                                        : in.ConsumeIntegral<int32_t>();
  std::vector<int64_t> shape(ndim >= 0 && ndim <= 70 ? size_t(ndim) : 1);
  for (int64_t& extent : shape)
    extent = in.ConsumeBool() ? in.ConsumeIntegralInRange<int64_t>(-1, 9) : in.ConsumeIntegral<int64_t>();
  abi::DLTensor prototype{};
  prototype.ndim = ndim;
  prototype.shape = in.ConsumeIntegralInRange<int>(0, 15) ? shape.data() : nullptr;
  prototype.dtype.code = in.ConsumeIntegralInRange<uint8_t>(0, 20);
  prototype.dtype.bits = in.PickValueInArray<uint8_t>({1, 4, 6, 8, 16, 32, 64, 0, 3, 255});
  prototype.dtype.lanes = in.ConsumeBool() ? 1 : in.ConsumeIntegral<uint16_t>();
  prototype.device.device_type = abi::DLDeviceType(in.ConsumeIntegralInRange<int32_t>(0, 20));
  prototype.device.device_id = in.ConsumeIntegralInRange<int32_t>(-1, 2);
  const bool null_prototype = in.ConsumeIntegralInRange<int>(0, 31) == 0;
  const bool with_callback = in.ConsumeIntegralInRange<int>(0, 15) != 0;

  // Skip what would really allocate more than max_bytes, bounded here
  // independently of dlbridge (in double: only the order of magnitude
  // matters). Sizes beyond int64 must be refused without allocating.
  if (!null_prototype && prototype.shape != nullptr && ndim >= 0 && ndim <= 64) {
    const double element = double(prototype.dtype.bits) * prototype.dtype.lanes / 8;
    double count = 1;
    bool any_negative = false;
    for (int32_t d = 0; d < ndim; ++d) {
      any_negative |= shape[size_t(d)] < 0;
      count *= double(shape[size_t(d)]);
    }
    const bool beyond_int64 = count * element > 1e19 || count > 1e19;
    if (!any_negative && !beyond_int64 && count * (element + 1) > double(max_bytes)) return;
  }

  const abi::DLPackExchangeAPI* api = make_exchange_api<NoObjects>();
  ErrorLog log;
  abi::DLManagedTensorVersioned* out = nullptr;
  const int status = api->managed_tensor_allocator(null_prototype ? nullptr : &prototype, &out,
                                                   &log, with_callback ? &record_error : nullptr);
  if (status != 0) {
    FUZZ_CHECK(status == -1);
    FUZZ_CHECK(log.calls == (with_callback ? 1 : 0));
    if (with_callback) {
      FUZZ_CHECK(log.kind == "ValueError" || log.kind == "BufferError" || log.kind == "MemoryError");
      FUZZ_CHECK(!log.message.empty());
    }
    return;
  }
  FUZZ_CHECK(log.calls == 0 && out != nullptr && out->deleter != nullptr);
  FUZZ_CHECK(out->version.major == 1 && (out->flags & DLBRIDGE_FLAG_READ_ONLY) == 0);
  const TensorView view = TensorView::from_dltensor(out->dl_tensor, out->flags);
  FUZZ_CHECK(view.device() == Device{} && view.is_c_contiguous());
  FUZZ_CHECK(view.dtype() == DType::from_dl(prototype.dtype) && view.ndim() == ndim);
  for (int32_t d = 0; d < ndim; ++d) FUZZ_CHECK(view.shape(d) == shape[size_t(d)]);
  FUZZ_CHECK(view.extent().bytes() == view.nbytes() || view.size() == 0);
  // Every byte the tensor claims must be ours to write.
  std::memset(view.data(), 0xa5, size_t(view.nbytes()));
  out->deleter(out);
}

// A chain of tables of random versions, some entries missing, maybe a cycle:
// the walk must stop, and what it returns must qualify.
void fuzz_chain(FuzzedDataProvider& in) {
  const size_t count = in.ConsumeIntegralInRange<size_t>(1, 24);
  std::vector<abi::DLPackExchangeAPI> tables(count);
  for (size_t i = 0; i < count; ++i) {
    abi::DLPackExchangeAPI& table = tables[i];
    std::memset(&table, 0, sizeof table);
    table.header.version.major = in.ConsumeIntegralInRange<uint32_t>(0, 2);
    table.header.version.minor = in.ConsumeIntegralInRange<uint32_t>(0, 4);
    if (in.ConsumeBool())
      table.managed_tensor_from_py_object_no_sync = make_exchange_api<NoObjects>()->managed_tensor_from_py_object_no_sync;
    const size_t next = in.ConsumeIntegralInRange<size_t>(0, count);  // count: end of chain
    table.header.prev_api = next == count ? nullptr : &tables[next].header;
  }
  const abi::DLPackExchangeAPI* found = usable_exchange_api(&tables[0].header);
  if (found == nullptr) return;
  FUZZ_CHECK(found >= tables.data() && found < tables.data() + count);
  FUZZ_CHECK(found->header.version.major == 1 && found->header.version.minor >= 2);
  FUZZ_CHECK(found->managed_tensor_from_py_object_no_sync != nullptr);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  if (in.ConsumeIntegralInRange<int>(0, 3) == 0)
    fuzz_chain(in);
  else
    fuzz_allocator(in);
  return 0;
}
