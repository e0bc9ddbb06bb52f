// Error code names are a stable contract shared with Python's `.code` and
// docs/errors.md; a rename here would silently break every caller that
// matches on the string, so the spellings are pinned one by one.
#include <gtest/gtest.h>
#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include <dlbridge/error.hpp>

#include <exception>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

namespace {

using dlbridge::Error;
using dlbridge::ErrorCode;

static_assert(std::is_base_of_v<std::runtime_error, Error>,
              "a plain catch (const std::exception&) must see dlbridge errors");
static_assert(dlbridge::error_code_name(ErrorCode::read_only) == "read_only");

struct Spelling {
  ErrorCode code;
  std::string_view name;
};

// The codes of docs/errors.md, plus the two that Python maps to built-ins.
constexpr Spelling spellings[] = {
    {ErrorCode::unsupported_device_type, "unsupported_device_type"},
    {ErrorCode::device_unavailable, "device_unavailable"},
    {ErrorCode::unsupported_dtype, "unsupported_dtype"},
    {ErrorCode::unsupported_layout, "unsupported_layout"},
    {ErrorCode::read_only, "read_only"},
    {ErrorCode::unsupported_version, "unsupported_version"},
    {ErrorCode::copy_required, "copy_required"},
    {ErrorCode::invalid_stream, "invalid_stream"},
    {ErrorCode::capsule_consumed, "capsule_consumed"},
    {ErrorCode::invalid_tensor, "invalid_tensor"},
    {ErrorCode::producer_refused, "producer_refused"},
    {ErrorCode::not_an_array, "not_an_array"},
    {ErrorCode::invalid_argument, "invalid_argument"},
    {ErrorCode::out_of_memory, "out_of_memory"},
};

}  // namespace

TEST(ErrorCodes, SpelledAsInTheContract) {
  for (const Spelling& s : spellings)
    EXPECT_EQ(dlbridge::error_code_name(s.code), s.name);
}

TEST(ErrorCodes, AllCodesListedOnceWithDistinctNames) {
  ASSERT_EQ(dlbridge::error_code_count, std::size(spellings));
  std::set<int> codes;
  std::set<std::string_view> names;
  for (const dlbridge::ErrorCodeInfo& row : dlbridge::error_code_table) {
    const ErrorCode code = row.code;
    const std::string_view name = dlbridge::error_code_name(code);
    EXPECT_EQ(&dlbridge::error_code_info(code), &row) << name;  // rows in enumerator order
    EXPECT_TRUE(codes.insert(static_cast<int>(code)).second) << name;
    EXPECT_TRUE(names.insert(name).second) << name;
    EXPECT_NE(name, "unknown");
  }
  for (const Spelling& s : spellings)
    EXPECT_EQ(names.count(s.name), 1u) << s.name << " missing from the table";
}

TEST(ErrorCodes, EveryRowNamesItsPythonClassBasesAndMeaning) {
  for (const dlbridge::ErrorCodeInfo& row : dlbridge::error_code_table) {
    EXPECT_FALSE(row.python_class.empty()) << row.name;
    EXPECT_FALSE(row.meaning.empty()) << row.name;
    const bool builtin = dlbridge::is_builtin_python_error(row.code);
    // dlbridge's classes end in "Error" and derive from DLPackError first.
    if (!builtin) {
      EXPECT_EQ(row.python_bases.substr(0, 11), "DLPackError") << row.name;
    }
  }
  EXPECT_TRUE(dlbridge::is_builtin_python_error(ErrorCode::invalid_argument));
  EXPECT_EQ(dlbridge::error_code_info(ErrorCode::invalid_argument).python_class, "ValueError");
  EXPECT_TRUE(dlbridge::is_builtin_python_error(ErrorCode::out_of_memory));
  EXPECT_EQ(dlbridge::error_code_info(ErrorCode::copy_required).python_bases,
            "DLPackError ValueError");
}

TEST(ErrorCodes, OutOfRangeValueHasAFallbackName) {
  // A code cast in from an integer (e.g. across a language boundary) must
  // still yield a printable name rather than falling off the switch.
  EXPECT_EQ(dlbridge::error_code_name(static_cast<ErrorCode>(1000)), "unknown");
}

TEST(ErrorObject, CarriesCodeMessageAndHint) {
  const Error e(ErrorCode::read_only, "The tensor is read-only.",
                "Pass copy=True to get a writable copy.");
  EXPECT_EQ(e.code(), ErrorCode::read_only);
  EXPECT_EQ(e.code_name(), "read_only");
  EXPECT_EQ(e.message(), "The tensor is read-only.");
  EXPECT_EQ(e.hint(), "Pass copy=True to get a writable copy.");
  const std::string what = e.what();
  EXPECT_NE(what.find(e.message()), std::string::npos) << what;
  EXPECT_NE(what.find(e.hint()), std::string::npos) << what;
  EXPECT_EQ(what, "The tensor is read-only. Pass copy=True to get a writable copy.");
}

TEST(ErrorObject, NoHintMeansWhatIsTheMessage) {
  const Error e(ErrorCode::invalid_argument, "Bad value.");
  EXPECT_TRUE(e.hint().empty());
  EXPECT_STREQ(e.what(), "Bad value.");
}

TEST(ErrorObject, EveryCodeSurvivesThrowAndCatchAsStdException) {
  for (const dlbridge::ErrorCodeInfo& row : dlbridge::error_code_table) {
    const ErrorCode code = row.code;
    const std::string name(row.name);
    try {
      dlbridge::detail::fail(code, "message for " + name, "hint for " + name);
    } catch (const std::exception& plain) {
      const std::string what = plain.what();
      EXPECT_NE(what.find("message for " + name), std::string::npos) << what;
      EXPECT_NE(what.find("hint for " + name), std::string::npos) << what;
      const auto* typed = dynamic_cast<const Error*>(&plain);
      ASSERT_NE(typed, nullptr);
      EXPECT_EQ(typed->code(), code);
    }
  }
}

TEST(ErrorBoundary, PassesTheResultOrHandsOverTheException) {
  std::string seen;
  auto note = [&](std::exception_ptr error) noexcept {
    try {
      std::rethrow_exception(error);
    } catch (const Error& e) {
      seen = e.code_name();
    } catch (...) {
      seen = "other";
    }
  };
  EXPECT_EQ(dlbridge::detail::error_boundary(-1, note, [] { return 7; }), 7);
  EXPECT_EQ(seen, "");
  EXPECT_EQ(dlbridge::detail::error_boundary(-1, note, []() -> int {
              dlbridge::detail::fail(ErrorCode::read_only, "m");
            }),
            -1);
  EXPECT_EQ(seen, "read_only");
  EXPECT_EQ(dlbridge::detail::error_boundary(-1, note, []() -> int { throw 3; }), -1);
  EXPECT_EQ(seen, "other");
}

#if defined(__GLIBCXX__) && defined(__linux__)
// A thread's exit is no error: the boundary never hands its empty
// exception_ptr to on_error (rethrowing that was undefined: a segfault), and
// since it cannot pass a noexcept frame either, the process ends by
// std::terminate, as for any exception that must not cross.
TEST(ErrorBoundaryDeathTest, AThreadExitInsideTheBodyIsNotReportedAsAnError) {
  auto exits_inside = [] {
    std::thread([] {
      auto report = [](std::exception_ptr error) noexcept {
        if (!error) std::fputs("an empty exception_ptr was reported\n", stderr);
        std::_Exit(3);
      };
      (void)dlbridge::detail::error_boundary(-1, report, []() -> int { pthread_exit(nullptr); });
    }).join();
    std::_Exit(0);
  };
  EXPECT_EXIT(exits_inside(), testing::KilledBySignal(SIGABRT), "");
}
#endif

TEST(ErrorObject, CopiesKeepEverything) {
  const Error original(ErrorCode::copy_required, "m", "h");
  const Error copy = original;  // exceptions are copied when rethrown by value
  EXPECT_EQ(copy.code(), ErrorCode::copy_required);
  EXPECT_EQ(copy.message(), "m");
  EXPECT_EQ(copy.hint(), "h");
  EXPECT_STREQ(copy.what(), original.what());
}
