"""The whole doctor over every installed library: every failure named by a catalogue record,
the first screen a newcomer sees (40 lines of 100 columns, the verdict on it), symbols that
agree with the cases behind them, nothing cut inside a word, and JSON in its documented schema.
Nothing here assumes which pairs fail today: the assertions hold whatever the libraries do."""

import json
import pathlib
import re

import pytest

from dlbridge import catalogue, doctor
from dlbridge.doctor import render_text, summary
from dlbridge.doctor.libraries import KNOWN, importable

INSTALLED = [n for n in KNOWN if importable(n)]
SCHEMA = pathlib.Path(doctor.__file__).with_name("report.schema.json")


@pytest.fixture(scope="module")
def report():
    return doctor.run(None, number=2, repeat=1)


@pytest.fixture(scope="module")
def screen(report):
    return render_text.render(report, color=False)


def _matrix_rows(lines) -> dict:
    """{producer: [symbols]} from the matrix: the rows after the header that names every library."""
    header = next(i for i, line in enumerate(lines) if line.split() == INSTALLED)
    return {line.split()[0]: line.split()[1:] for line in lines[header + 1:header + 1 + len(INSTALLED)]}


def test_every_installed_library_is_in_the_run(report):
    assert [lib["name"] for lib in report["libraries"]] == INSTALLED
    assert len(report["pairs"]) == len(INSTALLED) ** 2


def test_no_failure_is_uncatalogued(report):
    # What to do when this fails: add a record to python/dlbridge/catalogue/<library>.json, raised
    # by tests/python/test_catalogue_foreign.py, for each message listed.
    assert report["summary"]["uncatalogued"] == []
    known = catalogue.by_id()
    assert all(f["catalogue"] in known for f in report["summary"]["findings"])
    assert all(d["catalogue"] in known for f in report["summary"]["findings"] for d in f["direct"])


def test_the_first_screen_has_the_libraries_the_matrix_and_the_verdict(report, screen):
    first = screen.splitlines()[:40]
    text = "\n".join(first)
    for lib in report["libraries"]:
        assert f"{lib['name']} {lib['version']}" in text
    assert list(_matrix_rows(first)) == INSTALLED
    assert "Verdict" in first
    joined = " ".join(line.strip() for line in first)
    for sentence in report["summary"]["verdict"]:
        assert sentence in joined
    assert f"Exit status {report['summary']['exit_status']}:" in joined


def test_every_line_fits_100_columns(report, screen):
    assert max(len(line) for line in screen.splitlines()) <= render_text.WIDTH
    verbose = render_text.render(report, verbose=True)
    assert max(len(line) for line in verbose.splitlines()) <= render_text.WIDTH


def test_each_matrix_symbol_agrees_with_the_cases_behind_it(report, screen):
    names = INSTALLED
    rows = _matrix_rows(screen.splitlines())
    by_symbol = {v: k for k, v in render_text.SYMBOLS.items()}
    for producer in names:
        symbols = rows[producer]
        assert len(symbols) == 2 * len(names), (producer, symbols)
        for i, consumer in enumerate(names):
            mine = [r for r in report["results"] if (r["producer"], r["consumer"]) == (producer, consumer)]
            for route, symbol in zip(("direct", "dlbridge"), symbols[2 * i:2 * i + 2]):
                state = summary.pair_state([r for r in mine if r["route"] == route])
                assert by_symbol[symbol] == state, (producer, consumer, route)
                if state == "works":  # never a tick beside a crash or a refusal
                    assert all(r["status"] in ("zero-copy", "copy", "ok", "n/a") for r in mine if r["route"] == route)


def test_findings_are_whole_sentences_never_cut_inside_a_word(report, screen):
    flat = re.sub(r"\s+", " ", screen)
    for f in report["summary"]["findings"]:
        shown = render_text._reason(f["reason"])
        assert re.sub(r"\s+", " ", f"{shown}{render_text._direct_words(f)} — fix: {f['fix']}") in flat, f["id"]
        if shown.endswith(" …"):  # shortened: only ever between two words
            assert shown[:-2] + " " in f["reason"], f["id"]


def test_exit_status_says_whether_dlbridge_failed_where_it_should_not(report):
    own = [f for f in report["summary"]["findings"] if f["category"] in ("dlbridge-broken", "dlbridge-refuses")]
    assert report["summary"]["exit_status"] == (1 if own else 0)


def test_the_json_follows_its_schema(report):
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema comes with requirements/distributed.txt")
    data = json.loads(json.dumps(report))
    jsonschema.validate(data, json.loads(SCHEMA.read_text()))
    assert data["schema_version"] == data["summary"]["schema_version"] == summary.SCHEMA_VERSION
