// TensorArg<require...>: the requirements written in a parameter type, each
// refused with its own code, and the typed data pointer.
#include <gtest/gtest.h>

#include <dlbridge/python/tensor_arg.hpp>

#include <cstdint>
#include <type_traits>
#include <vector>

namespace {

namespace req = dlbridge::require;
using dlbridge::ErrorCode;

dlbridge::TensorView floats(std::vector<float>& data, std::vector<int64_t> shape,
                            std::vector<int64_t> strides = {}, uint64_t flags = 0) {
  return dlbridge::TensorView::from_data(data.data(), dlbridge::dtype_of<float>(), shape, strides,
                                         dlbridge::Device{}, flags);
}

template <typename Arg>
ErrorCode refusal(const dlbridge::TensorView& view) {
  try {
    Arg arg(view);
  } catch (const dlbridge::Error& e) {
    return e.code();
  }
  ADD_FAILURE() << "the view was accepted";
  return ErrorCode::invalid_argument;
}

TEST(TensorArg, AcceptsAViewThatMeetsEveryRequirement) {
  std::vector<float> data(6, 1.5f);
  using Arg = dlbridge::TensorArg<req::dtype<float>, req::ndim<2>, req::c_contiguous, req::writable,
                                  req::cpu, req::host_accessible>;
  Arg arg(floats(data, {2, 3}));
  static_assert(std::is_same_v<decltype(arg.data()), float*>);
  EXPECT_EQ(arg.data(), data.data());
  EXPECT_EQ(arg->size(), 6);
  const dlbridge::TensorView& view = arg;
  EXPECT_EQ(view.shape(1), 3);
  EXPECT_EQ(&*arg, &arg.view()) << "*x and x.view() are the one checked view";
  EXPECT_EQ((*arg).data(), data.data());
}

TEST(TensorArg, AWritableArgumentRefusesACopyTheImportMade) {
  // A copy (a torch tensor's resolved negation, a producer's IS_COPIED export) would take the
  // function's writes and drop them: only memory the caller's object holds is writable here.
  std::vector<float> data(6);
  const auto copied = floats(data, {6}, {}, DLBRIDGE_FLAG_IS_COPIED);
  EXPECT_EQ(refusal<dlbridge::TensorArg<req::writable>>(copied), ErrorCode::copy_required);
  EXPECT_NO_THROW(dlbridge::TensorArg<req::dtype<float>>{copied}) << "a function that only reads takes it";
  EXPECT_EQ(refusal<dlbridge::TensorArg<req::writable>>(
                floats(data, {6}, {}, DLBRIDGE_FLAG_IS_COPIED | DLBRIDGE_FLAG_READ_ONLY)),
            ErrorCode::copy_required) << "a copy first, as from_dlpack(x, copy=False) refuses it";
}

TEST(TensorArg, WithoutADtypeTheDataIsUntyped) {
  static_assert(std::is_same_v<dlbridge::TensorArg<req::writable>::element_type, void>);
  static_assert(std::is_same_v<dlbridge::TensorArg<req::writable, req::dtype<int8_t>>::element_type, int8_t>);
}

TEST(TensorArg, EachMissedRequirementHasItsCode) {
  std::vector<float> data(6);
  EXPECT_EQ(refusal<dlbridge::TensorArg<req::dtype<double>>>(floats(data, {6})), ErrorCode::unsupported_dtype);
  EXPECT_EQ(refusal<dlbridge::TensorArg<req::ndim<2>>>(floats(data, {6})), ErrorCode::unsupported_layout);
  EXPECT_EQ(refusal<dlbridge::TensorArg<req::c_contiguous>>(floats(data, {3, 2}, {1, 3})),
            ErrorCode::unsupported_layout);
  EXPECT_EQ(refusal<dlbridge::TensorArg<req::writable>>(floats(data, {6}, {}, DLBRIDGE_FLAG_READ_ONLY)),
            ErrorCode::read_only);
  EXPECT_EQ(refusal<dlbridge::TensorArg<req::device<dlbridge::abi::kDLCUDA>>>(floats(data, {6})),
            ErrorCode::device_unavailable);
}

TEST(TensorArg, MessagesNameWhatWasExpectedAndWhatCame) {
  std::vector<float> data(6);
  try {
    dlbridge::TensorArg<req::dtype<int32_t>, req::ndim<1>> arg(floats(data, {6}));
    FAIL() << "float32 accepted as int32";
  } catch (const dlbridge::Error& e) {
    EXPECT_EQ(e.message(), "This function takes int32 tensors; got float32.");
    EXPECT_NE(e.hint().find("astype('int32')"), std::string::npos);
  }
  try {
    dlbridge::TensorArg<req::c_contiguous> arg(floats(data, {3, 2}, {1, 3}));
    FAIL() << "a transposed view accepted as C-contiguous";
  } catch (const dlbridge::Error& e) {
    EXPECT_EQ(e.message(), "This function takes C-contiguous tensors; got strides (1, 3) for shape (3, 2).");
  }
}

TEST(TensorArg, RequirementsAreDataThatCanBeBuiltAtRunTime) {
  std::vector<float> data(4);
  dlbridge::ArgRequirements r;
  r.ndim = 1;
  r.check(floats(data, {4}));
  r.dtype = dlbridge::dtype_of<uint8_t>();
  EXPECT_THROW(r.check(floats(data, {4})), dlbridge::Error);
  EXPECT_EQ(dlbridge::TensorArg<req::ndim<3>>::requirements().ndim, 3);
}

TEST(TensorArg, TensorViewsOwnChecksStillApply) {
  // ArgRequirements asks TensorView::check for what it does not check itself.
  std::vector<float> data(8);
  dlbridge::ArgRequirements r;
  r.policy.require_host_accessible = true;
  auto on_cuda = dlbridge::TensorView::from_data(data.data(), dlbridge::dtype_of<float>(), {4}, {},
                                                 dlbridge::Device{dlbridge::abi::kDLCUDA, 0});
  try {
    r.check(on_cuda);
    FAIL() << "device memory accepted as host-accessible";
  } catch (const dlbridge::Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::device_unavailable);
  }
  dlbridge::ArgRequirements aligned;
  aligned.policy.min_alignment = 64;
  auto* odd = reinterpret_cast<float*>(reinterpret_cast<uintptr_t>(data.data()) | 4);
  try {
    aligned.check(dlbridge::TensorView::from_data(odd, dlbridge::dtype_of<float>(), {1}));
    FAIL() << "a misaligned view accepted";
  } catch (const dlbridge::Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::unsupported_layout);
  }
}

TEST(TensorArg, TheFirstMissedRequirementIsRaised) {
  std::vector<float> data(6);
  auto read_only_transposed = floats(data, {3, 2}, {1, 3}, DLBRIDGE_FLAG_READ_ONLY);
  EXPECT_EQ((refusal<dlbridge::TensorArg<req::dtype<double>, req::writable>>(read_only_transposed)),
            ErrorCode::unsupported_dtype);
  EXPECT_EQ((refusal<dlbridge::TensorArg<req::c_contiguous, req::writable>>(read_only_transposed)),
            ErrorCode::read_only);
  try {
    dlbridge::TensorArg<req::writable> arg(read_only_transposed);
    FAIL() << "a read-only view accepted as writable";
  } catch (const dlbridge::Error& e) {
    // ArgRequirements' own message, with the fix for a function argument.
    EXPECT_EQ(e.message(), "This function writes to its argument, and the tensor is read-only.");
  }
}

TEST(TensorArg, CastersFillTheViewInPlaceThenCheckIt) {
  using Access = dlbridge::detail::TensorArgAccess;
  std::vector<float> data(6);
  dlbridge::TensorArg<req::dtype<float>, req::ndim<2>> arg;
  Access::unchecked_view(arg) = floats(data, {2, 3});
  Access::check(arg);
  EXPECT_EQ(arg.data(), data.data());
  Access::unchecked_view(arg) = floats(data, {6});
  try {
    Access::check(arg);
    FAIL() << "a 1-d view passed ndim<2>";
  } catch (const dlbridge::Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::unsupported_layout);
  }
}

}  // namespace
