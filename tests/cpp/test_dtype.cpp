// DType names are the user-visible spelling of DLDataType (Python's DType.name
// and DType("float32")), and dtype_problem is the gate every imported tensor
// passes; both are tested against triples written out by hand from the spec.
#include <gtest/gtest.h>

#include <dlbridge/dtype.hpp>

#include <complex>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

namespace {

using dlbridge::DType;
using dlbridge::ErrorCode;

// The code table is usable at compile time, also under -fsanitize=undefined.
static_assert(dlbridge::find_dtype_code(17)->fixed_bits == 4);
static_assert(dlbridge::find_dtype_code(18) == nullptr);

struct Canonical {
  std::string_view name;
  uint8_t code;
  uint8_t bits;
};

// Every name of docs/dlpack-rules.md ("Data types"), with its triple.
constexpr Canonical canonical[] = {
    {"int8", 0, 8},
    {"int16", 0, 16},
    {"int32", 0, 32},
    {"int64", 0, 64},
    {"uint8", 1, 8},
    {"uint16", 1, 16},
    {"uint32", 1, 32},
    {"uint64", 1, 64},
    {"float16", 2, 16},
    {"float32", 2, 32},
    {"float64", 2, 64},
    {"bfloat16", 4, 16},
    {"complex64", 5, 64},
    {"complex128", 5, 128},
    {"bool", 6, 8},
    {"float8_e3m4", 7, 8},
    {"float8_e4m3", 8, 8},
    {"float8_e4m3b11fnuz", 9, 8},
    {"float8_e4m3fn", 10, 8},
    {"float8_e4m3fnuz", 11, 8},
    {"float8_e5m2", 12, 8},
    {"float8_e5m2fnuz", 13, 8},
    {"float8_e8m0fnu", 14, 8},
    {"float6_e2m3fn", 15, 6},
    {"float6_e3m2fn", 16, 6},
    {"float4_e2m1fn", 17, 4},
};

// Runs parse_dtype, which must throw; returns the error for inspection.
dlbridge::Error parse_error(std::string_view text) {
  try {
    DType t = dlbridge::parse_dtype(text);
    ADD_FAILURE() << "'" << text << "' parsed as " << dlbridge::dtype_name(t);
  } catch (const dlbridge::Error& e) {
    return e;
  }
  return dlbridge::Error(ErrorCode::invalid_argument, "no error thrown");
}

// An undefined dtype_traits<T> means "no DLPack dtype for T"; detect it
// without a hard error so the refusal itself can be tested.
template <typename T, typename = void>
struct has_dtype : std::false_type {};
template <typename T>
struct has_dtype<T, std::void_t<decltype(dlbridge::dtype_traits<T>::value)>>
    : std::true_type {};

}  // namespace

TEST(DTypeNames, EveryCanonicalNameRoundTrips) {
  for (const Canonical& want : canonical) {
    SCOPED_TRACE(want.name);
    const DType parsed = dlbridge::parse_dtype(want.name);
    EXPECT_EQ(parsed.code, want.code);
    EXPECT_EQ(parsed.bits, want.bits);
    EXPECT_EQ(parsed.lanes, 1);
    EXPECT_EQ(dlbridge::dtype_name(parsed), want.name);
    EXPECT_FALSE(dlbridge::dtype_problem(parsed).has_value());
    EXPECT_NO_THROW(dlbridge::validate_dtype(parsed));
  }
}

TEST(DTypeNames, EveryCanonicalNameTakesLanes) {
  for (const Canonical& want : canonical) {
    for (uint16_t lanes : {uint16_t{2}, uint16_t{4}, uint16_t{65535}}) {
      const std::string name = std::string(want.name) + "x" + std::to_string(lanes);
      SCOPED_TRACE(name);
      EXPECT_EQ(dlbridge::parse_dtype(name), (DType{want.code, want.bits, lanes}));
      EXPECT_EQ(dlbridge::dtype_name(DType{want.code, want.bits, lanes}), name);
    }
  }
}

TEST(DTypeNames, LanesSuffix) {
  EXPECT_EQ(dlbridge::parse_dtype("float32x4"), (DType{2, 32, 4}));
  // PyTorch exports FP4 two to a byte as lanes=2.
  EXPECT_EQ(dlbridge::parse_dtype("float4_e2m1fnx2"), (DType{17, 4, 2}));
  // The 'x' of "complex" is part of the name, not a lanes separator.
  EXPECT_EQ(dlbridge::parse_dtype("complex64"), (DType{5, 64, 1}));
  EXPECT_EQ(dlbridge::parse_dtype("complex128x2"), (DType{5, 128, 2}));
  EXPECT_EQ(dlbridge::dtype_name(DType{5, 64, 3}), "complex64x3");
}

TEST(DTypeNames, WidthsOutsideTheCanonicalList) {
  EXPECT_EQ(dlbridge::parse_dtype("int4"), (DType{0, 4, 1}));
  EXPECT_EQ(dlbridge::parse_dtype("uint1"), (DType{1, 1, 1}));
  EXPECT_EQ(dlbridge::parse_dtype("handle64"), (DType{3, 64, 1}));
  EXPECT_EQ(dlbridge::dtype_name(DType{0, 4, 1}), "int4");
  EXPECT_EQ(dlbridge::dtype_name(DType{3, 64, 1}), "handle64");
}

TEST(DTypeNames, InvalidTriplesPrintAsNumbers) {
  EXPECT_EQ(dlbridge::dtype_name(DType{18, 8, 1}), "dtype(18,8,1)");
  EXPECT_EQ(dlbridge::dtype_name(DType{255, 255, 65535}), "dtype(255,255,65535)");
  EXPECT_EQ(dlbridge::dtype_name(DType{17, 8, 1}), "dtype(17,8,1)");
  EXPECT_EQ(dlbridge::dtype_name(DType{2, 0, 1}), "dtype(2,0,1)");
  EXPECT_EQ(dlbridge::dtype_name(DType{2, 32, 0}), "dtype(2,32,0)");
}

TEST(DTypeNames, UnknownNamesAreRefused) {
  for (std::string_view text :
       {"", "float", "float0", "float256", "int8x0", "int8x65536", "float32x",
        "x4", "bool8", "bool1", "float4_e2m1", "float8_e4m3fnx", "complex65",
        "float6_e2m3fn6", "Float32", "float32 ", "int8x-1", "floatx32",
        "float032", "int8x04", "float00"}) {
    SCOPED_TRACE(text);
    dlbridge::Error e = parse_error(text);
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_NE(e.message().find("'" + std::string(text) + "'"), std::string::npos)
        << e.what();
    EXPECT_NE(e.hint().find("float32"), std::string::npos) << e.what();
  }
}

TEST(DTypeSizes, ElementBitsBytesAndSubbyte) {
  struct Row {
    DType t;
    uint32_t bits;
    uint32_t bytes;
    bool subbyte;
  };
  const Row rows[] = {
      {DType{2, 32, 1}, 32, 4, false},  {DType{2, 32, 4}, 128, 16, false},
      {DType{6, 8, 1}, 8, 1, false},    {DType{5, 128, 1}, 128, 16, false},
      {DType{17, 4, 1}, 4, 1, true},    {DType{17, 4, 2}, 8, 1, false},
      {DType{15, 6, 1}, 6, 1, true},    {DType{16, 6, 2}, 12, 2, false},
      {DType{1, 1, 1}, 1, 1, true},     {DType{0, 4, 3}, 12, 2, false},
      {DType{255, 255, 65535}, 255u * 65535u, (255u * 65535u + 7) / 8, false},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(dlbridge::dtype_name(row.t));
    EXPECT_EQ(row.t.element_bits(), row.bits);
    EXPECT_EQ(row.t.element_bytes(), row.bytes);
    EXPECT_EQ(row.t.is_subbyte(), row.subbyte);
  }
}

// dtype_valid is the cheap question every import asks; dtype_problem is the
// rule with its message. They must agree on every triple there is (lanes:
// every value that changes a rule, and a sample of the rest).
TEST(DTypeProblem, ValidAgreesWithProblemForEveryTriple) {
  int valid = 0;
  for (int code = 0; code < 256; ++code)
    for (int bits = 0; bits < 256; ++bits)
      for (uint16_t lanes : {uint16_t{0}, uint16_t{1}, uint16_t{2}, uint16_t{3}, uint16_t{4},
                             uint16_t{255}, uint16_t{65535}}) {
        const DType t{uint8_t(code), uint8_t(bits), lanes};
        const bool has_problem = dlbridge::dtype_problem(t).has_value();
        ASSERT_EQ(dlbridge::dtype_valid(t), !has_problem)
            << "code " << code << " bits " << bits << " lanes " << lanes;
        valid += !has_problem;
      }
  // Both outcomes occur: codes 0-6 take any (even, for complex) width; the
  // fixed-width codes take one.
  EXPECT_GT(valid, 1000);
  static_assert(dlbridge::dtype_valid(DType{2, 32, 1}));
  static_assert(!dlbridge::dtype_valid(DType{17, 8, 1}));
  static_assert(!dlbridge::dtype_valid(DType{18, 8, 1}));
  static_assert(!dlbridge::dtype_valid(DType{5, 63, 1}));
}

TEST(DTypeProblem, UnknownCodesAreUnsupported) {
  for (uint8_t code : {uint8_t{18}, uint8_t{100}, uint8_t{255}}) {
    SCOPED_TRACE(int(code));
    auto problem = dlbridge::dtype_problem(DType{code, 8, 1});
    ASSERT_TRUE(problem.has_value());
    EXPECT_EQ(problem->code(), ErrorCode::unsupported_dtype);
    EXPECT_NE(problem->message().find(std::to_string(code)), std::string::npos);
    EXPECT_FALSE(problem->hint().empty());
  }
  // The code decides first: an unknown code is not also called malformed.
  EXPECT_EQ(dlbridge::dtype_problem(DType{18, 0, 0})->code(), ErrorCode::unsupported_dtype);
}

TEST(DTypeProblem, ImpossibleWidthsAreInvalidTensors) {
  const DType bad[] = {
      DType{17, 8, 1},  // FP4 must be 4 bits
      DType{17, 4, 0},  // lanes 0
      DType{15, 8, 1},  // FP6 must be 6 bits
      DType{16, 8, 1},
      DType{6, 1, 1},   // bool is one byte
      DType{10, 16, 1}, // FP8 must be 8 bits
      DType{2, 0, 1},   // bits 0
      DType{0, 0, 1},
      DType{2, 32, 0},  // lanes 0
      DType{5, 63, 1},  // complex halves must be equal
  };
  for (const DType& t : bad) {
    SCOPED_TRACE(dlbridge::dtype_name(t));
    auto problem = dlbridge::dtype_problem(t);
    ASSERT_TRUE(problem.has_value());
    EXPECT_EQ(problem->code(), ErrorCode::invalid_tensor);
    EXPECT_FALSE(problem->hint().empty());
    try {
      dlbridge::validate_dtype(t);
      ADD_FAILURE() << "validate_dtype accepted it";
    } catch (const dlbridge::Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_tensor);
    }
  }
  auto fp4 = dlbridge::dtype_problem(DType{17, 8, 1});
  EXPECT_NE(fp4->message().find("float4_e2m1fn must have bits=4, got bits=8"),
            std::string::npos)
      << fp4->what();
}

TEST(DTypeOf, StandardTypes) {
  static_assert(dlbridge::dtype_of<bool>() == DType{6, 8, 1});
  EXPECT_EQ(dlbridge::dtype_of<bool>(), (DType{6, 8, 1}));
  EXPECT_EQ(dlbridge::dtype_of<int8_t>(), (DType{0, 8, 1}));
  EXPECT_EQ(dlbridge::dtype_of<int16_t>(), (DType{0, 16, 1}));
  EXPECT_EQ(dlbridge::dtype_of<int32_t>(), (DType{0, 32, 1}));
  EXPECT_EQ(dlbridge::dtype_of<int64_t>(), (DType{0, 64, 1}));
  EXPECT_EQ(dlbridge::dtype_of<uint8_t>(), (DType{1, 8, 1}));
  EXPECT_EQ(dlbridge::dtype_of<uint16_t>(), (DType{1, 16, 1}));
  EXPECT_EQ(dlbridge::dtype_of<uint32_t>(), (DType{1, 32, 1}));
  EXPECT_EQ(dlbridge::dtype_of<uint64_t>(), (DType{1, 64, 1}));
  EXPECT_EQ(dlbridge::dtype_of<signed char>(), (DType{0, 8, 1}));
  EXPECT_EQ(dlbridge::dtype_of<unsigned char>(), (DType{1, 8, 1}));
  EXPECT_EQ(dlbridge::dtype_of<short>(), (DType{0, 8 * sizeof(short), 1}));
  EXPECT_EQ(dlbridge::dtype_of<long>(), (DType{0, 8 * sizeof(long), 1}));
  EXPECT_EQ(dlbridge::dtype_of<long long>(), (DType{0, 64, 1}));
  EXPECT_EQ(dlbridge::dtype_of<unsigned long long>(), (DType{1, 64, 1}));
  EXPECT_EQ(dlbridge::dtype_of<float>(), (DType{2, 32, 1}));
  EXPECT_EQ(dlbridge::dtype_of<double>(), (DType{2, 64, 1}));
  EXPECT_EQ(dlbridge::dtype_of<std::complex<float>>(), (DType{5, 64, 1}));
  EXPECT_EQ(dlbridge::dtype_of<std::complex<double>>(), (DType{5, 128, 1}));
  EXPECT_EQ(dlbridge::dtype_of<const volatile double>(), (DType{2, 64, 1}));
  EXPECT_EQ(dlbridge::dtype_of<const std::complex<float>>(), (DType{5, 64, 1}));
  // Every deduced dtype is one a consumer accepts and a name round-trips.
  for (DType t : {dlbridge::dtype_of<bool>(), dlbridge::dtype_of<int8_t>(),
                  dlbridge::dtype_of<uint64_t>(), dlbridge::dtype_of<double>(),
                  dlbridge::dtype_of<std::complex<double>>()}) {
    EXPECT_FALSE(dlbridge::dtype_problem(t).has_value());
    EXPECT_EQ(dlbridge::parse_dtype(dlbridge::dtype_name(t)), t);
  }
}

TEST(DTypeOf, TypesWithoutADLPackDTypeHaveNone) {
  static_assert(has_dtype<float>::value);
  static_assert(has_dtype<std::complex<double>>::value);
  // No DLPack code has the layout of these; guessing one would corrupt data.
  static_assert(!has_dtype<long double>::value);
  static_assert(!has_dtype<std::complex<long double>>::value);
  static_assert(!has_dtype<std::complex<int>>::value);
  static_assert(!has_dtype<void*>::value);
  SUCCEED();
}

TEST(DTypeStruct, ConvertsToAndFromDLDataType) {
  const DType t{17, 4, 2};
  const dlbridge::abi::DLDataType dl = t.to_dl();
  EXPECT_EQ(dl.code, 17);
  EXPECT_EQ(dl.bits, 4);
  EXPECT_EQ(dl.lanes, 2);
  EXPECT_EQ(DType::from_dl(dl), t);
  EXPECT_EQ(DType{}, (DType{2, 32, 1}));  // the default is float32
  EXPECT_NE(t, (DType{17, 4, 1}));
}
