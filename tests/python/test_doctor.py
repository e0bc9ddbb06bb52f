"""dlbridge doctor against the installed NumPy, PyTorch and JAX: the findings that are
true of these versions, and what dlbridge.convert fixes."""

import json

import pytest

from dlbridge import doctor
from dlbridge.doctor import render_html, render_text

LIBS = ["numpy", "torch", "jax", "dlbridge"]


@pytest.fixture(scope="module")
def report():
    return doctor.run(LIBS)


def result(report, producer, consumer, case, route="direct"):
    return next(r for r in report["results"]
                if (r["producer"], r["consumer"], r["case"], r["route"]) == (producer, consumer, case, route))


def pair(report, producer, consumer):
    return next(p for p in report["pairs"] if (p["producer"], p["consumer"]) == (producer, consumer))


def test_finds_the_installed_libraries(report):
    libs = {lib["name"]: lib for lib in report["libraries"]}
    assert set(libs) == set(LIBS)
    assert libs["jax"]["speaks"] == "legacy"
    assert libs["numpy"]["speaks"] == libs["torch"]["speaks"] == libs["dlbridge"]["speaks"] == "versioned"
    assert libs["torch"]["c_exchange_api"] == "1.3 capsule"
    assert report["dlbridge_exchanges"]
    assert len(report["pairs"]) == len(LIBS) ** 2


def test_the_report_says_how_long_the_run_took(report):
    # How long is a benchmark's question (the brief: never a timed test); the report only has to say it.
    assert isinstance(report["seconds"], float) and report["seconds"] > 0


def test_torch_aborts_on_negative_strides_and_convert_fixes_it(report):
    direct = result(report, "numpy", "torch", "negative")
    assert direct["status"] == "crash" and direct["error"]["type"] == "SIGABRT"
    assert "Storage size calculation overflowed" in direct["error"]["message"]
    assert result(report, "numpy", "torch", "negative", "dlbridge")["status"] == "copy"
    assert "negative" in pair(report, "numpy", "torch")["fixed_by_dlbridge"]


def test_jax_rejects_non_compact_strides_and_convert_fixes_it(report):
    for case in ("negative", "strided"):
        direct = result(report, "numpy", "jax", case)
        assert direct["status"] == "fails" and "compact" in direct["error"]["message"]
        assert result(report, "numpy", "jax", case, "dlbridge")["status"] == "copy"
    assert result(report, "numpy", "jax", "transposed")["status"] in ("zero-copy", "copy")


def test_read_only_flag_lost_by_torch_and_guarded_by_dlbridge(report):
    assert result(report, "numpy", "torch", "read-only")["readonly"] == "lost"
    via = result(report, "numpy", "torch", "read-only", "dlbridge")
    # torch cannot see READ_ONLY: it gets one private copy, so no write reaches the source.
    assert via["status"] == "copy" and via["error"] is None and "READ_ONLY" in via["note"]
    assert result(report, "numpy", "numpy", "read-only")["readonly"] == "kept"
    assert pair(report, "numpy", "torch")["direct"]["readonly"] == "lost"


def test_read_only_to_jax_refused_by_numpy_and_done_by_dlbridge(report):
    direct = result(report, "numpy", "jax", "read-only")
    assert direct["status"] == "fails" and direct["error"]["type"] == "BufferError"
    via = result(report, "numpy", "jax", "read-only", "dlbridge")
    assert via["status"] in ("copy", "zero-copy") and via["readonly"] == "immutable"
    # dlbridge's own legacy export explains itself with a code.
    assert result(report, "dlbridge", "jax", "read-only")["error"]["code"] == "read_only"


def test_bfloat16_to_numpy_fails_directly_and_convert_shares_it_through_ml_dtypes(report):
    for producer in ("torch", "jax"):
        direct = result(report, producer, "numpy", "bfloat16")
        assert direct["status"] == "fails" and "Unsupported dtype" in direct["error"]["message"]
        assert result(report, producer, "numpy", "bfloat16", "dlbridge")["status"] == "zero-copy"
        assert "bfloat16" in pair(report, producer, "numpy")["fixed_by_dlbridge"]
    finding = next(f for f in report["summary"]["findings"] if f["catalogue"] == "numpy.import_unsupported_dtype")
    assert finding["category"] == "fixed" and finding["fix"] == 'dlbridge.convert(x, "numpy")'
    assert finding["blocks"] == [{"producers": ["torch", "jax", "dlbridge"], "consumers": ["numpy"],
                                  "case_words": "bfloat16", "cases": ["bfloat16"], "count": 3}]
    # JAX copies unaligned data itself, so either is a success here.
    assert result(report, "torch", "jax", "bfloat16", "dlbridge")["status"] in ("zero-copy", "copy")


def test_versions_spoken(report):
    assert pair(report, "numpy", "jax")["answered"] == "dltensor"
    assert pair(report, "jax", "numpy")["asked"]["max_version"][0] == 1
    assert pair(report, "jax", "numpy")["answered"] == "dltensor"   # JAX ignores max_version
    assert pair(report, "numpy", "dlbridge")["asked"]["max_version"] == [1, 3]
    assert pair(report, "numpy", "dlbridge")["answered"] == "dltensor_versioned"


def test_dlbridge_never_gives_a_wrong_or_crashing_result(report):
    bad = [r for r in report["results"] if r["route"] == "dlbridge" and r["status"] in ("wrong", "crash")]
    assert not bad
    for producer in LIBS:
        failures = pair(report, producer, "dlbridge")["dlbridge"]["failures"]
        # NumPy cannot export bfloat16 through DLPack, but dlbridge reads it through
        # __array_interface__ and the array's dtype name, so every import succeeds.
        assert [f["case"] for f in failures] == []
    direct = pair(report, "numpy", "torch")["direct"]["failures"]
    assert "bfloat16" in [f["case"] for f in direct]
    assert pair(report, "dlbridge", "dlbridge")["direct"]["summary"] == "zero-copy"


def test_costs_are_measured(report):
    cost = pair(report, "numpy", "dlbridge")["cost_us"]
    assert cost["direct"] > 0 and cost["dlbridge"] > 0


def test_renderers(report):
    json.dumps(report)
    plain = render_text.render(report, color=False)
    assert "\033[" not in plain and "numpy, tvm_ffi, dlbridge -> torch: negative" not in plain
    assert "[torch.negative_strides_abort] crash, 2 cases: numpy, dlbridge -> torch: negative" in plain
    assert "\033[" in render_text.render(report, color=True)
    verbose = render_text.render(report, color=False, verbose=True)
    assert "numpy -> torch negative (direct): crash — SIGABRT" in verbose
    page = render_html.render(report)
    assert page.startswith("<!DOCTYPE html>") and "<style>" in page
    for forbidden in ("<script", "<link", "http://", "https://", "src="):
        assert forbidden not in page
    assert page.count("<tr>") >= 2 * len(report["pairs"])


def test_every_direct_failure_links_to_its_catalogue_record(report):
    from dlbridge.catalogue import UNCATALOGUED, by_id

    failures = [(p["producer"], p["consumer"], f) for p in report["pairs"] for f in p["direct"]["failures"]]
    assert failures
    uncatalogued = [(prod, cons, f["case"], f["error"]) for prod, cons, f in failures if f["catalogue"] == UNCATALOGUED]
    assert not uncatalogued, "add these messages to python/dlbridge/catalogue/"
    assert all(f["catalogue"] in by_id() for _, _, f in failures)
    negative = next(f for prod, cons, f in failures if (prod, cons, f["case"]) == ("numpy", "torch", "negative"))
    assert negative["catalogue"] == "torch.negative_strides_abort"
