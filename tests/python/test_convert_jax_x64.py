"""JAX's 64-bit switch is a fact read when converting: with it off (JAX's default), int64,
uint64, float64 and complex128 into "jax" are a coded refusal naming the setting for every
copy value, and plan_convert says the same; with it on they hand over as before. Never a
silent narrowing (int64 2**40 + 5 arriving as int32 5)."""

import os
import subprocess
import sys

import numpy as np
import pytest

jax = pytest.importorskip("jax")

import dlbridge  # noqa: E402

WIDE = {
    "int64": lambda: np.array([2**40 + 5, -1, 2**33], dtype=np.int64),
    "uint64": lambda: np.array([2**63 + 1, 7], dtype=np.uint64),
    "float64": lambda: np.array([1e300, 0.5]),
    "complex128": lambda: np.array([1e300 + 1j, 2 - 3j]),
}
COPIES = [None, True, False]


@pytest.fixture
def x64():
    before = jax.config.read("jax_enable_x64")

    def switch(on: bool):
        jax.config.update("jax_enable_x64", on)

    yield switch
    jax.config.update("jax_enable_x64", before)


def assert_names_the_setting(exc):
    assert exc.code == "unsupported_dtype"
    assert 'jax.config.update("jax_enable_x64", True)' in exc.hint
    assert "JAX_ENABLE_X64" in exc.hint


@pytest.mark.parametrize("copy", COPIES, ids=["copy=None", "copy=True", "copy=False"])
@pytest.mark.parametrize("dtype", list(WIDE))
def test_64_bit_dtypes_into_jax_are_refused_naming_the_setting_while_it_is_off(x64, dtype, copy):
    x64(False)
    a = WIDE[dtype]()
    with pytest.raises(dlbridge.UnsupportedDTypeError) as converted:
        dlbridge.convert(a, "jax", copy=copy)
    assert_names_the_setting(converted.value)
    with pytest.raises(dlbridge.UnsupportedDTypeError) as planned:
        dlbridge.plan_convert(a, "jax", copy=copy)
    assert str(planned.value) == str(converted.value)


@pytest.mark.parametrize("dtype", list(WIDE))
def test_64_bit_dtypes_from_every_source_kind_are_refused_while_it_is_off(x64, dtype):
    x64(False)
    a = WIDE[dtype]()
    for source in (dlbridge.from_dlpack(a), a[::-1], a.astype(a.dtype.newbyteorder(">"))):
        with pytest.raises(dlbridge.UnsupportedDTypeError):
            dlbridge.convert(source, "jax")


@pytest.mark.parametrize("copy", COPIES, ids=["copy=None", "copy=True", "copy=False"])
@pytest.mark.parametrize("dtype", list(WIDE))
def test_64_bit_dtypes_into_jax_hand_over_unchanged_while_it_is_on(x64, dtype, copy):
    x64(True)
    a = WIDE[dtype]()
    a = dlbridge.convert(dlbridge.empty(a.shape, dtype), "numpy") if copy is False else a
    a[...] = WIDE[dtype]()
    out = dlbridge.convert(a, "jax", copy=copy)
    assert out.dtype == a.dtype
    np.testing.assert_array_equal(np.asarray(out), a)


def test_the_setting_is_read_at_every_conversion(x64):
    a = WIDE["int64"]()
    x64(True)
    assert dlbridge.convert(a, "jax").dtype == np.int64
    x64(False)
    with pytest.raises(dlbridge.UnsupportedDTypeError):
        dlbridge.convert(a, "jax")
    x64(True)
    assert dlbridge.plan_convert(a, "jax").action == "hand_over"


def test_narrower_dtypes_still_go_to_jax_directly_while_it_is_off(x64):
    x64(False)
    for a in (np.arange(4, dtype=np.float32), np.arange(4, dtype=np.int32), np.ones(3, np.complex64)):
        out = dlbridge.convert(a, "jax")
        assert out.dtype == a.dtype
        np.testing.assert_array_equal(np.asarray(out), a)
        assert dlbridge.plan_convert(a, "jax").via == "direct"
    # A 64-bit one never goes directly while the setting is off (JAX would narrow it).
    with pytest.raises(dlbridge.UnsupportedDTypeError):
        dlbridge.plan_convert(np.arange(4), "jax")


def test_jax_default_settings_refuse_in_a_fresh_process():
    # No configuration at all, as a new user has it.
    code = (
        "import numpy as np, dlbridge\n"
        "a = np.array([2**40 + 5, -1, 2**33])\n"
        "for copy in (None, True, False):\n"
        "    try:\n"
        "        dlbridge.convert(a, 'jax', copy=copy)\n"
        "    except dlbridge.UnsupportedDTypeError as e:\n"
        "        assert 'jax_enable_x64' in e.hint, e.hint\n"
        "    else:\n"
        "        raise SystemExit('narrowed')\n"
        "print('refused')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "JAX_ENABLE_X64"}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "refused"
