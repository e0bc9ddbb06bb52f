# Usage (ctest runs this; see the end of tests/cpp/CMakeLists.txt):
#   cmake -DDLBRIDGE_BINARY_DIR=<dlbridge build> -DCONSUMER_SOURCE_DIR=<this dir>
#         -DWORK_DIR=<scratch> -DGENERATOR=Ninja [-DMAKE_PROGRAM=...]
#         [-DCXX_COMPILER=...] [-DEXPECTED_VERSION=x.y.z] -P run_consumer_test.cmake
# Installs dlbridge into a fresh prefix and builds tests/consumer against it,
# which is what a user of find_package(dlbridge) gets. Any failing step stops
# the script with FATAL_ERROR, which ctest reports as a failed test.
cmake_minimum_required(VERSION 3.18)

foreach(var DLBRIDGE_BINARY_DIR CONSUMER_SOURCE_DIR WORK_DIR GENERATOR)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "run_consumer_test.cmake: -D${var}=... is required")
  endif()
endforeach()

set(prefix "${WORK_DIR}/prefix")
set(consumer_build "${WORK_DIR}/build")
# A stale prefix could hide a file that the install no longer provides.
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

function(run_step name)
  message(STATUS "consumer test: ${name}")
  execute_process(COMMAND ${ARGN}
                  RESULT_VARIABLE result
                  OUTPUT_VARIABLE out
                  ERROR_VARIABLE out)
  if(NOT result EQUAL 0)
    list(JOIN ARGN " " command_line)
    message(FATAL_ERROR "consumer test: step '${name}' failed (${result}):\n"
                        "  ${command_line}\n${out}")
  endif()
  message(STATUS "${out}")
endfunction()

run_step("install dlbridge"
  "${CMAKE_COMMAND}" --install "${DLBRIDGE_BINARY_DIR}" --prefix "${prefix}")

set(configure_args
  -S "${CONSUMER_SOURCE_DIR}" -B "${consumer_build}" -G "${GENERATOR}"
  -DCMAKE_BUILD_TYPE=Debug
  "-DCMAKE_PREFIX_PATH=${prefix}"
  # Only the fresh prefix may satisfy find_package, never a registry entry.
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
  -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF)
if(DEFINED MAKE_PROGRAM AND NOT MAKE_PROGRAM STREQUAL "")
  list(APPEND configure_args "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}")
endif()
if(DEFINED CXX_COMPILER AND NOT CXX_COMPILER STREQUAL "")
  list(APPEND configure_args "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}")
endif()
if(DEFINED EXPECTED_VERSION AND NOT EXPECTED_VERSION STREQUAL "")
  list(APPEND configure_args "-DDLBRIDGE_EXPECTED_VERSION=${EXPECTED_VERSION}")
endif()
run_step("configure consumer" "${CMAKE_COMMAND}" ${configure_args})

# The package must have come from the prefix just installed, not from the
# source or build tree, or the test would prove nothing about the install.
file(STRINGS "${consumer_build}/CMakeCache.txt" found_dir REGEX "^dlbridge_DIR:")
string(REGEX REPLACE "^dlbridge_DIR:[A-Z]+=" "" found_dir "${found_dir}")
file(REAL_PATH "${prefix}" real_prefix)
file(REAL_PATH "${found_dir}" real_found_dir)
string(FIND "${real_found_dir}" "${real_prefix}/" at)
if(NOT at EQUAL 0)
  message(FATAL_ERROR "consumer test: dlbridge was found at '${found_dir}', "
                      "outside the install prefix '${prefix}'")
endif()

run_step("build consumer" "${CMAKE_COMMAND}" --build "${consumer_build}")
run_step("run consumer" "${consumer_build}/consumer")
