"""docs/doxygen_comments.py, the filter through which Doxygen reads the headers for the C++ API page:
which plain comments become documentation, and that nothing else in a header changes."""

import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("doxygen_comments", ROOT / "docs" / "doxygen_comments.py")
doxygen_comments = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(doxygen_comments)

HEADER = '''\
// The file's opening comment: about the header, not its first declaration.
#pragma once

#include <cstdint>

// A comment above an include documents nothing.
#include <string>

// The version, as a macro.
#define MY_VERSION 3

namespace dlbridge {

// --- Values -------------------------------------------------------------
inline int first() { return 1; }

// A section's introduction, followed by a blank line.

// Adds one.
// Two lines of documentation.
inline int add_one(int x) {
  // A comment inside a body stays a comment.
  const char* url = "http://example.org";  // neither is this one
  return x + 1;
}

// A struct, and its members documented after them.
struct Options {
  int threads = 0;  // 0: as many as there are cores,
                    // or the count given
  const char* name = "a // b";  // the // in the string is no comment
 private:
  // Private state: documented for Doxygen, which leaves private members out (EXTRACT_PRIVATE).
  int hidden_ = 0;
};

// A tensor struct of another major version has another layout: refuse now.
static_assert(sizeof(int) == 4, "int");

enum class Code {
#define ENUMERATOR(name) name,
  ENUMERATOR(first) ENUMERATOR(second)
#undef ENUMERATOR
};

}  // namespace dlbridge
'''


def filtered():
    return doxygen_comments.doxygen_comments(HEADER)


def line_with(text: str, source: str) -> str:
    return next(line for line in source.splitlines() if text in line)


def test_declarations_get_their_comment_above_as_documentation():
    out = filtered()
    assert line_with("Adds one.", out) == "/// Adds one."
    assert line_with("Two lines of documentation.", out) == "/// Two lines of documentation."
    assert line_with("A struct, and its members", out).startswith("/// ")
    assert line_with("The version, as a macro.", out) == "/// The version, as a macro."


def test_members_get_their_comment_after_as_documentation():
    out = filtered()
    assert line_with("int threads = 0;", out).endswith("///< 0: as many as there are cores,")
    assert line_with("or the count given", out).strip() == "///< or the count given"
    assert line_with('const char* name = "a // b";', out) == \
        '  const char* name = "a // b";  ///< the // in the string is no comment'


def test_comments_that_document_nothing_stay_plain():
    out = filtered()
    for text in ("The file's opening comment", "A comment above an include", "--- Values ---",
                 "A section's introduction", "A comment inside a body", "neither is this one",
                 "A tensor struct of another major version", "namespace dlbridge"):
        assert line_with(text, out) == line_with(text, HEADER), text


def test_a_define_among_enumerators_moves_above_them_and_lines_stay_put():
    out = filtered()
    lines = out.splitlines()
    assert len(lines) == len(HEADER.splitlines())
    assert lines[0] == "#define ENUMERATOR(name) name,"
    body = out[out.index("enum class Code {"):]
    assert "#define" not in body and "#undef" not in body
    assert "ENUMERATOR(first) ENUMERATOR(second)" in body


def test_every_public_header_filters_without_changing_its_code():
    # Only comment markers change (and a #define among enumerators moves up, its #undef goes): with every
    # comment removed, a header holds the same lines before and after.
    def code_of(text: str) -> list[str]:
        return sorted(line.split("//", 1)[0].rstrip() for line in text.splitlines()
                      if line.split("//", 1)[0].strip() and not line.lstrip().startswith("#undef"))

    for header in sorted((ROOT / "include" / "dlbridge").rglob("*.hpp")):
        text = header.read_text()
        out = doxygen_comments.doxygen_comments(text)
        assert len(out.splitlines()) == len(text.splitlines()), header
        assert code_of(out) == code_of(text), header
