"""The error catalogue: one record per DLPack error message, dlbridge's own and other libraries'.

The JSON files beside this module are the single source. ``dlbridge explain`` and
``DLPackError.record`` read them, and docs/errors.md is generated from them
(``python -m dlbridge.catalogue.markdown docs/errors.md``).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import pathlib
import re
import textwrap

from . import linear

# File order is display order: dlbridge's own codes first, then the libraries it bridges.
LIBRARIES = ("dlbridge", "numpy", "torch", "jax", "tvm_ffi", "cupy", "tensorflow", "paddle", "mlx", "arrow", "warp")
LIBRARY_NAMES = {"dlbridge": "dlbridge", "numpy": "NumPy", "torch": "PyTorch", "jax": "JAX", "tvm_ffi": "TVM-FFI",
                 "cupy": "CuPy", "tensorflow": "TensorFlow", "paddle": "PaddlePaddle", "mlx": "MLX", "arrow": "PyArrow",
                 "warp": "Warp"}
HANDLING_STRATEGIES = ("convert", "copy", "fallback", "fail")
# Where an entry lives; `Record.link` appends the anchor.
DOCS_PAGE = "docs/errors.md"

_STR, _OPT_STR, _STRS = (str,), (str, type(None)), "list[str]"
# Every field of a record and its type, in the order the files write them.
SCHEMA = {
    "id": _STR, "library": _STR, "libraryVersions": _STRS, "errorClass": _STR, "errorCode": _OPT_STR,
    "messagePattern": _STR, "messageExamples": _STRS, "triggerScenarios": _STRS, "commonSituations": _STRS,
    "solutions": _STRS, "exampleFix": (dict,), "handlingStrategy": _STR, "tryCatchPattern": _STR,
    "preventionTips": _STRS, "dlbridgeCall": _OPT_STR, "dlbridgeCode": _OPT_STR, "dlbridgeRefusal": _OPT_STR,
    "evidence": (dict,),
}
EXAMPLE_FIX = {"setup": str, "before": str, "after": str, "runnable": bool}
# How much text is matched: the last 64 KiB. A traceback ends with its message, and every
# pattern costs at most linear.MAX_BUDGET steps per character, so a match is bounded too.
MAX_TEXT = 64 * 1024
# How a record's message is known: raised by this repository's tests (dlbridge's own,
# or another library's with the pinned version), or only read from the library's source.
EVIDENCE_KINDS = ("tested", "reproduced", "source")


@dataclasses.dataclass(frozen=True, eq=False)
class Record:
    """One catalogue entry; ``fields`` is the JSON object exactly as stored (camelCase keys).
    Records are loaded once, so identity is equality (and they hash)."""

    fields: dict

    @property
    def id(self) -> str:
        return self.fields["id"]

    @property
    def library(self) -> str:
        return self.fields["library"]

    @property
    def code(self) -> str | None:
        """dlbridge's error code for dlbridge's own records, None for other libraries'."""
        return self.fields["errorCode"]

    @property
    def pattern(self) -> str:
        return self.fields["messagePattern"]

    @property
    def exception(self) -> str:
        return self.fields["errorClass"]

    @property
    def anchor(self) -> str:
        # dlbridge's entries keep the anchors their headings always had (`#read_only`).
        return self.code if self.library == "dlbridge" else self.id.replace(".", "-")

    @property
    def link(self) -> str:
        return f"{DOCS_PAGE}#{self.anchor}"

    @property
    def dlbridge_record(self) -> "Record | None":
        """dlbridge's own entry for the situation: what dlbridge raises when it cannot fix it either."""
        code = self.fields["dlbridgeCode"]
        return by_code().get(code) if code else None

    def matches(self, text: str) -> bool:
        """Whether text is this error. dlbridge's patterns are deliberately loose (wording may
        improve) and its hints name other codes' words, so its records also need the exception
        class in the text, as every traceback shows it (dlbridge.errors.LayoutError: ...)."""
        text = searched(text)
        if self.library == "dlbridge" and self.exception.rsplit(".", 1)[-1] not in text:
            return False
        return _compiled(self.pattern).search(text) is not None

    def sample(self, example: str) -> str:
        """An example message as a traceback's last line shows it."""
        return f"{self.exception}: {example}" if self.library == "dlbridge" else example

    def __repr__(self) -> str:
        return f"Record(id={self.id!r})"

    def __str__(self) -> str:
        """The record as ``dlbridge explain`` prints it."""
        f = self.fields
        if self.library == "dlbridge":
            head = f"dlbridge error `{self.code}` ({f['errorClass']})"
        else:
            versions = ", ".join(f["libraryVersions"]) or "read from its source, not run here"
            silent = "no exception: "
            if f["errorClass"].startswith(silent):  # a crash or a wrong result: nothing was raised
                head = f"{LIBRARY_NAMES[self.library]} ({versions}), {f['errorClass'][len(silent):]}: {self.id}"
            else:
                head = f"{LIBRARY_NAMES[self.library]} ({versions}) raised {f['errorClass']}: {self.id}"
        lines = [head, f"  pattern: {self.pattern}", "  why:"]
        lines += [f"    - {t}" for t in f["triggerScenarios"]]
        lines.append("  common situations:")
        lines += [f"    - {t}" for t in f["commonSituations"]]
        lines.append("  fix, in order:")
        lines += [f"    {i}. {s}" for i, s in enumerate(f["solutions"], 1)]
        if self.library != "dlbridge":
            if f["dlbridgeCall"]:
                lines.append(f"  with dlbridge: {f['dlbridgeCall']}")
            own = self.dlbridge_record
            if own is not None:
                lines.append(f"  dlbridge's code for the same situation: {own.code}")
        fix = f["exampleFix"]
        setup = fix["setup"] + "\n" if fix["setup"] else ""
        lines += ["  before:", textwrap.indent(setup + fix["before"], "    "),
                  "  after:", textwrap.indent(setup + fix["after"], "    ")]
        lines += [f"  handling: {f['handlingStrategy']}", textwrap.indent(f["tryCatchPattern"], "    ")]
        lines.append("  prevention:")
        lines += [f"    - {t}" for t in f["preventionTips"]]
        lines.append(f"  entry: {self.link}")
        return "\n".join(lines) + "\n"

    @property
    def headline(self) -> str:
        """The fix to try first: the dlbridge call for another library's error where the record
        has one (it works on the record's own failing input: test_explain_headline.py), else the
        first solution."""
        return self.fields["dlbridgeCall"] or self.fields["solutions"][0]

    def brief(self) -> str:
        """One line: what it is, the fix to try first, and its entry (``dlbridge explain --brief``)."""
        f = self.fields
        if self.library == "dlbridge":
            what = f"dlbridge `{self.code}` ({f['errorClass']})"
        else:
            what = f"{LIBRARY_NAMES[self.library]} {f['errorClass']} {self.id}"
        return f"{what}: {self.headline} -- {self.link}"

    def as_dict(self) -> dict:
        return dict(self.fields)


def searched(text: str) -> str:
    """The part of text that is matched: all of it, or its last MAX_TEXT characters."""
    return text[-MAX_TEXT:] if len(text) > MAX_TEXT else text


@functools.lru_cache(maxsize=None)
def _compiled(pattern: str) -> re.Pattern:
    return re.compile(pattern)


def catalogue_dir() -> pathlib.Path:
    return pathlib.Path(__file__).resolve().parent


@functools.lru_cache(maxsize=1)
def records() -> tuple[Record, ...]:
    """Every record, dlbridge's first, each library's in file order."""
    found = []
    for library in LIBRARIES:
        path = catalogue_dir() / f"{library}.json"
        found.extend(Record(fields) for fields in json.loads(path.read_text(encoding="utf-8")))
    return tuple(found)


def by_code() -> dict[str, Record]:
    """dlbridge's own records, keyed by error code."""
    return {r.code: r for r in records() if r.library == "dlbridge"}


def by_id() -> dict[str, Record]:
    return {r.id: r for r in records()}


def matching(text: str) -> list[Record]:
    """The records whose pattern matches text (its last MAX_TEXT characters): other libraries'
    first, then dlbridge's own."""
    text = searched(text)
    found = [r for r in records() if r.matches(text)]
    return [r for r in found if r.library != "dlbridge"] + [r for r in found if r.library == "dlbridge"]


_WORD = re.compile(r"[a-z][a-z0-9_]{2,}")


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def closest(text: str, count: int = 3) -> list[tuple[Record, float]]:
    """Records that share the most words with text, best first: suggestions, never matches."""
    asked = _words(searched(text))
    if not asked:
        return []
    scored = []
    for r in records():
        known = _words(" ".join([*r.fields["messageExamples"], re.sub(r"\\.", " ", r.pattern), r.exception]))
        score = len(asked & known) / len(asked | known) if known else 0.0
        if score > 0:
            scored.append((r, round(score, 3)))
    scored.sort(key=lambda pair: -pair[1])
    return scored[:count]


def _compiles(pattern) -> bool:
    try:
        re.compile(pattern)
    except (re.error, TypeError):
        return False
    return True


def _type_ok(value, expected) -> bool:
    if expected == _STRS:
        return isinstance(value, list) and all(isinstance(item, str) for item in value)
    return isinstance(value, expected)


def problems(items=None) -> list[str]:
    """What is wrong with the catalogue: missing or mistyped fields, patterns that do not
    compile or miss their own examples, two records of one library matching one message."""
    items = records() if items is None else items
    found = []
    seen_ids = set()
    for r in items:
        f, where = r.fields, r.fields.get("id", "?")
        if list(f) != list(SCHEMA):
            found.append(f"{where}: fields {list(f)} are not {list(SCHEMA)}")
            continue
        found += [f"{where}: {k} is not {t}" for k, t in SCHEMA.items() if not _type_ok(f[k], t)]
        if where in seen_ids:
            found.append(f"{where}: duplicate id")
        seen_ids.add(where)
        if f["library"] not in LIBRARIES or not where.startswith(f["library"] + "."):
            found.append(f"{where}: id must start with its library, one of {LIBRARIES}")
        if f["handlingStrategy"] not in HANDLING_STRATEGIES:
            found.append(f"{where}: handlingStrategy {f['handlingStrategy']!r} not in {HANDLING_STRATEGIES}")
        fix = f["exampleFix"]
        if not all(isinstance(fix.get(k), t) for k, t in EXAMPLE_FIX.items()):
            found.append(f"{where}: exampleFix needs {EXAMPLE_FIX}")
        elif fix["runnable"] and not (fix["before"] and fix["after"]):
            found.append(f"{where}: a runnable exampleFix needs before and after")
        evidence = f["evidence"]
        if evidence.get("kind") not in EVIDENCE_KINDS or not isinstance(evidence.get("where"), str):
            found.append(f"{where}: evidence needs a kind in {EVIDENCE_KINDS} and where it was seen")
        if not f["solutions"] or not f["triggerScenarios"]:
            found.append(f"{where}: solutions and triggerScenarios must not be empty")
        if not _compiles(f["messagePattern"]):
            found.append(f"{where}: messagePattern does not compile")
            continue
        found += [f"{where}: messagePattern: {c}" for c in linear.complaints(f["messagePattern"])]
        found += [f"{where}: pattern misses its example {e!r}" for e in f["messageExamples"]
                  if not r.matches(r.sample(e))]
        if f["library"] == "dlbridge":
            if f["errorCode"] is None or f["dlbridgeCode"] != f["errorCode"]:
                found.append(f"{where}: dlbridge's records carry their code in errorCode and dlbridgeCode")
        else:
            if f["errorCode"] is not None:
                found.append(f"{where}: errorCode is dlbridge's code; other libraries' records leave it null")
            if not f["messageExamples"]:
                found.append(f"{where}: other libraries' records need the real message in messageExamples")
            if f["dlbridgeCode"] is not None and f["dlbridgeCode"] not in {x.code for x in items}:
                found.append(f"{where}: dlbridgeCode {f['dlbridgeCode']!r} has no dlbridge record")
            if f["dlbridgeCall"] and fix["runnable"] and f["dlbridgeCall"] not in fix["after"]:
                found.append(f"{where}: exampleFix.after does not use the recorded dlbridgeCall")
    valid = [r for r in items if list(r.fields) == list(SCHEMA) and _compiles(r.pattern)]
    for r in valid:
        for example in r.fields.get("messageExamples", []):
            twins = [o.id for o in valid if o is not r and o.library == r.library and o.matches(r.sample(example))]
            if twins:
                found.append(f"{r.id}: its example {example!r} is also matched by {twins}")
    return found


UNCATALOGUED = "uncatalogued"


def identify(message: str, type_name: str = "", code: str | None = None) -> str:
    """The id of the record for an error met at run time (the doctor's and check's failures),
    or "uncatalogued": a dlbridge code decides by itself, otherwise the text is matched."""
    if code in by_code():
        return by_code()[code].id
    found = matching(f"{type_name}: {message}" if type_name else message)
    return found[0].id if found else UNCATALOGUED
