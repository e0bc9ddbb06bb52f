"""DLPack has no byte order. Big-endian NumPy data used to surface NumPy's
bare BufferError; dlbridge now refuses it with its own code and the fix, and
convert byte-swaps it whenever a copy is allowed."""

import numpy as np
import pytest
import torch

import dlbridge
from conftest import check_error

BIG = np.arange(4, dtype=">f4")


@pytest.mark.parametrize("make", [lambda: BIG, lambda: BIG[::2], lambda: BIG.reshape(2, 2).T,
                                  lambda: memoryview(BIG)], ids=["array", "strided", "transposed", "memoryview"])
def test_non_native_byte_order_is_refused_with_the_fix(make):
    with pytest.raises(dlbridge.UnsupportedDTypeError) as info:
        dlbridge.from_dlpack(make())
    message = check_error(info, dlbridge.UnsupportedDTypeError, "unsupported_dtype")
    assert "byte order" in message and "newbyteorder('=')" in message
    assert "dtype" in message  # what docs/errors.md's pattern for the code asks


@pytest.mark.parametrize("to, as_numpy", [("numpy", np.asarray), ("torch", lambda t: t.numpy()),
                                          ("jax", np.asarray), ("dlbridge", np.asarray)])
def test_convert_byte_swaps_when_a_copy_is_allowed(to, as_numpy):
    for copy in (None, True):
        out = dlbridge.convert(BIG, to, copy=copy)
        np.testing.assert_array_equal(as_numpy(out), [0.0, 1.0, 2.0, 3.0])


def test_convert_with_copy_false_refuses_non_native_byte_order():
    with pytest.raises(dlbridge.UnsupportedDTypeError, match="byte order"):
        dlbridge.convert(BIG, "torch", copy=False)


def test_native_byte_order_stays_zero_copy_in_convert():
    a = np.arange(4, dtype="<f4")
    assert dlbridge.convert(a, "torch").data_ptr() == a.ctypes.data
