"""copy= is True, False or None at every entry point that takes it; NumPy's bool (what
``a.all()`` or ``a[i] > 0`` gives) is taken as the bool it is, and nothing else is."""

import numpy as np
import pytest

import dlbridge


def _entry_points():
    def convert(copy):
        return dlbridge.convert(np.arange(3.0), "numpy", copy=copy)

    def plan(copy):
        return dlbridge.plan_convert(np.arange(3.0), "numpy", copy=copy)

    def from_dlpack(copy):
        return dlbridge.from_dlpack(np.arange(3.0), copy=copy)

    def to_dlpack(copy):
        return dlbridge.to_dlpack(np.arange(3.0), copy=copy)

    def tensor_dlpack(copy):
        return dlbridge.from_dlpack(np.arange(3.0)).__dlpack__(max_version=(1, 3), copy=copy)

    return {f.__name__: f for f in (convert, plan, from_dlpack, to_dlpack, tensor_dlpack)}


ENTRY_POINTS = _entry_points()


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
@pytest.mark.parametrize("value", [True, False])
def test_a_numpy_bool_copy_is_the_bool_it_holds(entry, value):
    call = ENTRY_POINTS[entry]
    as_bool, as_numpy = call(value), call(np.bool_(value))
    if entry == "plan":
        assert (as_numpy.copy, as_numpy.reasons) == (as_bool.copy, as_bool.reasons)
    elif entry in ("convert", "from_dlpack"):
        source = np.arange(3.0)
        aliased = dlbridge.convert(source, "numpy", copy=np.bool_(value)) if entry == "convert" else \
            np.from_dlpack(dlbridge.from_dlpack(source, copy=np.bool_(value)))
        assert np.shares_memory(aliased, source) is (not value)


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
@pytest.mark.parametrize("value", [1, 0, "yes", np.int64(1), np.array(True), [True]])
def test_anything_else_as_copy_is_still_refused(entry, value):
    with pytest.raises(TypeError, match="copy must be True, False or None"):
        ENTRY_POINTS[entry](value)
