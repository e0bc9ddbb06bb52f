"""How from_dlpack talks to producers: streams for device memory, coded
errors where a producer refuses a request, copy=False kept honest."""

import numpy as np
import pytest

import dlbridge
from dlbridge._core import _testing


def make_device_producer(device_type, flags=0):
    """A producer type that records every __dlpack__ / __dlpack_device__ call."""

    class Producer:
        calls = []

        def __dlpack_device__(self):
            Producer.calls.append("device")
            return (device_type, 0)

        def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
            Producer.calls.append(("dlpack", stream))
            return _testing.make_capsule(device=(device_type, 0), flags=flags)

    return Producer


def test_cuda_producer_is_asked_again_with_the_legacy_default_stream():
    producer = make_device_producer(2)
    t = dlbridge.from_dlpack(producer())
    assert t.device == (2, 0)
    # The first tensor came without a stream, so it was dropped and asked for again.
    assert producer.calls == [("dlpack", None), ("dlpack", 1)]
    producer.calls.clear()
    dlbridge.from_dlpack(producer())
    # From then on the type is known to serve devices: device first, stream given once.
    assert producer.calls == ["device", ("dlpack", 1)]


def test_known_cpu_producer_serving_device_memory_later_is_asked_again():
    # A type learnt on host memory takes the short path (max_version alone,
    # adopted in place); its first device tensor still comes without a
    # stream, so it is dropped (its deleter runs) and asked for again.
    producer = make_device_producer(1)
    dlbridge.from_dlpack(producer())
    dlbridge.from_dlpack(producer())
    assert producer.calls == [("dlpack", None)] * 2
    producer.calls.clear()

    def dlpack_device(self):
        producer.calls.append("device")
        return (2, 0)

    def dlpack(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        producer.calls.append(("dlpack", stream))
        return _testing.make_capsule(device=(2, 0))

    producer.__dlpack_device__ = dlpack_device
    producer.__dlpack__ = dlpack
    before = _testing.deleter_calls()
    t = dlbridge.from_dlpack(producer())
    assert t.device == (2, 0)
    assert producer.calls == [("dlpack", None), ("dlpack", 1)]
    assert _testing.deleter_calls() == before + 1
    del t
    assert _testing.deleter_calls() == before + 2
    producer.calls.clear()
    dlbridge.from_dlpack(producer())
    assert producer.calls == ["device", ("dlpack", 1)]


def test_rocm_producer_gets_the_rocm_default_stream():
    producer = make_device_producer(10)
    dlbridge.from_dlpack(producer())
    assert producer.calls[-1] == ("dlpack", 0)


def test_cpu_producer_never_pays_for_device_queries():
    producer = make_device_producer(1)
    for _ in range(3):
        dlbridge.from_dlpack(producer())
    assert producer.calls == [("dlpack", None)] * 3


def test_dropped_device_tensor_is_released_exactly_once():
    producer = make_device_producer(2)
    before = _testing.deleter_calls()
    t = dlbridge.from_dlpack(producer())
    assert _testing.deleter_calls() == before + 1  # the tensor asked without a stream
    del t
    assert _testing.deleter_calls() == before + 2


def test_producer_refusing_a_device_gives_dlbridges_coded_error():
    # NumPy answers dl_device=cuda with an uncoded BufferError; dlbridge takes
    # the data as it is and reports why it cannot move it.
    with pytest.raises(dlbridge.DeviceUnavailableError) as info:
        dlbridge.from_dlpack(np.ones(3), device="cuda:0")
    assert info.value.code == "device_unavailable"
    assert "cuda:0" in str(info.value)


def test_copy_false_refuses_a_copy_the_producer_made_anyway():
    producer = make_device_producer(1, flags=dlbridge._core.FLAG_IS_COPIED)
    with pytest.raises(dlbridge.CopyRequiredError) as info:
        dlbridge.from_dlpack(producer(), copy=False)
    assert "copy=None" in info.value.hint
    assert dlbridge.from_dlpack(producer()).device == (1, 0)


@pytest.mark.parametrize("fn", [dlbridge.from_dlpack, dlbridge.to_dlpack])
def test_the_array_is_positional_only(fn):
    with pytest.raises(TypeError):
        fn(x=np.ones(3))
    if getattr(fn, "__text_signature__", None):  # a plain CPython function (from_dlpack)
        assert fn.__text_signature__.startswith("(x, /")
    else:
        assert "x: object, /" in fn.__doc__.partition("\n")[0]


@pytest.mark.parametrize("typestr", ["|b2", ">f4", "<V3", "<x4"])
def test_array_interface_types_dlpack_cannot_name_are_refused(typestr):
    buffer = np.zeros(16, np.uint8)

    class Interface:
        __array_interface__ = {"shape": (2,), "typestr": typestr, "version": 3,
                               "data": (buffer.ctypes.data, False)}

    with pytest.raises(dlbridge.UnsupportedDTypeError) as info:
        dlbridge.from_dlpack(Interface())
    assert typestr in str(info.value)


@pytest.mark.parametrize("device, error, fragment", [
    ("opencl", dlbridge.UnsupportedDeviceError, "DLDeviceType: kDLOpenCL"),
    ("cpu:1", dlbridge.DeviceUnavailableError, "the CPU is device 0"),
    ("cuda:0", dlbridge.DeviceUnavailableError, "cuda:0"),
])
def test_empty_on_a_device_this_machine_cannot_serve(device, error, fragment):
    # The backend says why (what it tried), as for dl_device requests.
    with pytest.raises(error, match=fragment) as info:
        dlbridge.empty(3, device=device)
    assert info.value.hint


def test_empty_on_the_cpu_is_compact_and_writable():
    t = dlbridge.empty((2, 3), "int16", "cpu")
    assert (t.shape, t.strides, t.dtype, t.readonly) == ((2, 3), (3, 1), "int16", False)
    assert t.data_ptr % 64 == 0
