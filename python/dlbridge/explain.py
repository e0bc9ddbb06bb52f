"""``dlbridge explain CODE``: the documented entry of an error code.

docs/errors.md is the single source: the package is installed editable, so the
page is found next to the sources rather than shipped twice.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import re
import sys

FIELDS = (
    "Exception",
    "Message pattern",
    "Trigger scenarios",
    "Common situations",
    "Solutions",
    "Example fix",
)

_ENTRY = re.compile(r"^## `([a-z_]+)`\s*$", re.MULTILINE)
_FIELD = re.compile(r"^\*\*(%s)(?::\*\*|\*\*)" % "|".join(map(re.escape, FIELDS)), re.MULTILINE)


@dataclasses.dataclass(frozen=True)
class Entry:
    code: str
    text: str  # the whole section, heading included, as printed by explain
    fields: dict

    @property
    def exception(self) -> str:
        return self.fields["Exception"].strip().strip("`")

    @property
    def pattern(self) -> str:
        # The regex sits in one code span; backticks never occur inside it.
        value = self.fields["Message pattern"].strip()
        if value.startswith("`") and value.endswith("`"):
            return value[1:-1]
        return value


def errors_doc_path() -> pathlib.Path | None:
    """Where docs/errors.md is: $DLBRIDGE_ERRORS_DOC; else the source tree's (always current
    in a checkout); else the copy a wheel installs beside the extension module."""
    override = os.environ.get("DLBRIDGE_ERRORS_DOC")
    if override:
        return pathlib.Path(override)
    here = pathlib.Path(__file__).resolve().parent
    # python/dlbridge/ -> repository root; also tolerate a flat layout.
    candidates = [root / "docs" / "errors.md" for root in (here.parents[1], here.parent)]
    try:
        from . import _core

        candidates.append(pathlib.Path(_core.__file__).resolve().parent / "errors.md")
    except ImportError:
        pass
    candidates.append(here / "errors.md")
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    return None


def parse(text: str) -> dict[str, Entry]:
    entries = {}
    heads = list(_ENTRY.finditer(text))
    for i, head in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        body = text[head.start():end].rstrip() + "\n"
        fields = {}
        marks = list(_FIELD.finditer(body))
        for j, mark in enumerate(marks):
            stop = marks[j + 1].start() if j + 1 < len(marks) else len(body)
            fields[mark.group(1)] = body[mark.end():stop].strip()
        entries[head.group(1)] = Entry(head.group(1), body, fields)
    return entries


def load() -> dict[str, Entry]:
    path = errors_doc_path()
    if path is None:
        raise FileNotFoundError(
            "docs/errors.md was not found next to the dlbridge sources; "
            "set DLBRIDGE_ERRORS_DOC to its path"
        )
    return parse(path.read_text(encoding="utf-8"))


def main(code: str, out=None) -> int:
    out = out or sys.stdout
    try:
        entries = load()
    except OSError as exc:
        print(f"dlbridge explain: {exc}", file=sys.stderr)
        return 1
    entry = entries.get(code.strip().strip("`"))
    if entry is None:
        print(f"dlbridge explain: unknown error code {code!r}", file=sys.stderr)
        print("known codes: " + ", ".join(sorted(entries)), file=sys.stderr)
        return 2
    out.write(entry.text)
    return 0
