// Import, adoption and re-export of hostile DLManagedTensor(Versioned)s.
//
// Every field of the struct comes from the input, from plausible to absurd.
// What must hold: adopt either refuses with an import error code or yields
// a view that states the struct's own fields; the deleter runs exactly once
// either way; and an accepted layout, placed in a heap block of exactly the
// byte extent it reports, is copied, unpacked and re-exported without one
// byte read outside that block (ASan watches) and with the same values.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <memory>

#include "fuzz_support.hpp"

namespace {

using namespace dlbridge;
using fuzz::accepted;

int deleter_calls = 0;
void count_versioned(abi::DLManagedTensorVersioned*) { ++deleter_calls; }
void count_legacy(abi::DLManagedTensor*) { ++deleter_calls; }

const std::initializer_list<ErrorCode> import_codes = {
    ErrorCode::invalid_tensor, ErrorCode::unsupported_version, ErrorCode::unsupported_dtype,
    ErrorCode::unsupported_device_type};

// Mostly small values, which reach the interesting branches, sometimes any.
int64_t pick_dim(FuzzedDataProvider& in, int64_t lo, int64_t hi) {
  return in.ConsumeBool() ? in.ConsumeIntegralInRange<int64_t>(lo, hi)
                          : in.ConsumeIntegral<int64_t>();
}

struct HostileTensor {
  std::vector<int64_t> shape, strides;
  abi::DLTensor tensor{};
  bool versioned = true;
  abi::DLPackVersion version{1, 3};
  uint64_t flags = 0;
  bool has_deleter = true;
};

HostileTensor read_hostile(FuzzedDataProvider& in) {
  HostileTensor h;
  h.versioned = in.ConsumeBool();
  h.has_deleter = in.ConsumeIntegralInRange<int>(0, 15) != 0;
  h.version.major = in.ConsumeBool() ? 1 : in.ConsumeIntegral<uint32_t>();
  h.version.minor = in.ConsumeIntegralInRange<uint32_t>(0, 5);
  h.flags = in.ConsumeBool() ? in.ConsumeIntegralInRange<uint64_t>(0, 7)
                             : in.ConsumeIntegral<uint64_t>();
  const int32_t ndim = in.ConsumeBool() ? in.ConsumeIntegralInRange<int32_t>(-1, 6)
                                        : in.ConsumeIntegral<int32_t>();
  // A producer that lies about ndim beyond its own array cannot be caught;
  // one whose ndim is out of range must be refused before the array is read.
  const size_t entries = ndim >= 0 && ndim <= 70 ? size_t(ndim) : 1;
  for (size_t d = 0; d < entries; ++d) h.shape.push_back(pick_dim(in, -1, 5));
  for (size_t d = 0; d < entries; ++d) h.strides.push_back(pick_dim(in, -6, 6));
  abi::DLTensor& t = h.tensor;
  t.ndim = ndim;
  t.shape = in.ConsumeIntegralInRange<int>(0, 15) ? h.shape.data() : nullptr;
  t.strides = in.ConsumeIntegralInRange<int>(0, 3) ? h.strides.data() : nullptr;
  t.dtype.code = in.ConsumeBool() ? in.ConsumeIntegralInRange<uint8_t>(0, 19)
                                  : in.ConsumeIntegral<uint8_t>();
  t.dtype.bits = in.PickValueInArray<uint8_t>({1, 2, 4, 6, 8, 12, 16, 32, 64, 128, 0, 255, 7});
  t.dtype.lanes = in.ConsumeBool() ? 1 : in.ConsumeIntegral<uint16_t>();
  t.device.device_type = abi::DLDeviceType(in.ConsumeBool() ? in.ConsumeIntegralInRange<int32_t>(0, 20)
                                                            : in.ConsumeIntegral<int32_t>());
  t.device.device_id = in.ConsumeBool() ? 0 : in.ConsumeIntegral<int32_t>();
  // Adoption never reads the data, so any address tests its arithmetic.
  t.data = reinterpret_cast<void*>(in.ConsumeBool() ? uintptr_t(0x10000)
                                                    : in.ConsumeIntegral<uintptr_t>());
  t.byte_offset = in.ConsumeBool() ? in.ConsumeIntegralInRange<uint64_t>(0, 64)
                                   : in.ConsumeIntegral<uint64_t>();
  return h;
}

// The accepted view states exactly what the struct said.
void check_view_matches(const TensorView& view, const HostileTensor& h, uint64_t flags) {
  const abi::DLTensor& t = h.tensor;
  FUZZ_CHECK(view.ndim() == t.ndim);
  FUZZ_CHECK(view.dtype() == DType::from_dl(t.dtype));
  FUZZ_CHECK(view.device() == Device::from_dl(t.device));
  FUZZ_CHECK(view.flags() == flags);
  FUZZ_CHECK(view.base_data() == t.data && view.byte_offset() == t.byte_offset);
  const std::vector<int64_t> shape(h.shape.begin(), h.shape.begin() + t.ndim);
  // A zero dim makes any size: the count is 0, and NULL strides need not be
  // the (possibly overflowing) row-major products then.
  const bool empty = std::find(shape.begin(), shape.end(), 0) != shape.end();
  int64_t size = empty ? 0 : 1;
  for (int32_t d = 0; d < t.ndim; ++d) {
    FUZZ_CHECK(view.shape(d) == shape[size_t(d)] && shape[size_t(d)] >= 0);
    if (!empty) size *= shape[size_t(d)];  // cannot overflow: the view's count did not
  }
  if (t.strides != nullptr || !empty) {
    const std::vector<int64_t> strides =
        t.strides ? std::vector<int64_t>(h.strides.begin(), h.strides.begin() + t.ndim)
                  : fuzz::row_major_strides(shape);
    for (int32_t d = 0; d < t.ndim; ++d) FUZZ_CHECK(view.stride(d) == strides[size_t(d)]);
  }
  FUZZ_CHECK(view.size() == size);
  FUZZ_CHECK(view.extent().low <= 0 && view.extent().high >= 0);
  FUZZ_CHECK(size == 0 || view.base_data() != nullptr);
}

bool same_view(const TensorView& a, const TensorView& b) {
  if (a.ndim() != b.ndim() || a.dtype() != b.dtype() || a.device() != b.device() ||
      a.data() != b.data() || a.flags() != b.flags())
    return false;
  for (int32_t d = 0; d < a.ndim(); ++d)
    if (a.shape(d) != b.shape(d) || a.stride(d) != b.stride(d)) return false;
  return true;
}

std::vector<int64_t> dims_of(const int64_t* p, int32_t n) { return std::vector<int64_t>(p, p + n); }

// Exports view in both formats and adopts the result again: the same view
// must come back, and legacy refuses exactly what it cannot carry.
void check_reexport(const TensorView& view) {
  const uint64_t flags = view.flags();
  auto versioned = export_tensor(view, nullptr, flags, ExportFormat::versioned);
  FUZZ_CHECK(same_view(versioned.view(), view));
  ManagedTensor again = ManagedTensor::adopt(versioned.release_versioned());
  FUZZ_CHECK(same_view(again.view(), view));
  const bool legacy_ok = (flags & (DLBRIDGE_FLAG_READ_ONLY | DLBRIDGE_FLAG_IS_SUBBYTE_TYPE_PADDED)) == 0;
  const bool made = accepted({ErrorCode::read_only, ErrorCode::unsupported_layout}, [&] {
    abi::DLManagedTensor* legacy = again.release_legacy();
    ManagedTensor back = ManagedTensor::adopt(legacy, flags);
    FUZZ_CHECK(same_view(back.view(), view));
    // A legacy tensor wrapped as versioned keeps its fields and strides.
    ManagedTensor wrapped = ManagedTensor::adopt(back.release_versioned());
    FUZZ_CHECK(same_view(wrapped.view(), view));
  });
  FUZZ_CHECK(made == legacy_ok);
}

// Places the accepted layout in a heap block of exactly its byte extent and
// copies it every way dlbridge can; ASan reports any byte outside the block.
void check_in_exact_block(const TensorView& accepted_view) {
  const ByteExtent extent = accepted_view.extent();
  const int64_t size = accepted_view.size();
  if (size == 0 || size > 256 || extent.bytes() > 4096) return;
  std::unique_ptr<unsigned char[]> block(new unsigned char[size_t(extent.bytes())]);
  for (int64_t i = 0; i < extent.bytes(); ++i) block[size_t(i)] = (unsigned char)(i * 151 + 7);
  abi::DLTensor t = accepted_view.dltensor();
  t.data = block.get();
  t.byte_offset = uint64_t(-extent.low);
  t.device = {abi::kDLCPU, 0};
  const uint64_t flags = accepted_view.flags();
  const TensorView view = TensorView::from_dltensor(t, flags);
  FUZZ_CHECK(view.extent().low == extent.low && view.extent().high == extent.high);

  const auto shape = dims_of(view.shape(), view.ndim());
  const auto strides = dims_of(view.strides(), view.ndim());
  const bool packed = view.packed();
  const int64_t step = fuzz::element_step_bits(view.dtype(), packed);
  const int64_t value_bits = packed ? int64_t(view.dtype().element_bits()) : step;
  const std::vector<bool> expected = fuzz::read_elements(view.data(), shape, strides, value_bits, step);

  const ManagedTensor compact = copy_to_compact(view);
  FUZZ_CHECK(compact.view().is_c_contiguous() && !compact.view().readonly());
  FUZZ_CHECK(fuzz::read_elements(compact.view().data(), shape, fuzz::row_major_strides(shape),
                                 value_bits, step) == expected);

  // One element per byte (or more): every lane value must survive.
  accepted({ErrorCode::unsupported_dtype}, [&] {
    const ManagedTensor unpacked = copy_unpacked(view);
    FUZZ_CHECK(unpacked.view().size() == size * view.dtype().lanes);
  });
  check_reexport(view);
}

void run(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  HostileTensor h = read_hostile(in);
  const uint64_t assumed_flags = in.ConsumeIntegralInRange<uint64_t>(0, 7);
  // The structs outlive every ManagedTensor that points at them.
  abi::DLManagedTensorVersioned versioned{};
  versioned.version = h.version;
  versioned.flags = h.flags;
  versioned.dl_tensor = h.tensor;
  versioned.deleter = h.has_deleter ? &count_versioned : nullptr;
  abi::DLManagedTensor legacy{};
  legacy.dl_tensor = h.tensor;
  legacy.deleter = h.has_deleter ? &count_legacy : nullptr;
  deleter_calls = 0;
  accepted(import_codes, [&] {
    const uint64_t flags = h.versioned ? h.flags : assumed_flags;
    ManagedTensor owned = h.versioned ? ManagedTensor::adopt(&versioned)
                                      : ManagedTensor::adopt(&legacy, assumed_flags);
    FUZZ_CHECK(!h.versioned || (h.version.major == 1 && (flags & ~known_flags) == 0));
    check_view_matches(owned.view(), h, flags);
    check_in_exact_block(owned.view());
  });
  // Refused or accepted, the producer's deleter ran exactly once.
  FUZZ_CHECK(deleter_calls == (h.has_deleter ? 1 : 0));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  run(data, size);
  return 0;
}
