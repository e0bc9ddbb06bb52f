"""convert and plan_convert of Arrow tables and record batches, for every installed target: a
dict of column name -> the target's tensor, each column as a call of its own converts it
(values, plan, sharing by pointer, writability); one chunk shared where the target may share
Arrow's immutable memory, several chunks joined by one copy that the plan names; nulls,
strings and nested types refused with their code and the column's name; a fixed-shape tensor
column an n-d tensor."""

from __future__ import annotations

import numpy as np
import pytest

import dlbridge
from dlbridge import libraries

pa = pytest.importorskip("pyarrow")

INSTALLED = [name for name in libraries.LIBRARIES if libraries.installed(name) and libraries.fact(name, "peer")]
for _name in INSTALLED:
    libraries.import_library(_name, order_others=True)
PEERS = {name: libraries.fact(name, "peer")() for name in INSTALLED}
TARGETS = [*INSTALLED, "dlbridge"]


def to_numpy(out, target):
    return np.asarray(dlbridge.convert(out, "numpy") if target == "dlbridge" else PEERS[target].to_numpy(out))


def pointer(out, target) -> int:
    return out.data_ptr if target == "dlbridge" else PEERS[target].data_ptr(out)


def writable(out, target):
    return (not out.readonly) if target == "dlbridge" else PEERS[target].writable(out)


def numeric_table():
    tensor = pa.FixedShapeTensorArray.from_numpy_ndarray(np.arange(24, dtype=np.float32).reshape(4, 2, 3))
    return pa.table({"i": pa.array([1, 2, 3, 4], pa.int64()), "f": pa.array([0.5, 1.5, 2.5, 3.5], pa.float32()),
                     "t": tensor})


def expected():
    return {"i": np.array([1, 2, 3, 4], np.int64), "f": np.array([0.5, 1.5, 2.5, 3.5], np.float32),
            "t": np.arange(24, dtype=np.float32).reshape(4, 2, 3)}


def column_pointer(column) -> int:
    chunk = column.chunk(0)
    values = chunk.storage.values if isinstance(chunk, pa.ExtensionArray) else chunk
    return values.buffers()[1].address + values.offset * values.type.bit_width // 8


@pytest.mark.parametrize("kind", ["table", "record_batch"])
@pytest.mark.parametrize("target", TARGETS)
def test_each_column_becomes_what_a_call_of_its_own_makes(target, kind):
    table = numeric_table()
    x = table if kind == "table" else table.to_batches()[0]
    plans = dlbridge.plan_convert(x, target)
    try:
        out = dlbridge.convert(x, target)
    except dlbridge.DLPackError as exc:
        # A target that cannot take a column refuses the table as it refuses the column.
        column = str(exc).split(":")[0]
        with pytest.raises(type(exc)):
            dlbridge.convert(x.column(column[len("x['"):-2]), target)
        return
    assert list(out) == ["i", "f", "t"] and list(plans) == ["i", "f", "t"]
    for name, values in expected().items():
        np.testing.assert_array_equal(to_numpy(out[name], target), values)
        column = x.column(name)  # a ChunkedArray of a table, an Array of a record batch
        assert repr(plans[name]) == repr(dlbridge.plan_convert(column, target))
        if plans[name].zero_copy:
            assert pointer(out[name], target) == column_pointer(table.column(name))
        else:
            assert pointer(out[name], target) != column_pointer(table.column(name))
        assert writable(out[name], target) == writable(dlbridge.convert(column, target), target)


def test_numeric_columns_are_shared_with_targets_that_may_share_immutable_memory():
    out = dlbridge.convert(numeric_table(), "numpy")
    plans = dlbridge.plan_convert(numeric_table(), "numpy")
    assert all(plan.zero_copy for plan in plans.values())
    assert out["t"].shape == (4, 2, 3) and not out["i"].flags.writeable


def chunked_table():
    return pa.Table.from_batches([pa.record_batch({"a": [1.0, 2.0]}), pa.record_batch({"a": [3.0]})])


def test_a_chunked_column_is_joined_by_one_copy():
    table = chunked_table()
    out = dlbridge.convert(table, "numpy")["a"]
    np.testing.assert_array_equal(out, [1.0, 2.0, 3.0])
    assert out.__array_interface__["data"][0] not in {column_pointer(pa.chunked_array([c])) for c in
                                                      table.column("a").chunks}
    with pytest.raises(dlbridge.CopyRequiredError, match=r"^x\['a'\]: "):
        dlbridge.convert(table, "numpy", copy=False)


def test_the_plan_of_a_chunked_column_says_the_copy():
    # The join Arrow's second look makes (libraries/arrow.py) is marked IS_COPIED on the import.
    plan = dlbridge.plan_convert(chunked_table(), "numpy")["a"]
    assert not plan.zero_copy and plan.copy != "none"
    assert "producer" in plan.reasons


@pytest.mark.parametrize(
    "column, error, code",
    [(pa.array([1, None, 3]), dlbridge.LayoutError, "unsupported_layout"),
     (pa.array(["a", "b", "c"]), dlbridge.DLPackError, None),
     (pa.array([[1], [2, 3], []]), dlbridge.DLPackError, None)],
    ids=["nulls", "strings", "nested"])
def test_nulls_strings_and_nested_columns_are_refused_naming_the_column(column, error, code):
    table = pa.table({"ok": pa.array([1, 2, 3]), "bad": column})
    single = None
    try:
        dlbridge.convert(table.column("bad"), "numpy")
    except Exception as exc:  # noqa: BLE001  (compared below)
        single = exc
    assert single is not None
    with pytest.raises(type(single)) as excinfo:
        dlbridge.convert(table, "numpy")
    assert isinstance(excinfo.value, error)
    assert getattr(excinfo.value, "code", None) == getattr(single, "code", None)
    if code is not None:
        assert excinfo.value.code == code
    assert str(excinfo.value).startswith("x['bad']: ")
    assert type(excinfo.value.__cause__) is type(single.__cause__)  # the producer's own exception kept
    with pytest.raises(type(single), match=r"^x\['bad'\]: "):
        dlbridge.plan_convert(table, "numpy")


def test_tables_inside_structures_and_duplicate_names():
    batch = {"features": numeric_table(), "ids": [np.arange(3)]}
    out = dlbridge.convert(batch, "numpy")
    assert out["features"]["t"].shape == (4, 2, 3)
    twice = pa.table([pa.array([1]), pa.array([2])], names=["a", "a"])
    with pytest.raises(ValueError, match="more than one column named 'a'"):
        dlbridge.convert(twice, "numpy")
