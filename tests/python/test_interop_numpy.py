"""NumPy as producer and as consumer of dlbridge."""

import gc

import ml_dtypes
import numpy as np
import pytest

import dlbridge
from conftest import check_error, numpy_layouts

# NumPy 2.5 (the first with wheels for Python 3.15) changed the classes of two refusals.
NUMPY_2_5 = tuple(int(part) for part in np.__version__.split(".")[:2]) >= (2, 5)

NUMPY_DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
                np.float16, np.float32, np.float64, np.complex64, np.complex128]
# ml_dtypes extends numpy with these; numpy's own __dlpack__ does not know them.
ML_DTYPES = ["bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
             "float8_e4m3b11fnuz", "float8_e3m4", "float8_e4m3", "float8_e8m0fnu", "float4_e2m1fn",
             "float6_e2m3fn", "float6_e3m2fn", "int4", "uint4", "int2"]


def values(dtype, shape=(2, 3)):
    a = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    if dtype is np.bool_:
        return (a % 2).astype(np.bool_)
    if np.issubdtype(dtype, np.complexfloating):
        return (a + 1j * a).astype(dtype)
    return a.astype(dtype)


@pytest.mark.parametrize("dtype", NUMPY_DTYPES, ids=lambda d: np.dtype(d).name)
def test_numpy_dtypes_round_trip_zero_copy(dtype):
    a = values(dtype)
    t = dlbridge.from_dlpack(a)
    assert t.dtype == np.dtype(dtype).name
    assert t.data_ptr == a.ctypes.data
    b = np.from_dlpack(t)
    assert b.dtype == a.dtype
    np.testing.assert_array_equal(b, a)
    assert np.shares_memory(a, b)


@pytest.mark.parametrize("name", ML_DTYPES)
def test_ml_dtypes_arrays_are_imported_although_numpy_refuses_to_export_them(name):
    # Finding: numpy's __dlpack__ knows only bool/int/uint/float/complex, so
    # bfloat16 and float8 arrays cannot leave numpy through DLPack at all.
    a = np.arange(8, dtype=getattr(ml_dtypes, name)).reshape(2, 4)[:, ::-1]
    with pytest.raises(BufferError, match="DLPack only supports"):
        a.__dlpack__(max_version=(1, 3))
    # dlbridge reads the memory through __array_interface__ and the dtype's name.
    t = dlbridge.from_dlpack(a)
    assert t.dtype == name
    assert t.data_ptr == a.__array_interface__["data"][0]
    assert t.strides == (4, -1)


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2", "float4_e2m1fn", "int4"])
def test_numpy_refuses_to_import_dlpack_extension_dtypes(name):
    # Finding: np.from_dlpack cannot read them either, even with ml_dtypes
    # installed, and says so with a RuntimeError rather than a BufferError
    # (NumPy < 2.5; from 2.5 a BufferError).
    with pytest.raises(BufferError if NUMPY_2_5 else RuntimeError, match="Unsupported dtype"):
        np.from_dlpack(dlbridge.empty((4,), name))


@pytest.mark.parametrize("layout, a", numpy_layouts(), ids=[name for name, _ in numpy_layouts()])
def test_layouts_round_trip_with_shared_memory(layout, a):
    t = dlbridge.from_dlpack(a)
    assert t.shape == a.shape
    assert t.strides == tuple(s // a.itemsize for s in a.strides) or a.size == 0
    if a.size:
        assert t.data_ptr == a.ctypes.data
    b = np.from_dlpack(t)
    np.testing.assert_array_equal(b, a)
    if a.size:
        assert b.ctypes.data == a.ctypes.data
        assert b.strides == a.strides or a.ndim == 0


@pytest.mark.parametrize("layout, a", numpy_layouts(), ids=[name for name, _ in numpy_layouts()])
def test_copy_true_never_shares(layout, a):
    t = dlbridge.from_dlpack(a, copy=True)
    b = np.from_dlpack(t)
    np.testing.assert_array_equal(b, a)
    assert not np.shares_memory(a, b)
    assert t.is_c_contiguous


def test_writes_through_a_shared_view_are_seen_by_the_source():
    a = np.zeros((3, 4))
    np.from_dlpack(dlbridge.from_dlpack(a[:, ::-1]))[0, 0] = 5.0
    assert a[0, 3] == 5.0


def test_numpy_speaks_dlpack_1_with_dlbridge_as_consumer():
    a = np.arange(3.0)
    assert dlbridge.inspect_capsule(a.__dlpack__(max_version=(1, 3)))["version"][0] == 1


# --- read-only

def test_readonly_is_kept_numpy_to_dlbridge_to_numpy():
    a = np.arange(6.0)
    a.flags.writeable = False
    t = dlbridge.from_dlpack(a)
    assert t.readonly
    b = np.from_dlpack(t)
    assert not b.flags.writeable
    assert np.shares_memory(a, b)
    with pytest.raises(ValueError):
        b[0] = 1.0


def test_readonly_refused_on_legacy_request_and_copy_true_is_writable():
    a = np.arange(3.0)
    a.flags.writeable = False
    t = dlbridge.from_dlpack(a)
    with pytest.raises(dlbridge.ReadOnlyError) as info:
        t.__dlpack__()
    check_error(info, dlbridge.ReadOnlyError, "read_only")
    b = np.from_dlpack(t, copy=True)
    assert b.flags.writeable and not np.shares_memory(a, b)


def test_numpy_refuses_its_own_readonly_legacy_export():
    # The same rule, applied by numpy: dlbridge imports read-only arrays
    # because it asks for a versioned capsule.
    a = np.arange(3.0)
    a.flags.writeable = False
    with pytest.raises(BufferError):
        a.__dlpack__()


# --- requests numpy makes and answers

def test_numpy_consumer_request_is_accepted_by_dlbridge():
    t = dlbridge.from_dlpack(np.arange(4.0))
    b = np.from_dlpack(t, device="cpu")
    assert b.ctypes.data == t.data_ptr


def test_numpy_rejects_any_stream_as_producer():
    # Finding: numpy treats every stream other than None, even the CPU's
    # harmless -1, as an error, and raises RuntimeError (not BufferError;
    # NumPy 2.5 raises ValueError).
    with pytest.raises(ValueError if NUMPY_2_5 else RuntimeError, match="stream=None"):
        np.arange(3.0).__dlpack__(stream=-1)


def test_numpy_copy_request_to_dlbridge_sets_is_copied():
    t = dlbridge.from_dlpack(np.arange(4.0))
    info = dlbridge.inspect_capsule(t.__dlpack__(max_version=(1, 3), copy=True))
    assert info["flags"] & 2
    assert info["data"] != t.data_ptr


# --- lifetime

def test_producer_deleted_before_the_consumer():
    a = np.arange(1000.0)
    expected = a.copy()
    t = dlbridge.from_dlpack(a[::3])
    del a
    gc.collect()
    np.testing.assert_array_equal(np.from_dlpack(t), expected[::3])


def test_dlbridge_tensor_deleted_before_the_numpy_view():
    t = dlbridge.empty((3, 3), "float64")
    b = np.from_dlpack(t)
    b[...] = 7.0
    del t
    gc.collect()
    assert b.sum() == 63.0
