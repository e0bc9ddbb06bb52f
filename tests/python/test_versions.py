"""What dlbridge promises whatever release of a library is installed (issue 36): run with the pins
here and with each older set of scripts/test-versions. Facts come from the installed library
(libraries.installed_target, release_facts); a release no module has measured gets the cautious
reading; no attribute a release lacks escapes as AttributeError."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import dlbridge
from dlbridge import libraries
from dlbridge.libraries import _release


def _has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _aligned(shape, dtype=np.float32, alignment=64):
    """A fresh array whose data starts on an `alignment`-byte boundary."""
    n = int(np.prod(shape)) * np.dtype(dtype).itemsize
    raw = np.zeros(n + alignment, dtype=np.uint8)
    start = -raw.ctypes.data % alignment
    a = raw[start:start + n].view(dtype).reshape(shape)
    a[...] = np.arange(a.size, dtype=dtype).reshape(shape)
    return a


def _shares(a, b) -> bool:
    return np.shares_memory(np.asarray(a), np.asarray(b))


def test_copy_true_into_numpy_is_a_writable_private_array():
    x = np.arange(6.0).reshape(2, 3)
    out = dlbridge.convert(dlbridge.from_dlpack(x), "numpy", copy=True)
    assert out.flags.writeable and not _shares(out, x)
    np.testing.assert_array_equal(out, x)


def test_a_writable_numpy_array_is_imported_writable_and_shared():
    x = np.arange(6.0)
    t = dlbridge.from_dlpack(x)
    assert not t.readonly
    np.asarray(t)[0] = 42.0
    assert x[0] == 42.0


def test_a_read_only_numpy_array_is_imported_read_only_and_shared():
    x = np.arange(6.0).reshape(2, 3)
    x.flags.writeable = False
    t = dlbridge.from_dlpack(x)
    assert t.readonly and t.data_ptr == x.ctypes.data
    assert dlbridge.plan_convert(x, "numpy").why is not None
    out = dlbridge.convert(t, "numpy")
    assert not out.flags.writeable and _shares(out, x)


def test_copy_false_into_numpy_shares_and_keeps_writability():
    x = np.arange(4.0)
    out = dlbridge.convert(dlbridge.from_dlpack(x), "numpy", copy=False)
    assert out.flags.writeable and _shares(out, x)


def test_numpy_facts_are_observed_from_the_installed_release():
    facts = libraries.release_facts("numpy")
    assert facts["version"] == np.__version__
    assert any("from_dlpack takes copy=" in f for f in facts["observed"])


@pytest.mark.parametrize("version, strides", [("0.10.2", "permuted_compact"), ("0.6.2", "row_major"),
                                              ("0.4.30", "row_major"), ("?", "row_major")])
def test_jax_reads_transposed_arrays_only_from_the_measured_releases(version, strides):
    pytest.importorskip("jax")
    from dlbridge.libraries import jax as jax_facts

    facts = _release.Facts(version=version)
    assert jax_facts.for_installed(jax_facts.TARGET, facts).strides == strides
    assert (facts.assumed != []) == (strides == "row_major")


@pytest.mark.skipif(not _has("jax"), reason="jax is not installed")
def test_a_transposed_aligned_array_reaches_jax_with_its_values():
    a = _aligned((8, 16))
    out = dlbridge.convert(a.T, "jax")
    np.testing.assert_array_equal(np.asarray(out), a.T)


@pytest.mark.skipif(not _has("pyarrow"), reason="pyarrow is not installed")
@pytest.mark.parametrize("shape", [(6,), (2, 3)])
def test_arrow_takes_tensors_with_or_without_its_importers(shape):
    import pyarrow as pa

    x = np.arange(6.0).reshape(shape)
    out = dlbridge.convert(x, "arrow")
    got = out.to_numpy_ndarray() if isinstance(out, pa.FixedShapeTensorArray) else out.to_numpy()
    np.testing.assert_array_equal(got, x)


@pytest.mark.skipif(not _has("mlx"), reason="mlx is not installed")
def test_mlx_takes_tensors_with_or_without_its_importer():
    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(np.array(dlbridge.convert(x, "mlx")), x)


@pytest.mark.skipif(not _has("warp"), reason="warp is not installed")
def test_warp_is_prepared_silently_on_every_release(capfd):
    x = np.arange(6.0, dtype=np.float32)
    out = dlbridge.convert(x, "warp")
    np.testing.assert_array_equal(out.numpy(), x)
    assert "Warp" not in capfd.readouterr().out


def test_every_installed_librarys_facts_can_be_learnt():
    for name in libraries.LIBRARIES:
        if libraries.installed(name) and name not in ("cupy",):
            facts = libraries.release_facts(name)
            assert facts["version"] != "?" or name == "tvm_ffi", name


@pytest.mark.skipif(not _has("mlx"), reason="mlx is not installed")
def test_an_imported_mlx_array_keeps_its_values_after_the_array_is_freed():
    import gc

    import mlx.core as mx

    t = dlbridge.from_dlpack(mx.array(np.arange(12, dtype=np.float32)))
    gc.collect()
    mx.eval([mx.array(np.full(12, 7, dtype=np.float32)) + 1 for _ in range(5)])
    np.testing.assert_array_equal(np.asarray(t), np.arange(12, dtype=np.float32))
    assert t.readonly


@pytest.mark.skipif(not _has("tensorflow"), reason="tensorflow is not installed")
def test_a_tensorflow_bfloat16_tensor_is_imported_read_only():
    from dlbridge.libraries import import_library

    tf = import_library("tensorflow", order_others=True)
    t = dlbridge.from_dlpack(tf.constant([1.0, 2.0, 3.0], dtype=tf.bfloat16))
    assert t.dtype.name == "bfloat16" and t.readonly and t.shape == (3,)


def test_the_doctor_reports_which_facts_were_observed_and_which_assumed():
    from dlbridge.doctor import exchange
    from dlbridge.doctor import libraries as doctor_libraries

    info = exchange.producer_info(doctor_libraries.load("numpy"))
    assert info["facts"]["observed"] and isinstance(info["facts"]["assumed"], list)
