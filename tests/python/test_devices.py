"""Device requests (dl_device, from_dlpack(device=...)), copy decisions
across devices, stream values, and the CUDA backend on a machine without a
usable GPU: every refusal must name what is missing, never crash."""

from __future__ import annotations

import numpy as np
import pytest

import dlbridge
from dlbridge._core import _testing, inspect_capsule

from conftest import check_error, fresh_producer_class

FLAG_IS_COPIED = 2


def _cuda_usable() -> bool:
    try:
        dlbridge.to_dlpack(np.zeros(1, np.float32), dl_device=(2, 0))
    except dlbridge.DeviceUnavailableError:
        return False
    return True


CUDA_USABLE = _cuda_usable()
needs_no_cuda = pytest.mark.skipif(
    CUDA_USABLE, reason="a CUDA device is usable here; these tests check its absence")


def labelled(device, shape=(2, 3)):
    """A tensor whose host memory claims to live on `device`: the consumer
    cannot tell, which is exactly what the negotiation paths must handle."""
    capsule = _testing.make_capsule(shape=list(shape), device=device, data_bytes=64)
    return dlbridge.from_dlpack(capsule)


# --- the CUDA family without a usable GPU

@needs_no_cuda
@pytest.mark.parametrize("dl_device", [(2, 0), (2, 1), (3, 0), (13, 0)])
def test_cuda_family_requests_say_what_was_tried(dl_device):
    with pytest.raises(dlbridge.DeviceUnavailableError) as info:
        dlbridge.empty((2, 2)).__dlpack__(max_version=(1, 3), dl_device=dl_device)
    message = check_error(info, dlbridge.DeviceUnavailableError, "device_unavailable")
    # Either the runtime was not found (and the names tried are listed) or
    # it loaded and the driver or device is missing: both name libcudart.
    assert "libcudart" in message
    assert "is not available" in message


@needs_no_cuda
def test_from_dlpack_to_cuda_is_unavailable_and_names_the_device():
    with pytest.raises(dlbridge.DeviceUnavailableError) as info:
        dlbridge.from_dlpack(dlbridge.empty(4), device="cuda:0")
    assert "cuda:0" in check_error(info, dlbridge.DeviceUnavailableError, "device_unavailable")
    with pytest.raises(dlbridge.DeviceUnavailableError):
        dlbridge.empty(3).copy(device="cuda_host")


@needs_no_cuda
def test_device_memory_cannot_reach_the_host_without_its_runtime():
    t = labelled((2, 0))
    assert t.device == dlbridge.Device("cuda:0")  # importing alone needs no runtime
    with pytest.raises(dlbridge.DeviceUnavailableError) as info:
        dlbridge.from_dlpack(t, device="cpu")
    assert "cuda:0" in check_error(info, dlbridge.DeviceUnavailableError, "device_unavailable")
    with pytest.raises(dlbridge.DeviceUnavailableError):
        t.copy(device="cpu")
    with pytest.raises(dlbridge.DeviceUnavailableError):
        t.__dlpack__(max_version=(1, 3), copy=True)
    with pytest.raises(dlbridge.CopyRequiredError) as info:
        t.__dlpack__(max_version=(1, 3), dl_device=(1, 0), copy=False)
    check_error(info, dlbridge.CopyRequiredError, "copy_required")


@needs_no_cuda
def test_cuda_array_interface_needs_the_runtime():
    class Cai:
        __cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (0x7F0000000000, False),
                                    "strides": None, "version": 3, "stream": 1}

    with pytest.raises(dlbridge.DeviceUnavailableError) as info:
        dlbridge.from_dlpack(Cai())
    message = check_error(info, dlbridge.DeviceUnavailableError, "device_unavailable")
    assert "__cuda_array_interface__" in message and "libcudart" in message


@pytest.mark.parametrize("interface, error", [
    ({"shape": (2,), "typestr": "<f4", "data": (1, False), "mask": object()}, dlbridge.LayoutError),
    ({"shape": (2,), "typestr": ">f4", "data": (1, False)}, dlbridge.UnsupportedDTypeError),
    ({"shape": (2,), "typestr": "<f4"}, TypeError),
    ({"shape": (2,), "typestr": "<f4", "data": 1}, TypeError),
])
def test_malformed_cuda_array_interfaces_are_refused_before_any_runtime_call(interface, error):
    cls = type("Cai", (), {"__cuda_array_interface__": interface})
    with pytest.raises(error):
        dlbridge.from_dlpack(cls())


# --- host-accessible memory: a relabel, not a copy

@pytest.mark.parametrize("device_type", [3, 13])
def test_pinned_and_managed_memory_reach_the_cpu_zero_copy(device_type):
    t = labelled((device_type, 0))
    on_cpu = dlbridge.from_dlpack(t, device="cpu", copy=False)
    assert on_cpu.device == dlbridge.Device("cpu")
    assert on_cpu.data_ptr == t.data_ptr
    info = inspect_capsule(t.__dlpack__(max_version=(1, 3), dl_device=(1, 0), copy=False))
    assert info["device"] == (1, 0)
    assert info["flags"] == 0
    assert info["data"] == t.data_ptr


@pytest.mark.parametrize("device_type", [3, 13])
def test_pinned_and_managed_memory_copied_to_the_cpu_on_request(device_type):
    t = labelled((device_type, 0))
    copied = dlbridge.from_dlpack(t, device="cpu", copy=True)
    assert copied.device == dlbridge.Device("cpu")
    assert copied.data_ptr != t.data_ptr
    info = inspect_capsule(t.__dlpack__(max_version=(1, 3), dl_device=(1, 0), copy=True))
    assert info["flags"] == FLAG_IS_COPIED
    assert info["device"] == (1, 0)


# --- negotiation with producers

def test_from_dlpack_device_is_asked_of_the_producer():
    cls = fresh_producer_class(style="modern")
    a = np.arange(6.0)
    t = dlbridge.from_dlpack(cls(a), device="cpu")
    assert cls.calls[-1]["dl_device"] == (1, 0)
    assert t.data_ptr == a.ctypes.data  # same device: nothing to copy


def test_a_producer_without_dl_device_is_imported_then_copied():
    cls = fresh_producer_class(style="no_keywords")
    a = np.arange(6.0)
    t = dlbridge.from_dlpack(cls(a), device="cpu", copy=True)
    assert all("dl_device" not in call for call in cls.calls[-1:])
    assert t.data_ptr != a.ctypes.data
    np.testing.assert_array_equal(np.from_dlpack(t), a)


def test_device_errors_for_types_and_ids():
    with pytest.raises(dlbridge.UnsupportedDeviceError):
        dlbridge.from_dlpack(dlbridge.empty(3), device=(4, 0))
    with pytest.raises(dlbridge.DeviceUnavailableError) as info:
        dlbridge.empty(3).__dlpack__(max_version=(1, 3), dl_device=(1, 1))
    assert "the CPU is device 0." in str(info.value)


# --- streams

@pytest.mark.parametrize("stream", [0, -2])
def test_invalid_cuda_streams(stream):
    with pytest.raises(dlbridge.StreamError) as info:
        labelled((2, 0)).__dlpack__(max_version=(1, 3), stream=stream)
    check_error(info, dlbridge.StreamError, "invalid_stream")


@pytest.mark.parametrize("stream", [None, 1, 2, -1])
def test_spec_cuda_streams_are_accepted_for_a_same_device_export(stream):
    info = inspect_capsule(labelled((2, 0)).__dlpack__(max_version=(1, 3), stream=stream))
    assert info["device"] == (2, 0)


@pytest.mark.parametrize("stream, valid", [(1, False), (2, False), (-3, False), (0, True), (None, True)])
def test_rocm_streams(stream, valid):
    t = labelled((10, 0))
    if valid:
        assert inspect_capsule(t.__dlpack__(max_version=(1, 3), stream=stream))["device"] == (10, 0)
    else:
        with pytest.raises(dlbridge.StreamError):
            t.__dlpack__(max_version=(1, 3), stream=stream)


def test_cpu_streams():
    t = dlbridge.empty(2)
    with pytest.raises(dlbridge.StreamError, match="host memory has no stream"):
        t.__dlpack__(max_version=(1, 3), stream=1)
    assert inspect_capsule(t.__dlpack__(max_version=(1, 3), stream=-1))["device"] == (1, 0)
