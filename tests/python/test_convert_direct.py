"""Target.direct_from: convert hands NumPy arrays straight to JAX's from_dlpack and JAX arrays
straight to NumPy's, each of which reads the other's own export exactly. Whatever the direct call
gives must equal what the plan gives (convert with device="cpu" takes no direct route), and
whatever either side refuses must end in the plan's answer."""

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import dlbridge  # noqa: E402
from dlbridge import _core, libraries  # noqa: E402


def unaligned_float32():
    return np.frombuffer(bytearray(17), dtype=np.uint8)[1:].view(np.float32)


def read_only():
    a = np.arange(3.0)
    a.flags.writeable = False
    return a


NUMPY_SOURCES = {
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

JAX_SOURCES = {
    "float32 8x8": lambda: jnp.arange(64, dtype=jnp.float32).reshape(8, 8),
    "bool": lambda: jnp.array([True, False]),
    "int8": lambda: jnp.arange(5, dtype=jnp.int8),
    "float16": lambda: jnp.arange(5, dtype=jnp.float16),
    "bfloat16": lambda: jnp.arange(5, dtype=jnp.bfloat16),
    "complex64": lambda: jnp.arange(3, dtype=jnp.complex64),
    "0-d": lambda: jnp.float32(2.0) + 0,
    "size 0": lambda: jnp.zeros((0, 2), jnp.float32),
    "transposed": lambda: jnp.arange(12.0).reshape(3, 4).T,
}


@pytest.fixture(autouse=True)
def jax_64_bit_types():
    # The sources include int64 and complex128, which JAX holds only with 64-bit types on.
    before = jax.config.read("jax_enable_x64")
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", before)


def _planned(x, to):
    # device= (here the CPU, where the data is) is no plain request: the plan's route.
    return dlbridge.convert(x, to, device="cpu")


@pytest.mark.parametrize("name", list(NUMPY_SOURCES))
def test_numpy_to_jax_directly_equals_the_plan(name):
    a = NUMPY_SOURCES[name]()
    out, general = dlbridge.convert(a, "jax"), _planned(a, "jax")
    assert type(out) is type(general)
    assert (out.dtype, out.shape) == (general.dtype, general.shape)
    assert np.array_equal(np.asarray(out), np.asarray(general))
    assert np.array_equal(np.asarray(out), a)


@pytest.mark.parametrize("name", list(JAX_SOURCES))
def test_jax_to_numpy_directly_equals_the_plan(name):
    x = JAX_SOURCES[name]()
    out, general = dlbridge.convert(x, "numpy"), _planned(x, "numpy")
    assert type(out) is type(general)
    assert (out.dtype, out.shape) == (general.dtype, general.shape)
    # JAX's memory must not change: both read-only, whichever way NumPy got it.
    assert out.flags.writeable is general.flags.writeable is False
    assert np.array_equal(out.astype(np.float64) if out.dtype.kind == "V" else out,
                          general.astype(np.float64) if general.dtype.kind == "V" else general)


@pytest.fixture
def importer_calls(monkeypatch):
    calls = []

    def recording(module, attr="from_dlpack"):
        original = getattr(module, attr)

        def record(x, *args, **kwargs):
            calls.append(type(x))
            return original(x, *args, **kwargs)

        monkeypatch.setattr(module, attr, record)

    return calls, recording


def test_a_numpy_array_jax_takes_is_handed_over_as_it_is(importer_calls):
    calls, record = importer_calls
    record(jnp)
    dlbridge.convert(np.arange(4, dtype=np.float32), "jax")
    assert calls == [np.ndarray]
    assert dlbridge.plan_convert(np.arange(4, dtype=np.float32), "jax").via == "direct"


def test_a_jax_array_numpy_takes_is_handed_over_as_it_is(importer_calls):
    calls, record = importer_calls
    record(np)
    x = jnp.arange(4, dtype=jnp.float32)
    dlbridge.convert(x, "numpy")
    assert calls == [type(x)]


@pytest.mark.parametrize("name", ["negative strides", "big-endian", "read-only"])
def test_a_refused_direct_call_ends_in_the_plan(importer_calls, name):
    calls, record = importer_calls
    record(jnp)
    out = dlbridge.convert(NUMPY_SOURCES[name](), "jax")
    assert np.array_equal(np.asarray(out), NUMPY_SOURCES[name]())
    # JAX refused the strides, NumPy the byte order and the read-only legacy export; the plan
    # then handed over a dlbridge tensor (a copy where it needs one).
    assert calls == [np.ndarray, dlbridge.Tensor]


def test_a_numpy_bfloat16_refusal_ends_in_the_extension(importer_calls):
    calls, record = importer_calls
    record(np)
    out = dlbridge.convert(jnp.arange(3, dtype=jnp.bfloat16), "numpy")
    assert str(out.dtype) == "bfloat16"
    assert len(calls) == 1  # NumPy refused; ml_dtypes' hand-over took it without NumPy's importer


def test_a_request_with_keywords_takes_the_plan(importer_calls):
    calls, record = importer_calls
    record(jnp)
    buffer = np.zeros(128, np.uint8)
    start = -buffer.ctypes.data % 64  # aligned as JAX wants it, so that copy=False may be taken
    a = buffer[start:start + 16].view(np.float32)
    dlbridge.convert(a, "jax", copy=True)
    dlbridge.convert(a, "jax", copy=False)
    dlbridge.convert(a, "jax", device="cpu")
    assert np.ndarray not in calls


def test_only_the_declared_classes_are_handed_over_directly(importer_calls):
    torch = pytest.importorskip("torch")
    calls, record = importer_calls
    record(jnp)
    dlbridge.convert(torch.arange(3.0), "jax")
    assert calls == [dlbridge.Tensor]
    assert libraries.TARGETS["jax"].direct_from == ("numpy:ndarray",)
    assert libraries.TARGETS["numpy"].direct_from == ("jaxlib._jax:ArrayImpl",)
    assert libraries.direct_classes(libraries.TARGETS["numpy"])[0] == (type(jnp.zeros(1)),)


def test_a_subclass_takes_the_plan_not_the_direct_route(importer_calls):
    calls, record = importer_calls
    record(jnp)

    class Sub(np.ndarray):
        pass

    out = dlbridge.convert(np.arange(4, dtype=np.float32).view(Sub), "jax")
    assert calls == [dlbridge.Tensor] and np.asarray(out).tolist() == [0.0, 1.0, 2.0, 3.0]


def test_a_subclass_converting_itself_in_dlpack_is_refused_not_recursed():
    class ReEntering(np.ndarray):
        def __dlpack__(self, **kwargs):
            return dlbridge.convert(self, "jax").__dlpack__(**kwargs)

    with pytest.raises(dlbridge.errors.ProducerError):
        dlbridge.convert(np.arange(3.0).view(ReEntering), "jax")


def test_a_target_learnt_before_jax_was_imported_takes_it_directly_once_it_is():
    import subprocess
    import sys
    import textwrap

    program = textwrap.dedent("""
        import sys
        import numpy as np
        import dlbridge
        dlbridge.convert(np.arange(3.0), "numpy")  # learns the numpy target without JAX
        assert "jax" not in sys.modules
        import jax.numpy as jnp
        # A dlbridge.Tensor is never a direct class: converting one first must not hide the arrival.
        dlbridge.convert(dlbridge.from_dlpack(np.arange(3.0)), "numpy")
        calls = []
        original = np.from_dlpack
        np.from_dlpack = lambda x, *a, **k: calls.append(type(x)) or original(x, *a, **k)
        x = jnp.arange(3.0)
        dlbridge.convert(x, "numpy")
        assert calls == [type(x)], calls
    """)
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_direct_from_is_refused_on_a_target_that_would_write_read_only_memory():
    import dataclasses

    from dlbridge.libraries._spec import Target

    careless = dataclasses.replace(Target("torch", read_only="ignored"), direct_from=("numpy:ndarray",))
    with pytest.raises(ValueError, match="direct_from"):
        libraries.direct_classes(careless)
