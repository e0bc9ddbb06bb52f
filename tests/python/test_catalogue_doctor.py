"""The failures that raise nothing -- a consumer that kills its process, returns wrong values
or makes read-only data writable -- are found by the doctor, which describes each in its own
words; those words name a catalogue record. Raised live here with the pinned libraries.
(test_doctor_report.py checks that no failure of the whole doctor run is uncatalogued.)"""

import importlib.util

import pytest

from dlbridge import catalogue, check
from dlbridge.doctor import runner, summary

EXPECTED = {
    ("numpy", "torch", "negative"): ("crash", "torch.negative_strides_abort"),
    ("numpy", "arrow", "size-0"): ("crash", "arrow.empty_tensor_sigfpe"),
    ("numpy", "arrow", "0-d"): ("crash", "arrow.zero_d_sigsegv"),
    ("numpy", "arrow", "strided"): ("wrong", "arrow.strided_wrong_values"),
    ("numpy", "mlx", "float64"): ("wrong", "mlx.narrows_float64"),
    ("numpy", "mlx", "complex128"): ("wrong", "mlx.narrows_float64"),
    ("numpy", "paddle", "negative"): ("wrong", "paddle.negative_strides_wrong_values"),
    ("numpy", "torch", "read-only"): ("lost", "torch.read_only_made_writable"),
    ("numpy", "paddle", "read-only"): ("lost", "paddle.read_only_made_writable"),
    ("dlbridge", "tvm_ffi", "read-only"): ("lost", "tvm_ffi.read_only_made_writable"),
}
MODULES = {"arrow": "pyarrow", "mlx": "mlx"}
ABSENT = sorted({c for _, c, _ in EXPECTED if importlib.util.find_spec(MODULES.get(c, c)) is None})


@pytest.fixture(scope="module")
def outcomes():
    if ABSENT:
        pytest.skip(f"not installed: {', '.join(ABSENT)} (requirements/libs.txt)")
    tasks = [{"kind": "case", "producer": p, "consumer": c, "case": k, "route": "direct"} for p, c, k in EXPECTED]
    libraries = sorted({n for t in tasks for n in (t["producer"], t["consumer"])})
    results, stalled = runner.run_tasks(libraries, tasks)
    assert stalled == {}
    return {(r["producer"], r["consumer"], r["case"]): r for r in results}


@pytest.mark.parametrize("key", sorted(EXPECTED), ids=lambda k: " ".join(k))
def test_each_silent_failure_names_its_record(outcomes, key):
    result = outcomes[key]
    outcome, record_id = EXPECTED[key]
    problem = summary._problem(result)
    assert problem is not None and problem[0] == outcome, result
    error = problem[1]
    assert catalogue.identify(error["message"], error["type"], error["code"]) == record_id, error
    assert catalogue.by_id()[record_id].fields["evidence"]["kind"] == "reproduced"


def test_the_crash_keeps_what_the_library_said(outcomes):
    message = outcomes[("numpy", "torch", "negative")]["error"]["message"]
    assert message.startswith("torch's from_dlpack killed the process (SIGABRT) on float32 data with negative strides: ")
    assert "Storage size calculation overflowed with sizes=[4, 6] and strides=[6, -1]" in message


def test_unknown_text_is_uncatalogued():
    assert catalogue.identify("disk on fire", "OSError") == catalogue.UNCATALOGUED


def test_check_links_a_raised_failure():
    results = {r["rule"]: r for r in check.run(check.load_target("tvm_ffi"))}
    # TVM-FFI 0.1.15's legacy export raises an AttributeError; the other rules raised nothing.
    assert results["P2.old"]["status"] == check.FAIL
    assert results["P2.old"]["catalogue"] == "tvm_ffi.legacy_max_version"
    assert all(r["catalogue"] is None for k, r in results.items() if k != "P2.old")
    assert "catalogue: tvm_ffi.legacy_max_version" in check.render("tvm_ffi", list(results.values()))
