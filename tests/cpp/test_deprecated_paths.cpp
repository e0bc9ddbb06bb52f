// What is kept for one release after the core was split into folders
// (CHANGELOG.md): the old include paths still compile and give the same
// declarations, and the 0.1.0 names ExportRequest and ExportPlan still name
// the one request and plan type. Compiling this file is most of the test.
// The python/ forwarders (nanobind.hpp, pybind11.hpp) need Python and are
// compiled by tests/outside instead.
#include <gtest/gtest.h>

#include <dlbridge/carry_out.hpp>
#include <dlbridge/consumer.hpp>
#include <dlbridge/convert_plan.hpp>
#include <dlbridge/copy.hpp>
#include <dlbridge/device_request.hpp>
#include <dlbridge/host_memory.hpp>
#include <dlbridge/producer.hpp>
#include <dlbridge/shared_memory.hpp>
#include <dlbridge/tensor_arg.hpp>
#include <dlbridge/transfer.hpp>

#include <type_traits>
#include <vector>

namespace {

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static_assert(std::is_same_v<dlbridge::ExportRequest, dlbridge::ExchangeRequest>);
static_assert(std::is_same_v<dlbridge::ExportPlan, dlbridge::ExchangePlan>);
#pragma GCC diagnostic pop

TEST(DeprecatedPaths, DeclareWhatTheyDeclaredBefore) {
  std::vector<float> data(6, 1.0f);
  const auto view =
      dlbridge::TensorView::from_data(data.data(), {dlbridge::abi::kDLFloat, 32, 1}, {2, 3});
  dlbridge::ExchangeRequest request;                      // request.hpp, through producer.hpp
  request.device = dlbridge::Device{};
  request.copy = true;
  const auto exported = dlbridge::plan_export(view, request);   // producer.hpp
  const auto imported = dlbridge::plan_import(view, request);   // consumer.hpp
  EXPECT_TRUE(exported.copy && imported.copy);
  auto copy = dlbridge::carry_out(view, exported);               // carry_out.hpp
  ASSERT_TRUE(copy);
  EXPECT_EQ(copy->view().nbytes(), 24);
  EXPECT_EQ(dlbridge::copy_to_compact(view).view().size(), 6);   // copy.hpp
  EXPECT_EQ(dlbridge::copy_to_device(view, dlbridge::Device{}).view().size(), 6);  // transfer.hpp
  EXPECT_EQ(dlbridge::served_backend(dlbridge::Device{})->name(), "cpu");  // device_request.hpp
  EXPECT_EQ(dlbridge::host_alignment, 64u);                       // host_memory.hpp
  dlbridge::ConvertTarget target;                                 // convert_plan.hpp
  EXPECT_EQ(dlbridge::plan_convert(view, dlbridge::Writability::writable, target, std::nullopt).copy,
            dlbridge::CopyBy::none);
  EXPECT_TRUE((std::is_class_v<dlbridge::SharedSegment>));        // shared_memory.hpp
  EXPECT_TRUE((std::is_class_v<dlbridge::TensorArg<>>));          // tensor_arg.hpp
}

}  // namespace
