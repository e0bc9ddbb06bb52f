"""Which dlbridge errors are also ValueErrors or TypeErrors: those caused by an
argument value (or type) rather than by a tensor that cannot be expressed. Every
class stays a DLPackError (so a BufferError) with its code."""

import numpy as np
import pytest

import dlbridge

ALSO_VALUE_ERRORS = {"invalid_stream", "copy_required"}
ALSO_TYPE_ERRORS = {"not_an_array"}


@pytest.mark.parametrize("code, cls", sorted(dlbridge.errors.ERROR_CLASSES.items()))
def test_error_class_bases_follow_the_documented_rule(code, cls):
    assert issubclass(cls, dlbridge.DLPackError)
    assert issubclass(cls, BufferError)
    assert issubclass(cls, ValueError) is (code in ALSO_VALUE_ERRORS)
    assert issubclass(cls, TypeError) is (code in ALSO_TYPE_ERRORS)


def test_invalid_stream_is_caught_as_value_error_and_as_buffer_error():
    t = dlbridge.empty(2)
    with pytest.raises(ValueError) as info:
        t.__dlpack__(stream=5)
    assert type(info.value) is dlbridge.StreamError
    assert info.value.code == "invalid_stream"
    with pytest.raises(BufferError):
        t.__dlpack__(stream=5)


def test_copy_required_by_a_device_move_is_caught_as_value_error():
    # The array API standard: device= needing a copy that copy=False forbids
    # is a ValueError.
    with pytest.raises(ValueError) as info:
        dlbridge.from_dlpack(np.ones(2), copy=False, device="cuda_host")
    assert type(info.value) is dlbridge.CopyRequiredError
    assert info.value.code == "copy_required"
