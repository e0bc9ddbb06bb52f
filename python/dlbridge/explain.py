"""``dlbridge explain TEXT|CODE|-`` and ``dlbridge.explain(exc_or_text)``: which library
raised a DLPack error, why, and the fix, from the catalogue (dlbridge/catalogue/*.json)."""

from __future__ import annotations

import json
import re
import sys

from . import catalogue
from .catalogue import LIBRARY_NAMES, Record

# A single word of this shape is looked up as a code or record id, not as a message.
_IDENTIFIER = re.compile(r"^[A-Za-z_][\w.]*$")


def _lookup(key: str) -> list[Record]:
    record = catalogue.by_code().get(key) or catalogue.by_id().get(key)
    return [record] if record else []


def explain(exc_or_text) -> list[Record]:
    """The catalogue records of an exception or a message, best first; empty when unknown.

    A DLPackError is looked up by its ``.code``. Anything else is matched by text
    (for exceptions, ``"ClassName: message"``), so a whole pasted traceback works too; only
    its last 64 KiB are read (``catalogue.MAX_TEXT``), in time linear in their length.
    """
    code = getattr(exc_or_text, "code", None)
    if isinstance(exc_or_text, BaseException):
        if isinstance(code, str) and code in catalogue.by_code():
            return [catalogue.by_code()[code]]
        text = f"{type(exc_or_text).__name__}: {exc_or_text}"
    elif isinstance(exc_or_text, str):
        text = exc_or_text.strip()
    else:
        raise TypeError(f"explain() takes an exception or a message, not {type(exc_or_text).__name__}")
    if _IDENTIFIER.match(text):
        found = _lookup(text)
        if found:
            return found
    return catalogue.matching(text)


def related(found: list[Record]) -> list[Record]:
    """dlbridge's own entries for the situations of other libraries' records in found."""
    out = []
    for record in found:
        own = record.dlbridge_record
        if record.library != "dlbridge" and own is not None and own not in found and own not in out:
            out.append(own)
    return out


def render(record: Record) -> str:
    """One record as the terminal shows it: ``str(record)``."""
    return str(record)


def brief(record: Record) -> str:
    """One record in one line: ``record.brief()``."""
    return record.brief()


def report(text: str) -> tuple[dict, int]:
    """What explain says about text, as JSON-ready data, and the exit status. ``query`` is the
    text as matched: its last catalogue.MAX_TEXT characters (a traceback ends with its message)."""
    found = explain(text)
    text = catalogue.searched(text)
    if found:
        return {"query": text, "recognised": True, "matches": [r.as_dict() for r in found],
                "related": [r.as_dict() for r in related(found)], "closest": []}, 0
    closest = [{"id": r.id, "score": score} for r, score in catalogue.closest(text)]
    return {"query": text, "recognised": False, "matches": [], "related": [], "closest": closest}, 2


def _quoted(text: str, limit: int = 60) -> str:
    return repr(text) if len(text) <= limit else f"{text[:limit]!r}... ({len(text):,} characters)"


def _print_text(data: dict, out, err, code: str | None, short: bool = False) -> None:
    by_id = catalogue.by_id()
    if data["recognised"] and short:
        for fields in data["matches"]:
            out.write(by_id[fields["id"]].brief() + "\n")
        return
    if data["recognised"]:
        for fields in data["matches"]:
            out.write(render(by_id[fields["id"]]) + "\n")
        for fields in data["related"]:
            out.write("what dlbridge says in the same situation:\n" + render(by_id[fields["id"]]) + "\n")
        return
    if code is not None:
        err.write(f"dlbridge explain: unknown error code {_quoted(code)}\n")
        err.write("known codes: " + ", ".join(sorted(catalogue.by_code())) + "\n")
    else:
        err.write("dlbridge explain: message not recognised; no catalogue record matches it.\n")
    if data["closest"]:
        err.write("closest records (not matches):\n")
        for item in data["closest"]:
            err.write(f"  {item['id']}  (shared words {item['score']:.2f})  {by_id[item['id']].link}\n")


def _read_tail(stream, limit: int) -> tuple[str, int]:
    """The last limit characters of what stream holds, and how many it held: read in pieces, so a
    piped log never sits in memory whole."""
    tail, total = "", 0
    while chunk := stream.read(1 << 16):
        tail += chunk
        total += len(chunk)
        if len(tail) > 2 * limit:
            tail = tail[-limit:]
    return tail[-limit:], total


def main(text: str, as_json: bool = False, out=None, err=None, stdin=None, short: bool = False) -> int:
    """The command: every match in full, or one line each (``short``, ``--brief``), or JSON."""
    out, err = out or sys.stdout, err or sys.stderr
    whole = True
    if text == "-":
        text, total = _read_tail(stdin or sys.stdin, catalogue.MAX_TEXT)
        whole = total == len(text)
    text = text.strip()
    data, status = report(text)
    if as_json:
        json.dump(data, out, indent=2, ensure_ascii=False)
        out.write("\n")
    else:
        # The end of a longer text is never taken for a code, however it looks.
        _print_text(data, out, err, code=text if whole and _IDENTIFIER.match(text) else None, short=short)
    return status
