"""Every error code of docs/errors.md, provoked through the public API: the class and
.code are right, and the message ends in a hint that names a concrete fix
(a keyword to pass, a call to make, a package to install), not just a reason.

Capsules no correct producer makes come from dlbridge._core._testing; they
enter through the public dlbridge.from_dlpack like any other capsule.
"""

import re

import numpy as np
import pytest
import torch

import dlbridge
from dlbridge import catalogue
from dlbridge._core import _testing

from conftest import check_error


class _Batch(list):
    """A list subclass: no structure convert can rebuild."""


class _Refusing:
    """A producer whose __dlpack__ refuses with an exception of its own."""

    def __dlpack__(self, **kwargs):
        raise RuntimeError("no export today")

    def __dlpack_device__(self):
        return (1, 0)


def _readonly(n=4):
    a = np.arange(n, dtype=np.float64)
    a.flags.writeable = False
    return a


def _consume_twice():
    capsule = np.arange(3.0).__dlpack__(max_version=(1, 3))
    dlbridge.from_dlpack(capsule)
    dlbridge.from_dlpack(capsule)


# (id, trigger, class, code, regex the hint must match: the fix it names)
CASES = [
    ("unsupported_device_type/export", lambda: dlbridge.to_dlpack(np.arange(3.0), dl_device=(7, 0)),
     dlbridge.UnsupportedDeviceError, "unsupported_device_type", r"dl_device=None.*|kDLCPU"),
    ("unsupported_device_type/from_dlpack", lambda: dlbridge.from_dlpack(np.arange(3.0), device="vulkan"),
     dlbridge.UnsupportedDeviceError, "unsupported_device_type", r"dl_device=None"),
    # No machine has 1000 CUDA devices: unavailable with or without a GPU.
    ("device_unavailable", lambda: dlbridge.to_dlpack(np.arange(3.0), dl_device=(2, 999)),
     dlbridge.DeviceUnavailableError, "device_unavailable", r"dl_device=\(1, 0\)"),
    ("unsupported_dtype/buffer", lambda: memoryview(dlbridge.from_dlpack(torch.zeros(2, dtype=torch.bfloat16))),
     dlbridge.UnsupportedDTypeError, "unsupported_dtype", r"from_dlpack"),
    ("unsupported_dtype/convert", lambda: dlbridge.convert(np.zeros(2, np.uint16), "torch"),
     dlbridge.UnsupportedDTypeError, "unsupported_dtype", r"[Cc]ast"),
    ("unsupported_layout", lambda: dlbridge.convert(np.arange(6.0)[::-1], "torch", copy=False),
     dlbridge.LayoutError, "unsupported_layout", r"copy=None"),
    ("read_only/legacy", lambda: dlbridge.to_dlpack(_readonly()),
     dlbridge.ReadOnlyError, "read_only", r"copy=True"),
    ("read_only/convert", lambda: dlbridge.convert(_readonly(), "torch", copy=False),
     dlbridge.ReadOnlyError, "read_only", r"copy=None"),
    ("unsupported_version/major", lambda: dlbridge.from_dlpack(_testing.make_capsule(version=(2, 0))),
     dlbridge.VersionError, "unsupported_version", r"[Uu]pgrade dlbridge|max_version=\(1, 3\)"),
    # A newer minor is readable unless it carries something 1.3 cannot read.
    ("unsupported_version/minor-flags",
     lambda: dlbridge.from_dlpack(_testing.make_capsule(version=(1, 9), strides=[3, 1], flags=1 << 10)),
     dlbridge.VersionError, "unsupported_version", r"max_version=\(1, 3\)"),
    ("copy_required/device", lambda: dlbridge.from_dlpack(np.arange(3.0), device="cuda:0", copy=False),
     dlbridge.CopyRequiredError, "copy_required", r"copy=None"),
    ("copy_required/convert", lambda: dlbridge.convert(_readonly(), "mlx", copy=False),
     dlbridge.CopyRequiredError, "copy_required", r"copy=None"),
    ("invalid_stream", lambda: dlbridge.to_dlpack(np.arange(3.0), stream=1),
     dlbridge.StreamError, "invalid_stream", r"stream=None"),
    ("capsule_consumed", _consume_twice,
     dlbridge.ConsumedCapsuleError, "capsule_consumed", r"__dlpack__\(\)"),
    ("invalid_tensor/null-data", lambda: dlbridge.from_dlpack(_testing.make_capsule(null_data=True)),
     dlbridge.InvalidTensorError, "invalid_tensor", r"report it"),
    ("invalid_tensor/fp6-bits", lambda: dlbridge.from_dlpack(_testing.make_capsule(dtype=(15, 8, 1))),
     dlbridge.InvalidTensorError, "invalid_tensor", r"report it"),
    ("producer_refused/refusing",
     lambda: dlbridge.from_dlpack(_Refusing()),
     dlbridge.ProducerError, "producer_refused", r"as it asks"),
    ("not_an_array/leaf", lambda: dlbridge.convert({"x": np.ones(2), "epoch": 7}, "numpy"),
     dlbridge.NotAnArrayError, "not_an_array", r"keep_non_arrays=True"),
    ("not_an_array/rebuild", lambda: dlbridge.plan_convert([_Batch([np.ones(2)])], "numpy"),
     dlbridge.NotAnArrayError, "not_an_array", r"dict, list or tuple"),
]


def test_every_api_code_has_a_case():
    assert {code for _, _, _, code, _ in CASES} == set(dlbridge.errors.ERROR_CLASSES)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_code_class_and_a_named_fix(case):
    _, trigger, cls, code, fix = case
    with pytest.raises(dlbridge.DLPackError) as info:
        trigger()
    message = check_error(info, cls, code)
    assert re.search(fix, info.value.hint), f"hint names no fix ({fix!r}): {info.value.hint!r}"
    assert message.endswith(info.value.hint)
    pattern = catalogue.by_code()[code].pattern
    assert re.search(pattern, message), f"docs/errors.md pattern {pattern!r} misses {message!r}"


def test_unsupported_device_on_import_states_the_contract_sentence():
    """docs/errors.md: every UnsupportedDeviceError message contains the contract
    sentence, the supported types and the fix; docs/errors.md's pattern must
    match it. A capsule from a producer on device type 99 is refused with
    another sentence (tensor_view.hpp read_header) and no dl_device fix."""
    capsule = _testing.make_capsule(device=(99, 0), strides=[3, 1])
    with pytest.raises(dlbridge.UnsupportedDeviceError) as info:
        dlbridge.from_dlpack(capsule)
    message = check_error(info, dlbridge.UnsupportedDeviceError, "unsupported_device_type")
    assert re.search(catalogue.by_code()["unsupported_device_type"].pattern, message), message
