"""Regression tests for what the fuzzers found (docs/fuzzing.md, "Findings")
that no other test pins down.

Finding 3: arrays whose dtype DLPack cannot carry made NumPy's __dlpack__
raise a bare BufferError, which reached the user with no code and no hint.
"""

import numpy as np
import pytest

import dlbridge

UNEXPORTABLE = {
    "structured": lambda: np.zeros(2, dtype=[("a", "<i4"), ("b", "<f8")]),
    "void": lambda: np.zeros(2, dtype="V3"),
    "unicode": lambda: np.array(["ab"]),
    "object": lambda: np.array([None, 1], dtype=object),
    "timedelta": lambda: np.arange(3, dtype="m8[s]"),
}
ENTRY_POINTS = {
    "from_dlpack": dlbridge.from_dlpack,
    "from_dlpack-copy": lambda x: dlbridge.from_dlpack(x, copy=True),
    "to_dlpack": dlbridge.to_dlpack,
    "convert-torch": lambda x: dlbridge.convert(x, "torch"),
}


@pytest.mark.parametrize("make", UNEXPORTABLE.values(), ids=UNEXPORTABLE.keys())
@pytest.mark.parametrize("call", ENTRY_POINTS.values(), ids=ENTRY_POINTS.keys())
def test_numpy_refusing_its_dtype_is_a_coded_dlpack_error(make, call):
    with pytest.raises(BufferError) as excinfo:
        call(make())
    err = excinfo.value
    assert isinstance(err, dlbridge.DLPackError), f"uncoded {type(err).__name__}: {err}"
    assert err.code and err.hint
    assert "std::" not in str(err)
