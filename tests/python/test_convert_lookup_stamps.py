"""convert remembers the import function it found for a target while nothing
it read to find it has changed: convert.TARGETS (which says when it changes,
libraries.TargetTable), and sys.modules and the module's dict (on the builds
that can read dict versions; src/python/convert.cpp). Each change after a
remembered call must be seen on the next one."""

import sys
import types

import numpy as np
import pytest

import dlbridge
from dlbridge.convert import TARGETS
from dlbridge.libraries._spec import Target

NAME = "stamplib"


def make_module(tag):
    module = types.ModuleType(NAME)
    module.calls = []

    def from_dlpack(x):
        module.calls.append(tag)
        return (tag, dlbridge.from_dlpack(x))

    module.from_dlpack = from_dlpack
    return module


@pytest.fixture
def stamplib(monkeypatch):
    """A target library whose from_dlpack tags what it returns; convert has
    already used it twice (learnt, then remembered) when the test starts."""
    module = make_module("first")
    monkeypatch.setitem(sys.modules, NAME, module)
    monkeypatch.setitem(TARGETS, NAME, Target(
        NAME, "from_dlpack", read_only="ignored", strides="any", devices=frozenset({1}), dtypes=None))
    for _ in range(2):
        assert dlbridge.convert(np.arange(3.0), NAME)[0] == "first"
    yield module
    TARGETS.pop(NAME, None)


def test_a_replaced_import_function_is_called_on_the_next_convert(stamplib, monkeypatch):
    monkeypatch.setattr(stamplib, "from_dlpack", lambda x: ("patched", x))
    assert dlbridge.convert(np.arange(3.0), NAME)[0] == "patched"
    monkeypatch.undo()
    # undo() also removed the library; put it back as it was.
    monkeypatch.setitem(sys.modules, NAME, stamplib)
    monkeypatch.setitem(TARGETS, NAME, Target(
        NAME, "from_dlpack", read_only="ignored", strides="any", devices=frozenset({1}), dtypes=None))
    assert dlbridge.convert(np.arange(3.0), NAME)[0] == "first"


def test_a_module_replaced_in_sys_modules_is_the_one_used(stamplib, monkeypatch):
    monkeypatch.setitem(sys.modules, NAME, make_module("second"))
    assert dlbridge.convert(np.arange(3.0), NAME)[0] == "second"
    assert stamplib.calls == ["first", "first"]


def test_a_replaced_target_entry_is_read_again(stamplib, monkeypatch):
    stamplib.other_import = lambda x: ("other", x)
    monkeypatch.setitem(TARGETS, NAME, Target(
        NAME, "other_import", read_only="ignored", strides="any", devices=frozenset({1}), dtypes=None))
    assert dlbridge.convert(np.arange(3.0), NAME)[0] == "other"


def _other_entry():
    return Target(NAME, "other_import", read_only="ignored", strides="any", devices=frozenset({1}), dtypes=None)


def _replace_by_update():
    TARGETS.update({NAME: _other_entry()})


def _replace_by_or():
    table = TARGETS
    table |= {NAME: _other_entry()}


def _replace_by_delete_and_setdefault():
    del TARGETS[NAME]
    TARGETS.setdefault(NAME, _other_entry())


def _replace_by_pop_and_setitem():
    TARGETS.pop(NAME)
    TARGETS[NAME] = _other_entry()


def _replace_by_popitem_and_update():
    saved = dict(TARGETS)
    while TARGETS:
        TARGETS.popitem()
    saved[NAME] = _other_entry()
    TARGETS.update(saved)


def _replace_by_clear_and_update():
    saved = dict(TARGETS)
    TARGETS.clear()
    saved[NAME] = _other_entry()
    TARGETS.update(**saved)


@pytest.mark.parametrize("replace", [
    _replace_by_update, _replace_by_or, _replace_by_delete_and_setdefault, _replace_by_pop_and_setitem,
    _replace_by_popitem_and_update, _replace_by_clear_and_update])
def test_a_target_entry_replaced_by_any_dict_method_is_read_again(stamplib, replace):
    # convert rereads an entry only when the table says it changed (libraries.TargetTable).
    stamplib.other_import = lambda x: ("other", x)
    saved = dict(TARGETS)
    try:
        replace()
        assert dlbridge.convert(np.arange(3.0), NAME)[0] == "other"
    finally:
        TARGETS.clear()
        TARGETS.update(saved)
    assert dlbridge.convert(np.arange(3.0), NAME)[0] == "first"


def test_an_unrelated_module_import_keeps_the_target_right(stamplib):
    # sys.modules changes with every new module; the function is looked up again and is the same one.
    sys.modules["stamplib_unrelated"] = types.ModuleType("stamplib_unrelated")
    try:
        assert dlbridge.convert(np.arange(3.0), NAME)[0] == "first"
    finally:
        del sys.modules["stamplib_unrelated"]
    assert stamplib.calls == ["first"] * 3
