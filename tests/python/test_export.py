"""to_dlpack and Tensor.__dlpack__: the DLPack producer rules, checked on the capsule itself."""

import ctypes
import re

import numpy as np
import pytest

import dlbridge
from dlbridge import catalogue, inspect_capsule
from dlbridge._core import FLAG_IS_SUBBYTE_TYPE_PADDED, _testing
from conftest import check_error

FLAG_READ_ONLY, FLAG_IS_COPIED = 1, 2
JAX_PREFIX = "The device specification passed to to_dlpack contains an unsupported device type (DLDeviceType: "


def source():
    return np.arange(6.0).reshape(2, 3)


def readonly_source():
    a = source()
    a.flags.writeable = False
    return a


def exporters():
    """Both producer entry points, over the same array."""
    a = source()
    t = dlbridge.from_dlpack(a)
    return [
        ("Tensor.__dlpack__", a, lambda **kw: t.__dlpack__(**kw)),
        ("to_dlpack", a, lambda **kw: dlbridge.to_dlpack(a, **kw)),
    ]


@pytest.fixture(params=["Tensor.__dlpack__", "to_dlpack"])
def export(request):
    for name, a, fn in exporters():
        if name == request.param:
            fn.array = a
            return fn


@pytest.mark.parametrize("max_version", [None, (0, 0), (0, 8)])
def test_old_or_absent_max_version_gives_a_legacy_capsule(export, max_version):
    info = inspect_capsule(export(max_version=max_version))
    assert info["name"] == "dltensor"
    assert info["version"] is None
    assert info["problem"] is None


@pytest.mark.parametrize("max_version", [(1, 0), (1, 3), (1, 99), (2, 0), (7, 7)])
def test_modern_max_version_gives_dlbridge_own_version(export, max_version):
    info = inspect_capsule(export(max_version=max_version))
    assert info["name"] == "dltensor_versioned"
    # The producer's own version, never the one asked for.
    assert info["version"] == (1, 3)
    assert info["flags"] == 0
    assert info["problem"] is None


def test_capsule_describes_the_tensor_zero_copy(export):
    info = inspect_capsule(export(max_version=(1, 3)))
    a = export.array
    assert info["device"] == (1, 0)
    assert info["dtype"] == (2, 64, 1)
    assert info["shape"] == [2, 3] and info["strides"] == [3, 1]
    assert info["data"] + info["byte_offset"] == a.ctypes.data
    assert info["has_deleter"]


def test_strided_export_keeps_strides():
    a = np.arange(24.0).reshape(4, 6)[1::2, ::-2]
    info = inspect_capsule(dlbridge.to_dlpack(a, max_version=(1, 3)))
    assert info["strides"] == [12, -2] and info["shape"] == [2, 3]
    assert info["data"] + info["byte_offset"] == a.ctypes.data


@pytest.mark.parametrize("dl_device, label", [((4, 0), "kDLOpenCL"), ((99, 0), "99"),
                                              ((7, 1), "kDLVulkan"), ((5, 0), "5")])
def test_unservable_device_types_use_the_jax_message(export, dl_device, label):
    with pytest.raises(dlbridge.UnsupportedDeviceError) as info:
        export(max_version=(1, 3), dl_device=dl_device)
    message = check_error(info, dlbridge.UnsupportedDeviceError, "unsupported_device_type")
    assert message.startswith(JAX_PREFIX + label + ")")
    assert "kDLCPU" in message  # the supported types
    assert "dl_device=None" in message  # the fix


def test_unsupported_device_exact_jax_prefixes():
    t = dlbridge.empty(2)
    with pytest.raises(dlbridge.UnsupportedDeviceError, match=r"^The device specification passed to "
                       r"to_dlpack contains an unsupported device type \(DLDeviceType: kDLOpenCL\)"):
        t.__dlpack__(dl_device=(4, 0))
    with pytest.raises(dlbridge.UnsupportedDeviceError, match=r"\(DLDeviceType: 99\)"):
        t.__dlpack__(dl_device=(99, 0))


@pytest.mark.parametrize("dl_device", [(2, 0), (2, 3), (3, 0), (13, 0), (1, 1)])
def test_servable_but_absent_devices_are_unavailable(export, dl_device):
    with pytest.raises(dlbridge.DeviceUnavailableError) as info:
        export(max_version=(1, 3), dl_device=dl_device)
    message = check_error(info, dlbridge.DeviceUnavailableError, "device_unavailable")
    assert "(1, 0)" in message


def test_dl_device_cpu_is_served_without_a_copy(export):
    info = inspect_capsule(export(max_version=(1, 3), dl_device=(1, 0)))
    assert info["device"] == (1, 0)
    assert info["flags"] & FLAG_IS_COPIED == 0
    assert info["data"] == export.array.ctypes.data


def test_copy_true_sets_is_copied_and_moves_the_data(export):
    info = inspect_capsule(export(max_version=(1, 3), copy=True))
    assert info["flags"] == FLAG_IS_COPIED
    assert info["data"] != export.array.ctypes.data
    t = dlbridge.from_dlpack(export(max_version=(1, 3), copy=True))
    np.testing.assert_array_equal(np.from_dlpack(t), export.array)


def test_copy_true_on_legacy_capsule_copies_silently(export):
    info = inspect_capsule(export(copy=True))
    assert info["name"] == "dltensor"
    assert info["data"] != export.array.ctypes.data


def test_copy_false_on_cpu_is_zero_copy(export):
    info = inspect_capsule(export(max_version=(1, 3), copy=False))
    assert info["flags"] == 0
    assert info["data"] == export.array.ctypes.data


def test_copy_false_to_another_device_cannot_be_served():
    t = dlbridge.empty(2)
    # The device is checked before the copy rule: there is nothing to copy to.
    with pytest.raises(dlbridge.DeviceUnavailableError):
        t.__dlpack__(max_version=(1, 3), dl_device=(2, 0), copy=False)


# --- read-only data

def test_readonly_versioned_export_carries_the_flag():
    info = inspect_capsule(dlbridge.to_dlpack(readonly_source(), max_version=(1, 3)))
    assert info["flags"] == FLAG_READ_ONLY


@pytest.mark.parametrize("max_version", [None, (0, 8)])
def test_readonly_legacy_export_is_refused(max_version):
    with pytest.raises(dlbridge.ReadOnlyError) as info:
        dlbridge.to_dlpack(readonly_source(), max_version=max_version)
    message = check_error(info, dlbridge.ReadOnlyError, "read_only")
    assert "max_version=(1, 3)" in message and "copy=True" in message
    t = dlbridge.from_dlpack(readonly_source())
    with pytest.raises(dlbridge.ReadOnlyError):
        t.__dlpack__(max_version=max_version)


def test_readonly_export_with_copy_is_a_writable_copy():
    a = readonly_source()
    legacy = inspect_capsule(dlbridge.to_dlpack(a, copy=True))
    assert legacy["name"] == "dltensor" and legacy["data"] != a.ctypes.data
    versioned = inspect_capsule(dlbridge.to_dlpack(a, max_version=(1, 3), copy=True))
    assert versioned["flags"] == FLAG_IS_COPIED


def test_bytes_export_is_readonly():
    info = inspect_capsule(dlbridge.to_dlpack(b"abc", max_version=(1, 0)))
    assert info["flags"] == FLAG_READ_ONLY and info["dtype"] == (1, 8, 1)


# --- streams on the CPU

@pytest.mark.parametrize("stream", [None, -1])
def test_cpu_accepts_no_stream_and_minus_one(export, stream):
    assert inspect_capsule(export(max_version=(1, 3), stream=stream))["problem"] is None


@pytest.mark.parametrize("stream", [0, 1, 2, 12345, -2])
def test_cpu_refuses_real_stream_values(export, stream):
    with pytest.raises(dlbridge.StreamError) as info:
        export(max_version=(1, 3), stream=stream)
    message = check_error(info, dlbridge.StreamError, "invalid_stream")
    assert f"stream={stream}" in message and "stream=None" in message


def test_stream_value_types():
    t = dlbridge.empty(1)
    with pytest.raises(TypeError):
        t.__dlpack__(stream="default")
    with pytest.raises(TypeError):
        t.__dlpack__(stream=True)
    with pytest.raises(dlbridge.StreamError):
        t.__dlpack__(stream=2**70)


# --- arguments

@pytest.mark.parametrize("max_version, exc", [
    ((1,), TypeError), ("1.3", TypeError), ((1.0, 3), TypeError), ((1, -1), ValueError), ([1, 3], TypeError),
])
def test_bad_max_version(max_version, exc):
    with pytest.raises(exc):
        dlbridge.empty(1).__dlpack__(max_version=max_version)


def test_keywords_only():
    t = dlbridge.empty(1)
    with pytest.raises(TypeError):
        t.__dlpack__(None)
    with pytest.raises(TypeError):
        dlbridge.to_dlpack(t, None)


def test_to_dlpack_reads_every_import_source():
    for x in (b"ab", bytearray(2), memoryview(b"ab"), dlbridge.empty(2), source().__dlpack__()):
        assert inspect_capsule(dlbridge.to_dlpack(x, max_version=(1, 3)))["problem"] is None


def test_each_export_is_a_new_capsule_over_the_same_memory():
    t = dlbridge.empty(4)
    first, second = t.__dlpack__(max_version=(1, 3)), t.__dlpack__(max_version=(1, 3))
    assert first is not second
    assert inspect_capsule(first)["data"] == inspect_capsule(second)["data"] == t.data_ptr


def _padded_uint4(values):
    capsule = _testing.make_capsule(shape=[len(values)], strides=[1], dtype=(1, 4, 1),
                                    flags=FLAG_IS_SUBBYTE_TYPE_PADDED, data_bytes=len(values))
    t = dlbridge.from_dlpack(capsule)
    ctypes.memmove(t.data_ptr, bytes(values), len(values))
    return t


def test_padded_subbyte_tensor_is_refused_as_a_legacy_capsule():
    """A legacy capsule cannot carry IS_SUBBYTE_TYPE_PADDED, so a padded uint4
    tensor [1, 2, 3, 4] exported legacy would be read back as packed
    [1, 0, 2, 0]: the export refuses, and says how to get a versioned one."""
    t = _padded_uint4([1, 2, 3, 4])
    with pytest.raises(dlbridge.LayoutError) as info:
        t.__dlpack__()
    check_error(info, dlbridge.LayoutError, "unsupported_layout")
    assert "max_version=(1, 3)" in info.value.hint
    assert re.search(catalogue.by_code()["unsupported_layout"].pattern, str(info.value))


def test_padded_subbyte_tensor_keeps_its_values_through_a_versioned_capsule():
    t = _padded_uint4([1, 2, 3, 4])
    assert dlbridge.convert(t, "numpy").astype(int).tolist() == [1, 2, 3, 4]
    back = dlbridge.from_dlpack(t.__dlpack__(max_version=(1, 3)))
    assert dlbridge.convert(back, "numpy").astype(int).tolist() == [1, 2, 3, 4]
