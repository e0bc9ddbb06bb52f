"""``dlbridge.convert``: hand an array to another library with the least work it accepts.

``convert`` and ``plan_convert`` are the extension's (src/python/convert.cpp); the decision
they carry out is the core's ``plan_convert`` (include/dlbridge/exchange/plan_convert.hpp). What each
library accepts is stated in its module of ``dlbridge.libraries``. This module only says
which description a target names (``_target_of``); it decides nothing about a hand-over.
"""

from __future__ import annotations

import contextlib
import importlib
from typing import Any, Callable, Iterator

from . import _core, libraries
from .libraries._spec import Target

TARGETS = libraries.TARGETS

# A target we know nothing about gets the cautious reading: it may write through what it
# imports and may not take copy=.
_UNKNOWN = dict(read_only="ignored", strides="any", devices=None, dtypes=None, copy_keyword=False)


def target_names() -> list[str]:
    """Every name convert takes besides modules and callables: "dlbridge" and each library's."""
    return ["dlbridge", *TARGETS]


def _target_of(to) -> tuple[str, Target | None, Callable[..., Any] | None, tuple[type, ...],
                            tuple[tuple[type, ...], tuple[str, ...]]]:
    """(name, description, importer, array classes, direct classes) for `to`: description None
    means dlbridge itself; importer None means Target.module's attribute Target.entry (looked up
    per call); the array classes are the library's own (``libraries.array_classes``), which
    convert returns as they are; the direct classes are those the importer is handed as they are
    (``libraries.direct_classes``)."""
    name, target, importer = _described(to)
    if target is None:
        return name, target, importer, (), ((), ())
    return name, target, importer, libraries.array_classes(target), libraries.direct_classes(target)


def _described(to) -> tuple[str, Target | None, Callable[..., Any] | None]:
    if isinstance(to, str):
        if to == "dlbridge":
            return "dlbridge", None, None
        target = TARGETS.get(to)
        if target is not None:
            libraries.import_library(to)
            importlib.import_module(target.module)
            target = libraries.installed_target(to, target)
            if target.prepare is not None:
                target.prepare()
            return to, target, None
        unknown = ValueError(f"unknown conversion target {to!r}; use one of {', '.join(target_names())}, "
                             "or pass a module or callable that has from_dlpack")
        # Only a dotted module name is looked up: importlib answers "" and ".x" with its own
        # ValueError and TypeError, which say nothing about convert.
        if not all(part.isidentifier() for part in to.split(".")):
            raise unknown
        try:
            module = importlib.import_module(to)
        except ImportError:
            raise unknown from None
        return _described_object(module)
    return _described_object(to)


def _described_object(to) -> tuple[str, Target | None, Callable[..., Any]]:
    fn = getattr(to, "from_dlpack", None)
    if fn is None and callable(to):
        fn = to
    if fn is None:
        raise TypeError(f"convert target {to!r} is neither a known name nor has from_dlpack")
    name = getattr(to, "__name__", None)
    if not isinstance(name, str):
        name = type(to).__name__
    top = name.split(".")[0]
    if top == "dlbridge":
        return "dlbridge", None, None
    for library, module in libraries.LIBRARIES.items():
        if module.MODULE.split(".")[0] == top:
            # A library we have data for, passed as an object rather than by name.
            return library, libraries.installed_target(library), fn
    return name, Target(name, **_UNKNOWN), fn


@contextlib.contextmanager
def alias_readonly(enabled: bool = True) -> Iterator[None]:
    """Inside the block, ``convert`` and ``plan_convert`` calls that pass no ``alias_readonly=``
    take it as ``enabled``: read-only or writability-unknown memory reaches a target that cannot
    see READ_ONLY (torch, paddle, ...) zero-copy, exactly as that library's own ``from_dlpack``
    would hand it over, instead of as one private copy. Never write through such a result.
    A context variable: each thread and asyncio task has its own; blocks nest."""
    if not isinstance(enabled, bool):
        raise TypeError(f"alias_readonly(enabled) must be True or False, got {type(enabled).__name__}")
    token = _core._alias_readonly_scope.set(enabled)
    try:
        yield
    finally:
        _core._alias_readonly_scope.reset(token)


convert = _core.convert
plan_convert = _core.plan_convert
_core._install_convert(TARGETS, _target_of)
TARGETS.changed = _core._targets_changed

# Structures of arrays (dicts, lists, tuples, Arrow tables, JAX nodes): the extension hands them to
# the walker, which converts each leaf through convert itself.
from . import structures as _structures  # noqa: E402  (it reads the extension's convert)

_core._install_structures(_structures.convert_structure, _structures.plan_structure, _structures.is_structure)
