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


def test_dlpack_device_is_an_enum_and_an_id():
    kind, index = dlbridge.empty(3).__dlpack_device__()
    assert kind is dlbridge.DeviceType.kDLCPU and index == 0


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
