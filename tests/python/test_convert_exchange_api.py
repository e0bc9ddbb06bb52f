"""convert builds a target's array through the target's DLPack C exchange API
(Target.exchange_api; src/python/hand_over.cpp) instead of calling its
from_dlpack. The table must give what from_dlpack gives, must free a
handed-over tensor exactly once however the library fails, and must not be
used once the library's from_dlpack has been replaced."""

import dataclasses
import gc
import sys
import types

import ml_dtypes
import numpy as np
import pytest
import torch

import dlbridge
from dlbridge._core import _testing
from dlbridge.convert import TARGETS
from dlbridge.libraries._spec import Target


# --- against torch, whose table is the one Target.exchange_api names

SOURCES = {
    "float32 8x8": lambda: np.arange(64, dtype=np.float32).reshape(8, 8),
    "0-d": lambda: np.array(3.5),
    "size 0": lambda: np.zeros((0, 3), np.int16),
    "bool": lambda: np.array([True, False, True]),
    "complex128": lambda: np.arange(6).astype(np.complex128) * 1j,
    "float16 transposed": lambda: np.arange(12, dtype=np.float16).reshape(3, 4).T,
    "int64 every other row": lambda: np.arange(20, dtype=np.int64).reshape(10, 2)[::2],
    "uint8 zero stride": lambda: np.lib.stride_tricks.as_strided(np.arange(3, dtype=np.uint8), (4, 3), (0, 1)),
    "negative strides": lambda: np.arange(12, dtype=np.float64).reshape(3, 4)[::-1, ::-2],
    "torch bfloat16": lambda: torch.arange(6, dtype=torch.bfloat16).reshape(2, 3),
    "torch float8": lambda: torch.zeros(4, dtype=torch.float8_e4m3fn),
    "torch sliced": lambda: torch.arange(30.0).reshape(5, 6)[1:, ::3],
}


def by_from_dlpack(x):
    """What torch.from_dlpack makes of what convert hands it (the route before the table);
    a torch tensor is torch's own array, which convert returns as it is."""
    if isinstance(x, torch.Tensor):
        return x
    tensor = dlbridge.from_dlpack(x)
    if any(s < 0 for s in tensor.strides):
        tensor = tensor.copy()
    return torch.from_dlpack(tensor)


@pytest.mark.parametrize("name", list(SOURCES))
def test_torchs_table_gives_what_torch_from_dlpack_gives(name):
    x = SOURCES[name]()
    out, expected = dlbridge.convert(x, "torch"), by_from_dlpack(x)
    assert type(out) is torch.Tensor
    assert (out.dtype, out.shape, out.stride(), out.storage_offset()) == \
        (expected.dtype, expected.shape, expected.stride(), expected.storage_offset())
    assert torch.equal(out.view(torch.uint8) if out.dtype == torch.float8_e4m3fn and out.dim() else out,
                       expected.view(torch.uint8) if expected.dtype == torch.float8_e4m3fn and expected.dim() else expected)
    assert not out.requires_grad and out.device == torch.device("cpu")


def test_torchs_table_aliases_the_source_and_keeps_it_alive():
    a = np.arange(6, dtype=np.float32)
    before = sys.getrefcount(a)
    out = dlbridge.convert(a, "torch")
    assert out.data_ptr() == a.ctypes.data
    out[0] = 42.0
    assert a[0] == 42.0
    assert sys.getrefcount(a) > before  # the export holds the source
    del out
    gc.collect()
    assert sys.getrefcount(a) == before


def test_negative_strides_reach_torch_as_one_compact_copy():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    neg = a[:, ::-1]
    out = dlbridge.convert(neg, "torch")
    assert out.is_contiguous() and out.tolist() == neg.tolist()
    assert out.data_ptr() != a.ctypes.data


def test_a_replaced_torch_from_dlpack_is_called_instead_of_the_table(monkeypatch):
    a = np.arange(3.0)
    dlbridge.convert(a, "torch")  # the route and its table are learnt
    calls = []
    original = torch.from_dlpack
    monkeypatch.setattr(torch, "from_dlpack", lambda x: calls.append(type(x)) or original(x))
    assert dlbridge.convert(a, "torch").tolist() == [0.0, 1.0, 2.0]
    assert calls == [dlbridge.Tensor]


def test_read_only_data_reaches_the_table_as_one_private_copy():
    a = np.arange(4.0)
    a.flags.writeable = False
    calls = []
    for copy in (None, True):
        out = dlbridge.convert(a, "torch", copy=copy)
        assert out.data_ptr() != a.ctypes.data and out.tolist() == [0.0, 1.0, 2.0, 3.0]
        calls.append(dlbridge.plan_convert(a, "torch", copy=copy).via)
    assert calls == ["exchange_api", "exchange_api"]


# --- against test tables that fail in each way a library may

@pytest.fixture
def fakelib(monkeypatch):
    """A library 'fakelib' whose array type publishes a test table; its
    from_dlpack tags what it returns, so each test sees which way was taken."""
    module = types.ModuleType("fakelib")
    module.calls = []

    def from_dlpack(x):
        module.calls.append(type(x))
        return ("from_dlpack", dlbridge.from_dlpack(x))

    module.from_dlpack = from_dlpack

    def install(mode):
        module.FakeArray = type("FakeArray", (), {"__dlpack_c_exchange_api__": _testing.builder_table(mode)})
        monkeypatch.setitem(sys.modules, "fakelib", module)
        monkeypatch.setitem(TARGETS, "fakelib", Target(
            "fakelib", "from_dlpack", read_only="ignored", strides="nonnegative",
            devices=frozenset({1}), dtypes=None, exchange_api="FakeArray"))
        return module

    yield install
    # The route table may hold the entry; a fresh name next time re-learns it.
    TARGETS.pop("fakelib", None)


def test_a_table_builds_the_array_and_from_dlpack_is_not_called(fakelib):
    lib = fakelib("wrap")
    a = np.arange(5, dtype=np.int32)
    calls = _testing.builder_calls()
    out = dlbridge.convert(a, "fakelib")
    assert isinstance(out, dlbridge.Tensor) and out.data_ptr == a.ctypes.data
    assert _testing.builder_calls() == calls + 1 and lib.calls == []


def test_a_negative_stride_copy_is_what_the_table_gets(fakelib):
    fakelib("wrap")
    a = np.arange(6, dtype=np.int32)[::-1]
    out = dlbridge.convert(a, "fakelib")
    assert out.strides == (1,) and np.asarray(out).tolist() == [5, 4, 3, 2, 1, 0]


@pytest.mark.parametrize("mode", ["fail_after_deleting", "fail_keeping", "fail_silently"])
def test_a_failing_table_frees_the_export_once_and_from_dlpack_decides(fakelib, mode):
    lib = fakelib(mode)
    a = np.arange(5, dtype=np.int32)
    before = sys.getrefcount(a)
    calls = _testing.builder_calls()
    tag, tensor = dlbridge.convert(a, "fakelib")
    assert tag == "from_dlpack" and lib.calls == [dlbridge.Tensor]
    assert _testing.builder_calls() == calls + 1
    del tensor
    gc.collect()
    # Freed once: a leaked export would hold a; a second free crashes under ASan.
    assert sys.getrefcount(a) == before


def test_a_type_without_a_usable_table_is_handed_to_from_dlpack(fakelib, monkeypatch):
    lib = fakelib("wrap")
    lib.FakeArray = type("FakeArray", (), {})  # no table on the type
    monkeypatch.setitem(TARGETS, "fakelib", dataclasses.replace(TARGETS["fakelib"], note="relearn"))
    tag, _ = dlbridge.convert(np.arange(3), "fakelib")
    assert tag == "from_dlpack"


def test_an_exchange_api_path_the_library_lacks_means_from_dlpack(fakelib, monkeypatch):
    lib = fakelib("wrap")
    monkeypatch.setitem(TARGETS, "fakelib", dataclasses.replace(TARGETS["fakelib"], exchange_api="Missing.Type"))
    tag, _ = dlbridge.convert(np.arange(3), "fakelib")
    assert tag == "from_dlpack" and lib.calls == [dlbridge.Tensor]


def test_a_table_is_not_used_for_a_dtype_the_target_lacks(fakelib, monkeypatch):
    lib = fakelib("wrap")
    monkeypatch.setitem(TARGETS, "fakelib", dataclasses.replace(
        TARGETS["fakelib"], dtypes=frozenset({"float32"})))
    with pytest.raises(dlbridge.UnsupportedDTypeError):
        dlbridge.convert(np.arange(3, dtype=np.int8), "fakelib")
    assert lib.calls == []
    out = dlbridge.convert(np.arange(3, dtype=np.float32), "fakelib")
    assert isinstance(out, dlbridge.Tensor)


def test_bfloat16_from_ml_dtypes_reaches_torch_through_the_general_route():
    a = np.arange(4, dtype=np.float32).astype(ml_dtypes.bfloat16)
    out = dlbridge.convert(a, "torch")
    assert out.dtype == torch.bfloat16 and out.tolist() == [0.0, 1.0, 2.0, 3.0]
