"""Older releases' DLPack errors (records whose evidence names this file), raised for real where
such a release is installed: the version environments of scripts/test-versions. Each record's
pattern matches the real message, it is the record `dlbridge explain` finds first, and its
recorded dlbridge fix works on the same input. With the pinned libraries every case skips
except the bookkeeping below."""

import importlib.metadata
import importlib.util

import numpy as np
import pytest

from dlbridge import catalogue

HERE = {"kind": "reproduced", "where": "tests/python/test_catalogue_releases.py"}
DISTRIBUTIONS = {"numpy": "numpy", "jax": "jax", "tvm_ffi": "apache-tvm-ffi", "tensorflow": "tensorflow-cpu",
                 "paddle": "paddlepaddle", "mlx": "mlx", "arrow": "pyarrow", "warp": "warp-lang", "torch": "torch"}
MODULES = {"arrow": "pyarrow", "mlx": "mlx.core"}
RECORDS = [r for r in catalogue.records() if r.fields["evidence"] == HERE]


def _installed_version(library: str) -> str | None:
    if importlib.util.find_spec(MODULES.get(library, library).split(".")[0]) is None:
        return None
    try:
        return importlib.metadata.version(DISTRIBUTIONS[library]).split("+")[0]
    except importlib.metadata.PackageNotFoundError:
        return None


def _param(record):
    version = _installed_version(record.library)
    seen_in = record.fields["libraryVersions"]
    return pytest.param(record, id=record.id, marks=pytest.mark.skipif(
        version not in seen_in, reason=f"{record.library} {version} is not one of {seen_in}"))


def _run(record, part: str) -> dict:
    fix = record.fields["exampleFix"]
    namespace = {}
    exec(compile(fix["setup"] + "\n" + part, record.id, "exec"), namespace)
    return namespace


def test_older_release_records_name_their_releases_and_run():
    assert RECORDS, "no record is kept for an older release"
    for r in RECORDS:
        assert r.fields["libraryVersions"], r.id
        assert r.fields["exampleFix"]["runnable"], r.id


SILENT = [r for r in RECORDS if r.fields["exampleFix"].get("silentlyWrong")]


@pytest.mark.parametrize("record", [_param(r) for r in SILENT])
def test_the_release_returns_wrong_values_silently(record):
    # The doctor's words for it are matched by the record (test_catalogue_doctor.py's way).
    namespace = _run(record, record.fields["exampleFix"]["before"])
    assert not np.array_equal(np.asarray(namespace["a"]), namespace["expected"])
    for example in record.fields["messageExamples"]:
        assert catalogue.matching(example)[0] is record


@pytest.mark.parametrize("record", [_param(r) for r in RECORDS if r not in SILENT])
def test_the_release_raises_the_catalogued_message(record):
    with pytest.raises(Exception) as excinfo:
        _run(record, record.fields["exampleFix"]["before"])
    exc = excinfo.value
    assert type(exc).__name__ == record.exception.rsplit(".", 1)[-1], f"{record.id}: {type(exc).__name__}: {exc}"
    assert record.matches(str(exc)), f"{record.id}: {record.pattern!r} misses the real message {str(exc)!r}"
    assert catalogue.matching(str(exc))[0] is record


@pytest.mark.parametrize("record", [_param(r) for r in RECORDS])
def test_the_fix_works_on_the_same_release(record):
    namespace = _run(record, record.fields["exampleFix"]["after"])
    assert [v for k, v in namespace.items() if k in ("t", "a")], f"{record.id}: the fix names no result"
    if "expected" in namespace:
        np.testing.assert_array_equal(np.asarray(namespace["a"]), namespace["expected"])
