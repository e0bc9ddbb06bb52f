# README.md shows examples/quickstart.cpp verbatim under "## C++ in one
# screen". The file is compiled and run by ctest, so this check is what makes
# the README's copy tested code too: any edit to one without the other fails.
#   cmake -DREADME=<README.md> -DEXAMPLE=<quickstart.cpp> -P readme_example.cmake
file(READ "${README}" readme)
file(READ "${EXAMPLE}" example)

set(heading "\n## C++ in one screen\n")
string(FIND "${readme}" "${heading}" heading_at)
if(heading_at EQUAL -1)
  message(FATAL_ERROR "${README} has no '## C++ in one screen' section.")
endif()
string(LENGTH "${heading}" heading_length)
math(EXPR after_heading "${heading_at} + ${heading_length}")
string(SUBSTRING "${readme}" ${after_heading} -1 section)

# The first fenced block of the section, up to the newline before its
# closing fence, so the comparison includes the file's final newline.
set(fence "```cpp\n")
string(FIND "${section}" "${fence}" fence_at)
string(FIND "${section}" "\n## " next_heading_at)
if(fence_at EQUAL -1 OR (NOT next_heading_at EQUAL -1 AND next_heading_at LESS fence_at))
  message(FATAL_ERROR "The '## C++ in one screen' section has no ```cpp block.")
endif()
string(LENGTH "${fence}" fence_length)
math(EXPR block_start "${fence_at} + ${fence_length}")
string(SUBSTRING "${section}" ${block_start} -1 rest)
string(FIND "${rest}" "\n```" close_at)
if(close_at EQUAL -1)
  message(FATAL_ERROR "The ```cpp block in '## C++ in one screen' is not closed.")
endif()
math(EXPR block_length "${close_at} + 1")
string(SUBSTRING "${rest}" 0 ${block_length} block)

if(NOT block STREQUAL example)
  file(WRITE "${CMAKE_CURRENT_BINARY_DIR}/readme_example_block.cpp" "${block}")
  message(FATAL_ERROR
    "The README's C++ block differs from ${EXAMPLE}.\n"
    "Extracted block: ${CMAKE_CURRENT_BINARY_DIR}/readme_example_block.cpp\n"
    "Copy the example into the README (or the README block into the example) "
    "so that both are the same bytes.")
endif()
