"""Malformed, future and unusual DLTensors from _testing.make_capsule.

Every case, accepted or refused, must run the producer's deleter exactly
once: a refusal that leaks or double-frees is as bad as a crash.
"""

import gc

import numpy as np
import pytest

import dlbridge
from dlbridge._core import _testing
from conftest import check_error

E = dlbridge
REFUSED = [
    # (id, make_capsule keywords, error class, code, words the message must contain)
    ("future-major", dict(version=(2, 0)), E.VersionError, "unsupported_version", ["2.0", "Upgrade"]),
    ("major-zero", dict(version=(0, 9)), E.VersionError, "unsupported_version", ["0.9"]),
    ("unknown-flag", dict(flags=1 << 3), E.InvalidTensorError, "invalid_tensor", ["0x8"]),
    ("unknown-high-flag", dict(flags=1 << 63), E.InvalidTensorError, "invalid_tensor", ["0x8000000000000000"]),
    ("future-flag", dict(flags=1 << 3, version=(1, 9)), E.VersionError, "unsupported_version", ["0x8"]),
    ("ndim-negative", dict(ndim=-1), E.InvalidTensorError, "invalid_tensor", ["ndim = -1"]),
    ("ndim-65", dict(ndim=65, shape=None), E.InvalidTensorError, "invalid_tensor", ["ndim = 65"]),
    ("null-shape", dict(shape=None, ndim=2), E.InvalidTensorError, "invalid_tensor", ["shape is NULL"]),
    ("negative-dim", dict(shape=[2, -3]), E.InvalidTensorError, "invalid_tensor", ["shape[1] = -3"]),
    ("count-overflow", dict(shape=[2**62, 4]), E.InvalidTensorError, "invalid_tensor", ["overflows"]),
    ("bytes-overflow", dict(shape=[2**61, 2], dtype=(2, 64, 1)), E.InvalidTensorError, "invalid_tensor",
     ["overflows"]),
    ("null-data", dict(null_data=True), E.InvalidTensorError, "invalid_tensor", ["data is NULL", "6 elements"]),
    ("fp4-bits-8", dict(dtype=(17, 8, 1)), E.InvalidTensorError, "invalid_tensor", ["bits=4"]),
    ("fp6-bits-8", dict(dtype=(16, 8, 1)), E.InvalidTensorError, "invalid_tensor", ["bits=6"]),
    ("bool-bits-1", dict(dtype=(6, 1, 1)), E.InvalidTensorError, "invalid_tensor", ["bits=8"]),
    ("zero-lanes", dict(dtype=(2, 32, 0)), E.InvalidTensorError, "invalid_tensor", ["lanes=0"]),
    ("dtype-code-99", dict(dtype=(99, 8, 1)), E.UnsupportedDTypeError, "unsupported_dtype", ["code 99"]),
    ("dtype-code-18", dict(dtype=(18, 8, 1)), E.UnsupportedDTypeError, "unsupported_dtype", ["code 18"]),
    ("device-99", dict(device=(99, 0)), E.UnsupportedDeviceError, "unsupported_device_type",
     ["DLDeviceType: 99"]),
    ("device-5-unused", dict(device=(5, 0)), E.UnsupportedDeviceError, "unsupported_device_type",
     ["DLDeviceType: 5"]),
    ("device-id-negative", dict(device=(1, -1)), E.InvalidTensorError, "invalid_tensor", ["device_id = -1"]),
    ("huge-stride", dict(shape=[2, 3], strides=[2**62, 1]), E.InvalidTensorError, "invalid_tensor",
     ["strides"]),
    ("huge-negative-stride", dict(shape=[3], strides=[-(2**62)]), E.InvalidTensorError, "invalid_tensor",
     ["strides"]),
    ("offset-beyond-int64", dict(byte_offset=2**63), E.InvalidTensorError, "invalid_tensor",
     ["byte_offset"]),
]


def both_capsule_kinds(cases):
    """Each case as a versioned and a legacy capsule, except where it is about
    the version or flags, which a legacy capsule does not have."""
    out = []
    for case in cases:
        kinds = [True] if {"version", "flags"} & set(case[1]) else [True, False]
        out += [pytest.param(case, v, id=f"{case[0]}-{'versioned' if v else 'legacy'}") for v in kinds]
    return out


@pytest.mark.parametrize("case, versioned", both_capsule_kinds(REFUSED))
def test_refusals_name_the_problem_and_free_the_tensor_once(case, versioned, deleters):
    _, kwargs, cls, code, words = case
    capsule = _testing.make_capsule(versioned=versioned, **kwargs)
    with pytest.raises(cls) as info:
        dlbridge.from_dlpack(capsule)
    message = check_error(info, cls, code)
    for word in words:
        assert word in message
    assert deleters.calls == 1  # run by the refusal itself, before the capsule dies
    del capsule, info
    assert deleters.settled() == 1


def test_future_major_version_reads_nothing_but_the_version(deleters):
    # ndim=-1 and NULL data would be refused if read; a 2.x struct may have
    # any layout, so the version check must come first and alone.
    capsule = _testing.make_capsule(version=(2, 0), ndim=-1, null_data=True, dtype=(99, 1, 1))
    info = dlbridge.inspect_capsule(capsule)
    assert info["version"] == (2, 0) and info["flags"] is None and "shape" not in info
    with pytest.raises(dlbridge.VersionError):
        dlbridge.from_dlpack(capsule)
    del capsule
    assert deleters.settled() == 1


ACCEPTED = [
    ("newer-minor", dict(version=(1, 9)), (2, 3)),
    ("older-minor", dict(version=(1, 0)), (2, 3)),
    ("zero-d-null-shape", dict(shape=None, ndim=0), ()),
    ("size-0-null-data", dict(shape=[0, 3], null_data=True), (0, 3)),
    ("size-0-null-data-offset", dict(shape=[5, 0], null_data=True, byte_offset=64), (5, 0)),
    ("null-strides", dict(strides=None), (2, 3)),
    ("zero-strides", dict(shape=[4, 3], strides=[0, 1]), (4, 3)),
    ("size-1-odd-stride", dict(shape=[1, 3], strides=[12345, 1]), (1, 3)),
    ("negative-stride", dict(shape=[3], strides=[-1], byte_offset=8), (3,)),
    ("byte-offset", dict(byte_offset=12), (2, 3)),
    ("unaligned-offset", dict(byte_offset=1, dtype=(1, 8, 1)), (2, 3)),
    ("read-only", dict(flags=1), (2, 3)),
    ("padded-fp4", dict(flags=4, dtype=(17, 4, 1)), (2, 3)),
    ("packed-fp4-lanes-2", dict(dtype=(17, 4, 2)), (2, 3)),
    ("all-flags", dict(flags=7, dtype=(17, 4, 1)), (2, 3)),
    ("cuda-device-view", dict(device=(2, 0)), (2, 3)),
    ("ndim-64", dict(shape=[1] * 64), (1,) * 64),
]


@pytest.mark.parametrize("case, versioned", both_capsule_kinds(ACCEPTED))
def test_unusual_but_valid_tensors_are_accepted(case, versioned, deleters):
    _, kwargs, shape = case
    capsule = _testing.make_capsule(versioned=versioned, **kwargs)
    described = dlbridge.inspect_capsule(capsule)
    t = dlbridge.from_dlpack(capsule)
    assert t.shape == shape
    if described["data"]:
        assert t.data_ptr == described["data"] + described["byte_offset"]
    # A legacy capsule leaves writability unknown: read-only (docs/boundary.md).
    assert t.readonly == (bool(kwargs.get("flags", 0) & 1) or not versioned)
    assert deleters.calls == 0
    del t
    assert deleters.settled() == 1
    del capsule
    assert deleters.settled() == 1


def test_null_strides_mean_row_major():
    t = dlbridge.from_dlpack(_testing.make_capsule(shape=[2, 3, 4], strides=None))
    assert t.strides == (12, 4, 1)


def test_byte_offset_moves_element_zero():
    base = dlbridge.inspect_capsule(_testing.make_capsule())["data"]
    capsule = _testing.make_capsule(byte_offset=16)
    info = dlbridge.inspect_capsule(capsule)
    t = dlbridge.from_dlpack(capsule)
    assert t.data_ptr == info["data"] + 16
    assert base != 0


def test_is_copied_flag_is_accepted_and_not_kept_on_the_tensor():
    t = dlbridge.from_dlpack(_testing.make_capsule(flags=2))
    assert t.flags == 0


def test_accepted_hostile_values_round_trip_through_numpy():
    # Zero strides broadcast one row: numpy must see the same element 4 times.
    t = dlbridge.from_dlpack(_testing.make_capsule(shape=[4, 3], strides=[0, 1]))
    a = np.from_dlpack(t)
    assert a.strides == (0, 4)
    assert a.shape == (4, 3)


# --- deleter bookkeeping

def test_capsule_never_consumed_is_freed_once_by_gc(deleters):
    capsules = [_testing.make_capsule(versioned=v) for v in (True, False) for _ in range(5)]
    assert deleters.calls == 0
    del capsules
    assert deleters.settled() == 10


def test_capsule_in_a_reference_cycle_is_freed_once(deleters):
    holder = [_testing.make_capsule()]
    holder.append(holder)
    del holder
    assert deleters.settled() == 1


def test_consumed_capsule_is_not_freed_by_its_destructor(deleters):
    capsule = _testing.make_capsule()
    t = dlbridge.from_dlpack(capsule)
    del capsule
    assert deleters.settled() == 0  # the tensor owns it now
    del t
    assert deleters.settled() == 1


def test_failed_second_consumption_does_not_free_again(deleters):
    capsule = _testing.make_capsule(version=(2, 0))
    with pytest.raises(dlbridge.VersionError):
        dlbridge.from_dlpack(capsule)
    with pytest.raises(dlbridge.ConsumedCapsuleError):
        dlbridge.from_dlpack(capsule)
    del capsule
    assert deleters.settled() == 1


def test_many_refusals_do_not_leak(deleters):
    for _ in range(200):
        with pytest.raises(dlbridge.InvalidTensorError):
            dlbridge.from_dlpack(_testing.make_capsule(shape=[-1]))
    gc.collect()
    assert deleters.settled() == 200


def test_every_error_class_has_a_code_and_a_hint_field():
    expected = {
        "UnsupportedDeviceError": "unsupported_device_type", "DeviceUnavailableError": "device_unavailable",
        "UnsupportedDTypeError": "unsupported_dtype", "LayoutError": "unsupported_layout",
        "ReadOnlyError": "read_only", "VersionError": "unsupported_version",
        "CopyRequiredError": "copy_required", "StreamError": "invalid_stream",
        "ConsumedCapsuleError": "capsule_consumed", "InvalidTensorError": "invalid_tensor",
    }
    for name, code in expected.items():
        cls = getattr(dlbridge, name)
        assert issubclass(cls, dlbridge.DLPackError) and issubclass(cls, BufferError)
        assert cls.code == code
        err = cls("message", "do this")
        assert (err.message, err.hint, str(err)) == ("message", "do this", "message do this")
