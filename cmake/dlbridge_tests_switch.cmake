# Resolves DLBRIDGE_BUILD_TESTS (ON, OFF or AUTO) into DLBRIDGE_TESTS_ENABLED.
# AUTO builds the tests only for a top-level, non-wheel build that finds
# GoogleTest, and says why when it does not; ON fails without GoogleTest.
set(DLBRIDGE_TESTS_ENABLED OFF)
if(SKBUILD OR NOT DLBRIDGE_BUILD_TESTS)
  return()
endif()
if(DLBRIDGE_BUILD_TESTS STREQUAL "AUTO")
  if(NOT DLBRIDGE_IS_TOP_LEVEL)
    return()
  endif()
  find_package(GTest QUIET)
  if(NOT GTest_FOUND)
    message(STATUS "dlbridge: C++ tests skipped: GoogleTest not found "
                   "(install libgtest-dev, or pass -DDLBRIDGE_BUILD_TESTS=ON to require it)")
    return()
  endif()
endif()
set(DLBRIDGE_TESTS_ENABLED ON)
