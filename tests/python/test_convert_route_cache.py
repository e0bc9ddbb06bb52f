"""convert's route cache (src/python/convert_route.cpp) keyed by producer
class: it keeps at most 16 classes alive, and notices a modified class where
the build can read version tags (not the abi3 build, by design)."""

import gc
import weakref

import numpy as np
import pytest
from conftest import fresh_producer_class

import dlbridge

ABI3 = dlbridge._core.__file__.endswith(".abi3.so")
ROUTE_SLOTS = 16


@pytest.fixture
def numpy_calls(monkeypatch):
    calls = []
    original = np.from_dlpack
    monkeypatch.setattr(np, "from_dlpack", lambda x: calls.append(type(x)) or original(x))
    return calls


def test_a_converted_class_is_released_once_evicted_from_the_cache():
    cls = fresh_producer_class(style="modern")
    assert dlbridge.convert(cls(np.arange(3.0)), "numpy").tolist() == [0.0, 1.0, 2.0]
    watch = weakref.ref(cls)
    del cls
    gc.collect()
    for _ in range(ROUTE_SLOTS):
        other = fresh_producer_class(style="modern")
        dlbridge.convert(other(np.arange(2.0)), "numpy")
    del other
    gc.collect()
    assert watch() is None


def move_to_numpy(numpy_calls):
    cls = fresh_producer_class(style="modern")
    x = cls(np.arange(3.0))
    dlbridge.convert(x, "numpy")  # learnt: not NumPy's own class, so through dlbridge
    cls.__module__ = "numpy.pretend"
    dlbridge.convert(x, "numpy")
    return cls


@pytest.mark.skipif(ABI3, reason="the abi3 build cannot read version tags")
def test_a_class_whose_module_is_reassigned_gets_a_new_route(numpy_calls):
    cls = move_to_numpy(numpy_calls)
    assert numpy_calls == [dlbridge.Tensor, cls]


@pytest.mark.skipif(not ABI3, reason="only the abi3 build keeps the first route")
def test_the_abi3_build_keeps_the_first_route_of_a_modified_class(numpy_calls):
    move_to_numpy(numpy_calls)
    assert numpy_calls == [dlbridge.Tensor, dlbridge.Tensor]
