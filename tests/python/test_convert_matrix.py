"""convert against every installed library, both ways, with default arguments and with each
copy value: every plain conversion works (a library to itself included), no write through a
result reaches memory that must not change, copy=False refuses exactly where a copy would
be needed, and what convert did agrees with its plan (dlbridge.plan_convert): the same
refusal, and a result that shares the source's memory exactly where the plan says zero-copy
(compared by pointer)."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import dlbridge
from dlbridge import libraries
from dlbridge._core import _testing

# Imported in the order that keeps the process alive (paddle before tensorflow).
INSTALLED = [name for name in libraries.LIBRARIES if libraries.installed(name) and libraries.fact(name, "peer")]
for _name in INSTALLED:
    libraries.import_library(_name, order_others=True)
PEERS = {name: libraries.fact(name, "peer")() for name in INSTALLED}


def values(x, target: str) -> np.ndarray:
    return np.asarray(dlbridge.convert(x, "numpy") if target == "dlbridge" else PEERS[target].to_numpy(x))


def plain(name: str):
    """A float32 (3, 4) array made natively by library `name`."""
    return PEERS[name].make(np.arange(12, dtype=np.float32).reshape(3, 4))


@pytest.mark.parametrize("target", INSTALLED)
@pytest.mark.parametrize("source", INSTALLED)
def test_every_plain_conversion_works_with_default_arguments(source, target):
    out = dlbridge.convert(plain(source), target)
    np.testing.assert_array_equal(PEERS[target].to_numpy(out), np.arange(12, dtype=np.float32).reshape(3, 4))


@pytest.mark.parametrize("name", INSTALLED)
def test_a_library_to_itself_is_the_input(name):
    x = plain(name)
    assert dlbridge.convert(x, name) is x
    assert dlbridge.plan_convert(x, name).action == "return_input"


def readonly_numpy():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    a.flags.writeable = False
    return a


# Sources whose memory must not change through the result: read-only NumPy data, and
# the legacy capsules of immutable libraries (their writability is unknown).
PROTECTED = {"numpy read-only": readonly_numpy}
for _name in ("jax", "tensorflow", "mlx"):
    if _name in INSTALLED:
        PROTECTED[_name] = lambda n=_name: plain(n)


def try_write(out, target: str) -> bool:
    """Writes 99 into element 0 the way the target's users would; False where the library refuses writes."""
    if target == "torch":
        out.view(-1)[0] = 99
    elif target == "paddle":
        out.flatten()[0] = 99  # paddle's flatten of a compact tensor is a view
        out[0, 0] = 99
    elif target == "tvm_ffi":
        view = np.from_dlpack(out)
        if view.flags.writeable:
            view.reshape(-1)[0] = 99
        else:  # NumPy before 2.2 imports read-only: write through the pointer, as a C++ user of it would
            ctypes.memmove(view.ctypes.data, np.array([99], view.dtype).tobytes(), view.itemsize)
    elif target == "warp":
        out.numpy().reshape(-1)[0] = 99
    elif target == "numpy":
        if not out.flags.writeable:
            return False
        out.reshape(-1)[0] = 99
    else:
        return False  # jax, tensorflow, mlx, arrow: immutable arrays
    return True


@pytest.mark.parametrize("target", INSTALLED)
@pytest.mark.parametrize("source", list(PROTECTED))
def test_no_write_through_a_result_reaches_memory_that_must_not_change(source, target):
    x = PROTECTED[source]()
    before = values(x, "numpy" if source.startswith("numpy") else source).copy()
    out = dlbridge.convert(x, target)
    try_write(out, target)
    np.testing.assert_array_equal(values(x, "numpy" if source.startswith("numpy") else source), before)


@pytest.mark.parametrize("target", INSTALLED)
@pytest.mark.parametrize("source", INSTALLED)
def test_copy_false_refuses_exactly_where_a_copy_would_be_needed(source, target):
    x = plain(source)
    plan = dlbridge.plan_convert(x, target)
    if plan.zero_copy:
        out = dlbridge.convert(x, target, copy=False)
        np.testing.assert_array_equal(PEERS[target].to_numpy(out), PEERS[source].to_numpy(x))
    else:
        with pytest.raises(dlbridge.DLPackError) as excinfo:
            dlbridge.convert(x, target, copy=False)
        assert excinfo.value.code in ("read_only", "copy_required", "unsupported_layout")
        assert "copy=None" in excinfo.value.hint


def test_warp_arrays_are_writable_memory_so_torch_takes_them_zero_copy():
    if "warp" not in INSTALLED or "torch" not in INSTALLED:
        pytest.skip("warp or torch is not installed")
    wp = libraries.warp.ready()
    arr = wp.array(np.arange(4, dtype=np.float32), device="cpu")
    # Warp's own view of its memory is writable: its arrays are mutable memory.
    assert arr.numpy().flags.writeable
    assert not dlbridge.from_dlpack(arr).readonly
    out = dlbridge.convert(arr, "torch")
    assert out.data_ptr() == arr.ptr
    out[1] = 7.0
    assert arr.numpy()[1] == 7.0
    # A class that only calls itself warp.array is not believed.
    fake = type("array", (), {"__module__": "warp", "__dlpack__": lambda self, **k: arr.__dlpack__(),
                              "__dlpack_device__": lambda self: (1, 0)})()
    assert dlbridge.from_dlpack(fake).readonly


# --- the differential test: what convert did, by pointer, against its plan

def _dlbridge_tensor():
    return dlbridge.from_dlpack(np.arange(12, dtype=np.float32).reshape(3, 4))


class _LegacyOnly:
    """A producer from before DLPack 1.0: __dlpack__ takes no keywords (writability unknown)."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self):
        return dlbridge.from_dlpack(self._a).__dlpack__(max_version=None)

    def __dlpack_device__(self):
        return (1, 0)


def _pinned_label():
    # Host memory labelled kDLCUDAHost (a test capsule): what a pinned buffer looks like.
    return dlbridge.from_dlpack(_testing.make_capsule(shape=[2, 3], device=(3, 0)))


SOURCES = {
    "dlbridge tensor": _dlbridge_tensor,
    "legacy-only": lambda: _LegacyOnly(np.arange(6.0)),
    "read-only": readonly_numpy,
    "negative strides": lambda: np.arange(12.0).reshape(3, 4)[:, ::-1],
    "transposed": lambda: np.arange(12, dtype=np.int32).reshape(3, 4).T,
    "every other": lambda: np.arange(12, dtype=np.int64)[::2],
    "0-d": lambda: np.array(2.5, np.float32),
    "size-0": lambda: np.zeros((0, 3), np.float32),
    "big-endian": lambda: np.arange(4, dtype=">f8"),
    "pinned label": _pinned_label,
}
if "torch" in INSTALLED:
    import torch

    SOURCES["torch bfloat16"] = lambda: torch.arange(6, dtype=torch.bfloat16).reshape(2, 3)
    SOURCES["torch conj"] = lambda: torch.tensor([1 + 2j, 3 - 1j]).conj()
for _name in INSTALLED:
    SOURCES[_name] = lambda n=_name: plain(n)

TARGETS = [*INSTALLED, "dlbridge"]


def _outcome(x, target, copy):
    try:
        return "ok", dlbridge.convert(x, target, copy=copy)
    except dlbridge.DLPackError as exc:
        return exc.code, None


def _source_pointer(source: str, x) -> int:
    """Where the source's own memory starts (element 0), read without dlbridge's import."""
    if isinstance(x, dlbridge.Tensor):
        return x.data_ptr
    if isinstance(x, _LegacyOnly):
        return x._a.__array_interface__["data"][0]
    if isinstance(x, np.ndarray):
        return x.__array_interface__["data"][0]
    if source.startswith("torch"):
        return x.data_ptr()
    return PEERS[source].data_ptr(x)


def _result_pointer(out, target: str) -> int:
    return out.data_ptr if target == "dlbridge" else PEERS[target].data_ptr(out)


def _expected_values(x):
    if isinstance(x, np.ndarray):
        return x
    t = dlbridge.from_dlpack(x)
    if t.dtype.name == "bfloat16":
        return None
    if t.device.type != dlbridge.DeviceType.kDLCPU:
        return np.frombuffer(memoryview(t.copy(device="cpu")), dtype=t.dtype.name).reshape(t.shape)
    return np.from_dlpack(t.copy())


def _is_writable(out, target) -> bool | None:
    if target == "numpy":
        return bool(out.flags.writeable)
    if target == "dlbridge":
        return not out.readonly
    return None


def _has_bytes(x) -> bool:
    # Without elements there is no memory to share: pointers say nothing.
    shape = x.shape if hasattr(x, "shape") else dlbridge.from_dlpack(x).shape
    return int(np.prod(tuple(shape))) > 0


@pytest.mark.parametrize("copy", [None, True, False], ids=["copy=None", "copy=True", "copy=False"])
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("source", list(SOURCES))
def test_the_plan_says_what_convert_does_by_pointer(source, target, copy):
    x = SOURCES[source]()
    try:
        plan = dlbridge.plan_convert(x, target, copy=copy)
        plan_code = "ok"
    except dlbridge.DLPackError as exc:
        plan, plan_code = None, exc.code
    source_pointer = _source_pointer(source, x)
    code, out = _outcome(x, target, copy)
    assert code == plan_code, (code, plan_code)
    if plan is None:
        return
    if copy is True:
        assert plan.copy != "none"
    if copy is False:
        assert plan.zero_copy
    # Zero-copy exactly where the result shares the source's memory.
    if plan.action == "return_input":
        assert out is x
    elif _has_bytes(x):
        shares = _result_pointer(out, target) == source_pointer
        assert shares == plan.zero_copy, (plan, hex(source_pointer), hex(_result_pointer(out, target)))
    # The values are the source's.
    if target in ("dlbridge", "numpy") and plan.action != "hand_over_extension":
        got = np.asarray(dlbridge.convert(out, "numpy") if target == "dlbridge" else out)
        expected = _expected_values(x)
        if expected is not None:
            np.testing.assert_array_equal(got, expected)
    # Writability: what must not change stays unwritable unless it is a private copy.
    writable = _is_writable(out, target)
    if writable is not None and plan.zero_copy and source in ("read-only", "legacy-only", "jax", "tensorflow", "mlx"):
        assert writable is False
    if writable is not None and plan.copy == "dlbridge":
        assert writable is True
