// Ownership is where DLPack consumers leak or double-free: every path below
// counts deleter calls through manager_ctx and asserts exactly one, at the
// right moment. The wrappers dlbridge allocates are freed by their own
// deleters, so ASan's leak check covers the conversions too.
#include <gtest/gtest.h>

#include "support/error_of.hpp"

#include <dlbridge/managed_tensor.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>

namespace {

using dlbridge::Error;
using dlbridge::ErrorCode;
using dlbridge::ImportPolicy;
using dlbridge::ManagedTensor;
namespace dlabi = dlbridge::abi;

// What a deleter saw. The deleters read only manager_ctx, so they are safe
// on structs whose other fields are garbage.
struct Calls {
  int count = 0;
  const void* last = nullptr;
};

void count_versioned(dlabi::DLManagedTensorVersioned* self) {
  auto* calls = static_cast<Calls*>(self->manager_ctx);
  ++calls->count;
  calls->last = self;
}

void count_legacy(dlabi::DLManagedTensor* self) {
  auto* calls = static_cast<Calls*>(self->manager_ctx);
  ++calls->count;
  calls->last = self;
}

// A 2x3 float32 producer that owns its arrays; the managed structs point
// into it, so it must outlive them (it does: each test holds it on the stack).
struct Producer {
  float data[6] = {1, 2, 3, 4, 5, 6};
  int64_t shape[2] = {2, 3};
  int64_t strides[2] = {3, 1};
  Calls calls;
  dlabi::DLManagedTensorVersioned versioned{};
  dlabi::DLManagedTensor legacy{};

  explicit Producer(uint32_t major = 1, uint32_t minor = 3, uint64_t flags = 0) {
    dlabi::DLTensor t{};
    t.data = data;
    t.device = {dlabi::kDLCPU, 0};
    t.ndim = 2;
    t.dtype = {dlabi::kDLFloat, 32, 1};
    t.shape = shape;
    t.strides = strides;
    versioned.version = {major, minor};
    versioned.manager_ctx = &calls;
    versioned.deleter = &count_versioned;
    versioned.flags = flags;
    versioned.dl_tensor = t;
    legacy.dl_tensor = t;
    legacy.manager_ctx = &calls;
    legacy.deleter = &count_legacy;
  }
};

using test_support::error_of;

bool contains(const std::string& text, const std::string& fragment) {
  return text.find(fragment) != std::string::npos;
}

TEST(Ownership, DestructionRunsTheDeleterOnce) {
  Producer p;
  {
    ManagedTensor t = ManagedTensor::adopt(&p.versioned);
    EXPECT_TRUE(t);
    EXPECT_TRUE(t.is_versioned());
    EXPECT_EQ(t.view().data(), static_cast<void*>(p.data));
    EXPECT_EQ(p.calls.count, 0);
  }
  EXPECT_EQ(p.calls.count, 1);
  EXPECT_EQ(p.calls.last, &p.versioned);
}

TEST(Ownership, LegacyDestructionRunsTheDeleterOnce) {
  Producer p;
  { ManagedTensor t = ManagedTensor::adopt(&p.legacy); }
  EXPECT_EQ(p.calls.count, 1);
  EXPECT_EQ(p.calls.last, &p.legacy);
}

TEST(Ownership, MoveConstructionChain) {
  Producer p;
  {
    ManagedTensor a = ManagedTensor::adopt(&p.versioned);
    ManagedTensor b(std::move(a));
    ManagedTensor c(std::move(b));
    EXPECT_FALSE(a);
    EXPECT_FALSE(b);
    EXPECT_TRUE(c);
    EXPECT_EQ(c.view().shape(1), 3);
    EXPECT_EQ(p.calls.count, 0);
  }
  EXPECT_EQ(p.calls.count, 1);
}

TEST(Ownership, MoveAssignmentReleasesTheOverwrittenTensor) {
  Producer first, second;
  {
    ManagedTensor a = ManagedTensor::adopt(&first.versioned);
    ManagedTensor b = ManagedTensor::adopt(&second.legacy);
    b = std::move(a);
    EXPECT_EQ(second.calls.count, 1);  // at the assignment, not later
    EXPECT_EQ(first.calls.count, 0);
    EXPECT_TRUE(b.is_versioned());
    ManagedTensor c;
    c = std::move(b);
    a = std::move(c);  // back into the moved-from original
    EXPECT_EQ(first.calls.count, 0);
    EXPECT_FALSE(b);
    EXPECT_FALSE(c);
  }
  EXPECT_EQ(first.calls.count, 1);
  EXPECT_EQ(second.calls.count, 1);
}

TEST(Ownership, SelfMoveKeepsOwnership) {
  Producer p;
  {
    ManagedTensor t = ManagedTensor::adopt(&p.versioned);
    ManagedTensor& alias = t;  // spelled via a reference to dodge -Wself-move
    t = std::move(alias);
    EXPECT_TRUE(t);
    EXPECT_EQ(p.calls.count, 0);
    EXPECT_EQ(t.view().size(), 6);
  }
  EXPECT_EQ(p.calls.count, 1);
}

TEST(Ownership, ResetRunsTheDeleterNowAndOnlyOnce) {
  Producer p;
  {
    ManagedTensor t = ManagedTensor::adopt(&p.versioned);
    t.reset();
    EXPECT_EQ(p.calls.count, 1);
    EXPECT_FALSE(t);
    t.reset();
  }
  EXPECT_EQ(p.calls.count, 1);
}

TEST(Ownership, SwapExchangesOwners) {
  Producer first, second;
  {
    ManagedTensor a = ManagedTensor::adopt(&first.versioned);
    ManagedTensor b = ManagedTensor::adopt(&second.legacy, DLBRIDGE_FLAG_READ_ONLY);
    a.swap(b);
    EXPECT_FALSE(a.is_versioned());
    EXPECT_TRUE(a.view().readonly());
    EXPECT_TRUE(b.is_versioned());
    a.reset();
    EXPECT_EQ(second.calls.count, 1);
    EXPECT_EQ(first.calls.count, 0);
  }
  EXPECT_EQ(first.calls.count, 1);
}

TEST(Ownership, NullDeleterIsNeverCalled) {
  Producer p;
  p.versioned.deleter = nullptr;
  p.legacy.deleter = nullptr;
  {
    ManagedTensor v = ManagedTensor::adopt(&p.versioned);
    ManagedTensor l = ManagedTensor::adopt(&p.legacy);
    ManagedTensor moved = std::move(v);
    l.reset();
  }
  // A NULL-deleter tensor still refused on adopt must not be "deleted" either.
  p.versioned.version = {2, 0};
  EXPECT_TRUE(error_of([&] { ManagedTensor::adopt(&p.versioned); }));
  EXPECT_EQ(p.calls.count, 0);
}

TEST(Ownership, NullDeleterSurvivesWrapping) {
  Producer p;
  p.legacy.deleter = nullptr;
  ManagedTensor t = ManagedTensor::adopt(&p.legacy);
  dlabi::DLManagedTensorVersioned* wrapped = t.release_versioned();
  ASSERT_NE(wrapped, nullptr);
  ASSERT_NE(wrapped->deleter, nullptr);  // the wrapper must still be freed
  wrapped->deleter(wrapped);
  EXPECT_EQ(p.calls.count, 0);
}

TEST(Adopt, NullPointersAreRefused) {
  auto versioned = error_of([] {
    ManagedTensor::adopt(static_cast<dlabi::DLManagedTensorVersioned*>(nullptr));
  });
  ASSERT_TRUE(versioned);
  EXPECT_EQ(versioned->code(), ErrorCode::invalid_tensor);
  EXPECT_TRUE(contains(versioned->message(), "NULL"));
  auto legacy = error_of(
      [] { ManagedTensor::adopt(static_cast<dlabi::DLManagedTensor*>(nullptr)); });
  ASSERT_TRUE(legacy);
  EXPECT_EQ(legacy->code(), ErrorCode::invalid_tensor);
}

TEST(Adopt, FutureMajorIsDeletedAndNothingElseRead) {
  Producer p(2, 0);
  // A 2.x struct may lay out everything after the deleter differently: any
  // read of these would crash or trip ASan.
  p.versioned.flags = ~uint64_t(0);
  p.versioned.dl_tensor.ndim = -5;
  p.versioned.dl_tensor.shape = reinterpret_cast<int64_t*>(uintptr_t(1));
  p.versioned.dl_tensor.strides = reinterpret_cast<int64_t*>(uintptr_t(1));
  p.versioned.dl_tensor.data = reinterpret_cast<void*>(uintptr_t(1));
  p.versioned.dl_tensor.device.device_type = static_cast<dlabi::DLDeviceType>(99);
  auto e = error_of([&] { ManagedTensor::adopt(&p.versioned); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), ErrorCode::unsupported_version);
  EXPECT_TRUE(contains(e->message(), "DLPack 2.0")) << e->message();
  EXPECT_TRUE(contains(e->hint(), "Upgrade dlbridge")) << e->hint();
  EXPECT_EQ(p.calls.count, 1);
  EXPECT_EQ(p.calls.last, &p.versioned);
}

TEST(Adopt, FarFutureMajor) {
  Producer p(UINT32_MAX, UINT32_MAX);
  auto e = error_of([&] { ManagedTensor::adopt(&p.versioned); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), ErrorCode::unsupported_version);
  EXPECT_TRUE(contains(e->message(), std::to_string(UINT32_MAX)));
  EXPECT_EQ(p.calls.count, 1);
}

TEST(Adopt, MajorZeroInAVersionedStructIsRefused) {
  Producer p(0, 9);
  auto e = error_of([&] { ManagedTensor::adopt(&p.versioned); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), ErrorCode::unsupported_version);
  EXPECT_TRUE(contains(e->message(), "DLPack 0.9"));
  EXPECT_EQ(p.calls.count, 1);
}

TEST(Adopt, NewerMinorWithKnownFieldsIsAccepted) {
  Producer p(1, 9, DLBRIDGE_FLAG_IS_COPIED);
  {
    ManagedTensor t = ManagedTensor::adopt(&p.versioned);
    EXPECT_EQ(t.version().major, 1u);
    EXPECT_EQ(t.version().minor, 9u);
    EXPECT_EQ(t.flags(), DLBRIDGE_FLAG_IS_COPIED);
  }
  EXPECT_EQ(p.calls.count, 1);
}

TEST(Adopt, OlderMinorIsAccepted) {
  Producer p(1, 0);
  p.versioned.dl_tensor.strides = nullptr;  // legal before 1.2
  ManagedTensor t = ManagedTensor::adopt(&p.versioned);
  EXPECT_EQ(t.view().stride(0), 3);
}

TEST(Adopt, UnknownFlagBitsFromANewerMinor) {
  Producer p(1, 4, DLBRIDGE_FLAG_READ_ONLY | 0x8);
  auto e = error_of([&] { ManagedTensor::adopt(&p.versioned); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), ErrorCode::unsupported_version);
  EXPECT_TRUE(contains(e->message(), "0x8")) << e->message();
  EXPECT_EQ(p.calls.count, 1);
}

TEST(Adopt, UnknownFlagBitsAtOurMinorAreMalformed) {
  Producer p(1, 3, uint64_t(1) << 63);
  auto e = error_of([&] { ManagedTensor::adopt(&p.versioned); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), ErrorCode::invalid_tensor);
  EXPECT_TRUE(contains(e->message(), "0x8000000000000000")) << e->message();
  EXPECT_EQ(p.calls.count, 1);

  Producer q(1, 3, 0x8);
  auto low_bit = error_of([&] { ManagedTensor::adopt(&q.versioned); });
  ASSERT_TRUE(low_bit);
  EXPECT_EQ(low_bit->code(), ErrorCode::invalid_tensor);
  EXPECT_TRUE(contains(low_bit->message(), "0x8 ")) << low_bit->message();
  EXPECT_EQ(q.calls.count, 1);
}

TEST(Adopt, InvalidTensorIsDeletedOnce) {
  Producer p;
  p.versioned.dl_tensor.ndim = -1;
  auto e = error_of([&] { ManagedTensor::adopt(&p.versioned); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), ErrorCode::invalid_tensor);
  EXPECT_EQ(p.calls.count, 1);

  Producer q;
  q.legacy.dl_tensor.data = nullptr;
  auto legacy = error_of([&] { ManagedTensor::adopt(&q.legacy); });
  ASSERT_TRUE(legacy);
  EXPECT_EQ(legacy->code(), ErrorCode::invalid_tensor);
  EXPECT_EQ(q.calls.count, 1);
}

TEST(Adopt, PolicyRefusalIsDeletedOnce) {
  Producer p(1, 3, DLBRIDGE_FLAG_READ_ONLY);
  ImportPolicy writable;
  writable.require_writable = true;
  auto e = error_of([&] { ManagedTensor::adopt(&p.versioned, writable); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), ErrorCode::read_only);
  EXPECT_EQ(p.calls.count, 1);

  Producer q;
  ImportPolicy contiguous;
  contiguous.require_c_contiguous = true;
  q.strides[0] = 1;
  q.strides[1] = 2;
  auto layout = error_of([&] { ManagedTensor::adopt(&q.legacy, 0, contiguous); });
  ASSERT_TRUE(layout);
  EXPECT_EQ(layout->code(), ErrorCode::unsupported_layout);
  EXPECT_EQ(q.calls.count, 1);
}

// The adopting constructor is adopt in place (std::allocate_shared): it
// takes m by clearing the caller's pointer before anything can fail, and
// from then on owns it, so every refusal runs the deleter exactly once and
// the caller, whose pointer is NULL, runs nothing.
TEST(AdoptInPlace, TakesThePointerAndOwnsTheTensor) {
  Producer p;
  dlabi::DLManagedTensorVersioned* m = &p.versioned;
  {
    ManagedTensor t(ManagedTensor::adopting, m);
    EXPECT_EQ(m, nullptr);
    EXPECT_TRUE(t.is_versioned());
    EXPECT_EQ(t.view().shape(1), 3);
    EXPECT_EQ(t.view().data(), p.data);
    EXPECT_EQ(p.calls.count, 0);
  }
  EXPECT_EQ(p.calls.count, 1);
}

TEST(AdoptInPlace, EveryRefusalRunsTheDeleterOnceAndClearsThePointer) {
  struct Case {
    const char* what;
    std::function<void(Producer&)> spoil;
    ErrorCode code;
  };
  const Case cases[] = {
      {"future major", [](Producer& p) { p.versioned.version.major = 2; }, ErrorCode::unsupported_version},
      {"unknown flag", [](Producer& p) { p.versioned.flags = uint64_t(1) << 40; }, ErrorCode::invalid_tensor},
      {"malformed view", [](Producer& p) { p.versioned.dl_tensor.ndim = -1; }, ErrorCode::invalid_tensor},
      {"policy", [](Producer& p) { p.versioned.flags = DLBRIDGE_FLAG_READ_ONLY; }, ErrorCode::read_only},
  };
  ImportPolicy writable;
  writable.require_writable = true;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Producer p;
    c.spoil(p);
    dlabi::DLManagedTensorVersioned* m = &p.versioned;
    auto e = error_of([&] { ManagedTensor t(ManagedTensor::adopting, m, writable); });
    ASSERT_TRUE(e);
    EXPECT_EQ(e->code(), c.code);
    EXPECT_EQ(m, nullptr);
    EXPECT_EQ(p.calls.count, 1);
    // adopt refuses it with the same error.
    Producer q;
    c.spoil(q);
    auto by_adopt = error_of([&] { ManagedTensor::adopt(&q.versioned, writable); });
    ASSERT_TRUE(by_adopt);
    EXPECT_EQ(by_adopt->code(), e->code());
    EXPECT_EQ(by_adopt->message(), e->message());
    EXPECT_EQ(q.calls.count, 1);
  }
  dlabi::DLManagedTensorVersioned* null = nullptr;
  auto e = error_of([&] { ManagedTensor t(ManagedTensor::adopting, null); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), ErrorCode::invalid_tensor);
}

TEST(Adopt, LegacyWithAssumedReadOnly) {
  Producer p;
  ManagedTensor t = ManagedTensor::adopt(&p.legacy, DLBRIDGE_FLAG_READ_ONLY);
  EXPECT_FALSE(t.is_versioned());
  EXPECT_TRUE(t.view().readonly());
  EXPECT_EQ(t.flags(), DLBRIDGE_FLAG_READ_ONLY);
  EXPECT_EQ(t.version().major, 0u);
  EXPECT_EQ(t.version().minor, 0u);
  Producer q;
  EXPECT_FALSE(ManagedTensor::adopt(&q.legacy).view().readonly());
}

TEST(Release, VersionedHandsOverTheSameStruct) {
  Producer p;
  ManagedTensor t = ManagedTensor::adopt(&p.versioned);
  dlabi::DLManagedTensorVersioned* out = t.release_versioned();
  EXPECT_EQ(out, &p.versioned);
  EXPECT_FALSE(t);
  t.reset();
  EXPECT_EQ(p.calls.count, 0);  // the caller owns it now
  out->deleter(out);
  EXPECT_EQ(p.calls.count, 1);
  EXPECT_EQ(t.release_versioned(), nullptr);
  EXPECT_EQ(t.release_legacy(), nullptr);
}

TEST(Release, LegacyHandsOverTheSameStruct) {
  Producer p;
  ManagedTensor t = ManagedTensor::adopt(&p.legacy);
  dlabi::DLManagedTensor* out = t.release_legacy();
  EXPECT_EQ(out, &p.legacy);
  EXPECT_FALSE(t);
  out->deleter(out);
  EXPECT_EQ(p.calls.count, 1);
}

TEST(Release, VersionedOfLegacyWraps) {
  Producer p;
  ManagedTensor t = ManagedTensor::adopt(&p.legacy, DLBRIDGE_FLAG_READ_ONLY);
  dlabi::DLManagedTensorVersioned* out = t.release_versioned();
  ASSERT_NE(out, nullptr);
  EXPECT_FALSE(t);
  EXPECT_EQ(out->version.major, 1u);
  EXPECT_EQ(out->version.minor, 3u);
  EXPECT_EQ(out->flags, DLBRIDGE_FLAG_READ_ONLY);  // what the caller assumed
  EXPECT_EQ(out->dl_tensor.data, static_cast<void*>(p.data));  // not copied
  EXPECT_EQ(out->dl_tensor.shape[1], 3);
  EXPECT_EQ(p.calls.count, 0);
  out->deleter(out);
  EXPECT_EQ(p.calls.count, 1);
  EXPECT_EQ(p.calls.last, &p.legacy);
}

TEST(Release, VersionedOfLegacyFillsInNullStrides) {
  // A 1.3 struct must carry strides when ndim != 0; a legacy producer may not.
  Producer p;
  p.legacy.dl_tensor.strides = nullptr;
  ManagedTensor t = ManagedTensor::adopt(&p.legacy);
  dlabi::DLManagedTensorVersioned* out = t.release_versioned();
  ASSERT_NE(out, nullptr);
  ASSERT_NE(out->dl_tensor.strides, nullptr);
  EXPECT_EQ(out->dl_tensor.strides[0], 3);
  EXPECT_EQ(out->dl_tensor.strides[1], 1);
  // And it is importable as what it claims to be.
  ManagedTensor again = ManagedTensor::adopt(out);
  EXPECT_EQ(again.view().stride(0), 3);
  again.reset();
  EXPECT_EQ(p.calls.count, 1);
}

TEST(Release, LegacyOfVersionedWraps) {
  Producer p(1, 3, DLBRIDGE_FLAG_IS_COPIED);
  ManagedTensor t = ManagedTensor::adopt(&p.versioned);
  dlabi::DLManagedTensor* out = t.release_legacy();
  ASSERT_NE(out, nullptr);
  EXPECT_NE(static_cast<void*>(out), static_cast<void*>(&p.versioned));
  EXPECT_EQ(out->dl_tensor.data, static_cast<void*>(p.data));
  EXPECT_EQ(out->dl_tensor.ndim, 2);
  EXPECT_EQ(p.calls.count, 0);
  out->deleter(out);
  EXPECT_EQ(p.calls.count, 1);
  EXPECT_EQ(p.calls.last, &p.versioned);
}

TEST(Release, LegacyOfReadOnlyIsRefusedAndStaysOwned) {
  Producer p(1, 3, DLBRIDGE_FLAG_READ_ONLY);
  {
    ManagedTensor t = ManagedTensor::adopt(&p.versioned);
    auto e = error_of([&] { t.release_legacy(); });
    ASSERT_TRUE(e);
    EXPECT_EQ(e->code(), ErrorCode::read_only);
    EXPECT_TRUE(contains(e->message(), "read-only"));
    EXPECT_TRUE(contains(e->hint(), "max_version=(1, 3)"));
    EXPECT_TRUE(t);
    EXPECT_EQ(p.calls.count, 0);
    // The refusal leaves it fully usable, including the other conversion.
    EXPECT_EQ(t.release_versioned(), &p.versioned);
    ManagedTensor back = ManagedTensor::adopt(&p.versioned);
  }
  EXPECT_EQ(p.calls.count, 1);
}

TEST(Release, LegacyOfAssumedReadOnlyLegacyIsRefused) {
  Producer p;
  {
    ManagedTensor t = ManagedTensor::adopt(&p.legacy, DLBRIDGE_FLAG_READ_ONLY);
    auto e = error_of([&] { t.release_legacy(); });
    ASSERT_TRUE(e);
    EXPECT_EQ(e->code(), ErrorCode::read_only);
    EXPECT_TRUE(t);
  }
  EXPECT_EQ(p.calls.count, 1);
}

TEST(Release, WrappersNestAndUnwindOnce) {
  Producer p;
  ManagedTensor t = ManagedTensor::adopt(&p.versioned);
  dlabi::DLManagedTensor* legacy = t.release_legacy();
  ManagedTensor u = ManagedTensor::adopt(legacy);
  dlabi::DLManagedTensorVersioned* versioned = u.release_versioned();
  ManagedTensor w = ManagedTensor::adopt(versioned);
  EXPECT_EQ(w.view().data(), static_cast<void*>(p.data));
  EXPECT_EQ(p.calls.count, 0);
  w.reset();
  EXPECT_EQ(p.calls.count, 1);
  EXPECT_EQ(p.calls.last, &p.versioned);
}

}  // namespace
