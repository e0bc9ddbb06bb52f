"""Property: every dtype and layout the core supports survives pickling --
each protocol, in-band and out-of-band, and shared memory -- with its values,
shape, dtype and flags intact."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("dlbridge._share", reason="needs dlbridge._share, which this build left out (-DDLBRIDGE_SHARE=OFF)")
import dlbridge  # noqa: E402
from dlbridge._pickle import rebuild_tensor  # noqa: E402

pytestmark = pytest.mark.sharing

READ_ONLY = 1
PADDED = 4

DTYPES = [
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "bfloat16", "complex64", "complex128",
    "float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu", "float6_e2m3fn", "float4_e2m1fn",
    "int4", "uint2", "float32x2", "int8x4",
]


@st.composite
def tensors(draw):
    dtype = dlbridge.DType(draw(st.sampled_from(DTYPES)))
    subbyte = dtype.bits * dtype.lanes < 8
    padded = subbyte and draw(st.booleans())
    packed = subbyte and not padded
    ndim = draw(st.integers(0, 3))
    shape = draw(st.lists(st.integers(0, 4), min_size=ndim, max_size=ndim))
    # Packed elements share bytes, so only C order addresses them one by one.
    order = list(range(ndim)) if packed else draw(st.permutations(range(ndim)))
    steps = [1] * ndim if packed else draw(st.lists(st.sampled_from([1, 2, -1, -2]),
                                                   min_size=ndim, max_size=ndim))
    strides, span = [0] * ndim, 1
    for d in reversed(order):
        strides[d] = span * steps[d]
        span *= max(shape[d], 1) * abs(steps[d])
    # Negative strides reach back from element 0, which sits that far in.
    offset_elements = sum((n - 1) * -s for n, s in zip(shape, strides) if s < 0 and n > 0)
    unit_bits = dtype.bits * dtype.lanes if packed else ((dtype.bits * dtype.lanes + 7) // 8) * 8
    total_bytes = (span * unit_bits + 7) // 8 + 8
    payload = draw(st.binary(min_size=total_bytes, max_size=total_bytes))
    readonly = draw(st.booleans())
    flags = (PADDED if padded else 0) | (READ_ONLY if readonly else 0)
    buffer = bytes(payload) if readonly else bytearray(payload)
    layout = (1, (dtype.code, dtype.bits, dtype.lanes), tuple(shape), tuple(strides),
              offset_elements * unit_bits // 8, flags & PADDED)
    return rebuild_tensor(buffer, layout)


def canonical(t) -> bytes:
    """The values in C order, one element per byte at least, as bytes."""
    buffers = []
    pickle.dumps(t.copy_unpacked(), protocol=5, buffer_callback=buffers.append)
    return bytes(buffers[0].raw())


def same(a, b):
    assert (a.shape, a.dtype, a.flags, a.device) == (b.shape, b.dtype, b.flags, b.device)
    assert canonical(a) == canonical(b)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tensors(), st.integers(2, pickle.HIGHEST_PROTOCOL))
def test_in_band_round_trip(t, protocol):
    same(pickle.loads(pickle.dumps(t, protocol=protocol)), t)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tensors())
def test_out_of_band_round_trip(t):
    buffers = []
    data = pickle.dumps(t, protocol=5, buffer_callback=buffers.append)
    same(pickle.loads(data, buffers=buffers), t)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tensors())
def test_shared_memory_round_trip(t):
    shared = t.share_memory()
    assert shared.is_shared
    same(shared, t)
    same(pickle.loads(pickle.dumps(shared)), t)

