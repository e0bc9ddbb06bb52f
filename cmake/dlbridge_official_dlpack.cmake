# Finds an official DLPack header of the version dlbridge speaks, for the tests
# that compare dlbridge's declarations with it (test_abi_official) or convert
# between the two (test_dlpack_compat). Sets DLBRIDGE_OFFICIAL_DLPACK_FOUND and,
# when found, the cache path DLBRIDGE_OFFICIAL_DLPACK_INCLUDE (a directory with
# dlpack/dlpack.h). Where it looks, in order:
#   1. DLBRIDGE_OFFICIAL_DLPACK_INCLUDE given by the user;
#   2. a dlpack/dlpack.h on the system include path (Debian's libdlpack-dev);
#   3. through a Python found by CMake: the apache-tvm-ffi package's include/,
#      else torch's ATen/dlpack.h, staged here as dlpack/dlpack.h.
# A header of another version is not used: the tests compare exact values.
set(DLBRIDGE_OFFICIAL_DLPACK_INCLUDE "" CACHE PATH
    "Directory holding dlpack/dlpack.h from an official DLPack release (found when empty)")
set(DLBRIDGE_OFFICIAL_DLPACK_FOUND OFF)

file(STRINGS "${PROJECT_SOURCE_DIR}/include/dlbridge/version.hpp" _dl_lines
     REGEX "define DLBRIDGE_DLPACK_(MAJOR|MINOR) ")
string(REGEX MATCH "MAJOR ([0-9]+)" _ "${_dl_lines}")
set(_dl_want "${CMAKE_MATCH_1}")
string(REGEX MATCH "MINOR ([0-9]+)" _ "${_dl_lines}")
set(_dl_want "${_dl_want}.${CMAKE_MATCH_1}")

# "<major>.<minor>" of the dlpack.h in dir, or "" when there is none.
function(_dlbridge_dlpack_version dir out)
  set(version "")
  if(EXISTS "${dir}/dlpack/dlpack.h")
    file(STRINGS "${dir}/dlpack/dlpack.h" lines
         REGEX "define DLPACK_(MAJOR|MINOR)_VERSION ")
    string(REGEX MATCH "MAJOR_VERSION ([0-9]+)" _ "${lines}")
    set(version "${CMAKE_MATCH_1}")
    string(REGEX MATCH "MINOR_VERSION ([0-9]+)" _ "${lines}")
    set(version "${version}.${CMAKE_MATCH_1}")
  endif()
  set(${out} "${version}" PARENT_SCOPE)
endfunction()

set(_dl_candidates "")
set(_dl_rejected "")
if(DLBRIDGE_OFFICIAL_DLPACK_INCLUDE)
  list(APPEND _dl_candidates "${DLBRIDGE_OFFICIAL_DLPACK_INCLUDE}")
else()
  find_path(_dl_system_include dlpack/dlpack.h)
  if(_dl_system_include)
    list(APPEND _dl_candidates "${_dl_system_include}")
  endif()
  find_package(Python COMPONENTS Interpreter QUIET)
  if(Python_Interpreter_FOUND)
    execute_process(
      COMMAND "${Python_EXECUTABLE}" "${CMAKE_CURRENT_LIST_DIR}/find_official_dlpack.py"
              "${CMAKE_CURRENT_BINARY_DIR}/official_dlpack"
      OUTPUT_VARIABLE _dl_python_dirs OUTPUT_STRIP_TRAILING_WHITESPACE
      RESULT_VARIABLE _dl_python_result ERROR_QUIET)
    if(_dl_python_result EQUAL 0 AND _dl_python_dirs)
      string(REPLACE "\n" ";" _dl_python_dirs "${_dl_python_dirs}")
      list(APPEND _dl_candidates ${_dl_python_dirs})
    endif()
  endif()
endif()

foreach(dir IN LISTS _dl_candidates)
  _dlbridge_dlpack_version("${dir}" version)
  if(version STREQUAL _dl_want)
    set(DLBRIDGE_OFFICIAL_DLPACK_INCLUDE "${dir}" CACHE PATH
        "Directory holding dlpack/dlpack.h from an official DLPack release (found when empty)" FORCE)
    set(DLBRIDGE_OFFICIAL_DLPACK_FOUND ON)
    message(STATUS "dlbridge: official DLPack ${version} header: ${dir}/dlpack/dlpack.h")
    break()
  endif()
  list(APPEND _dl_rejected "${dir} (version '${version}')")
endforeach()

if(NOT DLBRIDGE_OFFICIAL_DLPACK_FOUND)
  if(_dl_rejected)
    list(JOIN _dl_rejected ", " _dl_rejected)
    set(_dl_rejected " Looked at: ${_dl_rejected}.")
  endif()
  message(STATUS "dlbridge: test_abi_official and test_dlpack_compat skipped: no official "
                 "DLPack ${_dl_want} dlpack/dlpack.h found.${_dl_rejected} Install "
                 "apache-tvm-ffi or torch for a Python on PATH, or pass "
                 "-DDLBRIDGE_OFFICIAL_DLPACK_INCLUDE=<dir with dlpack/dlpack.h>.")
endif()
