"""Target.direct_from: convert hands NumPy arrays straight to JAX's
from_dlpack and JAX arrays straight to NumPy's, each of which reads the
other's own export exactly (NumPy marks JAX's legacy capsules read-only, as
dlbridge does). Whatever the direct call gives must equal what the general
route gives, and whatever either side refuses must end in the general
route's answer."""

import jax.numpy as jnp
import numpy as np
import pytest

import dlbridge
from dlbridge.convert import TARGETS, _convert_general


def unaligned_float32():
    return np.frombuffer(bytearray(17), dtype=np.uint8)[1:].view(np.float32)


def read_only():
    a = np.arange(3.0)
    a.flags.writeable = False
    return a


SOURCES = {
    "float32 8x8": lambda: np.arange(64, dtype=np.float32).reshape(8, 8),
    "transposed": lambda: np.arange(12, dtype=np.float32).reshape(3, 4).T,
    "negative strides": lambda: np.arange(12.0).reshape(3, 4)[:, ::-1],
    "every other": lambda: np.arange(12, dtype=np.int32)[::2],
    "zero stride": lambda: np.lib.stride_tricks.as_strided(np.arange(3, dtype=np.float32), (2, 3), (0, 4)),
    "bool": lambda: np.array([True, False, True]),
    "int64": lambda: np.arange(3, dtype=np.int64),
    "complex128": lambda: np.arange(3) * 1j,
    "float16": lambda: np.arange(5, dtype=np.float16),
    "0-d": lambda: np.array(2.0, np.float32),
    "size 0": lambda: np.zeros((0, 2), np.float32),
    "big-endian": lambda: np.arange(3, dtype=">f4"),
    "unaligned": unaligned_float32,
    "read-only": read_only,
}


@pytest.mark.parametrize("name", list(SOURCES))
def test_numpy_to_jax_directly_equals_the_general_route(name):
    a = SOURCES[name]()
    out, general = dlbridge.convert(a, "jax"), _convert_general(a, "jax", None, None)
    assert type(out) is type(general)
    assert (out.dtype, out.shape) == (general.dtype, general.shape)
    assert np.array_equal(np.asarray(out), np.asarray(general))
    assert np.array_equal(np.asarray(out), a)


@pytest.fixture
def jax_calls(monkeypatch):
    calls = []
    original = jnp.from_dlpack

    def recording(x, *args, **kwargs):
        calls.append(type(x))
        return original(x, *args, **kwargs)

    monkeypatch.setattr(jnp, "from_dlpack", recording)
    return calls


def test_a_numpy_array_jax_takes_is_handed_over_as_it_is(jax_calls):
    dlbridge.convert(np.arange(4, dtype=np.float32), "jax")
    assert jax_calls == [np.ndarray]


@pytest.mark.parametrize("name", ["negative strides", "big-endian", "read-only"])
def test_a_refused_direct_call_ends_in_the_general_route(jax_calls, name):
    out = dlbridge.convert(SOURCES[name](), "jax")
    assert np.array_equal(np.asarray(out), SOURCES[name]())
    # JAX refused the strides, NumPy refused the byte order and the
    # read-only legacy export; the general route then handed over a copy.
    assert jax_calls == [np.ndarray, dlbridge.Tensor]


def test_only_numpy_is_handed_to_jax_directly(jax_calls):
    import torch

    dlbridge.convert(torch.arange(3.0), "jax")
    assert jax_calls == [dlbridge.Tensor]
    assert TARGETS["jax"].direct_from == ("numpy",)


JAX_SOURCES = {
    "float32 3x4": lambda: jnp.arange(12.0, dtype=jnp.float32).reshape(3, 4),
    "bool": lambda: jnp.array([True, False]),
    "int8": lambda: jnp.arange(3, dtype=jnp.int8),
    "complex64": lambda: jnp.arange(3) * 1j,
    "float16": lambda: jnp.arange(3, dtype=jnp.float16),
    "bfloat16": lambda: jnp.arange(3, dtype=jnp.bfloat16),
    "float8_e4m3fn": lambda: jnp.arange(3, dtype=jnp.float8_e4m3fn),
    "0-d": lambda: jnp.array(2.0),
    "size 0": lambda: jnp.zeros((0, 2)),
}


@pytest.mark.parametrize("name", list(JAX_SOURCES))
def test_jax_to_numpy_directly_equals_the_general_route(name):
    x = JAX_SOURCES[name]()
    out, general = dlbridge.convert(x, "numpy"), _convert_general(x, "numpy", None, None)
    assert (out.dtype, out.shape, out.flags.writeable) == (general.dtype, general.shape, False)
    assert out.tobytes() == general.tobytes()


@pytest.fixture
def numpy_calls(monkeypatch):
    calls = []
    original = np.from_dlpack
    monkeypatch.setattr(np, "from_dlpack", lambda x: calls.append(type(x).__name__) or original(x))
    return calls


def test_a_jax_array_numpy_takes_is_handed_over_as_it_is(numpy_calls):
    dlbridge.convert(jnp.arange(3.0), "numpy")
    assert numpy_calls == ["ArrayImpl"]


def test_a_jax_dtype_numpy_refuses_ends_in_the_general_route(numpy_calls):
    out = dlbridge.convert(jnp.arange(3, dtype=jnp.bfloat16), "numpy")
    assert str(out.dtype) == "bfloat16"
    # NumPy refused bfloat16; the general route handed it over through ml_dtypes.
    assert numpy_calls == ["ArrayImpl"]
