"""convert reads a source's dtype for its byte-order check only from NumPy arrays: another
library's dtype property may raise (tvm_ffi 0.1.15's does for complex tensors), and the
exchange itself never needs it."""

import numpy as np
import pytest

import dlbridge
from foreign_producers import DTypeRaises


@pytest.mark.parametrize("target", [np, np.from_dlpack], ids=["module", "function"])
def test_a_raising_dtype_property_is_never_read(target):
    a = np.arange(4.0)
    out = dlbridge.convert(DTypeRaises(a), target)
    assert np.shares_memory(out, a)
    np.testing.assert_array_equal(out, a)


def test_numpy_arrays_in_the_other_byte_order_are_swapped_into_one_copy():
    import torch

    swapped = np.arange(4.0).astype(np.dtype(np.float64).newbyteorder())
    out = dlbridge.convert(swapped, "torch")
    assert out.tolist() == [0.0, 1.0, 2.0, 3.0]
    plan = dlbridge.plan_convert(swapped, "torch")
    assert (plan.copy, plan.reasons) == ("dlbridge", ("byte_order",))
    with pytest.raises(dlbridge.UnsupportedDTypeError):
        dlbridge.convert(swapped, "torch", copy=False)
    assert isinstance(out, torch.Tensor)
    # NumPy reads its own byte order: its own array is returned as it is.
    assert dlbridge.convert(swapped, np) is swapped
