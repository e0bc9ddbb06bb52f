"""Round 3 of the boundary (issue 28), the importer's and convert's part: trust in a producer is
granted by class objects, never names; re-entry is refused; a producer's refusal is coded
whatever its exception type; a table replaced during a call does no harm. (What the other
libraries' targets cannot represent is in their test_interop_<library>.py: this file also runs
against the extension built under ASan, where those libraries' own exit handlers misbehave.)"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import dlbridge
from dlbridge.convert import TARGETS


def test_a_torch_subclass_setting_dlbridges_table_is_read_through_torchs_own():
    # It used to recurse in C until the stack overflowed: dlbridge's table imports through
    # from_dlpack, which found the subclass's table again.
    class Sub(torch.Tensor):
        __dlpack_c_exchange_api__ = dlbridge.Tensor.__dlpack_c_exchange_api__

    x = torch.arange(4.0).as_subclass(Sub)
    t = dlbridge.from_dlpack(x)
    assert t.data_ptr == x.data_ptr() and np.from_dlpack(t).tolist() == [0.0, 1.0, 2.0, 3.0]


def test_a_class_calling_itself_torch_tensor_is_a_generic_producer():
    base = np.arange(3.0)

    class Tensor:  # noqa: D401  (the name is the point)
        __module__ = "torch"
        __dlpack_c_exchange_api__ = dlbridge.Tensor.__dlpack_c_exchange_api__

        def __dlpack__(self, **kwargs):
            return base.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return (1, 0)

    t = dlbridge.from_dlpack(Tensor())
    assert t.data_ptr == base.ctypes.data
    assert dlbridge.convert(Tensor(), "numpy").tolist() == [0.0, 1.0, 2.0]


def test_a_producer_importing_itself_is_refused_not_recursed():
    class SelfImporter:
        def __dlpack__(self, **kwargs):
            return dlbridge.from_dlpack(self).__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return (1, 0)

    for call in (dlbridge.from_dlpack, lambda x: dlbridge.convert(x, "numpy")):
        with pytest.raises(dlbridge.ProducerError) as excinfo:
            call(SelfImporter())
        assert excinfo.value.code == "producer_refused" and "same object" in str(excinfo.value)


def test_a_tensor_that_requires_grad_is_imported_as_its_read_only_view():
    p = torch.nn.Parameter(torch.arange(3.0))
    with pytest.raises((RuntimeError, BufferError), match="require"):
        p.__dlpack__()  # torch's own export refuses it
    for copy in (None, False):
        t = dlbridge.from_dlpack(p, copy=copy)
        assert t.readonly and t.data_ptr == p.data_ptr()
    view = dlbridge.convert(p, "numpy")
    assert not view.flags.writeable and view.tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(ValueError, match="read-only"):
        view[0] = 9.0
    assert dlbridge.convert(p, "torch") is p          # torch's own tensor, as it is
    c = torch.tensor([1 + 2j], requires_grad=True).conj()
    assert dlbridge.convert(c, "numpy").tolist() == [1 - 2j]


def test_a_producer_refusing_with_any_exception_is_coded():
    class Refuses:
        def __dlpack__(self, **kwargs):
            raise RuntimeError("not today")

        def __dlpack_device__(self):
            return (1, 0)

    with pytest.raises(dlbridge.ProducerError) as excinfo:
        dlbridge.from_dlpack(Refuses())
    assert isinstance(excinfo.value.__cause__, RuntimeError) and "not today" in str(excinfo.value)


@pytest.mark.parametrize("leaving", [KeyboardInterrupt, SystemExit, GeneratorExit])
def test_an_exception_that_is_no_refusal_is_not_wrapped(leaving):
    class Leaving:
        def __dlpack__(self, **kwargs):
            raise leaving

        def __dlpack_device__(self):
            return (1, 0)

    with pytest.raises(leaving):
        dlbridge.from_dlpack(Leaving())
    with pytest.raises(leaving):
        dlbridge.convert(Leaving(), "numpy")


def test_a_refusal_whose_str_raises_is_still_coded():
    class Unprintable(Exception):
        def __str__(self):
            raise ValueError("no text")

    class Refuses:
        def __dlpack__(self, **kwargs):
            raise Unprintable()

        def __dlpack_device__(self):
            return (1, 0)

    with pytest.raises(dlbridge.ProducerError) as excinfo:
        dlbridge.from_dlpack(Refuses())
    assert "Unprintable" in str(excinfo.value)


def test_a_target_table_replaced_during_the_call_does_no_harm(monkeypatch):
    # A producer's __dlpack__ replacing convert's table entry for the target being
    # converted to used to free the entry the call was using (ASan: heap-use-after-free).
    import dataclasses

    original = TARGETS["numpy"]

    class Replacer:
        def __dlpack__(self, **kwargs):
            TARGETS["numpy"] = dataclasses.replace(original, note="replaced")
            dlbridge.convert(torch.zeros(1), "numpy")  # the new entry is learnt meanwhile
            return np.arange(3.0).__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return (1, 0)

    monkeypatch.setitem(TARGETS, "numpy", original)
    dlbridge.convert(torch.zeros(1), "numpy")  # learnt before the call
    assert dlbridge.convert(Replacer(), "numpy").tolist() == [0.0, 1.0, 2.0]
