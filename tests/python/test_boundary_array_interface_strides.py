"""A size-1 dimension may carry any byte stride, also one that is not a
multiple of the item size: NumPy accepts such an __array_interface__, and so
must dlbridge (it raised LayoutError). The same holds for every dimension of
an array without elements."""

import numpy as np
import pytest

import dlbridge

BASE = np.arange(6, dtype=np.float32)


class Interface:
    def __init__(self, shape, strides, base=BASE):
        self.base = base
        self.__array_interface__ = dict(shape=shape, strides=strides, typestr="<f4",
                                        data=(base.ctypes.data, False), version=3)


@pytest.mark.parametrize("odd", [7, -3, 1, 2**40 + 1])
def test_size1_dim_with_a_byte_stride_not_a_multiple_of_the_itemsize_is_accepted(odd):
    x = Interface((2, 1, 3), (12, odd, 4))
    expected = np.asarray(x)  # NumPy's reading
    t = dlbridge.from_dlpack(x)
    assert t.shape == (2, 1, 3)
    assert t.strides == (3, 0, 1)
    np.testing.assert_array_equal(np.asarray(t), expected)
    np.testing.assert_array_equal(np.asarray(t), BASE.reshape(2, 1, 3))


def test_array_without_elements_accepts_any_byte_strides():
    x = Interface((0, 3), (5, 7))
    assert dlbridge.from_dlpack(x).shape == (0, 3)
    assert np.asarray(x).shape == (0, 3)


def test_stepped_dim_with_a_byte_stride_not_a_multiple_of_the_itemsize_is_still_refused():
    with pytest.raises(dlbridge.LayoutError):
        dlbridge.from_dlpack(Interface((2, 3), (7, 4)))
