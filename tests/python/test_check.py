"""dlbridge check against the installed producers: the findings true of these versions."""

import enum
import os
import subprocess
import sys
import textwrap

import pytest

from dlbridge import check


def results(target):
    return {r["rule"]: r for r in check.run(check.load_target(target))}


def test_every_rule_has_a_distinct_id():
    ids = [ident for ident, _, _ in check.RULES]
    assert len(ids) == len(set(ids)) >= 20


def test_dlbridge_passes_every_rule(capsys):
    found = results("dlbridge")
    bad = {k: r["evidence"] for k, r in found.items() if r["status"] not in (check.PASS, check.NA)}
    assert not bad
    # Only what no CPU build can show, or what another issue adds, may be unobservable.
    assert {k for k, r in found.items() if r["status"] == check.NA} <= {"C.exchange_api"}
    assert check.main("dlbridge") == 0
    out = capsys.readouterr().out
    assert out.count("PASS") >= 20 and "FAIL" not in out


def test_numpy_findings():
    found = results("numpy")
    # NumPy, the array API's reference, returns plain ints: the standard's Enum is not required.
    assert found["P1.device"]["status"] == check.PASS and "types int, int" in found["P1.device"]["evidence"]
    for rule in ("P2.legacy", "P2.versioned", "P2.readonly_legacy", "P8.flags_readonly", "P4.copy_true", "P7.unconsumed"):
        assert found[rule]["status"] == check.PASS, found[rule]


class _Device(enum.IntEnum):
    CPU = 1


@pytest.mark.parametrize("device, ok", [
    ((1, 0), True),  # NumPy's and array_api_strict's plain ints
    ((_Device.CPU, 0), True),  # the standard's enum, as an IntEnum
    ([1, 0], False),
    ((1, 0, 0), False),
    ((1, None), False),  # paddle's device_id
    (("cpu", 0), False),
    ((1.0, 0), False),
    ((True, 0), False),
], ids=["ints", "intenum", "list", "triple", "none-id", "str-type", "float-type", "bool-type"])
def test_device_rule_takes_two_ints(device, ok):
    class Producer:
        def __dlpack_device__(self):
            return device

    rule = {ident: fn for ident, _, fn in check.RULES}["P1.device"]
    passed, evidence = rule(check.Producer("fake", lambda shape, dtype, readonly=False: Producer(), False))
    assert passed is ok, evidence


def test_torch_findings():
    found = results("torch")
    # PyTorch copies on copy=True but never sets IS_COPIED.
    assert found["P4.copy_true"]["status"] == check.FAIL and "0x0" in found["P4.copy_true"]["evidence"]
    assert found["C.exchange_api"]["status"] == check.PASS
    assert found["P8.flags_readonly"]["status"] == check.NA


def test_jax_findings():
    found = results("jax")
    # JAX ignores max_version and only exports legacy capsules.
    assert found["P2.versioned"]["status"] == check.FAIL
    assert "'dltensor'" in found["P2.versioned"]["evidence"]
    assert found["P2.legacy"]["status"] == check.PASS


def test_module_factory_target(tmp_path, monkeypatch, capsys):
    (tmp_path / "myproducer.py").write_text(textwrap.dedent("""
        import math
        import numpy as np
        import dlbridge

        def make(shape, dtype, readonly=False):
            a = np.arange(math.prod(shape)).reshape(shape).astype(dtype)
            a.flags.writeable = not readonly
            return dlbridge.from_dlpack(a)
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    found = results("myproducer:make")
    assert found["P8.flags_readonly"]["status"] == check.PASS
    assert check.main("myproducer:make") == 0


def test_unknown_target_exits_2(capsys):
    assert check.main("nosuchmodule_xyz:make") == 2
    assert check.main("notatarget") == 2
    assert "cannot load" in capsys.readouterr().err


HOSTILE_FACTORIES = """
import sys
import numpy as np

class Unprintable(Exception):
    def __str__(self):
        raise RuntimeError("no text for you")

class ExitingText(Exception):
    def __str__(self):
        sys.exit(3)

def exits(shape, dtype, readonly=False):
    sys.exit(0)

def unprintable(shape, dtype, readonly=False):
    raise Unprintable()

def exiting_text(shape, dtype, readonly=False):
    raise ExitingText()
"""


@pytest.mark.parametrize("factory, evidence", [
    ("exits", "raised SystemExit: 0"),
    ("unprintable", "raised Unprintable: <str() of this Unprintable raised RuntimeError>"),
    ("exiting_text", "raised ExitingText: <str() of this ExitingText raised SystemExit>"),
])
def test_a_factory_that_exits_or_cannot_be_printed_is_reported_as_failing(tmp_path, factory, evidence):
    (tmp_path / "hostile_factories.py").write_text(HOSTILE_FACTORIES)
    out = subprocess.run([sys.executable, "-m", "dlbridge", "check", f"hostile_factories:{factory}"],
                         capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, PYTHONPATH=str(tmp_path)))
    assert out.returncode == 1, out.stdout + out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    assert out.stdout.count("FAIL") >= 20, "every rule was tried and reported"
    assert evidence in out.stdout


def test_a_target_whose_import_exits_is_a_load_error(tmp_path, monkeypatch, capsys):
    (tmp_path / "exits_on_import.py").write_text("import sys\nsys.exit(0)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert check.main("exits_on_import:make") == 2
    assert "cannot load 'exits_on_import:make': SystemExit: 0" in capsys.readouterr().err
