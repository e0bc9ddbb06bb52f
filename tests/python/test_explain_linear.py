"""`dlbridge explain` costs time linear in its input, and bounded: every catalogue pattern's
repeats have an upper bound (so a search does a bounded amount of work per character), and
only the last catalogue.MAX_TEXT characters are searched. Asserted on counts, never on time;
bench/bench_explain.py prints the timings."""

import io
import json
import re

import pytest

from dlbridge import catalogue
from dlbridge.catalogue import linear
from dlbridge.explain import explain, main

# Inputs shaped to make the patterns the catalogue used to have backtrack: one long word
# (`\w+ is not supported`), the class names dlbridge's own records need before their `.*`
# patterns are tried, and many near-misses of a pattern with a long prefix.
CLASSES = " ".join(r.exception for r in catalogue.records()) + "\n"
HOSTILE = {
    "word": CLASSES + "a" * 1_000_000,
    "number": CLASSES + "9" * 1_000_000,
    "near-misses": CLASSES + "Storage size calculation overflowed with sizes=[" * 20_000,
}


@pytest.mark.parametrize("record", catalogue.records(), ids=lambda r: r.id)
def test_every_pattern_has_bounded_repeats_and_budget(record):
    steps, unbounded = linear.analyse(record.pattern)
    assert unbounded == [] and steps <= linear.MAX_BUDGET, (record.pattern, steps, unbounded)


@pytest.mark.parametrize("pattern, complaint", [
    (r"\w+ is not supported by dlpack", "upper bound"),
    (r"(?s).*read.?only.*", "upper bound"),
    (r"sizes=\[[^\]]*\]", "upper bound"),
    (r"x{0,5000}", "upper bound"),
    (r"(a|ab){0,40}c", "steps per position"),
    (r"(\w{1,9})-\1", "upper bound"),
])
def test_patterns_that_can_backtrack_are_refused(pattern, complaint):
    found = linear.complaints(pattern)
    assert found and complaint in found[0], found


def test_the_catalogue_refuses_a_record_with_such_a_pattern():
    record = catalogue.by_id()["tensorflow.export_dtype_unsupported"]
    broken = catalogue.Record({**record.fields, "messagePattern": r"\w+ is not supported by dlpack"})
    others = [r for r in catalogue.records() if r is not record]
    assert any("messagePattern: a repeat without a small upper bound" in p for p in catalogue.problems([*others, broken]))


class _CountingPattern:
    """Stands in for a compiled pattern and adds up the characters each search is given."""

    def __init__(self, compiled, counts):
        self._compiled, self._counts = compiled, counts

    def search(self, text):
        self._counts.append((self._compiled.pattern, len(text)))
        return self._compiled.search(text)


@pytest.fixture
def searched(monkeypatch):
    counts = []
    real = catalogue._compiled
    monkeypatch.setattr(catalogue, "_compiled", lambda pattern: _CountingPattern(real(pattern), counts))
    return counts


def _steps_bound(counts) -> int:
    """What the searches can cost at most: characters searched times the pattern's budget."""
    return sum(length * linear.budget(pattern) for pattern, length in counts)


@pytest.mark.parametrize("shape", sorted(HOSTILE))
def test_work_grows_linearly_and_stops_growing_at_the_bound(searched, shape):
    text = HOSTILE[shape]
    bounds = []
    for size in (10_000, 40_000, catalogue.MAX_TEXT, len(text)):
        searched.clear()
        explain(text[:size])
        assert max(length for _, length in searched) <= min(size, catalogue.MAX_TEXT)
        bounds.append(_steps_bound(searched))
    per_character = [bound / size for bound, size in zip(bounds[:3], (10_000, 40_000, catalogue.MAX_TEXT))]
    assert max(per_character) <= 1.2 * min(per_character)  # linear up to the bound...
    assert bounds[3] <= bounds[2] * 1.01  # ...and no more work past it


def test_a_megabyte_is_read_to_its_end(searched):
    # The message is found at the end of a long log: that part is what is searched.
    tail = "jax.errors.JaxRuntimeError: UNIMPLEMENTED: Only DLPack tensors with trivial (compact) striding are supported"
    assert [r.id for r in explain(HOSTILE["word"] + "\n" + tail)] == ["jax.non_compact_strides"]


def test_json_quotes_the_searched_tail_not_the_whole_input():
    out = io.StringIO()
    status = main("-", as_json=True, out=out, err=io.StringIO(), stdin=io.StringIO(HOSTILE["number"]))
    data = json.loads(out.getvalue())
    assert status == 2 and not data["recognised"]
    assert data["query"] == HOSTILE["number"].strip()[-catalogue.MAX_TEXT:]


class _Counting(io.StringIO):
    """A stream that records the largest read it was asked for."""

    def __init__(self, text):
        super().__init__(text)
        self.reads = []

    def read(self, size=-1):
        self.reads.append(size)
        return super().read(size)


def test_stdin_is_read_in_pieces_and_only_its_end_kept():
    stream = _Counting(HOSTILE["number"] + "\nRuntimeError: Unsupported dtype in DLTensor.\n")
    out = io.StringIO()
    assert main("-", as_json=True, out=out, err=io.StringIO(), stdin=stream) == 0
    assert all(0 < size <= 1 << 16 for size in stream.reads)
    data = json.loads(out.getvalue())
    assert [m["id"] for m in data["matches"]] == ["numpy.import_unsupported_dtype"]
    assert len(data["query"]) <= catalogue.MAX_TEXT


def test_the_end_of_a_long_input_is_not_taken_for_a_code():
    err = io.StringIO()
    assert main("-", out=io.StringIO(), err=err, stdin=io.StringIO("a" * 1_000_000)) == 2
    assert err.getvalue().startswith("dlbridge explain: message not recognised")


def test_an_unknown_long_code_is_quoted_short():
    err = io.StringIO()
    assert main("a" * 100_000, out=io.StringIO(), err=err) == 2
    first = err.getvalue().splitlines()[0]
    assert first.endswith("... (100,000 characters)") and len(first) < 200


def test_bounded_patterns_still_find_every_example():
    for record in catalogue.records():
        for example in record.fields["messageExamples"]:
            assert re.search(record.pattern, record.sample(example)), (record.id, example)
