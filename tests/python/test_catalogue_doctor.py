"""The doctor and check link each failure they meet to its catalogue record, or say
"uncatalogued" (test_doctor.py keeps that list empty for the pinned libraries)."""

from dlbridge import check, doctor
from dlbridge.doctor import render_html, render_text


def _report_with(failure: dict) -> dict:
    summary = {"summary": "fails", "counts": {}, "readonly": "n/a", "failures": [failure], "copies": []}
    return {"dlbridge": "0", "python": "3", "platform": "p", "libraries": [], "missing": {}, "cases": ["negative"],
            "pairs": [{"producer": "numpy", "consumer": "torch", "direct": summary, "asked": None, "answered": None,
                       "cost_us": {"direct": None, "dlbridge": None}, "fixed_by_dlbridge": ["negative"],
                       "dlbridge": {**summary, "failures": []}}],
            "results": [], "seconds": 0.1, "dlbridge_exchanges": True}


def test_table_and_page_show_the_id_or_uncatalogued():
    error = {"type": "SIGABRT", "message": "process died: what():  Storage size calculation overflowed with "
             "sizes=[4, 6] and strides=[6, -1]", "code": None, "hint": None}
    failure = {"case": "negative", "status": "crash", "error": error, "catalogue": doctor._catalogue_id(error)}
    text, page = render_text.render(_report_with(failure)), render_html.render(_report_with(failure))
    assert "catalogue: torch.negative_strides_abort" in text
    assert '<a href="docs/errors.md#torch-negative_strides_abort">torch.negative_strides_abort</a>' in page
    unknown = {**failure, "catalogue": doctor._catalogue_id({"type": "OSError", "message": "disk on fire"})}
    assert "catalogue: uncatalogued" in render_text.render(_report_with(unknown))
    assert "[uncatalogued]" in render_html.render(_report_with(unknown))


def test_check_links_a_raised_failure():
    results = {r["rule"]: r for r in check.run(check.load_target("tvm_ffi"))}
    # TVM-FFI 0.1.15's legacy export raises an AttributeError; the other rules raised nothing.
    assert results["P2.old"]["status"] == check.FAIL
    assert results["P2.old"]["catalogue"] == "tvm_ffi.legacy_max_version"
    assert all(r["catalogue"] is None for k, r in results.items() if k != "P2.old")
    assert "catalogue: tvm_ffi.legacy_max_version" in check.render("tvm_ffi", list(results.values()))
