"""NumPy scalars export both a buffer and __array_interface__; the buffer of
a datetime64/timedelta64 scalar is eight 'B' bytes, which dlbridge imported
as uint8[8]. The interface names the real type and is read first."""

import gc
import weakref

import numpy as np
import pytest

import dlbridge
from conftest import check_error


@pytest.mark.parametrize("scalar", [np.datetime64(1, "D"), np.timedelta64(5, "s"),
                                    np.datetime64("2024-01-01T00:00", "ns")], ids=repr)
def test_datetime_scalars_are_refused_not_read_as_bytes(scalar):
    with pytest.raises(dlbridge.UnsupportedDTypeError) as info:
        dlbridge.from_dlpack(scalar)
    message = check_error(info, dlbridge.UnsupportedDTypeError, "unsupported_dtype")
    assert scalar.dtype.str in message


@pytest.mark.parametrize("scalar", [np.float64(2.5), np.int8(-3), np.complex64(1 - 2j), np.bool_(True),
                                    np.uint16(7)], ids=repr)
def test_numeric_scalars_import_as_zero_d_tensors_of_their_dtype(scalar):
    t = dlbridge.from_dlpack(scalar)
    assert t.shape == ()
    assert t.dtype == scalar.dtype.name
    assert np.asarray(t) == scalar


def test_memory_owned_by_the_interface_dict_lives_as_long_as_the_tensor():
    # NumPy scalars describe a temporary array kept alive only by the dict's
    # '__ref'; a class that does the same must keep working after the dict
    # would otherwise be dropped.
    class FreshEachTime:
        def __init__(self):
            self.refs = []

        @property
        def __array_interface__(self):
            fresh = np.arange(4.0)
            self.refs.append(weakref.ref(fresh))
            d = dict(fresh.__array_interface__)
            d["__ref"] = fresh
            return d

    source = FreshEachTime()
    t = dlbridge.from_dlpack(source)
    gc.collect()
    assert source.refs[-1]() is not None
    np.testing.assert_array_equal(np.asarray(t), np.arange(4.0))
    del t
    gc.collect()
    assert source.refs[-1]() is None
