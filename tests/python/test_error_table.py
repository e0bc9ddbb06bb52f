"""The one table of error codes (include/dlbridge/error.hpp): the Python classes are made from it,
the extension raises the classes the package registered for it, and the error catalogue
(python/dlbridge/catalogue/dlbridge.json, which generates docs/errors.md) documents exactly its codes."""

import json
import pathlib
import re

import pytest

import dlbridge
from dlbridge import _core

ROOT = pathlib.Path(__file__).resolve().parents[2]
ROWS = _core._error_codes()
CODED = [row for row in ROWS if row[2]]


def test_the_catalogue_documents_every_coded_row_with_its_class():
    records = json.loads((ROOT / "python/dlbridge/catalogue/dlbridge.json").read_text())
    documented = {r["errorCode"]: r for r in records}
    assert set(documented) == {code for code, _, _, _ in CODED}
    for code, name, _, _ in CODED:
        assert documented[code]["id"] == f"dlbridge.{code}"
        assert documented[code]["errorClass"] == f"dlbridge.{name}"


def test_the_classes_are_the_rows():
    assert set(dlbridge.errors.ERROR_CLASSES) == {code for code, _, _, _ in CODED}
    for code, name, bases, meaning in CODED:
        cls = dlbridge.errors.ERROR_CLASSES[code]
        assert (cls.__name__, cls.code, cls.__doc__) == (name, code, meaning)
        assert [b.__name__ for b in cls.__bases__] == list(bases)
        assert getattr(dlbridge, name) is cls is getattr(dlbridge.errors, name)


def test_built_in_rows_are_reported_as_built_ins():
    builtins = {code: name for code, name, bases, _ in ROWS if not bases}
    assert builtins == {"invalid_argument": "ValueError", "out_of_memory": "MemoryError"}
    with pytest.raises(ValueError) as info:
        dlbridge.Device("cpu:-1")
    assert not isinstance(info.value, dlbridge.DLPackError)


def test_the_extension_raises_the_registered_class():
    with pytest.raises(dlbridge.ReadOnlyError) as info:
        import numpy as np

        a = np.arange(3.0)
        a.flags.writeable = False
        dlbridge.to_dlpack(a)
    assert type(info.value) is dlbridge.errors.ERROR_CLASSES["read_only"]


@pytest.mark.parametrize("change, error", [
    (lambda classes: classes.pop("read_only"), ValueError),
    (lambda classes: classes.update(read_only=dlbridge.LayoutError), ValueError),
    (lambda classes: classes.update(not_a_code=dlbridge.LayoutError), ValueError),
])
def test_registration_refuses_classes_that_differ_from_the_table(change, error):
    classes = dict(dlbridge.errors.ERROR_CLASSES)
    change(classes)
    with pytest.raises(error):
        _core._register_error_classes(classes, dlbridge.DLPackError)
    # Nothing was replaced: the package's classes are still the ones raised.
    with pytest.raises(dlbridge.StreamError):
        dlbridge.to_dlpack(dlbridge.empty(1), stream=5)


def test_registration_refuses_a_base_that_is_not_a_buffer_error():
    with pytest.raises(TypeError):
        _core._register_error_classes(dict(dlbridge.errors.ERROR_CLASSES), ValueError)


def test_each_code_is_spelled_once_outside_its_raise_sites():
    """The table is the only place that lists the codes: the enum, the C boundary's error kinds,
    the extension's mapping and the Python classes all read it."""
    table = (ROOT / "include/dlbridge/error.hpp").read_text()
    # Raise sites (fail(ErrorCode::read_only, ...)) name their code; nothing else in these files may.
    readers = {p: re.sub(r"ErrorCode::\w+", "", (ROOT / p).read_text()) for p in (
        "include/dlbridge/exchange_api.hpp", "src/python/errors.cpp", "python/dlbridge/errors.py")}
    for code, _, _, _ in ROWS:
        assert len(re.findall(rf"X\({code},", table)) == 1, code
        for path, text in readers.items():
            assert not re.search(rf"\b{code}\b", text), f"{path} spells {code}"
