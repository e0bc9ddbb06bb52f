// The DLPack 1.3 C exchange API between two C++ frameworks, with no Python:
// a producer's table built by make_exchange_api<Provider>() and a consumer
// that only sees the C function pointers.
#include <gtest/gtest.h>

#include <dlbridge/dlbridge.hpp>

#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "support/error_of.hpp"

namespace {

namespace dl = dlbridge;
namespace dlabi = dlbridge::abi;
using test_support::error_of;

// The producer framework's own array type; the table passes it as void*.
struct Array {
  std::shared_ptr<std::vector<float>> data;
  std::vector<int64_t> shape;
  bool readonly = false;
};

struct ArrayProvider {
  static inline std::string last_error;
  static inline int objects_made = 0;

  static dl::TensorView view_of(void* object) {
    if (object == nullptr) dl::detail::fail(dl::ErrorCode::invalid_argument, "NULL array.");
    auto* a = static_cast<Array*>(object);
    return dl::TensorView::from_data(a->data->data(), dl::dtype_of<float>(), a->shape, {}, {},
                                     a->readonly ? DLBRIDGE_FLAG_READ_ONLY : 0);
  }
  static dlabi::DLManagedTensorVersioned* to_managed(void* object) {
    auto* a = static_cast<Array*>(object);
    dl::TensorView v = view_of(object);
    return dl::make_versioned(v, a->data, v.flags());
  }
  static void to_dltensor(void* object, dlabi::DLTensor* out) {
    // Borrowed: the shape lives in the Array, which outlives the call.
    auto* a = static_cast<Array*>(object);
    view_of(object);
    *out = dlabi::DLTensor{a->data->data(), {dlabi::kDLCPU, 0}, int32_t(a->shape.size()),
                           {dlabi::kDLFloat, 32, 1}, a->shape.data(), nullptr, 0};
  }
  static void* from_managed(dlabi::DLManagedTensorVersioned* tensor) {
    dl::ManagedTensor owned = dl::ManagedTensor::adopt(tensor);
    ++objects_made;
    auto* out = new dl::ManagedTensor(std::move(owned));
    return out;
  }
  static void* current_stream(dl::Device device) {
    if (device.type != dlabi::kDLCPU)
      dl::detail::fail(dl::ErrorCode::device_unavailable, "only the CPU here");
    return nullptr;
  }
  static void report_error(std::exception_ptr error) noexcept {
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      last_error = e.what();
    }
  }
};

const dlabi::DLPackExchangeAPI* table() { return dl::make_exchange_api<ArrayProvider>(); }

TEST(ExchangeApi, HeaderIsVersion13WithNoOlderTable) {
  const dlabi::DLPackExchangeAPI* api = table();
  EXPECT_EQ(api->header.version.major, 1u);
  EXPECT_EQ(api->header.version.minor, 3u);
  EXPECT_EQ(api->header.prev_api, nullptr);
  EXPECT_EQ(api, table());  // one static table per provider
  EXPECT_NE(api->dltensor_from_py_object_no_sync, nullptr);
}

TEST(ExchangeApi, ManagedImportKeepsTheDataAliveUntilTheDeleter) {
  auto data = std::make_shared<std::vector<float>>(std::vector<float>{1, 2, 3, 4, 5, 6});
  Array a{data, {2, 3}, true};
  std::weak_ptr<std::vector<float>> watch = data;
  data.reset();
  dl::ManagedTensor imported = dl::import_with(table(), &a);
  a.data.reset();  // the producer lets go; the export still owns the memory
  ASSERT_FALSE(watch.expired());
  EXPECT_EQ(imported.view().shape(1), 3);
  EXPECT_TRUE(imported.view().readonly());
  EXPECT_EQ(static_cast<const float*>(imported.view().data())[5], 6.0f);
  imported.reset();
  EXPECT_TRUE(watch.expired());
}

TEST(ExchangeApi, BorrowedViewPointsIntoTheProducer) {
  Array a{std::make_shared<std::vector<float>>(4), {4}};
  dlabi::DLTensor t{};
  ASSERT_EQ(table()->dltensor_from_py_object_no_sync(&a, &t), 0);
  EXPECT_EQ(t.data, a.data->data());
  EXPECT_EQ(t.shape, a.shape.data());
  EXPECT_EQ(dl::TensorView::from_dltensor(t).size(), 4);
}

TEST(ExchangeApi, ToObjectTakesOwnership) {
  Array a{std::make_shared<std::vector<float>>(2), {2}};
  std::weak_ptr<std::vector<float>> watch = a.data;
  dlabi::DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(table()->managed_tensor_from_py_object_no_sync(&a, &m), 0);
  a.data.reset();
  void* object = nullptr;
  const int before = ArrayProvider::objects_made;
  ASSERT_EQ(table()->managed_tensor_to_py_object_no_sync(m, &object), 0);
  EXPECT_EQ(ArrayProvider::objects_made, before + 1);
  ASSERT_FALSE(watch.expired());
  delete static_cast<dl::ManagedTensor*>(object);
  EXPECT_TRUE(watch.expired());
}

TEST(ExchangeApi, FailuresReturnMinusOneAndNoExceptionCrosses) {
  dlabi::DLManagedTensorVersioned* m = nullptr;
  ArrayProvider::last_error.clear();
  EXPECT_EQ(table()->managed_tensor_from_py_object_no_sync(nullptr, &m), -1);
  EXPECT_NE(ArrayProvider::last_error.find("NULL array"), std::string::npos);
  void* object = nullptr;
  EXPECT_EQ(table()->managed_tensor_to_py_object_no_sync(nullptr, &object), -1);
  EXPECT_NE(ArrayProvider::last_error.find("NULL"), std::string::npos);
  void* stream = reinterpret_cast<void*>(1);
  EXPECT_EQ(table()->current_work_stream(dlabi::kDLCPU, 0, &stream), 0);
  EXPECT_EQ(stream, nullptr);
  EXPECT_EQ(table()->current_work_stream(dlabi::kDLCUDA, 0, &stream), -1);
}

TEST(ExchangeApi, AllocatorMakesCompactHostTensorsAndReportsThroughSetError) {
  int64_t shape[] = {3, 5};
  dlabi::DLTensor prototype{nullptr, {dlabi::kDLCPU, 0}, 2, {dlabi::kDLFloat, 64, 1}, shape, nullptr, 0};
  dlabi::DLManagedTensorVersioned* out = nullptr;
  std::string kind, message;
  auto set_error = [](void* ctx, const char* k, const char* msg) {
    auto* seen = static_cast<std::pair<std::string, std::string>*>(ctx);
    seen->first = k;
    seen->second = msg;
  };
  std::pair<std::string, std::string> seen;
  ASSERT_EQ(table()->managed_tensor_allocator(&prototype, &out, &seen, set_error), 0);
  dl::ManagedTensor owned = dl::ManagedTensor::adopt(out);
  EXPECT_TRUE(owned.view().is_c_contiguous());
  EXPECT_EQ(owned.view().nbytes(), 3 * 5 * 8);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(owned.view().data()) % 64, 0u);

  prototype.device = {dlabi::kDLCUDA, 0};
  EXPECT_EQ(table()->managed_tensor_allocator(&prototype, &out, &seen, set_error), -1);
  EXPECT_EQ(seen.first, "BufferError");
  EXPECT_NE(seen.second.find("kDLCUDA"), std::string::npos);
  EXPECT_EQ(table()->managed_tensor_allocator(nullptr, &out, &seen, set_error), -1);
  prototype.device = {dlabi::kDLCPU, 0};
  int64_t negative[] = {3, -5};
  prototype.shape = negative;
  EXPECT_EQ(table()->managed_tensor_allocator(&prototype, &out, &seen, set_error), -1);
  EXPECT_EQ(seen.first, "ValueError");  // a bad argument, as Python would say
  prototype.shape = shape;
  prototype.ndim = -1;
  EXPECT_EQ(table()->managed_tensor_allocator(&prototype, &out, &seen, set_error), -1);
  EXPECT_EQ(table()->managed_tensor_allocator(&prototype, &out, nullptr, nullptr), -1);
}

TEST(ExchangeApi, UsableTableWalksToAnUnderstoodVersion) {
  dlabi::DLPackExchangeAPI older = *table();
  older.header.version = {1, 2};
  dlabi::DLPackExchangeAPI future = *table();
  future.header.version = {2, 0};
  future.header.prev_api = &older.header;
  EXPECT_EQ(dl::usable_exchange_api(&future.header), &older);
  dlabi::DLPackExchangeAPI empty = *table();
  empty.managed_tensor_from_py_object_no_sync = nullptr;
  EXPECT_EQ(dl::usable_exchange_api(&empty.header), nullptr);
  dlabi::DLPackExchangeAPIHeader too_old{{1, 1}, nullptr};
  EXPECT_EQ(dl::usable_exchange_api(&too_old), nullptr);
  EXPECT_EQ(dl::usable_exchange_api(nullptr), nullptr);
  // A cycle in prev_api must not hang the consumer.
  dlabi::DLPackExchangeAPIHeader loop{{3, 0}, nullptr};
  loop.prev_api = &loop;
  EXPECT_EQ(dl::usable_exchange_api(&loop), nullptr);
}

TEST(ExchangeApi, ImportWithReportsAProducerFailure) {
  auto e = error_of([] { dl::import_with(table(), nullptr); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), dl::ErrorCode::invalid_tensor);
}

}  // namespace
