#include <gtest/gtest.h>

#include <dlbridge/dlbridge.hpp>

#include <string>

TEST(Version, StringMatchesNumbers) {
  std::string expected = std::to_string(DLBRIDGE_VERSION_MAJOR) + "." +
                         std::to_string(DLBRIDGE_VERSION_MINOR) + "." +
                         std::to_string(DLBRIDGE_VERSION_PATCH);
  EXPECT_EQ(expected, DLBRIDGE_VERSION_STRING);
}

TEST(Version, ProducesDLPack13) {
  EXPECT_EQ(DLBRIDGE_DLPACK_MAJOR, 1);
  EXPECT_EQ(DLBRIDGE_DLPACK_MINOR, 3);
}
