"""convert and plan_convert of structures (nested dicts, lists, tuples, named tuples, JAX pytree
nodes), differentially against one call per leaf for every installed target: the same values,
the same plan, the same sharing of memory (by pointer), the same writability, the same refusal
(its class and code kept, the leaf's path in its message)."""

from __future__ import annotations

import collections
import sys
from typing import NamedTuple

import numpy as np
import pytest

import dlbridge
from dlbridge import libraries

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


def readonly(a):
    a.flags.writeable = False
    return a


def leaves():
    """Fresh sources: writable, read-only, strided NumPy arrays and a 0-d one."""
    return [np.arange(8, dtype=np.float32), readonly(np.arange(6, dtype=np.int64).reshape(2, 3)),
            np.arange(16, dtype=np.float64).reshape(4, 4)[:, ::2], np.array(3.5, dtype=np.float32)]


class Pair(NamedTuple):
    first: object
    second: object


def nest(a, b, c, d):
    return {"x": [a, (b, c)], "y": Pair(d, {"z": a})}


def flat(structure):
    """The leaves of nest(...) in order."""
    return [structure["x"][0], structure["x"][1][0], structure["x"][1][1], structure["y"].first,
            structure["y"].second["z"]]


def single_outcome(x, target, **kw):
    """What one call does: ('ok', plan repr, result) or ('refused', class, code)."""
    try:
        plan = dlbridge.plan_convert(x, target, **kw)
        return "ok", repr(plan), dlbridge.convert(x, target, **kw)
    except Exception as exc:  # noqa: BLE001  (compared, not swallowed)
        return "refused", type(exc), getattr(exc, "code", None)


@pytest.mark.parametrize("copy", [None, True, False])
@pytest.mark.parametrize("target", TARGETS)
def test_each_leaf_of_a_structure_gets_what_a_call_of_its_own_gets(target, copy):
    kw = {} if copy is None else {"copy": copy}
    # The same source arrays for both (a plan may depend on where an allocation landed).
    structure = nest(*leaves())
    sources = flat(structure)
    singles = [single_outcome(a, target, **kw) for a in sources]
    if any(s[0] == "refused" for s in singles):
        first = next(i for i, s in enumerate(singles) if s[0] == "refused")
        with pytest.raises(singles[first][1]) as excinfo:
            dlbridge.convert(structure, target, **kw)
        assert getattr(excinfo.value, "code", None) == singles[first][2]
        paths = ["x['x'][0]", "x['x'][1][0]", "x['x'][1][1]", "x['y'].first", "x['y'].second['z']"]
        assert str(excinfo.value).startswith(paths[first] + ": ")
        return
    plans = flat(dlbridge.plan_convert(structure, target, **kw))
    out = dlbridge.convert(structure, target, **kw)
    assert isinstance(out, dict) and isinstance(out["x"], list) and isinstance(out["x"][1], tuple)
    assert type(out["y"]) is Pair
    for source, plan, leaf, single in zip(sources, plans, flat(out), singles):
        assert repr(plan) == single[1]
        np.testing.assert_array_equal(to_numpy(leaf, target), source)
        if plan.zero_copy and source.size:
            assert pointer(leaf, target) == source.__array_interface__["data"][0]
        elif source.size:
            assert pointer(leaf, target) != source.__array_interface__["data"][0]
        assert writable(leaf, target) == writable(single[2], target)


def test_a_list_of_arrays_converts_in_order_and_keeps_its_class():
    arrays = [np.full(3, i, dtype=np.int32) for i in range(5)]
    out = dlbridge.convert(arrays, "dlbridge")
    assert type(out) is list and [int(np.from_dlpack(t)[0]) for t in out] == list(range(5))
    assert type(dlbridge.convert(tuple(arrays), "numpy")) is tuple
    assert dlbridge.convert([], "numpy") == [] and dlbridge.convert({}, "numpy") == {}
    # Named tuples and dict subclasses inside a list are walked too.
    inner = dlbridge.convert([Pair(arrays[0], arrays[1]), collections.OrderedDict(a=arrays[2])], "dlbridge")
    assert type(inner[0]) is Pair and type(inner[1]) is collections.OrderedDict
    assert isinstance(inner[0].second, dlbridge.Tensor) and isinstance(inner[1]["a"], dlbridge.Tensor)


def test_ordered_and_default_dicts_keep_their_class_and_order():
    od = collections.OrderedDict([("b", np.ones(2)), ("a", np.zeros(2))])
    out = dlbridge.convert(od, "dlbridge")
    assert type(out) is collections.OrderedDict and list(out) == ["b", "a"]
    dd = collections.defaultdict(list, {"a": np.ones(2)})
    out = dlbridge.convert(dd, "dlbridge")
    assert type(out) is collections.defaultdict and out.default_factory is list


def test_a_non_array_leaf_is_a_coded_type_error_naming_its_path():
    with pytest.raises(TypeError) as excinfo:
        dlbridge.convert({"batch": {"x": [np.ones(2), np.ones(2), "label"]}}, "numpy")
    err = excinfo.value
    assert type(err) is dlbridge.NotAnArrayError and err.code == "not_an_array"
    assert isinstance(err, dlbridge.DLPackError)
    assert err.message.startswith("x['batch']['x'][2]: dlbridge.convert cannot read a str")
    assert "keep_non_arrays=True" in err.hint and str(err).endswith(err.hint)
    assert err.__cause__ is None and err.__suppress_context__
    with pytest.raises(dlbridge.NotAnArrayError, match=r"^x\[1\]: "):
        dlbridge.plan_convert([np.ones(2), None], "numpy")


def test_a_single_value_that_is_not_an_array_keeps_the_plain_type_error():
    # Not a structure: the single-array refusal of from_dlpack, uncoded, as before.
    with pytest.raises(TypeError, match="cannot read a int") as excinfo:
        dlbridge.convert(3, "numpy")
    assert not isinstance(excinfo.value, dlbridge.DLPackError)


@pytest.mark.parametrize("keep", [False, True])
@pytest.mark.parametrize("keywords", [{"device": object()}, {"copy": "yes"}], ids=["device", "copy"])
def test_a_bad_keyword_met_at_a_non_array_leaf_is_the_keyword_s_refusal(keywords, keep):
    with pytest.raises(TypeError) as single:
        dlbridge.convert(np.ones(2), "numpy", **keywords)
    # Neither called not_an_array nor, under keep_non_arrays, silently kept.
    with pytest.raises(TypeError) as excinfo:
        dlbridge.convert({"n": 3}, "numpy", keep_non_arrays=keep, **keywords)
    assert type(excinfo.value) is type(single.value)
    assert str(excinfo.value) == f"x['n']: {single.value}"


def test_keep_non_arrays_keeps_them_as_they_are_and_plans_none_for_them():
    label = object()
    out = dlbridge.convert({"x": np.ones(2), "n": 3, "label": label, "none": None}, "dlbridge",
                           keep_non_arrays=True)
    assert isinstance(out["x"], dlbridge.Tensor) and out["n"] == 3 and out["label"] is label
    assert out["none"] is None
    plans = dlbridge.plan_convert({"x": np.ones(2), "n": 3}, "numpy", keep_non_arrays=True)
    assert plans["n"] is None and plans["x"].action == "return_input"
    # A single value: an array is converted, anything else kept.
    assert dlbridge.convert("text", "numpy", keep_non_arrays=True) == "text"
    assert isinstance(dlbridge.convert(np.ones(2), "dlbridge", keep_non_arrays=True), dlbridge.Tensor)


def test_keep_non_arrays_still_refuses_an_array_it_cannot_convert():
    bad = readonly(np.ones(3))
    with pytest.raises(dlbridge.ReadOnlyError) as excinfo:
        dlbridge.convert({"w": [bad]}, "torch", copy=False, keep_non_arrays=True)
    assert excinfo.value.code == "read_only" and str(excinfo.value).startswith("x['w'][0]: ")
    assert excinfo.value.hint


def test_a_class_the_walker_cannot_rebuild_is_refused_by_name():
    class Batch(list):
        pass

    if "jax" in sys.modules:
        pytest.skip("JAX is imported: a list subclass is JAX's leaf, refused as an array")
    with pytest.raises(TypeError, match="cannot rebuild a .*Batch") as excinfo:
        dlbridge.convert(Batch([np.ones(2)]), "numpy")
    assert type(excinfo.value) is dlbridge.NotAnArrayError and excinfo.value.hint


def test_an_unknown_target_is_refused_before_any_leaf():
    with pytest.raises(ValueError, match="unknown conversion target"):
        dlbridge.convert({"a": np.ones(2)}, "no_such_library_xyz")


def test_a_wrong_keyword_is_refused():
    with pytest.raises(TypeError):
        dlbridge.convert({"a": np.ones(2)}, "numpy", stream=1)
    with pytest.raises(TypeError, match=r"^convert\(\) takes exactly two positional arguments \(1 given\)"):
        dlbridge.convert([np.ones(2)])
    with pytest.raises(TypeError, match=r"^plan_convert\(\) takes exactly two positional arguments \(3 given\)"):
        dlbridge.plan_convert([np.ones(2)], "numpy", "torch")


def test_jax_pytree_nodes_are_walked_as_jax_sees_them():
    if "jax" not in INSTALLED:
        pytest.skip("jax is not installed")
    import jax

    @jax.tree_util.register_pytree_node_class
    class Params:
        def __init__(self, w, b):
            self.w, self.b = w, b

        def tree_flatten(self):
            return (self.w, self.b), None

        @classmethod
        def tree_unflatten(cls, aux, children):
            return cls(*children)

    params = Params(np.ones((2, 2), dtype=np.float32), np.zeros(2, dtype=np.float32))
    out = dlbridge.convert(params, "dlbridge")  # a node at the top
    assert type(out) is Params and isinstance(out.w, dlbridge.Tensor) and out.b.shape == (2,)
    nested = dlbridge.convert({"p": [params]}, "numpy")
    assert type(nested["p"][0]) is Params
    plans = dlbridge.plan_convert({"p": params}, "numpy")
    assert plans["p"].w.action == "return_input"
    # The path below the node is JAX's own (jax.tree_util.keystr).
    with pytest.raises(TypeError, match=r"^x\['p'\]\[0\]\[<flat index 1>\]: "):
        dlbridge.convert({"p": [Params(np.ones(2), "b")]}, "numpy")
    # Not a node: refused as before.
    with pytest.raises(TypeError, match="cannot read a object"):
        dlbridge.convert(object(), "numpy")
