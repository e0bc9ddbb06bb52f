"""Size-1 dimensions may carry any stride. The views of a dlbridge tensor
(memoryview, __array_interface__, copy_unpacked) used to multiply such a
stride by the item size unchecked: undefined behaviour, and a wrapped value
in release builds. A byte stride that does not fit is reported as 0."""

import numpy as np
import pytest

import dlbridge
from dlbridge._core import _testing

VALUES = np.arange(6, dtype=np.int32).reshape(2, 1, 3)


def tensor_with_size1_stride(stride):
    capsule = _testing.make_capsule(shape=[2, 1, 3], strides=[3, stride, 1], dtype=(0, 32, 1))
    t = dlbridge.from_dlpack(capsule)
    np.asarray(memoryview(t)).reshape(-1)[:] = np.arange(6, dtype=np.int32)
    return t


@pytest.mark.parametrize("stride", [2**62, 2**63 - 1, -(2**63), -(2**62) - 7])
def test_size1_dim_with_overflowing_byte_stride_is_reported_as_zero(stride):
    t = tensor_with_size1_stride(stride)
    assert t.strides[1] == stride
    assert memoryview(t).strides == (12, 0, 4)
    assert t.__array_interface__["strides"] == (12, 0, 4)
    np.testing.assert_array_equal(np.asarray(t), VALUES)
    np.testing.assert_array_equal(np.asarray(t.copy_unpacked()), VALUES)
    np.testing.assert_array_equal(np.asarray(t.copy()), VALUES)


def test_size1_dim_with_a_stride_that_fits_keeps_it():
    t = tensor_with_size1_stride(2**40)
    assert memoryview(t).strides == (12, 2**42, 4)
    assert t.__array_interface__["strides"] == (12, 2**42, 4)
    np.testing.assert_array_equal(np.asarray(t), VALUES)
