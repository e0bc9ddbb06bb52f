// plan_convert over the matrix of sources (writability, layout, dtype,
// device) x targets (each read-only rule, stride rule and copy behaviour the
// libraries show) x copy in {nullopt, true, false}: each case's action, who
// copies and why, or the refusal's code; and the rules that must hold for
// every case of the matrix (exactly one copy, copy=False never copies,
// protected data never reaches a target that may write through it).
#include <gtest/gtest.h>

#include "support/error_of.hpp"
#include "support/fake_backend.hpp"

#include <dlbridge/backend/registry.hpp>
#include <dlbridge/exchange/plan_convert.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace {

using dlbridge::ConvertAction;
using dlbridge::ConvertPlan;
using dlbridge::ConvertTarget;
using dlbridge::CopyBy;
using dlbridge::Device;
using dlbridge::DType;
using dlbridge::ErrorCode;
using dlbridge::ReadOnlyRule;
using dlbridge::StrideRule;
using dlbridge::TensorView;
using dlbridge::Writability;
namespace dlabi = dlbridge::abi;
using test_support::error_of;

constexpr DType f32{dlabi::kDLFloat, 32, 1};
constexpr DType bf16{dlabi::kDLBfloat, 16, 1};
constexpr DType boolean{dlabi::kDLBool, 8, 1};
constexpr DType int4{dlabi::kDLInt, 4, 1};
constexpr DType c128{dlabi::kDLComplex, 128, 1};

// 64-byte aligned storage for every view below.
alignas(64) float storage[256];

dlbridge::DTypeSet standard() {
  return {boolean, {dlabi::kDLInt, 8, 1}, {dlabi::kDLInt, 32, 1}, {dlabi::kDLInt, 64, 1},
          {dlabi::kDLUInt, 8, 1}, {dlabi::kDLFloat, 16, 1}, f32, {dlabi::kDLFloat, 64, 1},
          {dlabi::kDLComplex, 64, 1}, c128};
}

// The targets, shaped like the libraries python/dlbridge/libraries/ describes.
ConvertTarget numpy_like() {
  ConvertTarget t;
  t.name = "numpy";
  t.read_only = ReadOnlyRule::honoured;
  t.devices = {dlabi::kDLCPU, dlabi::kDLCUDAHost, dlabi::kDLROCMHost};
  t.dtypes = standard();
  t.extension = "ml_dtypes";
  t.extension_dtypes = {bf16, int4};
  t.extension_one_per_byte = true;
  return t;
}

ConvertTarget torch_like() {
  ConvertTarget t;
  t.name = "torch";
  t.read_only = ReadOnlyRule::ignored;
  t.strides = StrideRule::nonnegative;
  t.devices = {dlabi::kDLCPU, dlabi::kDLCUDA};
  t.dtypes = standard();
  t.dtypes.insert(bf16);
  return t;
}

ConvertTarget jax_like() {
  ConvertTarget t;
  t.name = "jax";
  t.read_only = ReadOnlyRule::immutable;
  t.strides = StrideRule::permuted_compact;
  t.devices = {dlabi::kDLCPU, dlabi::kDLCUDA};
  t.dtypes = standard();
  t.dtypes.insert(bf16);
  t.alignment = 64;
  return t;
}

ConvertTarget tensorflow_like() {
  ConvertTarget t = torch_like();
  t.name = "tensorflow";
  t.strides = StrideRule::row_major;
  return t;
}

ConvertTarget arrow_like() {
  ConvertTarget t;
  t.name = "arrow";
  t.read_only = ReadOnlyRule::immutable;
  t.strides = StrideRule::row_major;
  t.devices = {dlabi::kDLCPU};
  t.dtypes = {f32, {dlabi::kDLInt, 32, 1}};
  t.copied_dtypes = {boolean};
  t.zero_dim = false;
  t.max_extent = INT32_MAX;
  return t;
}

ConvertTarget mlx_like() {
  ConvertTarget t;
  t.name = "mlx";
  t.read_only = ReadOnlyRule::honoured;
  t.devices = {dlabi::kDLCPU};
  t.dtypes = standard();
  t.copies_on_import = true;
  t.max_extent = INT32_MAX;
  return t;
}

ConvertTarget anything() {
  ConvertTarget t;
  t.name = "dlbridge";
  t.read_only = ReadOnlyRule::honoured;
  t.host_memory_as_cpu = false;
  return t;
}

uint64_t flags_of(Writability w) {
  return w == Writability::writable ? 0 : DLBRIDGE_FLAG_READ_ONLY;
}

TensorView view_of(std::vector<int64_t> shape, std::vector<int64_t> strides = {}, DType dtype = f32,
                   Device device = {}, Writability w = Writability::writable, int64_t offset = 0) {
  return TensorView::from_data(storage + offset, dtype, shape, strides, device, flags_of(w));
}

ConvertPlan plan(const TensorView& v, const ConvertTarget& t, std::optional<bool> copy,
                 Writability w = Writability::writable) {
  return dlbridge::plan_convert(v, w, t, copy);
}

std::optional<ErrorCode> refusal(const TensorView& v, const ConvertTarget& t, std::optional<bool> copy,
                                 Writability w = Writability::writable) {
  auto e = error_of([&] { (void)plan(v, t, copy, w); });
  if (!e) return std::nullopt;
  return e->code();
}

TEST(PlanConvert, PlainDataIsHandedOverAsItIs) {
  for (const ConvertTarget& t : {numpy_like(), torch_like(), jax_like(), tensorflow_like(), anything()}) {
    const ConvertPlan p = plan(view_of({3, 4}), t, std::nullopt);
    EXPECT_EQ(p.action, ConvertAction::hand_over) << t.name;
    EXPECT_EQ(p.copy, CopyBy::none) << t.name;
    EXPECT_TRUE(dlbridge::convert_plan_why(p, view_of({3, 4}), Writability::writable, t).empty()) << t.name;
  }
}

TEST(PlanConvert, ReadOnlyDataGetsOnePrivateCopyForATargetThatMayWrite) {
  for (Writability w : {Writability::read_only, Writability::unknown}) {
    const TensorView v = view_of({3, 4}, {}, f32, {}, w);
    for (const ConvertTarget& t : {torch_like(), tensorflow_like()}) {
      const ConvertPlan p = plan(v, t, std::nullopt, w);
      EXPECT_EQ(p.copy, CopyBy::dlbridge) << t.name;
      EXPECT_EQ(p.reasons, uint32_t(dlbridge::copy_for_read_only)) << t.name;
      const std::string why = dlbridge::convert_plan_why(p, v, w, t);
      EXPECT_NE(why.find("cannot see READ_ONLY"), std::string::npos) << why;
      EXPECT_EQ(refusal(v, t, false, w), ErrorCode::read_only) << t.name;
      EXPECT_EQ(plan(v, t, true, w).copy, CopyBy::dlbridge);
    }
  }
}

TEST(PlanConvert, ReadOnlyDataReachesTargetsThatSeeTheFlagOrNeverWriteWithoutACopy) {
  for (Writability w : {Writability::read_only, Writability::unknown}) {
    const TensorView v = view_of({3, 4}, {}, f32, {}, w);
    for (const ConvertTarget& t : {numpy_like(), jax_like(), anything()}) {
      const ConvertPlan p = plan(v, t, false, w);
      EXPECT_EQ(p.copy, CopyBy::none) << t.name;
    }
    // A legacy capsule may carry protected data only to a target that never writes.
    EXPECT_TRUE(plan(v, jax_like(), std::nullopt, w).legacy_capsule_ok);
    EXPECT_TRUE(plan(v, mlx_like(), std::nullopt, w).legacy_capsule_ok);
    EXPECT_FALSE(plan(v, numpy_like(), std::nullopt, w).legacy_capsule_ok);
    EXPECT_FALSE(plan(v, torch_like(), std::nullopt, w).legacy_capsule_ok);
    EXPECT_FALSE(plan(view_of({3, 4}), jax_like(), std::nullopt).legacy_capsule_ok);
  }
}

TEST(PlanConvert, StridesOutsideTheTargetsRuleAreCopiedOnce) {
  const TensorView reversed = view_of({3, 4}, {4, -1}, f32, {}, Writability::writable, 3);
  const TensorView every_other = view_of({3, 4}, {8, 2});
  const TensorView transposed = view_of({4, 3}, {1, 4});
  EXPECT_EQ(plan(reversed, torch_like(), std::nullopt).reasons, uint32_t(dlbridge::copy_for_layout));
  EXPECT_EQ(refusal(reversed, torch_like(), false), ErrorCode::unsupported_layout);
  EXPECT_EQ(plan(reversed, numpy_like(), false).copy, CopyBy::none);
  EXPECT_EQ(plan(every_other, torch_like(), false).copy, CopyBy::none);
  EXPECT_EQ(plan(every_other, jax_like(), std::nullopt).copy, CopyBy::dlbridge);
  EXPECT_EQ(plan(transposed, jax_like(), false).copy, CopyBy::none);
  EXPECT_EQ(plan(transposed, tensorflow_like(), std::nullopt).copy, CopyBy::dlbridge);
  // Read-only and badly strided: one copy, for both reasons' sake, named once each.
  const TensorView both = view_of({3, 4}, {4, -1}, f32, {}, Writability::read_only, 3);
  const ConvertPlan p = plan(both, torch_like(), std::nullopt, Writability::read_only);
  EXPECT_EQ(p.copy, CopyBy::dlbridge);
  EXPECT_EQ(p.reasons, uint32_t(dlbridge::copy_for_layout));
  EXPECT_EQ(refusal(both, torch_like(), false, Writability::read_only), ErrorCode::unsupported_layout);
}

TEST(PlanConvert, ZeroDimAndSizeZeroTensors) {
  const TensorView scalar = view_of({});
  const TensorView empty = view_of({0, 5}, {-5, 1});
  EXPECT_EQ(plan(scalar, torch_like(), false).copy, CopyBy::none);
  EXPECT_EQ(refusal(scalar, arrow_like(), std::nullopt), ErrorCode::unsupported_layout);
  EXPECT_EQ(plan(empty, tensorflow_like(), false).copy, CopyBy::none);  // size 0 fits every rule
}

TEST(PlanConvert, DimensionsBeyondWhatTheTargetHoldsAreRefusedNotOverflowed) {
  const TensorView huge = view_of({0, int64_t(1) << 40});
  EXPECT_EQ(refusal(huge, mlx_like(), std::nullopt), ErrorCode::unsupported_layout);
  EXPECT_EQ(refusal(huge, arrow_like(), std::nullopt), ErrorCode::unsupported_layout);
  EXPECT_EQ(plan(huge, numpy_like(), std::nullopt).copy, CopyBy::none);
}

TEST(PlanConvert, DTypesThroughAnExtensionOrTheTargetsOwnCopyOrNotAtAll) {
  const TensorView b = view_of({4}, {}, bf16);
  EXPECT_EQ(plan(b, numpy_like(), false).action, ConvertAction::hand_over_extension);
  EXPECT_EQ(plan(b, numpy_like(), false).copy, CopyBy::none);
  // Packed int4 becomes one value per byte: the one copy is the unpacking.
  const TensorView packed = view_of({8}, {}, int4);
  const ConvertPlan p = plan(packed, numpy_like(), std::nullopt);
  EXPECT_TRUE(p.unpack);
  EXPECT_EQ(p.copy, CopyBy::dlbridge);
  EXPECT_EQ(refusal(packed, numpy_like(), false), ErrorCode::copy_required);
  EXPECT_TRUE(plan(packed, numpy_like(), true).unpack);  // copy=True: still the one (unpacking) copy
  // Arrow bit-packs booleans itself.
  const TensorView bools = view_of({4}, {}, boolean);
  EXPECT_EQ(plan(bools, arrow_like(), std::nullopt).copy, CopyBy::target);
  EXPECT_EQ(refusal(bools, arrow_like(), false), ErrorCode::copy_required);
  EXPECT_EQ(refusal(view_of({2}, {}, c128), arrow_like(), std::nullopt), ErrorCode::unsupported_dtype);
  EXPECT_EQ(refusal(b, tensorflow_like(), std::nullopt), std::nullopt);
  EXPECT_EQ(refusal(view_of({4}, {}, int4), torch_like(), std::nullopt), ErrorCode::unsupported_dtype);
}

TEST(PlanConvert, TargetsThatCopyOnImportMakeTheOneCopy) {
  const TensorView v = view_of({3, 4}, {}, f32, {}, Writability::read_only);
  for (std::optional<bool> copy : {std::optional<bool>{}, std::optional<bool>{true}}) {
    const ConvertPlan p = plan(v, mlx_like(), copy, Writability::read_only);
    EXPECT_EQ(p.copy, CopyBy::target);
    EXPECT_EQ(p.reasons, uint32_t(dlbridge::copy_by_target_import));
  }
  EXPECT_EQ(refusal(v, mlx_like(), false, Writability::read_only), ErrorCode::copy_required);
}

TEST(PlanConvert, UnalignedDataIsCopiedByATargetWithAnAlignmentRule) {
  const TensorView unaligned = view_of({8}, {}, f32, {}, Writability::writable, 1);
  EXPECT_EQ(plan(unaligned, jax_like(), std::nullopt).copy, CopyBy::target);
  EXPECT_EQ(refusal(unaligned, jax_like(), false), ErrorCode::copy_required);
  EXPECT_EQ(plan(unaligned, jax_like(), true).copy, CopyBy::dlbridge);  // our copy is aligned
  EXPECT_EQ(plan(view_of({8}), jax_like(), false).copy, CopyBy::none);
}

TEST(PlanConvert, DevicesTheTargetDoesNotImport) {
  const TensorView pinned = view_of({4}, {}, f32, Device{dlabi::kDLCUDAHost, 0});
  const ConvertPlan p = plan(pinned, torch_like(), false);
  EXPECT_TRUE(p.host_alias);
  EXPECT_EQ(p.copy, CopyBy::none);
  EXPECT_TRUE(plan(pinned, numpy_like(), false).host_alias);  // read on the host, no stream needed
  EXPECT_FALSE(plan(pinned, anything(), false).host_alias);   // dlbridge keeps the label
  const TensorView opencl = view_of({4}, {}, f32, Device{dlabi::kDLOpenCL, 0});
  auto e = error_of([&] { (void)plan(opencl, torch_like(), std::nullopt); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), ErrorCode::unsupported_device_type);
  EXPECT_NE(e->message().find("(DLDeviceType: kDLOpenCL)"), std::string::npos) << e->message();
  EXPECT_NE(e->message().find("torch imports kDLCPU, kDLCUDA"), std::string::npos) << e->message();
  EXPECT_EQ(plan(opencl, anything(), false).copy, CopyBy::none);
}

// dlbridge's copy of device memory is made on the device: the registry
// passed in is the one asked whether it is here, not the default one.
TEST(PlanConvert, ACopyOnADeviceAsksTheRegistryItIsGiven) {
  const TensorView on_ext = view_of({4}, {}, f32, Device{dlabi::kDLExtDev, 0});
  auto fake = std::make_shared<test_support::FakeBackend>();
  dlbridge::backend::Registry own;
  own.set(dlabi::kDLExtDev, fake);
  const ConvertPlan p = dlbridge::plan_convert(on_ext, Writability::writable, anything(), true, own);
  EXPECT_EQ(p.copy, CopyBy::dlbridge);
  EXPECT_EQ(fake->availability_calls, 1);
  // The default registry serves no kDLExtDev.
  EXPECT_EQ(refusal(on_ext, anything(), true), ErrorCode::unsupported_device_type);
  // Without a copy no device is asked.
  (void)dlbridge::plan_convert(on_ext, Writability::writable, anything(), std::nullopt, own);
  EXPECT_EQ(fake->availability_calls, 1);
}

TEST(PlanConvert, CopyTrueIsAlwaysExactlyOnePrivateCopy) {
  const TensorView v = view_of({3, 4});
  for (const ConvertTarget& t : {numpy_like(), torch_like(), jax_like(), tensorflow_like(), anything()}) {
    const ConvertPlan p = plan(v, t, true);
    EXPECT_EQ(p.copy, CopyBy::dlbridge) << t.name;
    EXPECT_EQ(p.reasons, uint32_t(dlbridge::copy_requested)) << t.name;
  }
}

// --- what the source is beyond its view (ConvertSource), and the options

dlbridge::ConvertPlan plan_with(const TensorView& v, const dlbridge::ConvertSource& source, const ConvertTarget& t,
                                std::optional<bool> copy, std::optional<bool> alias = std::nullopt,
                                bool (*scope)() = nullptr) {
  dlbridge::ConvertOptions options;
  options.copy = copy;
  options.alias_readonly = alias;
  options.alias_scope = scope;
  return dlbridge::plan_convert(v, source, t, options);
}

TEST(PlanConvert, DTypesHeldOnlyUnderASettingAreRefusedWhileItIsOffForEveryCopyValue) {
  ConvertTarget t = jax_like();
  bool on = false;
  t.setting_dtypes = {{dlabi::kDLInt, 64, 1}, {dlabi::kDLFloat, 64, 1}, c128};
  t.setting_on = [&on] { return on; };
  t.setting_hint = "turn x64 on";
  const TensorView f64 = view_of({4}, {}, {dlabi::kDLFloat, 64, 1});
  for (std::optional<bool> copy : {std::optional<bool>(), std::optional<bool>(true), std::optional<bool>(false)}) {
    auto e = error_of([&] { (void)plan_with(f64, {}, t, copy); });
    ASSERT_TRUE(e);
    EXPECT_EQ(e->code(), ErrorCode::unsupported_dtype);
    EXPECT_NE(e->hint().find("turn x64 on"), std::string::npos);
  }
  EXPECT_EQ(plan_with(view_of({4}), {}, t, std::nullopt).copy, CopyBy::none);  // float32 is no setting's
  on = true;  // read on every plan: the setting can change at run time
  EXPECT_EQ(plan_with(f64, {}, t, std::nullopt).copy, CopyBy::none);
}

TEST(PlanConvert, OnePerByteSubByteDataCannotReachALegacyCapsuleOnlyTarget) {
  ConvertTarget t = anything();
  t.legacy_capsules_only = true;
  static uint8_t bytes[8] = {};
  const TensorView padded = TensorView::from_data(bytes, int4, {8}, {}, Device{}, DLBRIDGE_FLAG_IS_SUBBYTE_TYPE_PADDED);
  for (std::optional<bool> copy : {std::optional<bool>(), std::optional<bool>(true), std::optional<bool>(false)}) {
    auto e = error_of([&] { (void)plan_with(padded, {}, t, copy); });
    ASSERT_TRUE(e);
    EXPECT_EQ(e->code(), ErrorCode::unsupported_layout);
  }
  t.legacy_capsules_only = false;
  EXPECT_EQ(plan_with(padded, {}, t, std::nullopt).copy, CopyBy::none);
}

TEST(PlanConvert, TheOtherByteOrderIsOneSwappingCopyByDlbridgeThatNoTargetCopiesAgain) {
  dlbridge::ConvertSource swapped;
  swapped.other_byte_order = true;
  // Unaligned for JAX: still the one copy, ours (aligned), not JAX's as well.
  const TensorView v = view_of({4}, {}, f32, {}, Writability::writable, 1);
  const ConvertPlan p = plan_with(v, swapped, jax_like(), std::nullopt);
  EXPECT_EQ(p.copy, CopyBy::dlbridge);
  EXPECT_TRUE(p.swap_bytes);
  EXPECT_EQ(p.reasons, uint32_t(dlbridge::copy_for_byte_order));
  EXPECT_EQ(plan_with(v, swapped, torch_like(), true).reasons, uint32_t(dlbridge::copy_for_byte_order));
  auto e = error_of([&] { (void)plan_with(v, swapped, jax_like(), false); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), ErrorCode::unsupported_dtype);
}

TEST(PlanConvert, ACopyTheImportMadeIsTheOneCopyAndIsPrivate) {
  dlbridge::ConvertSource resolved;
  resolved.writability = Writability::read_only;
  resolved.copied = dlbridge::copy_for_lazy_view;
  const TensorView v = view_of({4});
  for (std::optional<bool> copy : {std::optional<bool>(), std::optional<bool>(true)}) {
    const ConvertPlan p = plan_with(v, resolved, torch_like(), copy);
    EXPECT_EQ(p.copy, CopyBy::none);  // no second copy, not even for copy=True or read-only
    EXPECT_EQ(p.reasons, uint32_t(dlbridge::copy_for_lazy_view));
  }
}

bool scope_on() { return true; }

TEST(PlanConvert, AliasReadonlyHandsProtectedDataOverZeroCopyOnlyWhereItIsAccepted) {
  dlbridge::ConvertSource unknown;
  unknown.writability = Writability::unknown;
  const TensorView v = view_of({4}, {}, f32, {}, Writability::read_only);
  EXPECT_EQ(plan_with(v, unknown, torch_like(), std::nullopt).copy, CopyBy::dlbridge);
  for (std::optional<bool> copy : {std::optional<bool>(), std::optional<bool>(false)}) {
    const ConvertPlan p = plan_with(v, unknown, torch_like(), copy, true);
    EXPECT_EQ(p.copy, CopyBy::none);
    EXPECT_TRUE(p.alias_readonly);
    EXPECT_FALSE(p.legacy_capsule_ok);
  }
  // The scope answers only where the call says nothing; an explicit False wins.
  EXPECT_TRUE(plan_with(v, unknown, torch_like(), std::nullopt, std::nullopt, scope_on).alias_readonly);
  EXPECT_FALSE(plan_with(v, unknown, torch_like(), std::nullopt, false, scope_on).alias_readonly);
  // copy=True is still a private copy; a target that sees READ_ONLY needs no consent.
  EXPECT_EQ(plan_with(v, unknown, torch_like(), true, true).copy, CopyBy::dlbridge);
  EXPECT_FALSE(plan_with(v, unknown, numpy_like(), std::nullopt, true).alias_readonly);
  // A layout copy is still made (the direct call would refuse or misread it).
  const TensorView flipped = view_of({4}, {-1}, f32, {}, Writability::read_only, 3);
  EXPECT_EQ(plan_with(flipped, unknown, torch_like(), std::nullopt, true).copy, CopyBy::dlbridge);
}

TEST(DTypeSet, HoldsWhatWasInsertedAndNothingElse) {
  dlbridge::DTypeSet set{f32, bf16, int4, {dlabi::kDLFloat, 32, 4}};
  EXPECT_EQ(set.size(), 4u);
  set.insert(f32);
  EXPECT_EQ(set.size(), 4u);
  for (DType d : {f32, bf16, int4, DType{dlabi::kDLFloat, 32, 4}}) EXPECT_TRUE(set.contains(d));
  for (DType d : {DType{dlabi::kDLFloat, 64, 1}, DType{dlabi::kDLInt, 32, 1}, DType{dlabi::kDLFloat, 32, 2},
                  DType{dlabi::kDLInt, 8, 1}, DType{dlabi::kDLBfloat, 32, 1}, c128, boolean})
    EXPECT_FALSE(set.contains(d)) << dlbridge::dtype_name(d);
  // Every code and whole-byte width has a bit of its own.
  dlbridge::DTypeSet all;
  for (uint8_t code = 0; code < 25; ++code)
    for (uint8_t bits : {8, 16, 32, 64, 128}) {
      EXPECT_FALSE(all.contains(DType{code, bits, 1}));
      all.insert(DType{code, bits, 1});
      EXPECT_TRUE(all.contains(DType{code, bits, 1}));
    }
  EXPECT_EQ(all.size(), 125u);
  EXPECT_TRUE(dlbridge::DTypeSet{}.empty());
}

// Every source of the matrix against every target: the rules hold case by case.
TEST(PlanConvert, RulesHoldOverTheWholeMatrix) {
  struct Source {
    const char* name;
    TensorView view;
    Writability writability;
  };
  std::vector<Source> sources;
  for (Writability w : {Writability::writable, Writability::read_only, Writability::unknown}) {
    sources.push_back({"plain", view_of({3, 4}, {}, f32, {}, w), w});
    sources.push_back({"negative", view_of({3, 4}, {4, -1}, f32, {}, w, 3), w});
    sources.push_back({"transposed", view_of({4, 3}, {1, 4}, f32, {}, w), w});
    sources.push_back({"strided", view_of({3, 2}, {4, 2}, f32, {}, w), w});
    sources.push_back({"0-d", view_of({}, {}, f32, {}, w), w});
    sources.push_back({"size-0", view_of({0, 3}, {}, f32, {}, w), w});
    sources.push_back({"bfloat16", view_of({4}, {}, bf16, {}, w), w});
    sources.push_back({"int4", view_of({8}, {}, int4, {}, w), w});
    sources.push_back({"bool", view_of({4}, {}, boolean, {}, w), w});
    sources.push_back({"unaligned", view_of({8}, {}, f32, {}, w, 1), w});
    sources.push_back({"pinned", view_of({4}, {}, f32, Device{dlabi::kDLCUDAHost, 0}, w), w});
    sources.push_back({"opencl", view_of({4}, {}, f32, Device{dlabi::kDLOpenCL, 0}, w), w});
  }
  const std::vector<ConvertTarget> targets = {numpy_like(), torch_like(), jax_like(), tensorflow_like(),
                                              arrow_like(), mlx_like(), anything()};
  int cases = 0;
  for (const Source& s : sources)
    for (const ConvertTarget& t : targets) {
      const std::string where = std::string(s.name) + " -> " + t.name;
      std::optional<ConvertPlan> none_plan, false_plan, true_plan;
      std::optional<ErrorCode> true_refusal;
      try { none_plan = plan(s.view, t, std::nullopt, s.writability); } catch (const dlbridge::Error&) {}
      try { false_plan = plan(s.view, t, false, s.writability); } catch (const dlbridge::Error&) {}
      try {
        true_plan = plan(s.view, t, true, s.writability);
      } catch (const dlbridge::Error& e) {
        true_refusal = e.code();
      }
      ++cases;
      // copy=True and copy=None are refused for the same cases: only what
      // no copy can fix (device, dtype, shape) -- and copy=True also where
      // dlbridge's copy would land on a device whose runtime is absent.
      const bool copy_needs_a_device = none_plan && !true_plan && s.view.device() != Device{} &&
                                       (true_refusal == ErrorCode::device_unavailable ||
                                        true_refusal == ErrorCode::unsupported_device_type);
      if (!copy_needs_a_device) {
        EXPECT_EQ(none_plan.has_value(), true_plan.has_value()) << where;
      }
      if (true_plan) {
        EXPECT_NE(true_plan->copy, CopyBy::none) << where;
      }
      // copy=False never copies, and succeeds exactly where copy=None needs no copy.
      if (false_plan) {
        EXPECT_EQ(false_plan->copy, CopyBy::none) << where;
      }
      if (!none_plan) continue;
      EXPECT_EQ(false_plan.has_value(), none_plan->copy == CopyBy::none) << where;
      // Never zero-copy protected data to a target that may write through it.
      if (t.read_only == ReadOnlyRule::ignored && s.writability != Writability::writable) {
        EXPECT_NE(none_plan->copy, CopyBy::none) << where;
      }
      // A copy always says why; no copy says nothing.
      const std::string why = dlbridge::convert_plan_why(*none_plan, s.view, s.writability, t);
      EXPECT_EQ(why.empty(), none_plan->copy == CopyBy::none) << where;
      EXPECT_EQ(none_plan->reasons == 0, none_plan->copy == CopyBy::none) << where;
    }
  EXPECT_EQ(cases, 3 * 12 * 7);
}

}  // namespace
