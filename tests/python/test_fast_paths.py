"""The shortcuts of issue 11 (raw from_dlpack/convert entry points, the plain
host export of __dlpack__, convert's route table) keep every rule of the
general path: each test here makes a shortcut see a request it must not
answer itself."""

import dataclasses

import numpy as np
import pytest
import torch
from conftest import check_error

import dlbridge
from dlbridge.convert import TARGETS


def readonly(a):
    a = np.array(a)
    a.flags.writeable = False
    return a


# --- convert's route table

def test_a_replaced_target_entry_is_read_again(monkeypatch):
    a = readonly(np.arange(4.0))
    assert dlbridge.convert(a, "torch").data_ptr() != a.ctypes.data  # learnt: torch ignores READ_ONLY
    monkeypatch.setitem(TARGETS, "torch", dataclasses.replace(TARGETS["torch"], read_only="honoured"))
    out = dlbridge.convert(a, "torch")
    assert out.tolist() == [0.0, 1.0, 2.0, 3.0] and out.data_ptr() == a.ctypes.data


def test_a_replaced_import_function_is_the_one_called(monkeypatch):
    a = np.arange(3.0)
    assert isinstance(dlbridge.convert(a, "torch"), torch.Tensor)  # route learnt
    monkeypatch.setattr(torch, "from_dlpack", lambda x: ("patched", x))
    tag, handed = dlbridge.convert(a, "torch")
    assert tag == "patched" and isinstance(handed, dlbridge.Tensor)


def test_the_libraries_own_array_is_returned_as_it_is(monkeypatch):
    calls = []
    original = np.from_dlpack
    monkeypatch.setattr(np, "from_dlpack", lambda x: calls.append(type(x)) or original(x))
    a = np.arange(3.0)
    assert dlbridge.convert(a, "numpy") is a
    dlbridge.convert(torch.arange(3.0), "numpy")
    assert calls == [dlbridge.Tensor]
    # Asked for a device or a copy, it is not the input any more.
    assert dlbridge.convert(a, "numpy", copy=True) is not a
    assert dlbridge.convert(a, "numpy", device="cpu") is not a


def test_numpys_own_bfloat16_reaches_numpy_as_it_is():
    # numpy.from_dlpack refuses NumPy's own bfloat16 arrays; convert returns the array.
    import ml_dtypes

    a = np.arange(4, dtype=np.float32).astype(ml_dtypes.bfloat16)
    with pytest.raises(BufferError):
        np.from_dlpack(a)
    assert dlbridge.convert(a, "numpy") is a
    out = dlbridge.convert(a, "numpy", copy=True)
    assert out.dtype == ml_dtypes.bfloat16 and out.ctypes.data != a.ctypes.data


def test_torch_tensors_with_lazy_bits_keep_their_meaning():
    # torch's own export drops the negative bit: torch -> torch returns the
    # tensor itself, and asked for a copy, dlbridge's import resolves the bit.
    x = torch._neg_view(torch.tensor([1.0, -2.0]))
    assert torch.from_dlpack(x).tolist() == [1.0, -2.0]  # the direct path's wrong answer
    assert dlbridge.convert(x, "torch") is x
    assert dlbridge.convert(x, "torch", copy=True).tolist() == [-1.0, 2.0]
    c = torch.tensor([1 + 2j]).conj()
    assert dlbridge.convert(c, "torch", copy=True).tolist() == [1 - 2j]
    assert dlbridge.convert(c, "numpy").tolist() == [1 - 2j]


def test_only_the_strides_outside_the_rule_make_the_copy():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    same = dlbridge.convert(a[:, ::2], "torch")  # positive strides: zero-copy
    assert same.data_ptr() == a.ctypes.data
    flipped = dlbridge.convert(a[::-1], "torch")  # negative: one compact copy
    assert flipped.data_ptr() != a.ctypes.data and flipped.is_contiguous()
    np.testing.assert_array_equal(flipped.numpy(), a[::-1])


def test_a_non_string_target_and_keywords_keep_every_rule():
    a = readonly(np.arange(3.0))
    assert dlbridge.convert(a, torch.from_dlpack).data_ptr() != a.ctypes.data
    with pytest.raises(dlbridge.ReadOnlyError):
        dlbridge.convert(a, torch.from_dlpack, copy=False)
    with pytest.raises(dlbridge.LayoutError):
        dlbridge.convert(np.arange(3.0)[::-1], "torch", copy=False)


@pytest.mark.parametrize("call", [
    lambda: dlbridge.convert(np.ones(2)),
    lambda: dlbridge.convert(np.ones(2), "numpy", "cpu"),
    lambda: dlbridge.convert(np.ones(2), "numpy", devic=None),
    lambda: dlbridge.from_dlpack(),
    lambda: dlbridge.from_dlpack(np.ones(2), None),
    lambda: dlbridge.from_dlpack(np.ones(2), cpy=True),
])
def test_bad_calls_of_the_raw_entry_points_are_type_errors(call):
    with pytest.raises(TypeError):
        call()


def test_keywords_are_matched_by_value_too():
    name = "".join(["co", "py"])  # a str that is not the interned "copy"
    a = np.arange(3.0)
    t = dlbridge.from_dlpack(a, **{name: True})
    assert t.data_ptr != a.ctypes.data
    with pytest.raises(dlbridge.LayoutError):
        dlbridge.convert(a[::-1], "torch", **{name: False})


def test_keywords_from_a_fresh_dict_each_call_are_matched_by_pointer():
    # torch.from_dlpack calls __dlpack__(**kwargs): a new kwnames tuple per call,
    # with the interned names. Neither the pointer match nor the cached layout of
    # an earlier call may put a value in the wrong slot.
    a = np.arange(3.0)
    other = "".join(["dev", "ice"])  # equal to "device", not the interned object
    for _ in range(2):
        assert dlbridge.from_dlpack(a, **{"copy": True}).data_ptr != a.ctypes.data
        assert dlbridge.from_dlpack(a, **{"device": None, "copy": False}).data_ptr == a.ctypes.data
        assert dlbridge.from_dlpack(a, **{"copy": True, other: None}).data_ptr != a.ctypes.data
        assert dlbridge.from_dlpack(a, **{"copy": False}).data_ptr == a.ctypes.data
    t = dlbridge.from_dlpack(a)
    info = dlbridge.inspect_capsule(t.__dlpack__(**{"max_version": (1, 0), "copy": True}))
    assert info["versioned"] and info["flags"] == dlbridge._core.FLAG_IS_COPIED
    assert not dlbridge.inspect_capsule(t.__dlpack__(**{"max_version": (0, 9)}))["versioned"]


# --- Tensor.__dlpack__: the plain host export

def test_the_plain_export_keeps_read_only_and_the_version():
    t = dlbridge.from_dlpack(readonly(np.arange(3.0)))
    info = dlbridge.inspect_capsule(t.__dlpack__(max_version=(1, 0)))
    assert info["versioned"] and info["version"] == (1, 3)
    assert info["flags"] == dlbridge._core.FLAG_READ_ONLY
    with pytest.raises(dlbridge.ReadOnlyError):
        t.__dlpack__(max_version=(0, 9))  # legacy: the general path refuses


@pytest.mark.parametrize("max_version,error", [
    ((True, 0), TypeError), ((1, -1), ValueError), ((2**40, 0), ValueError),
    ((2**70, 0), ValueError), ([1, 0], TypeError), ((1,), TypeError),
])
def test_odd_max_versions_still_get_the_general_checks(max_version, error):
    t = dlbridge.from_dlpack(np.arange(3.0))
    with pytest.raises(error):
        t.__dlpack__(max_version=max_version)


def test_copy_true_is_not_the_plain_export():
    t = dlbridge.from_dlpack(np.arange(3.0))
    info = dlbridge.inspect_capsule(t.__dlpack__(max_version=(1, 3), copy=True))
    assert info["flags"] & dlbridge._core.FLAG_IS_COPIED
    assert info["data"] != t.data_ptr


def test_data_dlbridge_cannot_import_as_it_is_gets_the_general_repairs():
    # NumPy data in the other byte order: the import refuses it, and the
    # general route byte-swaps it into a copy.
    a = np.arange(4, dtype=np.float32).astype(np.float32().dtype.newbyteorder("S"))
    with pytest.raises(BufferError):
        dlbridge.from_dlpack(a)
    assert dlbridge.convert(a, "torch").tolist() == [0.0, 1.0, 2.0, 3.0]
    assert dlbridge.convert(a, "numpy").tolist() == [0.0, 1.0, 2.0, 3.0]
