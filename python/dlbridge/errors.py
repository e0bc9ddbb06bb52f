"""The exceptions dlbridge raises when a tensor cannot be expressed or exchanged.

Every class subclasses :class:`DLPackError`, itself a :class:`BufferError`, so
code that already falls back on ``BufferError`` keeps working. ``code`` is a
stable string (documented in docs/errors.md, shown by ``dlbridge explain``),
``hint`` says what to do about it, and ``record`` / ``link`` lead to its catalogue entry.

The classes are made from the core's table of error codes; the package registers them with the
extension (``dlbridge/__init__.py``), which raises them for the C++ errors of each code.
"""

from __future__ import annotations

from . import _core


class DLPackError(BufferError):
    """Base class of every dlbridge exchange failure."""

    code: str = "dlpack_error"

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(f"{message} {hint}" if hint else message)
        self.message = message
        self.hint = hint

    @property
    def record(self):
        """This error's catalogue entry (a ``dlbridge.catalogue.Record``), found from ``code``."""
        # Imported here: the JSON catalogue is read only when an entry is asked for.
        from .catalogue import by_code

        return by_code().get(self.code)

    @property
    def link(self) -> str | None:
        """Where the entry is documented: ``docs/errors.md#`` and the code."""
        record = self.record
        return record.link if record is not None else None


def _classes_of_the_table() -> dict[str, type[DLPackError]]:
    """One class per coded row of the C++ core's error table (include/dlbridge/error.hpp): its name,
    bases and docstring come from the row, so no code is spelled twice. Codes whose class is a
    built-in (ValueError, MemoryError) have none here."""
    bases_by_name = {"DLPackError": DLPackError, "ValueError": ValueError, "TypeError": TypeError}
    classes = {}
    for code, name, bases, meaning in _core._error_codes():
        if not bases:
            continue
        namespace = {"__doc__": meaning, "__module__": __name__, "__qualname__": name, "code": code}
        classes[code] = type(name, tuple(bases_by_name[b] for b in bases), namespace)
    return classes


# code -> class; each class is also a name of this module (dlbridge.errors.ReadOnlyError).
ERROR_CLASSES = _classes_of_the_table()
globals().update({cls.__name__: cls for cls in ERROR_CLASSES.values()})

__all__ = ["DLPackError", "ERROR_CLASSES", *(cls.__name__ for cls in ERROR_CLASSES.values())]
