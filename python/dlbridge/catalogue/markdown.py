"""docs/errors.md, generated from the catalogue: ``python -m dlbridge.catalogue.markdown docs/errors.md``.

The page is never edited by hand; tests/python/test_catalogue.py fails when it and the
catalogue disagree.
"""

from __future__ import annotations

import sys

from . import LIBRARY_NAMES, Record, records

INTRO = """\
# dlbridge error codes, and other libraries' DLPack errors

<!-- Generated from python/dlbridge/catalogue/*.json by
     `python -m dlbridge.catalogue.markdown docs/errors.md`; edit the JSON, not this page. -->

Every failure to express or exchange a tensor raises a subclass of
`dlbridge.DLPackError`, itself a `BufferError`, so code that already falls back
on `BufferError` keeps working. Each error carries `.code` (one of the stable
strings below), `.hint` (what to do), `.record` (its catalogue entry) and
`.link` (its place on this page). `dlbridge explain CODE` prints one entry;
`dlbridge explain "MESSAGE"` finds the entry of any message below, dlbridge's or
another library's, and `dlbridge.explain(exc_or_text)` returns the records.

Bad argument types and values are not listed here: they raise `TypeError` and
`ValueError` (code `invalid_argument` inside the C++ core), and allocation
failures raise `MemoryError` (code `out_of_memory`).

Every entry is one record of the catalogue that ships in the wheel
(`dlbridge/catalogue/*.json`), with the same fields in the same order:

- **Exception** — the Python class.
- **Message pattern** — a Python regular expression that matches `str(error)`
  with `re.search`. dlbridge's patterns name only the essential words, so wording
  can improve without breaking callers that match; `dlbridge explain` also needs
  the class name before it calls a message dlbridge's. Every repeat in a pattern
  has an upper bound (`\\d{1,20}`, never `\\d+`), so matching costs time linear in
  the text; `dlbridge explain` reads the last 64 KiB of what it is given.
- **Trigger scenarios**, **Common situations**, **Solutions** — lists; solutions in order.
- **Example fix** — the failing call and the fix, as Python.
- **Handling strategy** — `convert`, `copy`, `fallback` or `fail`; **Try/except pattern**; **Prevention tips**.
- For other libraries' errors: the versions where the message was seen, the
  dlbridge call that avoids it, and dlbridge's code for the same situation.
"""

FOREIGN_INTRO = """\
# Other libraries' DLPack errors

The messages that NumPy, PyTorch, JAX, TVM-FFI, TensorFlow, PaddlePaddle, MLX, PyArrow
and Warp raise at the DLPack boundary were reproduced with the versions pinned in
requirements/dev.txt and requirements/libs.txt (tests/python/test_catalogue_foreign.py
raises each one and runs its fix). CuPy's, and two of TensorFlow's that need a TPU or a
remote device, were read from their sources, which is said in each entry.

Some failures raise nothing: the process dies, the values come back wrong, or read-only
data arrives writable. Their entries have no exception; the message is the one
`dlbridge doctor` reports when it finds them, and their example fix shows the silent call.
"""


def _span(text: str) -> str:
    """Inline code that survives backticks inside it."""
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def _bullets(items, numbered: bool = False) -> str:
    return "\n".join(f"{i}. {item}" if numbered else f"- {item}" for i, item in enumerate(items, 1))


def _block(code: str, language: str = "python") -> str:
    return f"```{language}\n{code}\n```"


def _example(record: Record) -> str:
    fix = record.fields["exampleFix"]
    language = fix.get("language", "python")
    setup = fix["setup"] + "\n" if fix["setup"] else ""
    note = "" if fix["runnable"] else " (not run by the tests: it needs what this machine lacks)"
    return (f"**Example fix**{note}\n\nBefore:\n\n{_block(setup + fix['before'], language)}\n\n"
            f"After:\n\n{_block(setup + fix['after'], language)}")


def _common_tail(record: Record) -> list[str]:
    f = record.fields
    parts = [f"**Trigger scenarios**\n{_bullets(f['triggerScenarios'])}",
             f"**Common situations**\n{_bullets(f['commonSituations'])}",
             f"**Solutions**\n{_bullets(f['solutions'], numbered=record.library != 'dlbridge')}"]
    if record.library != "dlbridge":
        parts.append(_dlbridge_side(record))
    parts += [_example(record),
              f"**Handling strategy:** `{f['handlingStrategy']}`",
              f"**Try/except pattern**\n\n{_block(f['tryCatchPattern'])}",
              f"**Prevention tips**\n{_bullets(f['preventionTips'])}"]
    return parts


def _dlbridge_side(record: Record) -> str:
    f = record.fields
    call = f"`{f['dlbridgeCall']}`" if f["dlbridgeCall"] else "none: dlbridge cannot make this data exchangeable"
    own = record.dlbridge_record
    if own is None:
        code = "none (dlbridge handles it, or passes the library's error through)"
    else:
        code = f"[`{own.code}`](#{own.anchor})"
        if f["dlbridgeRefusal"]:
            code += f", e.g. from `{f['dlbridgeRefusal']}`"
    return f"**With dlbridge:** {call}. dlbridge's code for the same situation: {code}."


def _own_entry(record: Record) -> str:
    f = record.fields
    parts = [f"## `{record.code}`", f"**Exception:** `{f['errorClass']}`",
             f"**Message pattern:** `{record.pattern}`", *_common_tail(record)]
    return "\n\n".join(parts)


def _exception(error_class: str) -> str:
    """`ValueError`, or the words of a failure that raises nothing ("none: the process dies of SIGFPE")."""
    silent = "no exception: "
    return f"none: {error_class[len(silent):]}" if error_class.startswith(silent) else f"`{error_class}`"


def _foreign_entry(record: Record) -> str:
    f = record.fields
    evidence = f["evidence"]
    if evidence["kind"] == "reproduced":
        seen = f"{LIBRARY_NAMES[record.library]} {', '.join(f['libraryVersions'])}, reproduced by {evidence['where']}"
    else:
        seen = f"{LIBRARY_NAMES[record.library]}, read from {evidence['where']}; not run here"
    parts = [f'<a id="{record.anchor}"></a>\n### `{record.id}`',
             f"**Exception:** {_exception(f['errorClass'])} — {seen}",
             f"**Message pattern:** `{record.pattern}`",
             "**Message seen:** " + "; ".join(_span(e) for e in f["messageExamples"]),
             *_common_tail(record)]
    return "\n\n".join(parts)


def render() -> str:
    parts = [INTRO]
    parts += [_own_entry(r) for r in records() if r.library == "dlbridge"]
    parts.append(FOREIGN_INTRO)
    for library, name in LIBRARY_NAMES.items():
        mine = [r for r in records() if r.library == library and library != "dlbridge"]
        if mine:
            parts.append(f"## {name}")
            parts += [_foreign_entry(r) for r in mine]
    return "\n\n".join(part.rstrip("\n") for part in parts) + "\n"


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    text = render()
    if not argv or argv == ["-"]:
        sys.stdout.write(text)
    else:
        with open(argv[0], "w", encoding="utf-8") as out:
            out.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
