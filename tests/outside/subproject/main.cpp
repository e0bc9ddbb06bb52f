// Compiled inside a parent project: dlbridge's include path and C++17 come
// with the target. Exits 0 when a parse round-trips.
#include <dlbridge/device.hpp>
#include <dlbridge/dtype.hpp>
#include <dlbridge/version.hpp>

#include <cstdio>

int main() {
  const bool ok = dlbridge::dtype_name(dlbridge::parse_dtype("bfloat16")) == "bfloat16" &&
                  dlbridge::to_string(dlbridge::parse_device("cuda:1")) == "cuda:1";
  std::printf("dlbridge %s as a subproject: %s\n", DLBRIDGE_VERSION_STRING, ok ? "ok" : "wrong");
  return ok ? 0 : 1;
}
