// dtype_name never prints a name that parse_dtype rejects: every valid
// dtype's name parses back to it, and every invalid one prints in the
// "dtype(code,bits,lanes)" form, which is no name at all. (It printed
// "complex5" once, which parse_dtype then refused.)
#include <gtest/gtest.h>

#include <dlbridge/dtype.hpp>

#include <string>

namespace {

using dlbridge::DType;

TEST(BoundaryDtypeNames, EveryPrintedNameParsesBackToTheSameDtype) {
  // Every defined code and a few beyond (all unknown codes behave alike).
  const unsigned lanes_cases[] = {0, 1, 3, 256, 65535};
  int named = 0;
  for (unsigned code = 0; code < 24; ++code)
    for (unsigned bits = 0; bits < 256; ++bits)
      for (unsigned lanes : lanes_cases) {
        const DType t{uint8_t(code), uint8_t(bits), uint16_t(lanes)};
        const std::string name = dlbridge::dtype_name(t);
        if (dlbridge::dtype_problem(t)) {
          EXPECT_EQ(name, "dtype(" + std::to_string(code) + "," + std::to_string(bits) + "," +
                              std::to_string(lanes) + ")");
          continue;
        }
        ++named;
        DType back{};
        ASSERT_NO_THROW(back = dlbridge::parse_dtype(name)) << name;
        EXPECT_EQ(back, t) << name;
      }
  EXPECT_GT(named, 1000);
}

TEST(BoundaryDtypeNames, OddComplexWidthIsNotNamed) {
  EXPECT_EQ(dlbridge::dtype_name(DType{dlbridge::abi::kDLComplex, 5, 3}), "dtype(5,5,3)");
  EXPECT_EQ(dlbridge::dtype_name(DType{dlbridge::abi::kDLComplex, 64, 1}), "complex64");
}

}  // namespace
