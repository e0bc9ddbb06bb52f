// Exits 0 only when the installed headers compile on their own and give the
// right answers; any mismatch prints what differed so a CI log explains it.
#include <dlbridge/dlbridge.hpp>

#include <cstdio>
#include <cstring>

namespace {

int failures = 0;

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "consumer check failed: %s\n", what);
    ++failures;
  }
}

}  // namespace

int main() {
  check(std::strcmp(DLBRIDGE_PACKAGE_VERSION, DLBRIDGE_VERSION_STRING) == 0,
        "find_package version equals DLBRIDGE_VERSION_STRING");

  const dlbridge::Device cuda = dlbridge::parse_device("cuda:1");
  check(cuda == dlbridge::Device{dlbridge::abi::kDLCUDA, 1}, "parse_device(\"cuda:1\")");
  check(dlbridge::to_string(dlbridge::parse_device("cpu")) == "cpu", "cpu round trip");

  const dlbridge::DType f32x4 = dlbridge::parse_dtype("float32x4");
  check(f32x4 == dlbridge::DType{dlbridge::abi::kDLFloat, 32, 4}, "parse_dtype(\"float32x4\")");
  check(dlbridge::dtype_name(dlbridge::parse_dtype("float4_e2m1fn")) == "float4_e2m1fn",
        "float4_e2m1fn round trip");
  check(dlbridge::dtype_of<double>() == dlbridge::parse_dtype("float64"), "dtype_of<double>");

  bool refused = false;
  try {
    dlbridge::parse_device("gpu");
  } catch (const dlbridge::Error& e) {
    refused = e.code() == dlbridge::ErrorCode::invalid_argument;
  }
  check(refused, "parse_device(\"gpu\") throws invalid_argument");

  if (failures == 0) std::puts("dlbridge consumer: all checks passed");
  return failures == 0 ? 0 : 1;
}
