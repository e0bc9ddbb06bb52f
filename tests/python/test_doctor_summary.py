"""What the doctor concludes from its results (doctor/summary.py), on results written here:
the state of each pair, findings grouped by cause, the verdict and the exit status. The
grouping works from the data, whatever the libraries answer."""

import pytest

from dlbridge.doctor import summary

CASES = ["bool", "int8", "float32", "complex64", "transposed", "negative", "read-only"]


def ok(status="zero-copy", readonly=None):
    return {"status": status, "error": None, "readonly": readonly}


def refused(message, kind="ValueError", code=None, hint=None):
    return {"status": "fails", "error": {"type": kind, "message": message, "code": code, "hint": hint},
            "readonly": None}


def bad(status, message, kind):
    return {"status": status, "error": {"type": kind, "message": message, "code": None, "hint": None},
            "readonly": None}


NA = {"status": "n/a", "error": None, "readonly": None}
TORCH_ABORT = ("torch's from_dlpack killed the process (SIGABRT) on float32 data with negative strides: "
               "Storage size calculation overflowed with sizes=[4, 6] and strides=[6, -1]")
ARROW_TYPE = "unsupported DLPack type 6"
COMPLEX = ("arrow cannot hold dtype complex64. Cast in the source library first (e.g. to float32), or "
           "choose a target that holds it.")
HINT = "Cast in the source library first (e.g. to float32), or choose a target that holds it."


def report(cells, libraries=("a", "b")):
    """cells: {(producer, consumer, case): (direct, via)}; every other case works both ways."""
    results, pairs = [], []
    for p in libraries:
        for c in libraries:
            pairs.append({"producer": p, "consumer": c})
            for case in CASES:
                direct, via = cells.get((p, c, case), (ok(), ok()))
                for route, outcome in (("direct", direct), ("dlbridge", via)):
                    results.append({"producer": p, "consumer": c, "case": case, "route": route, "note": None,
                                    **outcome})
    return {"cases": CASES, "pairs": pairs, "results": results, "dlbridge_exchanges": True}


def findings(cells, **kwargs):
    return summary.summarise(report(cells, **kwargs))


def test_everything_works():
    s = findings({})
    assert s["findings"] == [] and s["uncatalogued"] == [] and s["exit_status"] == 0
    assert {m["direct"] for m in s["matrix"]} == {m["dlbridge"] for m in s["matrix"]} == {"works"}
    assert s["verdict"] == ["Every one of the 4 pairs works directly.",
                            "Nothing that works directly fails through dlbridge."]


def test_a_crash_fixed_by_dlbridge_is_one_finding_over_the_pairs_that_share_it():
    s = findings({("a", "b", "negative"): (bad("crash", TORCH_ABORT, "SIGABRT"), ok("copy")),
                  ("b", "b", "negative"): (bad("crash", TORCH_ABORT, "SIGABRT"), ok("copy"))})
    [finding] = s["findings"]
    assert finding["category"] == "fixed" and finding["catalogue"] == "torch.negative_strides_abort"
    assert finding["outcomes"] == {"crash": 2} and finding["cases"] == 2
    assert finding["blocks"] == [{"producers": ["a", "b"], "consumers": ["b"], "case_words": "negative",
                                  "cases": ["negative"], "count": 2}]
    assert finding["fix"] == 'dlbridge.convert(x, "b")'
    matrix = {(m["producer"], m["consumer"]): m for m in s["matrix"]}
    assert matrix[("a", "b")] == {"producer": "a", "consumer": "b", "direct": "unsafe", "dlbridge": "works"}
    assert s["exit_status"] == 0
    assert s["verdict"][0] == "dlbridge makes 2 of 2 failing pairs work (2 of 2 cases that fail directly)."
    one = findings({("a", "b", "negative"): (bad("crash", TORCH_ABORT, "SIGABRT"), ok("copy"))})
    assert one["verdict"][0] == "dlbridge makes 1 of 1 failing pair work (1 of 1 case that fails directly)."


def test_many_dtypes_of_one_pair_are_counted_not_listed():
    cells = {("a", "b", case): (refused(ARROW_TYPE, "ArrowInvalid"), ok()) for case in ("bool", "int8", "float32",
                                                                                          "complex64")}
    [finding] = findings(cells)["findings"]
    assert finding["blocks"][0]["case_words"] == "4 dtypes"
    every = {("a", "b", case): (refused(ARROW_TYPE, "ArrowInvalid"), ok()) for case in CASES}
    assert findings(every)["findings"][0]["blocks"][0]["case_words"] == "every case"


def test_a_refusal_where_the_direct_call_works_is_dlbridge_failing():
    s = findings({("a", "b", "int8"): (ok(), refused("The data is read-only and b cannot see the READ_ONLY flag",
                                                     "ReadOnlyError", "read_only", "Pass copy=True"))})
    [finding] = s["findings"]
    assert finding["category"] == "dlbridge-refuses" and finding["route"] == "dlbridge"
    assert finding["fix"] == 'dlbridge.convert(x, "b", copy=True)'
    assert s["exit_status"] == 1
    assert "dlbridge refuses 1 case it should do (dlbridge.read_only)" in s["verdict"][-1]


def test_a_refusal_one_copy_would_cure_is_dlbridge_failing_even_where_the_direct_call_fails():
    direct = refused("Legacy DLPack support is not implemented for immutable tensors", "ArrowNotImplementedError")
    via = refused("The data is read-only and b cannot see the READ_ONLY flag", "ReadOnlyError", "read_only")
    [finding] = findings({("a", "b", "int8"): (direct, via)})["findings"]
    assert finding["category"] == "dlbridge-refuses"
    assert finding["direct"] == [{"catalogue": "arrow.legacy_immutable", "outcome": "fails", "cases": 1}]


def test_what_neither_route_can_do_is_impossible_and_not_dlbridge_failing():
    s = findings({("a", "b", "complex64"): (refused("unsupported DLPack type 5", "ArrowInvalid"),
                                            refused(COMPLEX, "UnsupportedDTypeError", "unsupported_dtype", HINT))})
    [finding] = s["findings"]
    assert finding["category"] == "impossible" and finding["catalogue"] == "dlbridge.unsupported_dtype"
    assert finding["fix"] == HINT
    assert finding["direct"] == [{"catalogue": "arrow.unsupported_dlpack_type", "outcome": "fails", "cases": 1}]
    assert s["exit_status"] == 0
    assert s["verdict"][1] == "1 case cannot be done either way: the consumer has no such dtype (1)."


@pytest.mark.parametrize("via", [
    bad("wrong", "dlbridge.convert(x, 'b') returned different values for float32 data", "WrongResult"),
    bad("crash", "dlbridge.convert(x, 'b') killed the process (SIGSEGV) on float32 data", "SIGSEGV"),
    bad("hangs", "dlbridge.convert(x, 'b') did not return within 120 s on float32 data", "Hang"),
    refused("something went wrong", "KeyError"),  # no code: dlbridge let another error through
    ok("zero-copy", readonly="lost"),
])
def test_dlbridge_misbehaving_is_a_bug_and_exit_status_1(via):
    s = findings({("a", "b", "float32"): (ok(), via)})
    [finding] = s["findings"]
    assert finding["category"] == "dlbridge-broken" and s["exit_status"] == 1
    assert finding["fix"].startswith("a dlbridge bug")
    assert any("misbehaves in 1 case " in line for line in s["verdict"])


def test_a_lost_read_only_flag_is_a_problem_with_its_record():
    s = findings({("a", "torch", "read-only"): (ok(readonly="lost"), ok("copy", readonly="kept"))},
                 libraries=("a", "torch"))
    [finding] = s["findings"]
    assert finding["outcomes"] == {"lost": 1} and finding["catalogue"] == "torch.read_only_made_writable"
    assert {(m["producer"], m["consumer"]): m["direct"] for m in s["matrix"]}[("a", "torch")] == "unsafe"


def test_unknown_messages_are_listed_uncatalogued_and_kept_apart():
    s = findings({("a", "b", "int8"): (refused("the first unknown thing 1"), ok()),
                  ("a", "b", "bool"): (refused("the first unknown thing 2"), ok()),
                  ("b", "a", "int8"): (refused("a second unknown thing"), ok())})
    assert len(s["uncatalogued"]) == 3
    assert sorted(f["cases"] for f in s["findings"]) == [1, 2]  # numbers aside, one message is one cause
    assert all(f["catalogue"] == "uncatalogued" for f in s["findings"])


def test_findings_come_most_urgent_first_and_are_numbered():
    s = findings({("a", "b", "complex64"): (refused("unsupported DLPack type 5", "ArrowInvalid"),
                                            refused(COMPLEX, "UnsupportedDTypeError", "unsupported_dtype", HINT)),
                  ("a", "b", "bool"): (refused(ARROW_TYPE, "ArrowInvalid"), ok()),
                  ("b", "a", "negative"): (bad("crash", TORCH_ABORT, "SIGABRT"), ok("copy")),
                  ("b", "b", "int8"): (ok(), bad("wrong", "dlbridge.convert(x, 'b') returned different values",
                                                 "WrongResult"))})
    assert [(f["id"], f["category"]) for f in s["findings"]] == [
        (1, "dlbridge-broken"), (2, "fixed"), (3, "fixed"), (4, "impossible")]
    assert s["findings"][1]["outcomes"] == {"crash": 1}  # a crash before a refusal


def test_dlbridge_route_not_tried():
    r = report({("a", "b", "int8"): (refused(ARROW_TYPE, "ArrowInvalid"), NA)})
    r["dlbridge_exchanges"], r["dlbridge_state"] = False, "import failed: ImportError: no _core"
    s = summary.summarise(r)
    assert s["findings"][0]["category"] == "not-tried" and s["exit_status"] == 1
    assert s["verdict"][0] == "dlbridge's route was not tried: import failed: ImportError: no _core."


def test_pair_states():
    assert summary.pair_state([NA, NA]) == "n/a"
    assert summary.pair_state([ok(), NA]) == "works"
    assert summary.pair_state([ok(), refused("x")]) == "partial"
    assert summary.pair_state([refused("x"), refused("y")]) == "fails"
    assert summary.pair_state([ok(), bad("wrong", "x", "WrongResult")]) == "unsafe"
    assert summary.pair_state([ok(readonly="lost")]) == "unsafe"


def test_an_installed_library_left_out_is_exit_status_1():
    r = report({})
    r["missing"] = {"c": "import failed: AttributeError: module 'c' has no attribute 'from_dlpack'",
                    "d": "not installed"}
    s = summary.summarise(r)
    assert s["exit_status"] == 1
    assert "c was left out: import failed: AttributeError: module 'c' has no attribute 'from_dlpack'." in s["verdict"]


def test_a_library_not_installed_is_no_finding():
    r = report({})
    r["missing"] = {"d": "not installed"}
    assert summary.summarise(r)["exit_status"] == 0
