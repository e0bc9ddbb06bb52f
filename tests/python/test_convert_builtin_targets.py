"""convert enters a builtin import function (numpy.from_dlpack is one)
through its C entry rather than through the call protocol
(py::call_one_arg in src/python/py_compat.hpp). Whatever calling convention
the builtin has, convert must give what calling it gives, pass a bound
builtin its object, and turn a builtin that breaks the contract into a
Python exception, never a crash or a value."""

import numpy as np
import pytest
import torch

import dlbridge
from dlbridge._core import _testing


def source():
    # Not NumPy's own array (convert would return that as it is): numpy's importer
    # receives dlbridge's tensor of it.
    return torch.arange(3.0, dtype=torch.float64)


def tensor_of(x):
    return dlbridge.from_dlpack(x)


@pytest.fixture
def numpy_import(monkeypatch):
    """Replaces numpy.from_dlpack; convert has learnt the real one first."""
    dlbridge.convert(source(), "numpy")

    def install(fn):
        monkeypatch.setattr(np, "from_dlpack", fn)

    return install


@pytest.mark.parametrize("builtin", [
    repr,                                  # METH_O
    format,                                # METH_FASTCALL
    lambda x: ("called", repr(x)),         # a Python function: the call protocol
], ids=["METH_O", "METH_FASTCALL", "python"])
def test_a_builtin_target_gives_what_calling_it_gives(numpy_import, builtin):
    numpy_import(builtin)
    assert dlbridge.convert(source(), "numpy") == builtin(tensor_of(source()))


def test_a_fastcall_builtin_gets_its_one_argument(numpy_import):
    numpy_import(iter)  # METH_FASTCALL: iter(x) with nargs 1; a Tensor is not iterable
    with pytest.raises(TypeError, match="not iterable"):
        dlbridge.convert(source(), "numpy")


def test_a_bound_builtin_gets_its_object(numpy_import):
    received = []
    numpy_import(received.append)
    assert dlbridge.convert(source(), "numpy") is None
    assert len(received) == 1 and isinstance(received[0], dlbridge.Tensor)


def test_a_builtin_that_takes_no_argument_raises_its_type_error(numpy_import):
    numpy_import(globals)  # METH_NOARGS: left to the call protocol
    with pytest.raises(TypeError, match="globals"):
        dlbridge.convert(source(), "numpy")


@pytest.mark.parametrize("name", ["null_without_error", "result_beside_error"])
def test_a_builtin_that_breaks_the_contract_raises(numpy_import, name):
    numpy_import(getattr(_testing, name))
    with pytest.raises(SystemError):
        dlbridge.convert(source(), "numpy")
    # Nothing is left set: the next call works.
    assert dlbridge.convert(np.arange(3.0), "dlbridge").shape == (3,)


def test_the_real_import_function_is_used_again_once_restored(numpy_import, monkeypatch):
    numpy_import(repr)
    assert dlbridge.convert(source(), "numpy").startswith("dlbridge.Tensor(")
    monkeypatch.undo()
    out = dlbridge.convert(source(), "numpy")
    assert isinstance(out, np.ndarray) and out.tolist() == [0.0, 1.0, 2.0]
