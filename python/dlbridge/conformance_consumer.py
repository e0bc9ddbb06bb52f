"""The tests that ``dlbridge.testing`` adds for ``--dlpack-consumer``: one per consumer rule and consumer."""

from __future__ import annotations

import functools

import pytest

from . import check_consumer
from .testing import report, run_rule


@functools.lru_cache(maxsize=None)
def _consumer(spec: str):
    return check_consumer.load_consumer(spec)


def test_consumer_rule(dlpack_consumer_rule):
    spec, (_, text, fn) = dlpack_consumer_rule
    try:
        spec, consume = _consumer(spec)
    except (ImportError, AttributeError, ValueError) as exc:
        pytest.fail(f"cannot load consumer {spec!r}: {exc}", pytrace=False)
    report(text, run_rule(check_consumer.call_rule, fn, consume, spec))
