"""Doxygen's input filter for dlbridge's headers: their plain ``//`` comments are the API documentation.

The headers document each declaration with the ``//`` comment block right above it, and a member with a
comment after it on the same line; Doxygen reads only its own markers (``///``, ``///<``). This filter,
run by Doxygen on every header (docs/Doxyfile, INPUT_FILTER), gives it those markers and changes nothing
else, so the headers stay written for their readers and keep their line numbers:

- a comment block directly above a declaration at namespace or class scope becomes ``///``; a block
  followed by a blank line (a section heading) or by a preprocessor line stays a plain comment;
- a comment after a declaration on the same line becomes ``///<``, as do its continuation lines;
- comments inside function bodies and the file's opening comment stay plain.

    python3 docs/doxygen_comments.py HEADER    prints the filtered header
"""

from __future__ import annotations

import re
import sys

# A brace opens a scope whose comments document declarations when the statement before it starts so.
_SCOPE = re.compile(r"^(?:template\s*<.*>\s*)?(?:namespace|class|struct|union|(enum))\b|^extern\b", re.S)
_ACCESS = re.compile(r"^\s*(?:public|private|protected)\s*:")
# "// --- Values -----": a heading over the declarations that follow, not the first one's documentation.
_HEADING = re.compile(r"^\s*//\s*---.*---\s*$")


def _scan(text: str):
    """Yields ("comment", offset of a line comment's ``//``, whether it is at declaration scope) and
    ("directive in list", offset of the ``#`` of a directive among enumerators or in an initializer, None)
    in order.

    Strings, character literals and block comments are skipped, so a ``//`` inside them is no comment.
    """
    # One per open brace: "scope" (namespace, class), "list" (enumerators, an initializer) or "body".
    scopes: list[str] = []
    statement = []  # the text since the last ; { or }, to classify the next brace
    i, n = 0, len(text)
    at_line_start = True
    while i < n:
        c = text[i]
        if c == "\n":
            at_line_start = True
            statement.append(c)
            i += 1
            continue
        if at_line_start and c not in " \t":
            at_line_start = False
            if c == "#":  # a preprocessor line (with its continuations) is no part of a statement
                if scopes and scopes[-1] == "list":
                    yield "directive in list", i, None
                while i < n and text[i] != "\n":
                    i += 2 if text.startswith("\\\n", i) else 1
                continue
        if text.startswith("//", i):
            yield "comment", i, "body" not in scopes
            i = text.find("\n", i)
            i = n if i < 0 else i
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        elif c == '"' or (c == "'" and not text[i - 1:i].isalnum()):  # 1'000 is a digit separator
            raw = re.match(r'R"([^(]*)\(', text[i - 1:i + 20]) if i and text[i - 1] == "R" else None
            if raw:
                end = text.find(")" + raw.group(1) + '"', i)
                i = n if end < 0 else end + len(raw.group(1)) + 2
            else:
                i += 1
                while i < n and text[i] != c:
                    i += 2 if text[i] == "\\" else 1
                i += 1
            statement.append("_")
        elif c == "{":
            head = "".join(statement).strip()
            kind = _SCOPE.match(head)
            scopes.append("list" if head.endswith("=") or (kind and kind.group(1))
                          else "scope" if kind else "body")
            statement = []
            i += 1
        elif c == "}":
            if scopes:
                scopes.pop()
            statement = []
            i += 1
        elif c == ";":
            statement = []
            i += 1
        else:
            statement.append(c)
            i += 1


# Lines a comment above does not document: directives other than #define, namespace dlbridge (every header
# reopens it) and a static_assert (which declares nothing).
_NOT_DOCUMENTED = re.compile(
    r"\s*(?:#(?!\s*define\b)|//|}|namespace\s+dlbridge\b|static_assert\b|using\s+namespace\b|$)")


def _is_declaration(line: str) -> bool:
    return not _NOT_DOCUMENTED.match(line) and not _ACCESS.match(line)


def doxygen_comments(text: str) -> str:
    """The header with Doxygen's markers on the comments that document declarations."""
    lines = text.split("\n")
    starts = [0]
    for line in lines[:-1]:
        starts.append(starts[-1] + len(line) + 1)

    def line_of(offset: int) -> int:
        lo, hi = 0, len(starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if starts[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo

    comments = {}  # line number -> (column of //, at declaration scope, whole-line comment)
    in_lists = []
    for event, offset, documents in _scan(text):
        number = line_of(offset)
        if event == "directive in list":
            in_lists.append(number)
            continue
        column = offset - starts[number]
        comments[number] = (column, documents, not lines[number][:column].strip())

    out = list(lines)
    first_code = next((k for k, line in enumerate(lines) if line.strip() and not line.lstrip().startswith("//")),
                      len(lines))
    k = 0
    while k < len(lines):
        if k not in comments:
            k += 1
            continue
        column, documents, whole_line = comments[k]
        if not whole_line:
            # After a declaration: ///<, continued by the comment-only lines aligned under it.
            if documents and _is_declaration(lines[k][:column]):
                out[k] = lines[k][:column] + "///<" + lines[k][column + 2:]
                j = k + 1
                while j in comments and comments[j][2] and comments[j][0] == column:
                    out[j] = lines[j][:column] + "///<" + lines[j][column + 2:]
                    j += 1
                k = j
            else:
                k += 1
            continue
        if _HEADING.match(lines[k]):
            k += 1
            continue
        block_end = k
        while block_end + 1 in comments and comments[block_end + 1][2]:
            block_end += 1
        follows = lines[block_end + 1] if block_end + 1 < len(lines) else ""
        if documents and k > first_code and _is_declaration(follows):
            for j in range(k, block_end + 1):
                c = comments[j][0]
                out[j] = lines[j][:c] + "///" + lines[j][c + 2:]
        k = block_end + 1
    # Doxygen's preprocessor leaves a #define among enumerators or in an initializer behind as text, which
    # it then lists as an enumerator or prints in the initializer (error.hpp's X-macro table): the
    # definition moves to the top, the #undef goes. Only single-line definitions are there.
    moved = [out[k] for k in in_lists if out[k].lstrip().startswith("#define")]
    out = moved + [line if k not in in_lists else "" for k, line in enumerate(out)
                   if not (k in in_lists and line.lstrip().startswith("#define"))]
    return "\n".join(out)


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as f:
        sys.stdout.write(doxygen_comments(f.read()))
