"""dlbridge.Tensor: properties, repr, buffer protocol and copy()."""

import ctypes
import io

import numpy as np
import pytest

import dlbridge
from dlbridge import Device, DType
from dlbridge._core import _testing
from conftest import check_error


PyBUF_WRITABLE, PyBUF_ND, PyBUF_STRIDES = 0x1, 0x8, 0x18


def get_buffer(obj, flags):
    """PyObject_GetBuffer with exact flags: Python-level callers such as
    readinto replace the exporter's exception with a generic TypeError."""
    view = ctypes.create_string_buffer(256)  # larger than any Py_buffer
    get = ctypes.pythonapi.PyObject_GetBuffer
    get.argtypes = [ctypes.py_object, ctypes.c_void_p, ctypes.c_int]
    get.restype = ctypes.c_int
    get(obj, ctypes.addressof(view), flags)
    release = ctypes.pythonapi.PyBuffer_Release
    release.argtypes = [ctypes.c_void_p]
    release(ctypes.addressof(view))


def readonly_array(a):
    a = np.array(a)
    a.flags.writeable = False
    return a


def test_properties_of_a_strided_view_describe_the_source():
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    view = base[1::2, ::-3]
    t = dlbridge.from_dlpack(view)
    assert t.shape == (2, 2)
    assert t.strides == (12, -3)  # elements, not numpy's bytes
    assert t.ndim == 2
    assert t.size == 4
    assert t.nbytes == 16  # of a compact copy, not of the span touched
    assert t.dtype == DType("float32")
    assert t.device == Device("cpu")
    assert t.readonly is False
    assert t.flags == 0
    assert t.data_ptr == view.ctypes.data
    assert not t.is_c_contiguous and not t.is_f_contiguous


def test_property_types_are_plain_python_values():
    t = dlbridge.empty((2, 3), "int16")
    assert type(t.shape) is tuple and all(type(d) is int for d in t.shape)
    assert type(t.strides) is tuple
    assert type(t.data_ptr) is int and t.data_ptr != 0
    assert isinstance(t.dtype, DType) and isinstance(t.device, Device)


@pytest.mark.parametrize("make, c, f", [
    (lambda: np.zeros((3, 4)), True, False),
    (lambda: np.zeros((3, 4), order="F"), False, True),
    (lambda: np.zeros((3, 4)).T, False, True),
    (lambda: np.zeros((1, 4)), True, True),
    (lambda: np.zeros((4,)), True, True),
    (lambda: np.zeros(()), True, True),
    (lambda: np.zeros((3, 4))[:, ::2], False, False),
])
def test_contiguity_flags(make, c, f):
    t = dlbridge.from_dlpack(make())
    assert (t.is_c_contiguous, t.is_f_contiguous) == (c, f)


def test_zero_d_and_size_zero():
    t = dlbridge.from_dlpack(np.float64(2.5) * np.ones(()))
    assert (t.shape, t.strides, t.ndim, t.size, t.nbytes) == ((), (), 0, 1, 8)
    e = dlbridge.from_dlpack(np.zeros((0, 3), np.int32))
    assert (e.shape, e.size, e.nbytes) == ((0, 3), 0, 0)


def test_repr_shows_shape_dtype_device_strides_and_flags():
    t = dlbridge.from_dlpack(np.zeros((2, 3))[:, ::-1])
    assert repr(t) == "dlbridge.Tensor(shape=(2, 3), dtype=float64, device=cpu, strides=(3, -1))"
    ro = dlbridge.from_dlpack(readonly_array([1, 2]))
    assert repr(ro).endswith(", readonly=True)")
    padded = dlbridge.from_dlpack(_testing.make_capsule(dtype=(17, 4, 1), flags=5))
    assert "dtype=float4_e2m1fn" in repr(padded)
    assert "readonly=True" in repr(padded) and "subbyte_padded=True" in repr(padded)
    # Shapes are written as Python writes tuples (dlbridge::dims_text).
    assert repr(dlbridge.empty(())).startswith("dlbridge.Tensor(shape=(), ")
    assert repr(dlbridge.empty((4,))).endswith("strides=(1,))")


def test_dlpack_device_is_an_enum_and_an_id():
    kind, index = dlbridge.empty(3).__dlpack_device__()
    assert kind is dlbridge.DeviceType.kDLCPU and index == 0
    # The CPU answer is one shared tuple; other devices get their own.
    assert dlbridge.empty(1).__dlpack_device__() is dlbridge.empty(2).__dlpack_device__()
    cuda1 = dlbridge.from_dlpack(_testing.make_capsule(device=(2, 1)))
    assert cuda1.__dlpack_device__() == (dlbridge.DeviceType.kDLCUDA, 1)
    assert cuda1.__dlpack_device__()[0] is dlbridge.DeviceType.kDLCUDA
    pinned = dlbridge.from_dlpack(_testing.make_capsule(device=(3, 0)))
    assert pinned.__dlpack_device__() == (dlbridge.DeviceType.kDLCUDAHost, 0)
    assert dlbridge.from_dlpack(_testing.make_capsule(device=(1, 2))).__dlpack_device__()[1] == 2


def test_tensor_has_no_public_constructor():
    with pytest.raises(TypeError):
        dlbridge.Tensor()


def test_type_carries_the_c_exchange_api_capsule():
    api = type(dlbridge.empty(1)).__dlpack_c_exchange_api__
    assert type(api).__name__ == "PyCapsule"
    assert dlbridge.inspect_capsule(api)["name"] == "dlpack_exchange_api"


# --- empty

def test_empty_makes_compact_writable_tensors():
    t = dlbridge.empty((2, 3), "float32")
    assert (t.shape, t.strides, t.readonly, t.dtype) == ((2, 3), (3, 1), False, "float32")
    assert dlbridge.empty(5).shape == (5,)
    assert dlbridge.empty(5).dtype == "float32"
    assert dlbridge.empty((), "int8").shape == ()


def test_empty_refuses_impossible_requests():
    with pytest.raises(ValueError):
        dlbridge.empty((-1,))
    with pytest.raises(ValueError):
        dlbridge.empty((2**62, 4))
    with pytest.raises(dlbridge.DeviceUnavailableError) as info:
        dlbridge.empty((2,), "float32", "cuda")
    check_error(info, dlbridge.DeviceUnavailableError, "device_unavailable")
    with pytest.raises(dlbridge.UnsupportedDeviceError):
        dlbridge.empty((2,), "float32", "opencl")


# --- buffer protocol

@pytest.mark.parametrize("dtype, fmt", [
    ("bool", "?"), ("int8", "b"), ("int16", "h"), ("int32", "i"), ("int64", "q"),
    ("uint8", "B"), ("uint16", "H"), ("uint32", "I"), ("uint64", "Q"),
    ("float16", "e"), ("float32", "f"), ("float64", "d"), ("complex64", "Zf"), ("complex128", "Zd"),
])
def test_buffer_formats(dtype, fmt):
    m = memoryview(dlbridge.empty((2, 2), dtype))
    assert m.format == fmt
    assert m.itemsize == DType(dtype).itemsize
    assert m.shape == (2, 2)


def test_memoryview_and_numpy_see_the_same_memory_and_strides():
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    t = dlbridge.from_dlpack(a.T)
    m = memoryview(t)
    assert m.shape == (4, 3) and m.strides == (4, 16) and m.f_contiguous and not m.readonly
    b = np.asarray(t)
    assert np.shares_memory(a, b)
    np.testing.assert_array_equal(b, a.T)
    b[0, 0] = 99
    assert a[0, 0] == 99


def test_buffer_of_a_readonly_tensor_is_readonly():
    t = dlbridge.from_dlpack(readonly_array([1.0, 2.0]))
    assert t.readonly
    assert memoryview(t).readonly
    assert not np.asarray(t).flags.writeable


def test_writable_buffer_request_on_readonly_tensor_is_refused():
    t = dlbridge.from_dlpack(readonly_array(np.zeros(4)))
    with pytest.raises(dlbridge.ReadOnlyError) as info:
        get_buffer(t, PyBUF_WRITABLE | PyBUF_STRIDES)
    check_error(info, dlbridge.ReadOnlyError, "read_only")
    with pytest.raises(TypeError):
        (ctypes.c_double * 4).from_buffer(t)


def test_writable_buffer_request_writes_through():
    a = np.zeros(4, np.uint8)
    t = dlbridge.from_dlpack(a)
    assert io.BytesIO(b"\x01\x02\x03\x04").readinto(t) == 4
    assert a.tolist() == [1, 2, 3, 4]


def test_contiguous_buffer_request_on_strided_tensor_is_refused():
    t = dlbridge.from_dlpack(np.zeros(8, np.uint8)[::2])
    get_buffer(t, PyBUF_STRIDES)  # a strided request is fine
    with pytest.raises(dlbridge.LayoutError) as info:
        get_buffer(t, PyBUF_ND)
    assert "copy()" in check_error(info, dlbridge.LayoutError, "unsupported_layout")


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3fn", "float8_e5m2", "float4_e2m1fn",
                                   "int4", "float32x4"])
def test_buffer_protocol_refuses_dtypes_it_cannot_describe(dtype):
    t = dlbridge.empty((4,), dtype)
    with pytest.raises(dlbridge.UnsupportedDTypeError) as info:
        memoryview(t)
    message = check_error(info, dlbridge.UnsupportedDTypeError, "unsupported_dtype")
    assert dtype in message and "from_dlpack" in message


def test_buffer_release_keeps_the_tensor_usable():
    t = dlbridge.empty((3, 5), "float64")
    for _ in range(100):
        with memoryview(t) as m:
            assert m.nbytes == 120
    assert memoryview(t).shape == (3, 5)


# --- copy

def test_copy_is_compact_writable_and_new():
    a = np.arange(12.0).reshape(3, 4)
    t = dlbridge.from_dlpack(a[::2, ::-1])
    c = t.copy()
    assert c.is_c_contiguous and c.strides == (4, 1)
    assert c.data_ptr != t.data_ptr
    np.testing.assert_array_equal(np.from_dlpack(c), a[::2, ::-1])
    np.from_dlpack(c)[0, 0] = -1
    assert a[0, 3] == 3.0


def test_copy_of_readonly_tensor_is_writable():
    t = dlbridge.from_dlpack(readonly_array([1, 2, 3]))
    c = t.copy()
    assert t.readonly and not c.readonly
    assert np.from_dlpack(c).flags.writeable


def test_copy_to_cpu_by_name_and_refusals_for_other_devices():
    t = dlbridge.from_dlpack(np.arange(3))
    assert t.copy(device="cpu").device == "cpu"
    with pytest.raises(dlbridge.DeviceUnavailableError):
        t.copy(device="cuda:0")
    with pytest.raises(dlbridge.UnsupportedDeviceError):
        t.copy(device="opencl")


def test_copy_of_padded_subbyte_tensor_keeps_values():
    t = dlbridge.from_dlpack(_testing.make_capsule(shape=[3], dtype=(17, 4, 1), flags=4))
    c = t.copy()
    assert c.dtype == "float4_e2m1fn" and c.shape == (3,)
    assert not c.readonly


# --- __array_interface__ and copy_unpacked

def packed(dtype, shape, strides, data: bytes, byte_offset=0):
    """A writable tensor over a copy of `data` (no library exports packed sub-byte data from Python)."""
    t = dlbridge.from_dlpack(_testing.make_capsule(shape=shape, strides=strides, dtype=dtype,
                                                   data_bytes=len(data), byte_offset=byte_offset))
    ctypes.memmove(t.data_ptr - byte_offset, data, len(data))
    return t


@pytest.mark.parametrize("dtype", ["bool", "int8", "int16", "int64", "uint8", "uint32", "float16",
                                   "float32", "float64", "complex64", "complex128"])
def test_array_interface_typestr_is_numpys_for_standard_dtypes(dtype):
    a = np.zeros((2, 3), dtype=dtype)[:, ::-2]
    t = dlbridge.from_dlpack(a)
    ai = t.__array_interface__
    assert np.dtype(ai["typestr"]) == a.dtype and ai["descr"] == [("", ai["typestr"])]
    assert ai["shape"] == a.shape and ai["strides"] == a.strides
    assert ai["data"] == (a.__array_interface__["data"][0], False) and ai["version"] == 3


def test_numpy_prefers_the_buffer_protocol_where_it_describes_the_dtype():
    # numpy.asarray asks for a buffer first and reads __array_interface__ only
    # when that is refused, so standard dtypes keep the exact buffer route.
    a = readonly_array(np.arange(12.0).reshape(3, 4))
    t = dlbridge.from_dlpack(a[::-1, 1:])
    b = np.asarray(t)
    assert type(b.base) is memoryview and b.base.obj is t
    assert np.shares_memory(a, b) and not b.flags.writeable
    np.testing.assert_array_equal(b, a[::-1, 1:])


def test_numpy_reads_other_dtypes_through_the_array_interface_as_raw_elements():
    import ml_dtypes

    a = readonly_array(np.arange(8, dtype=np.float32).reshape(2, 4).astype(ml_dtypes.bfloat16))
    t = dlbridge.from_dlpack(a[:, ::-1])
    assert t.__array_interface__["typestr"] == "|V2"
    b = np.asarray(t)
    assert b.dtype == np.dtype("V2") and b.base is t and not b.flags.writeable
    assert b.ctypes.data == t.data_ptr and b.strides == a[:, ::-1].strides
    np.testing.assert_array_equal(b.view(ml_dtypes.bfloat16).astype(np.float32), a[:, ::-1].astype(np.float32))


def test_array_interface_refuses_packed_and_device_memory():
    with pytest.raises(dlbridge.UnsupportedDTypeError) as info:
        np.asarray(packed((0, 4, 1), [4], None, b"\x21\x43"))
    assert "copy_unpacked" in check_error(info, dlbridge.UnsupportedDTypeError, "unsupported_dtype")
    cuda = dlbridge.from_dlpack(_testing.make_capsule(device=(2, 0)))
    with pytest.raises(dlbridge.DeviceUnavailableError) as info:
        np.asarray(cuda)
    check_error(info, dlbridge.DeviceUnavailableError, "device_unavailable")


def test_copy_unpacked_gives_packed_subbyte_values_a_byte_each():
    # Elements 0..5 of packed uint4 are 1..6; strides (1, 2) read them transposed.
    t = packed((1, 4, 1), [2, 3], [1, 2], b"\x21\x43\x65")
    u = t.copy_unpacked()
    assert u.dtype == "uint4" and u.shape == (2, 3) and u.flags & 4 and not u.readonly
    assert np.asarray(u).view(np.uint8).tolist() == [[1, 3, 5], [2, 4, 6]]
    # Signed values stay in the low bits, zero-extended, which is how ml_dtypes stores int4.
    s = packed((0, 4, 1), [2], None, b"\xf8").copy_unpacked()
    assert np.asarray(s).view(np.uint8).tolist() == [8, 15]


def test_copy_unpacked_splits_lanes_into_a_trailing_axis():
    # Reversed from the last byte: elements 2, 1, 0, lane 0 in the low bits.
    t = packed((17, 4, 2), [3], [-1], b"\x21\x43\x65", byte_offset=2)
    u = t.copy_unpacked()
    assert u.dtype == "float4_e2m1fn" and u.shape == (3, 2)
    assert np.asarray(u).view(np.uint8).tolist() == [[5, 6], [3, 4], [1, 2]]
    wide = packed((2, 32, 4), [2], None, np.arange(8, dtype=np.float32).tobytes()).copy_unpacked()
    assert wide.dtype == "float32" and not wide.flags & 4
    np.testing.assert_array_equal(np.asarray(wide), np.arange(8, dtype=np.float32).reshape(2, 4))


def test_array_interface_of_empty_null_data_keeps_read_only():
    t = dlbridge.from_dlpack(_testing.make_capsule(shape=[0, 3], dtype=(4, 16, 1), null_data=True, flags=1))
    assert t.data_ptr == 0
    b = np.asarray(t)
    assert b.shape == (0, 3) and not b.flags.writeable and b.base is t
