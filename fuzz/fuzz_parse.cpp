// Parsing and printing of dtypes and devices: any text is either refused as
// invalid_argument or parsed to a valid value whose printed name parses back
// to itself; any (code, bits, lanes) or (type, id) prints without crashing,
// and a valid one round-trips through its name.
#include <fuzzer/FuzzedDataProvider.h>

#include <string>

#include "fuzz_support.hpp"

namespace {

using namespace dlbridge;
using fuzz::accepted;

void parse_dtype_text(const std::string& text) {
  accepted({ErrorCode::invalid_argument}, [&] {
    const DType t = parse_dtype(text);
    FUZZ_CHECK(!dtype_problem(t));
    FUZZ_CHECK(parse_dtype(dtype_name(t)) == t);
  });
}

void parse_device_text(const std::string& text) {
  accepted({ErrorCode::invalid_argument}, [&] {
    const Device d = parse_device(text);
    FUZZ_CHECK(is_known_device_type(d.type) && d.id >= 0);
    FUZZ_CHECK(parse_device(to_string(d)) == d);
  });
}

void print_dtype(FuzzedDataProvider& in) {
  DType t;
  t.code = in.ConsumeBool() ? in.ConsumeIntegralInRange<uint8_t>(0, 19) : in.ConsumeIntegral<uint8_t>();
  t.bits = in.ConsumeIntegral<uint8_t>();
  t.lanes = in.ConsumeBool() ? 1 : in.ConsumeIntegral<uint16_t>();
  const std::string name = dtype_name(t);
  FUZZ_CHECK(!name.empty());
  if (!dtype_problem(t)) {
    FUZZ_CHECK(parse_dtype(name) == t);
  } else {
    // An invalid dtype must not print as a name that means another one.
    accepted({ErrorCode::invalid_argument}, [&] { FUZZ_CHECK(parse_dtype(name) == t); });
  }
}

void print_device(FuzzedDataProvider& in) {
  Device d;
  d.type = abi::DLDeviceType(in.ConsumeBool() ? in.ConsumeIntegralInRange<int32_t>(-1, 20)
                                              : in.ConsumeIntegral<int32_t>());
  d.id = in.ConsumeBool() ? in.ConsumeIntegralInRange<int32_t>(-1, 9) : in.ConsumeIntegral<int32_t>();
  const std::string text = to_string(d);
  FUZZ_CHECK(!text.empty());
  (void)device_type_label(d.type);
  if (is_known_device_type(d.type) && d.id >= 0) FUZZ_CHECK(parse_device(text) == d);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  switch (in.ConsumeIntegralInRange<int>(0, 3)) {
    case 0: parse_dtype_text(in.ConsumeRemainingBytesAsString()); break;
    case 1: parse_device_text(in.ConsumeRemainingBytesAsString()); break;
    case 2: print_dtype(in); break;
    default: print_device(in); break;
  }
  return 0;
}
