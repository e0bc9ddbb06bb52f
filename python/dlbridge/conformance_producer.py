"""The tests that ``dlbridge.testing`` adds for ``--dlpack-producer``: one per producer rule and producer."""

from __future__ import annotations

import functools

import pytest

from . import check
from .testing import report, run_rule


@functools.lru_cache(maxsize=None)
def _producer(spec: str) -> check.Producer:
    return check.load_target(spec)


def test_producer_rule(dlpack_producer_rule):
    spec, (_, text, fn) = dlpack_producer_rule
    try:
        producer = _producer(spec)
    except (ImportError, AttributeError, ValueError) as exc:
        pytest.fail(f"cannot load producer {spec!r}: {exc}", pytrace=False)
    report(text, run_rule(fn, producer))
