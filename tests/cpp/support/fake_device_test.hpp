// The fixture of the C++ tests that plan and carry out exchanges with the
// fake kDLExtDev backend (producer, consumer and transfer tests): the backend
// installed for the test, and a 2x3 float32 host tensor to move.
#pragma once

#include <gtest/gtest.h>

#include "fake_backend.hpp"

#include <memory>
#include <vector>

namespace test_support {

constexpr dlbridge::DType f32{dlbridge::abi::kDLFloat, 32, 1};
constexpr dlbridge::Device cpu{};
constexpr dlbridge::Device ext0{dlbridge::abi::kDLExtDev, 0};  // present
constexpr dlbridge::Device ext1{dlbridge::abi::kDLExtDev, 1};  // absent

struct FakeDeviceTest : ::testing::Test {
  std::shared_ptr<FakeBackend> fake = std::make_shared<FakeBackend>();
  ScopedBackend installed{dlbridge::abi::kDLExtDev, fake};
  std::vector<float> data = iota(6);
  dlbridge::TensorView host = dlbridge::TensorView::from_data(data.data(), f32, {2, 3});
};

}  // namespace test_support
