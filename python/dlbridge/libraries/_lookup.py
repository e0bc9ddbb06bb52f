"""``module:attribute.path`` names, read one way wherever dlbridge takes one: a library's array
classes (``Target.array_types``), its importer (``CONSUMER``), and what users pass to
``dlbridge check`` and the pytest plugin."""

from __future__ import annotations

import importlib
import sys


class MissingAttribute(AttributeError):
    """``owner`` (the object reached so far, ``owner_name`` its dotted name) has no attribute ``name``."""

    def __init__(self, owner: object, owner_name: str, name: str) -> None:
        super().__init__(f"{owner_name!r} has no attribute {name!r}")
        self.owner, self.owner_name, self.name = owner, owner_name, name


def lookup(path: str, *, imported_only: bool = False):
    """The object that ``path`` names.

    The module is imported (its ImportError propagates) and an attribute missing on the way
    raises MissingAttribute. With ``imported_only`` nothing is imported: None where the module is
    not imported yet or lacks an attribute on the way (a library's classes exist only once its
    module is imported)."""
    module_name, _, attributes = path.partition(":")
    if imported_only:
        found = sys.modules.get(module_name)
    else:
        found = importlib.import_module(module_name)
    owner_name = module_name
    for part in attributes.split(".") if attributes else ():
        if found is None:
            return None
        try:
            found = getattr(found, part)
        except AttributeError:
            if imported_only:
                return None
            raise MissingAttribute(found, owner_name, part) from None
        owner_name = f"{owner_name}.{part}"
    return found
