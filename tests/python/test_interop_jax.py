"""JAX as producer and as consumer of dlbridge (x64 enabled in conftest)."""

import gc

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import dlbridge
from conftest import numpy_layouts

JAX_DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
              "float16", "float32", "float64", "bfloat16", "complex64", "complex128",
              "float8_e4m3fn", "float8_e5m2", "float8_e4m3b11fnuz", "float8_e4m3fnuz", "float8_e5m2fnuz",
              "float8_e3m4", "float8_e4m3", "float8_e8m0fnu"]


def jax_values(name, n=6):
    dtype = jnp.dtype(name)
    if name == "bool":
        return jnp.arange(n) % 2 == 0
    if dtype.itemsize == 1 and name.startswith("float8"):
        # Byte patterns, built in numpy: ml_dtypes defines the type.
        raw = (np.arange(n, dtype=np.uint8) % 60).view(getattr(ml_dtypes, name))
        return jnp.asarray(raw)
    if name.startswith("complex"):
        return (jnp.arange(n) + 1j).astype(dtype)
    return jnp.arange(n).astype(dtype)


def pointer(x):
    return x.unsafe_buffer_pointer()


@pytest.mark.parametrize("name", JAX_DTYPES)
def test_jax_dtypes_round_trip_zero_copy(name):
    x = jax_values(name)
    t = dlbridge.from_dlpack(x)
    assert t.dtype == name
    assert t.data_ptr == pointer(x)
    y = jnp.from_dlpack(t)
    assert y.dtype == x.dtype
    np.testing.assert_array_equal(np.asarray(y).view(np.uint8), np.asarray(x).view(np.uint8))


@pytest.mark.parametrize("name", ["int4", "uint4", "int2", "uint2"])
def test_jax_refuses_to_export_sub_byte_integers(name):
    x = jnp.zeros(4, getattr(jnp, name))
    with pytest.raises(Exception, match="no DLPack equivalent"):
        dlbridge.from_dlpack(x)


def test_jax_float4_exports_but_cannot_come_back():
    # Finding: JAX exports float4_e2m1fn as (17, 4, 1) on a legacy capsule,
    # and its own importer then rejects the same tensor ("default layout"),
    # even from JAX itself.
    x = jnp.zeros(4, jnp.float4_e2m1fn)
    t = dlbridge.from_dlpack(x)
    assert tuple(t.dtype) == (17, 4, 1)
    with pytest.raises(Exception, match="default layout"):
        jnp.from_dlpack(t)
    with pytest.raises(Exception, match="default layout"):
        jnp.from_dlpack(x)


def test_jax_exports_only_legacy_capsules():
    # Finding: JAX ignores max_version and always returns "dltensor", so its
    # immutable arrays cannot say read-only and IS_COPIED is never set;
    # dlbridge treats the unknown writability as read-only.
    x = jnp.arange(3.0)
    info = dlbridge.inspect_capsule(x.__dlpack__(max_version=(1, 3)))
    assert info["name"] == "dltensor" and info["version"] is None
    t = dlbridge.from_dlpack(x)
    assert t.flags == 1 and t.readonly


def test_jax_unsupported_dl_device_message_is_the_seed():
    # The message dlbridge extends; JAX gives the bare number, dlbridge the name.
    with pytest.raises(BufferError, match=r"unsupported device type \(DLDeviceType: 4\)"):
        jnp.arange(3.0).__dlpack__(dl_device=(4, 0))
    with pytest.raises(dlbridge.UnsupportedDeviceError, match=r"\(DLDeviceType: kDLOpenCL\)"):
        dlbridge.to_dlpack(jnp.arange(3.0), dl_device=(4, 0))


def test_jax_copy_request_copies():
    x = jnp.arange(6.0)
    t = dlbridge.from_dlpack(x, copy=True)
    assert t.data_ptr != pointer(x)
    np.testing.assert_array_equal(np.from_dlpack(t), np.asarray(x))


# --- dlbridge as producer for JAX

COMPACT = {"c", "f", "transposed", "zero-d", "size-0", "offset", "size-0-strided"}


@pytest.mark.parametrize("layout, a", numpy_layouts(), ids=[n for n, _ in numpy_layouts()])
def test_numpy_layouts_through_dlbridge_into_jax(layout, a):
    t = dlbridge.from_dlpack(a)
    if layout in COMPACT or layout == "size1-odd-stride":
        y = jnp.from_dlpack(t)
        np.testing.assert_array_equal(np.asarray(y), a)
    else:
        # Finding: JAX accepts only compact strides (any permutation), and
        # rejects negative and stepped ones instead of copying.
        with pytest.raises(Exception, match="compact"):
            jnp.from_dlpack(t)
        y = jnp.from_dlpack(dlbridge.from_dlpack(a, copy=True))
        np.testing.assert_array_equal(np.asarray(y), a)


def test_jax_import_of_an_aligned_dlbridge_tensor_is_zero_copy():
    # dlbridge allocates 64-byte aligned memory, which JAX's CPU client can alias.
    t = dlbridge.from_dlpack(np.arange(12.0).reshape(3, 4)).copy()
    assert t.data_ptr % 64 == 0
    y = jnp.from_dlpack(t)
    assert pointer(y) == t.data_ptr


def test_jax_copies_unaligned_memory_silently():
    # Finding: JAX aliases only 64-byte aligned buffers and copies others
    # without saying so, so "zero-copy into JAX" depends on the allocator.
    a = np.arange(17.0)[1:]
    assert a.ctypes.data % 64 != 0
    y = jnp.from_dlpack(dlbridge.from_dlpack(a))
    assert pointer(y) != a.ctypes.data
    np.testing.assert_array_equal(np.asarray(y), a)


def test_jax_asks_for_a_legacy_capsule_so_readonly_tensors_are_refused():
    # JAX calls __dlpack__ without max_version; dlbridge must not hand out
    # read-only memory on a capsule that cannot say so.
    a = np.arange(3.0)
    a.flags.writeable = False
    t = dlbridge.from_dlpack(a)
    with pytest.raises(dlbridge.ReadOnlyError):
        jnp.from_dlpack(t)
    y = jnp.from_dlpack(t.copy())
    assert np.asarray(y).tolist() == [0.0, 1.0, 2.0]


@pytest.mark.parametrize("make", [
    lambda: jnp.arange(12.0).reshape(3, 4),
    lambda: jnp.arange(12.0).reshape(3, 4).T,
    lambda: jnp.zeros((0, 2)),
    lambda: jnp.array(1.5),
])
def test_jax_arrays_reach_numpy_and_torch_through_dlbridge(make):
    import torch

    x = make()
    t = dlbridge.from_dlpack(x)
    np.testing.assert_array_equal(np.from_dlpack(t), np.asarray(x))
    np.testing.assert_array_equal(torch.from_dlpack(t).numpy(), np.asarray(x))


# --- lifetime

def test_jax_producer_deleted_before_the_consumer():
    x = jnp.arange(1000.0) * 2
    expected = np.asarray(x).copy()
    t = dlbridge.from_dlpack(x)
    del x
    gc.collect()
    np.testing.assert_array_equal(np.from_dlpack(t), expected)


def test_dlbridge_deleted_before_the_jax_array():
    a = np.arange(16.0)
    t = dlbridge.from_dlpack(a)
    y = jnp.from_dlpack(t)
    del t, a
    gc.collect()
    assert float(y.sum()) == 120.0
    assert jax.devices("cpu")[0] in y.devices()
