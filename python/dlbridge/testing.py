"""DLPack conformance as a pytest plugin, for other libraries' test suites.

    pytest -p dlbridge.testing --dlpack-producer mylib:make_array --dlpack-consumer mylib:from_dlpack

adds one test per observable DLPack 1.3 rule and per named producer or consumer: a producer is
``module:factory`` with ``factory(shape, dtype, readonly=False)`` returning a fresh CPU array (or a short
name: numpy, torch, jax, tvm_ffi, dlbridge); a consumer is ``module:callable`` taking one producer (or a
short name). A rule that cannot be observed for that library is skipped with the reason; a broken rule
fails with the evidence. The rules are those of ``dlbridge check`` (producers) and ``dlbridge.check_consumer``.

Without either option the plugin adds nothing, so it is safe to enable in ``addopts``.
"""

from __future__ import annotations

import os

import pytest

from . import check, check_consumer

_HERE = os.path.dirname(os.path.abspath(__file__))
# One module of rule tests per side, so a run that names only producers collects no consumer tests.
_RULE_TESTS = {"dlpack_producer": os.path.join(_HERE, "conformance_producer.py"),
               "dlpack_consumer": os.path.join(_HERE, "conformance_consumer.py")}


def pytest_addoption(parser):
    group = parser.getgroup("dlpack", "DLPack conformance (dlbridge)")
    group.addoption("--dlpack-producer", action="append", default=[], metavar="MODULE:FACTORY",
                    help="check this producer against every DLPack producer rule (repeatable)")
    group.addoption("--dlpack-consumer", action="append", default=[], metavar="MODULE:CALLABLE",
                    help="check this from_dlpack-like callable against every DLPack consumer rule (repeatable)")


def pytest_configure(config):
    for option, module in _RULE_TESTS.items():
        if config.getoption(option) and module not in config.args:
            config.args.append(module)


def pytest_generate_tests(metafunc):
    if "dlpack_producer_rule" in metafunc.fixturenames:
        cases = [(spec, r) for spec in metafunc.config.getoption("dlpack_producer") for r in check.RULES]
        metafunc.parametrize("dlpack_producer_rule", cases, ids=[f"{spec}::{r[0]}" for spec, r in cases])
    if "dlpack_consumer_rule" in metafunc.fixturenames:
        cases = [(spec, r) for spec in metafunc.config.getoption("dlpack_consumer") for r in check_consumer.RULES]
        metafunc.parametrize("dlpack_consumer_rule", cases, ids=[f"{spec}::{r[0]}" for spec, r in cases])


def report(text: str, outcome: tuple[bool, str]) -> None:
    """Turns one rule's (ok, evidence) into a pass, or a failure that quotes the rule and the evidence."""
    ok, evidence = outcome
    if not ok:
        pytest.fail(f"{text}\nevidence: {evidence}", pytrace=False)


def run_rule(fn, *args):
    """Runs a rule; an unobservable one becomes a skip with its reason."""
    try:
        return fn(*args)
    except check.NotObservable as exc:
        pytest.skip(f"not observable: {exc}")
    except check.ToolMissing as exc:
        pytest.fail(f"dlbridge cannot check this rule here: {exc}", pytrace=False)
    except Exception as exc:
        # As in `dlbridge check`: a library that raises where the rule expects an answer breaks the rule.
        return False, f"raised {type(exc).__name__}: {str(exc)[:160]}"
