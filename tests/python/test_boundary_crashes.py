"""Arguments that used to crash the interpreter: each must now be refused
with a TypeError (a bad argument) and leave the process running."""

import copy
import pickle

import numpy as np
import pytest

import dlbridge


class DeviceAnswer:
    """A device-like object whose __dlpack_device__ returns `answer`."""

    def __init__(self, answer):
        self.answer = answer

    def __dlpack_device__(self):
        return self.answer


MALFORMED_DEVICE_ANSWERS = [(), (1,), (1, 0, 0), [1, 0], None, "cpu", 1.5, ("cpu", 0), (1, "0")]


def device_entry_points(device):
    yield lambda: dlbridge.Device(device)
    yield lambda: dlbridge.from_dlpack(np.ones(2), device=device)
    yield lambda: dlbridge.empty(2, device=device)
    yield lambda: dlbridge.empty(2).copy(device=device)
    yield lambda: dlbridge.to_dlpack(np.ones(2), dl_device=device)
    yield lambda: dlbridge.empty(2).__dlpack__(dl_device=device)


@pytest.mark.parametrize("answer", MALFORMED_DEVICE_ANSWERS, ids=repr)
def test_malformed_dlpack_device_answer_is_a_type_error(answer):
    device = DeviceAnswer(answer)
    for call in device_entry_points(device):
        with pytest.raises(TypeError, match="__dlpack_device__"):
            call()


@pytest.mark.parametrize("answer", MALFORMED_DEVICE_ANSWERS, ids=repr)
def test_device_equality_with_malformed_dlpack_device_is_false(answer):
    assert (dlbridge.Device("cpu") == DeviceAnswer(answer)) is False
    assert (dlbridge.Device("cpu") != DeviceAnswer(answer)) is True


class SwitchingProducer:
    """Delivers kDLCUDAManaged memory once (so its type is marked as a device
    producer), then answers __dlpack_device__ with garbage."""

    answer = (13, 0)

    def __init__(self, source):
        self.source = source

    def __dlpack__(self, **kwargs):
        return self.source.__dlpack__()

    def __dlpack_device__(self):
        return type(self).answer


def test_producer_reasked_for_its_device_may_answer_garbage():
    from dlbridge._core import _testing

    class Producer(SwitchingProducer):
        pass

    # kDLCUDAManaged host-accessible memory: the consumer marks the type and
    # asks its device before every later import.
    def managed_capsule():
        return _testing.make_capsule(device=(13, 0), versioned=False)

    dlbridge.from_dlpack(Producer(type("S", (), {"__dlpack__": lambda self: managed_capsule()})()))
    for answer in [(), "cuda", None, (13,)]:
        Producer.answer = answer
        with pytest.raises(TypeError, match="__dlpack_device__"):
            dlbridge.from_dlpack(Producer(type("S", (), {"__dlpack__": lambda self: managed_capsule()})()))


class LyingTuple(tuple):
    def __len__(self):
        return self.claimed

    def __getitem__(self, index):
        return 0

    def __iter__(self):
        return iter((1, 3) * 8)


def lying(items, claimed):
    t = LyingTuple(items)
    t.claimed = claimed
    return t


@pytest.mark.parametrize("items, claimed", [((), 2), ((1,), 2), ((1, 3, 0), 2), ((1, 3), 100)])
def test_tuple_subclass_with_lying_len_is_read_by_its_real_items(items, claimed):
    t = dlbridge.empty(2)
    value = lying(items, claimed)
    if tuple.__len__(value) == 2:  # really two items: read as what they are
        assert t.__dlpack__(max_version=value) is not None
        return
    with pytest.raises(TypeError, match="max_version"):
        t.__dlpack__(max_version=value)
    with pytest.raises(TypeError, match="max_version"):
        dlbridge.to_dlpack(np.ones(2), max_version=value)
    with pytest.raises(TypeError, match="device"):
        dlbridge.Device(value)
    if tuple.__len__(value) != 3:
        with pytest.raises(TypeError, match="dtype"):
            dlbridge.DType(value)
    with pytest.raises(TypeError, match="device"):
        dlbridge.empty(2, device=value)


def uninitialised_tensor_uses():
    t = dlbridge.Tensor.__new__(dlbridge.Tensor)
    return [
        lambda: np.from_dlpack(t), lambda: dlbridge.from_dlpack(t), lambda: dlbridge.to_dlpack(t),
        lambda: memoryview(t), lambda: np.asarray(t), lambda: t.__dlpack__(),
        lambda: t.__dlpack__(max_version=(1, 3)), lambda: t.__dlpack_device__(), lambda: t.shape,
        lambda: t.__array_interface__, lambda: t.copy(), lambda: t.copy_unpacked(), lambda: repr(t),
        lambda: dlbridge.convert(t, "numpy"), lambda: dlbridge.convert(t, "torch"),
        lambda: t.share_memory(), lambda: t.is_shared, lambda: t.__reduce_ex__(5),
        lambda: pickle.dumps(t, protocol=5), lambda: copy.copy(t), lambda: copy.deepcopy(t),
    ]


@pytest.mark.filterwarnings("ignore:nanobind")
def test_uninitialised_tensor_is_refused_everywhere():
    # Tensor.__new__(Tensor) runs no constructor; it used to be read as a
    # tensor with garbage fields (and imported through its own exchange API,
    # recursing until the stack overflowed).
    for _ in range(50):
        for use in uninitialised_tensor_uses():
            with pytest.raises(TypeError):
                use()
