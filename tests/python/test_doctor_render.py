"""The doctor's text and HTML output on reports written here: the first screen stays within
40 lines of 100 columns with eleven libraries, lines wrap between words, terminals that cannot
print the symbols get plain ones, and what libraries say is escaped in HTML."""

import io
import re

import pytest

from dlbridge.doctor import render_html, render_text, summary

ELEVEN = ["numpy", "torch", "jax", "cupy", "paddle", "tensorflow", "mlx", "tvm_ffi", "arrow", "warp", "dlbridge"]
CASES = ["float32", "negative", "read-only"]
LONG = ("A message that goes on and on about a tensor whose strides are not what the importer wanted, naming "
        "Supercalifragilisticexpialidocious_identifier_that_cannot_be_broken and more words after it; then a "
        "second clause that should not be shown.")


def _report(libraries, outcome):
    """Every pair of libraries; outcome(producer, consumer, case) -> (direct, via) result fields."""
    results, pairs = [], []
    for p in libraries:
        for c in libraries:
            pairs.append({"producer": p, "consumer": c, "asked": {"max_version": [1, 3]},
                          "answered": "dltensor_versioned", "cost_us": {"direct": 1.5, "dlbridge": None},
                          "direct": {"summary": "zero-copy", "readonly": "kept"},
                          "dlbridge": {"summary": "zero-copy", "readonly": "kept"}})
            for case in CASES:
                for route, fields in zip(("direct", "dlbridge"), outcome(p, c, case)):
                    results.append({"producer": p, "consumer": c, "case": case, "route": route, "note": None,
                                    "readonly": None, **fields})
    report = {"dlbridge": "0.1.0", "python": "3.11", "platform": "Linux-6.18.44-fc-v1252-x86_64-with-glibc2.36-x",
              "seconds": 1.0, "cases": CASES,
              "libraries": [{"name": n, "version": "1.0", "speaks": "versioned", "c_exchange_api": "no", "driven": True}
                            for n in libraries],
              "missing": {}, "pairs": pairs, "results": results, "dlbridge_exchanges": True, "dlbridge_state": None}
    report["summary"] = summary.summarise(report)
    return report


def _mixed(p, c, case):
    works = {"status": "zero-copy", "error": None}
    if case == "negative" and c in ("torch", "arrow"):
        return ({"status": "fails", "error": {"type": "ValueError", "message": f"{LONG} ({p})", "code": None,
                                               "hint": None}}, works)
    if case == "read-only" and c == "paddle":
        return (works, {"status": "fails", "error": {"type": "ReadOnlyError", "message": "The data is read-only <b>.",
                                                      "code": "read_only", "hint": "Pass copy=True."}})
    return works, works


@pytest.fixture(scope="module")
def eleven():
    return _report(ELEVEN, _mixed)


def test_the_first_screen_holds_eleven_libraries_and_the_verdict(eleven):
    lines = render_text.render(eleven).splitlines()
    first = "\n".join(lines[:40])
    assert "Verdict" in first and "Exit status 1:" in first
    header = next(i for i, line in enumerate(lines) if line.split() == ELEVEN)
    assert header + len(ELEVEN) < 40


def test_lines_wrap_between_words_and_only_an_unbreakable_word_is_wider(eleven):
    text = render_text.render(eleven, verbose=True)
    for line in text.splitlines():
        assert len(line) <= render_text.WIDTH or "Supercalifragilistic" in line.split()[-1] or \
            len(max(line.split(), key=len)) > 60
    words = set(LONG.replace(";", " ").split())
    shown = set(text.split())
    # A word of the message is either shown whole or not at all (the second clause is dropped).
    assert {w for w in shown if any(w != whole and whole.startswith(w) and len(w) > 3 for whole in words)} <= words


def test_plain_symbols_where_the_terminal_cannot_print_them(eleven):
    assert render_text.can_print_symbols(io.TextIOWrapper(io.BytesIO(), encoding="utf-8"))
    assert not render_text.can_print_symbols(io.TextIOWrapper(io.BytesIO(), encoding="ascii"))
    plain = render_text.render(eleven, unicode=False)
    plain.encode("ascii")
    assert "+ all cases work" in plain and "✓" not in plain


def test_colour_only_when_asked_and_never_moves_a_line_break(eleven):
    plain, coloured = render_text.render(eleven), render_text.render(eleven, color=True)
    assert "\033[" not in plain
    assert "\033[32m✓\033[0m" in coloured
    assert re.sub(r"\033\[[0-9;]*m", "", coloured) == plain


def test_verbose_adds_every_failing_case(eleven):
    default, verbose = render_text.render(eleven), render_text.render(eleven, verbose=True)
    failing = [r for r in eleven["results"] if r["status"] == "fails"]
    assert "Every failing case" not in default
    assert f"Every failing case ({len(failing)})" in verbose
    assert "numpy -> torch negative (direct): fails — ValueError: A message" in verbose
    assert "1.5/-" in verbose  # a cost that was not measured reads as a dash, not None


def test_html_escapes_what_libraries_say(eleven):
    page = render_html.render(eleven)
    assert "The data is read-only &lt;b&gt;." in page and "read-only <b>." not in page
    assert "None" not in page.split("<h2>Details</h2>")[1].split("<td>")[-1]
    assert page.count('id="verdict"') == 1 and '<section id="verdict" class=bad>' in page


def test_an_empty_run_says_so():
    report = _report([], _mixed)
    text = render_text.render(report)
    assert "no pairs" in text and "Findings: none.\n" in text
    assert "No pairs were tried" in text and "Every pair works" not in text
    page = render_html.render(report)
    assert "No pairs: the doctor needs" in page and "Every pair works" not in page
