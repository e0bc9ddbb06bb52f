"""from_dlpack: every kind of source, zero-copy where allowed, and the refusals."""

import array

import numpy as np
import pytest

import dlbridge
from dlbridge._core import _testing
from conftest import check_error, fresh_producer_class

MAX = {"max_version": (1, 3)}


def source():
    return np.arange(6.0).reshape(2, 3)


# --- __dlpack__ producers, new and old

def test_modern_producer_is_asked_for_dlpack_1_3_once_per_import():
    cls = fresh_producer_class(style="modern")
    a = source()
    for _ in range(3):
        t = dlbridge.from_dlpack(cls(a))
        assert t.data_ptr == a.ctypes.data
    assert cls.calls == [MAX] * 3


def test_keywordless_producer_is_probed_once_per_type():
    cls = fresh_producer_class(style="no_keywords")
    a = source()
    for _ in range(4):
        t = dlbridge.from_dlpack(cls(a))
        np.testing.assert_array_equal(np.from_dlpack(t), a)
        assert t.data_ptr == a.ctypes.data
    # One refused probe with max_version, then plain calls only.
    assert cls.calls == [MAX, {}, {}, {}, {}]


def test_probing_is_remembered_per_type_not_per_object_or_globally():
    first, second = fresh_producer_class(style="no_keywords"), fresh_producer_class(style="no_keywords")
    modern = fresh_producer_class(style="modern")
    a = source()
    for cls in (first, second, modern, first, second, modern):
        dlbridge.from_dlpack(cls(a))
    assert first.calls == [MAX, {}, {}]
    assert second.calls == [MAX, {}, {}]
    assert modern.calls == [MAX, MAX]


def test_legacy_only_producer_is_imported_and_probed_never():
    cls = fresh_producer_class(style="legacy_only")
    a = source()
    for _ in range(3):
        t = dlbridge.from_dlpack(cls(a))
        assert t.data_ptr == a.ctypes.data
        assert t.readonly  # a legacy capsule cannot say writable: unknown is read-only
    assert cls.calls == [MAX] * 3


def test_old_producers_with_device_and_copy_requests_still_work():
    a = source()
    for style in ("no_keywords", "legacy_only"):
        cls = fresh_producer_class(style=style)
        for _ in range(2):
            assert dlbridge.from_dlpack(cls(a), device="cpu").data_ptr == a.ctypes.data
            assert dlbridge.from_dlpack(cls(a), copy=False).data_ptr == a.ctypes.data
            copied = dlbridge.from_dlpack(cls(a), copy=True)
            assert copied.data_ptr != a.ctypes.data
            np.testing.assert_array_equal(np.from_dlpack(copied), a)


def test_modern_producer_receives_dl_device_and_copy_false():
    cls = fresh_producer_class(style="modern")
    a = source()
    dlbridge.from_dlpack(cls(a), device="cpu", copy=False)
    assert cls.calls[-1]["dl_device"] == (1, 0)
    assert cls.calls[-1]["copy"] is False


def test_copy_true_never_aliases_even_if_the_producer_ignores_copy():
    class IgnoresCopy:
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
            return self.a.__dlpack__(max_version=max_version)

        def __dlpack_device__(self):
            return (1, 0)

    a = source()
    t = dlbridge.from_dlpack(IgnoresCopy(a), copy=True)
    assert t.data_ptr != a.ctypes.data
    assert not t.readonly
    np.testing.assert_array_equal(np.from_dlpack(t), a)


def test_producer_errors_propagate_unchanged():
    class Refuses:
        def __dlpack__(self, **kwargs):
            raise BufferError("this producer refuses")

        def __dlpack_device__(self):
            return (1, 0)

    with pytest.raises(BufferError, match="this producer refuses"):
        dlbridge.from_dlpack(Refuses())


def test_producer_raising_typeerror_for_every_call_is_a_producer_error_with_that_cause():
    class Broken:
        calls = 0

        def __dlpack__(self, *args, **kwargs):
            Broken.calls += 1
            raise TypeError("broken producer")

    with pytest.raises(dlbridge.ProducerError, match="broken producer") as excinfo:
        dlbridge.from_dlpack(Broken())
    assert isinstance(excinfo.value.__cause__, TypeError)
    assert 1 <= Broken.calls <= 3  # a bounded ladder, not a loop


def test_producer_returning_a_non_capsule_is_a_type_error():
    class NotACapsule:
        def __dlpack__(self, **kwargs):
            return 5

    with pytest.raises(TypeError, match="capsule"):
        dlbridge.from_dlpack(NotACapsule())


# --- raw capsules

@pytest.mark.parametrize("request_kwargs, name", [(MAX, "dltensor_versioned"), ({}, "dltensor")])
def test_raw_capsule_is_consumed_and_renamed(request_kwargs, name):
    a = source()
    capsule = a.__dlpack__(**request_kwargs)
    assert dlbridge.inspect_capsule(capsule)["name"] == name
    t = dlbridge.from_dlpack(capsule)
    assert t.data_ptr == a.ctypes.data
    info = dlbridge.inspect_capsule(capsule)
    assert info["name"] == "used_" + name and info["consumed"]


@pytest.mark.parametrize("versioned", [True, False])
def test_second_consumption_of_a_capsule_is_refused(versioned, deleters):
    capsule = _testing.make_capsule(versioned=versioned)
    t = dlbridge.from_dlpack(capsule)
    with pytest.raises(dlbridge.ConsumedCapsuleError) as info:
        dlbridge.from_dlpack(capsule)
    message = check_error(info, dlbridge.ConsumedCapsuleError, "capsule_consumed")
    assert "__dlpack__()" in message
    assert deleters.calls == 0  # t still owns the tensor
    del t, capsule
    assert deleters.settled() == 1


@pytest.mark.parametrize("name", ["foo", "dltensor_v", "DLTENSOR"])
def test_capsule_with_a_foreign_name_is_a_type_error(name, deleters):
    capsule = _testing.make_capsule(name=name)
    with pytest.raises(TypeError, match=name):
        dlbridge.from_dlpack(capsule)
    assert deleters.calls == 0
    del capsule
    # Not ours to consume: the capsule's own destructor frees it.
    assert deleters.settled() == 1


def test_capsule_import_with_copy_true_does_not_alias(deleters):
    a = source()
    t = dlbridge.from_dlpack(a.__dlpack__(**MAX), copy=True)
    assert t.data_ptr != a.ctypes.data
    c = dlbridge.from_dlpack(_testing.make_capsule(), copy=True)
    # The source tensor is no longer needed once copied.
    assert deleters.settled() == 1
    assert c.shape == (2, 3)


# --- dlbridge.Tensor itself

def test_tensor_import_is_zero_copy_and_copy_true_copies():
    t = dlbridge.empty((2, 2))
    assert dlbridge.from_dlpack(t).data_ptr == t.data_ptr
    assert dlbridge.from_dlpack(t, copy=False).data_ptr == t.data_ptr
    assert dlbridge.from_dlpack(t, copy=True).data_ptr != t.data_ptr


def test_tensor_import_to_an_absent_device():
    t = dlbridge.empty(2)
    with pytest.raises(dlbridge.DeviceUnavailableError) as info:
        dlbridge.from_dlpack(t, device="cuda:0")
    check_error(info, dlbridge.DeviceUnavailableError, "device_unavailable")
    with pytest.raises(dlbridge.CopyRequiredError) as info:
        dlbridge.from_dlpack(t, device="cuda:0", copy=False)
    check_error(info, dlbridge.CopyRequiredError, "copy_required")
    with pytest.raises(dlbridge.UnsupportedDeviceError):
        dlbridge.from_dlpack(t, device="opencl")


def test_numpy_device_refusal_propagates_as_a_buffer_error():
    # numpy answers dl_device=(2, 0) itself, with its own plain BufferError.
    with pytest.raises(BufferError):
        dlbridge.from_dlpack(source(), device="cuda:0")


# --- buffer protocol and __array_interface__

@pytest.mark.parametrize("obj, dtype, shape, readonly", [
    (b"abcd", "uint8", (4,), True),
    (bytearray(b"abcd"), "uint8", (4,), False),
    (array.array("d", [1.0, 2.0, 3.0]), "float64", (3,), False),
    (array.array("h", [1, -2]), "int16", (2,), False),
    (array.array("Q", [2**64 - 1]), "uint64", (1,), False),
    (memoryview(b"abcdefgh").cast("i"), "int32", (2,), True),
    (memoryview(bytearray(24)).cast("d", (3, 1)), "float64", (3, 1), False),
])
def test_buffer_protocol_objects(obj, dtype, shape, readonly):
    t = dlbridge.from_dlpack(obj)
    assert (t.dtype, t.shape, t.readonly) == (dtype, shape, readonly)
    with memoryview(obj) as m:
        np.testing.assert_array_equal(np.asarray(t), np.asarray(m))
        assert t.data_ptr == np.asarray(m).ctypes.data


def test_buffer_import_shares_and_keeps_memory_alive():
    buf = bytearray(b"\x00\x01\x02")
    t = dlbridge.from_dlpack(buf)
    buf[0] = 7
    assert np.from_dlpack(t)[0] == 7
    del buf
    assert np.from_dlpack(t).tolist() == [7, 1, 2]


def test_strided_memoryview_keeps_its_strides():
    m = memoryview(bytearray(range(16))).cast("h")[::-2]
    t = dlbridge.from_dlpack(m)
    assert t.strides == (-2,) and t.shape == (4,)
    assert np.asarray(t).tolist() == m.tolist()


def test_readonly_buffer_with_copy_true_is_writable():
    t = dlbridge.from_dlpack(b"abc", copy=True)
    assert not t.readonly
    assert bytes(np.from_dlpack(t)) == b"abc"


class ArrayInterfaceOnly:
    def __init__(self, a):
        self.keep = a
        self.__array_interface__ = a.__array_interface__


def test_array_interface_only_object_is_zero_copy_and_strided():
    a = np.arange(12, dtype=np.int16).reshape(3, 4)[:, ::2]
    t = dlbridge.from_dlpack(ArrayInterfaceOnly(a))
    assert t.data_ptr == a.ctypes.data
    assert t.strides == (4, 2)
    np.testing.assert_array_equal(np.from_dlpack(t), a)


def test_array_interface_readonly_flag_is_kept():
    a = np.arange(3.0)
    a.flags.writeable = False
    t = dlbridge.from_dlpack(ArrayInterfaceOnly(a))
    assert t.readonly


def test_array_interface_object_stays_alive_while_the_tensor_lives():
    holder = ArrayInterfaceOnly(np.arange(5.0))
    t = dlbridge.from_dlpack(holder)
    del holder
    assert np.from_dlpack(t).tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]


@pytest.mark.parametrize("make", [
    lambda: memoryview(np.zeros(3, ">f4")),
    lambda: ArrayInterfaceOnly(np.zeros(3, ">f4")),
    lambda: ArrayInterfaceOnly(np.zeros(3, "U3")),
])
def test_element_types_dlpack_cannot_hold_are_refused(make):
    with pytest.raises(dlbridge.UnsupportedDTypeError) as info:
        dlbridge.from_dlpack(make())
    check_error(info, dlbridge.UnsupportedDTypeError, "unsupported_dtype")


def test_cuda_array_interface_without_cuda_is_device_unavailable():
    class CudaOnly:
        __cuda_array_interface__ = {"shape": (1,), "typestr": "<f4", "data": (0, False), "version": 3}

    with pytest.raises(dlbridge.DeviceUnavailableError) as info:
        dlbridge.from_dlpack(CudaOnly())
    check_error(info, dlbridge.DeviceUnavailableError, "device_unavailable")


# --- argument errors

@pytest.mark.parametrize("x", [3.5, None, "text", object(), [1, 2, 3]])
def test_objects_without_any_protocol_are_type_errors(x):
    with pytest.raises(TypeError, match=type(x).__name__):
        dlbridge.from_dlpack(x)


@pytest.mark.parametrize("kwargs, exc", [
    ({"copy": "yes"}, TypeError),
    ({"copy": 1}, TypeError),
    ({"device": 3.5}, TypeError),
    ({"device": "gpu"}, ValueError),
])
def test_bad_keyword_values(kwargs, exc):
    with pytest.raises(exc):
        dlbridge.from_dlpack(source(), **kwargs)


def test_device_and_copy_are_keyword_only():
    with pytest.raises(TypeError):
        dlbridge.from_dlpack(source(), "cpu")
