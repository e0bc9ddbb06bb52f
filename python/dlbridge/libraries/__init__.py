"""One module per array library dlbridge knows: everything dlbridge knows about that library.

Each module (``numpy.py``, ``torch.py``, ...) states, from measurements against the pinned
version (``requirements/libs.txt``):

- ``NAME`` (the name users pass to ``convert`` and ``check``), ``MODULE`` (what to import),
  ``RANK`` (where the doctor lists it), ``CONSUMER`` (its own importer, ``module:attribute``,
  where ``dlbridge.check_consumer`` has been measured against it);
- ``TARGET``: what its importer accepts, for ``convert`` (``_spec.Target``);
- ``make(shape, dtype, readonly=False)`` and ``SUPPORTS_READONLY``: fresh arrays for
  ``dlbridge check``;
- ``peer()`` (``_spec.Peer``) and ``cannot_make(array)``: how ``dlbridge doctor`` makes and
  reads its arrays;
- facts about importing it: ``CRASHES_WHEN_IMPORTED_AFTER``,
  ``DIRECT_ABORTS`` (the doctor's cases that kill a process when handed to it directly),
  ``LEGACY_EXPORT_WRITABLE`` (its legacy capsules carry writable memory);
- ``for_installed(target, facts)`` where releases differ: the Target for the installed release,
  each fact recorded as observed or assumed (``_release.py``; ``installed_target`` below).

Adding a library is one module here and its tests (CONTRIBUTING.md). Nothing here imports
the libraries themselves, and no module of this package imports the rest of dlbridge at
import time.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import sys
from types import ModuleType

from ._lookup import lookup
from ._release import Facts, version_text
from ._spec import Target


def _discover() -> dict[str, ModuleType]:
    found = []
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        found.append(module)
    found.sort(key=lambda m: (m.RANK, m.NAME))
    return {m.NAME: m for m in found}


class TargetTable(dict):
    """A dict that tells convert when it changes (``changed``, set by ``dlbridge.convert``):
    convert rereads a learnt target's entry only after a change, not on every call."""

    __slots__ = ("changed",)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.changed = lambda: None

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        self.changed()

    def __delitem__(self, key):
        super().__delitem__(key)
        self.changed()

    def __ior__(self, other):
        super().__ior__(other)
        self.changed()
        return self

    def pop(self, *args):
        try:
            return super().pop(*args)
        finally:
            self.changed()

    def popitem(self):
        try:
            return super().popitem()
        finally:
            self.changed()

    def setdefault(self, key, default=None):
        try:
            return super().setdefault(key, default)
        finally:
            self.changed()

    def update(self, *args, **kwargs):
        try:
            super().update(*args, **kwargs)
        finally:
            self.changed()

    def clear(self):
        super().clear()
        self.changed()


LIBRARIES: dict[str, ModuleType] = _discover()
# convert's table: the name users pass -> what that library's importer accepts.
TARGETS: TargetTable = TargetTable({name: m.TARGET for name, m in LIBRARIES.items()})


def fact(name: str, attribute: str, default=None):
    """One stated fact of a library (a module attribute), or default where it states none."""
    module = LIBRARIES.get(name)
    return getattr(module, attribute, default) if module is not None else default


def installed(name: str) -> bool:
    """Whether the library can be imported here (found, not imported)."""
    top = fact(name, "MODULE", name).split(".")[0]
    try:
        return importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        return False


def import_library(name: str, *, order_others: bool = False) -> ModuleType:
    """The library's module, imported without killing the process.

    A library that crashes when imported after another one that this process has
    already imported raises ImportError with the reason instead. order_others
    first imports the installed libraries that would crash if imported after this
    one (dlbridge check and doctor, which drive both, use it).
    """
    module_name = fact(name, "MODULE", name)
    if module_name not in sys.modules:
        for before in fact(name, "CRASHES_WHEN_IMPORTED_AFTER", ()):
            if fact(before, "MODULE", before) in sys.modules:
                raise ImportError(f"{name} crashes the process (SIGSEGV) when first imported after {before}, which "
                                  f"this process has imported; import {name} before {before}.")
        if order_others:
            for other, module in LIBRARIES.items():
                if name in getattr(module, "CRASHES_WHEN_IMPORTED_AFTER", ()) and installed(other):
                    import_library(other)
    return importlib.import_module(module_name)


# name -> (the stated Target it was derived from, the installed release's Target, its Facts).
_INSTALLED: dict[str, tuple[Target, Target, Facts]] = {}


def installed_target(name: str, stated: Target | None = None) -> Target:
    """The Target of the installed release of library `name` (imported by the caller): the module's
    ``for_installed`` applied to ``stated`` (``TARGETS[name]`` unless given), once per process and
    stated Target; the stated Target itself where the module defines no ``for_installed``."""
    stated = TARGETS[name] if stated is None else stated
    known = _INSTALLED.get(name)
    if known is not None and known[0] is stated:
        return known[1]
    module = LIBRARIES.get(name)
    adapt = getattr(module, "for_installed", None)
    facts = Facts(version=version_text(module.MODULE) if module is not None else "?")
    target = stated if adapt is None else adapt(stated, facts)
    _INSTALLED[name] = (stated, target, facts)
    return target


def release_facts(name: str) -> dict:
    """What the installed release's facts rest on (``Facts.as_dict``): the library is imported."""
    import_library(name, order_others=True)
    installed_target(name)
    return _INSTALLED[name][2].as_dict()


def array_classes(target: Target) -> tuple[type, ...]:
    """The library's own array classes (``target.array_types``) as far as its modules are imported."""
    found = (lookup(path, imported_only=True) for path in target.array_types)
    return tuple(cls for cls in found if isinstance(cls, type))


def direct_classes(target: Target) -> tuple[tuple[type, ...], tuple[str, ...]]:
    """``target.direct_from``'s classes as far as their modules are imported, and the modules of
    the others (convert learns the target again once one of them is imported)."""
    if target.direct_from and target.read_only == "ignored":
        raise ValueError("Target.direct_from needs a target that sees READ_ONLY or never writes: "
                         "handing an array over directly would skip the read-only copy")
    found = [(path, lookup(path, imported_only=True)) for path in target.direct_from]
    return (tuple(cls for _, cls in found if isinstance(cls, type)),
            tuple(path.partition(":")[0] for path, cls in found if not isinstance(cls, type)))


def producer_facts(cls: type) -> tuple[str, type, bool, bool] | None:
    """What the extension's importer needs to know of a producer type, asked once per type:
    (library name, its real array class, whether its legacy capsules carry writable memory,
    whether its capsules keep their memory alive: the module's export_keeps_memory() for the
    installed release, True where it states none), or None for a type of no library here."""
    for name, module in LIBRARIES.items():
        for real in array_classes(module.TARGET):
            if issubclass(cls, real) and getattr(cls, "__dlpack__", None) is getattr(real, "__dlpack__", None):
                keeps = getattr(module, "export_keeps_memory", None)
                return (name, real, bool(getattr(module, "LEGACY_EXPORT_WRITABLE", False)),
                        True if keeps is None else bool(keeps()))
    return None
