"""convert enters a builtin import function (numpy.from_dlpack is one)
through its C entry rather than through the call protocol
(py::call_one_arg in src/python/py_compat.hpp). Whatever calling convention
the builtin has, convert must give what calling it gives, pass a bound
builtin its object, and turn a builtin that breaks the contract into a
Python exception, never a crash or a value."""

import numpy as np
import pytest

import dlbridge
from dlbridge._core import _testing


@pytest.fixture
def numpy_import(monkeypatch):
    """Replaces numpy.from_dlpack; convert has learnt the real one first."""
    dlbridge.convert(np.arange(3.0), "numpy")

    def install(fn):
        monkeypatch.setattr(np, "from_dlpack", fn)

    return install


@pytest.mark.parametrize("builtin, expected", [
    (len, 3),                              # METH_O
    (sorted, [0.0, 1.0, 2.0]),             # METH_FASTCALL | METH_KEYWORDS
    (lambda x: list(iter(x)), [0.0, 1.0, 2.0]),  # a Python function: the call protocol
])
def test_a_builtin_target_gives_what_calling_it_gives(numpy_import, builtin, expected):
    numpy_import(builtin)
    assert dlbridge.convert(np.arange(3.0), "numpy") == expected


def test_a_fastcall_builtin_gets_its_one_argument(numpy_import):
    numpy_import(iter)  # METH_FASTCALL: iter(x) with nargs 1
    assert list(dlbridge.convert(np.arange(3.0), "numpy")) == [0.0, 1.0, 2.0]


def test_a_bound_builtin_gets_its_object(numpy_import):
    received = []
    numpy_import(received.append)
    x = np.arange(3.0)
    assert dlbridge.convert(x, "numpy") is None
    assert received and all(r is x for r in received)


def test_a_builtin_that_takes_no_argument_raises_its_type_error(numpy_import):
    numpy_import(globals)  # METH_NOARGS: left to the call protocol
    with pytest.raises(TypeError, match="globals"):
        dlbridge.convert(np.arange(3.0), "numpy")


@pytest.mark.parametrize("name", ["null_without_error", "result_beside_error"])
def test_a_builtin_that_breaks_the_contract_raises(numpy_import, name):
    numpy_import(getattr(_testing, name))
    with pytest.raises(SystemError):
        dlbridge.convert(np.arange(3.0), "numpy")
    # Nothing is left set: the next call works.
    assert dlbridge.convert(np.arange(3.0), "dlbridge").shape == (3,)


def test_the_real_import_function_is_used_again_once_restored(numpy_import, monkeypatch):
    numpy_import(len)
    assert dlbridge.convert(np.arange(3.0), "numpy") == 3
    monkeypatch.undo()
    out = dlbridge.convert(np.arange(3.0), "numpy")
    assert isinstance(out, np.ndarray) and out.tolist() == [0.0, 1.0, 2.0]
