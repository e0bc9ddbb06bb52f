"""The array libraries doctor drives, as producers and as consumers.

What doctor knows of each library is in its module of ``dlbridge.libraries`` (``peer()``:
how to make its array from a NumPy array, its own from_dlpack, how to read back a data
pointer, values and writability; ``cannot_make``; import ordering). This
module adds dlbridge itself and finds which are installed. Libraries that are not
installed are simply absent; nothing here imports them at module level.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any, Callable

from .. import libraries as _libraries
from ..libraries._spec import NotApplicable  # noqa: F401  (the doctor's name for a case a producer cannot make)

# The order doctor lists them in; only importable ones are used.
KNOWN = (*_libraries.LIBRARIES, "dlbridge")


def direct_aborts(consumer: str) -> tuple[str, ...]:
    """The doctor's cases that kill the process when handed to this consumer directly."""
    return tuple(_libraries.fact(consumer, "DIRECT_ABORTS", ()))


def cannot_make(producer: str) -> Callable[[Any], str | None] | None:
    """The producer's own test of which cases it cannot make, decided without importing it."""
    return _libraries.fact(producer, "cannot_make")


@dataclasses.dataclass
class Library:
    name: str
    version: str
    make: Callable[[Any], Any] | None             # numpy array -> this library's array, same layout
    consume: Callable[[Any], Any] | None          # this library's from_dlpack
    data_ptr: Callable[[Any], int] | None
    to_numpy: Callable[[Any], Any] | None
    writable: Callable[[Any], bool | None]        # None: the library has no notion of writes
    array_type: type | None = None

    @property
    def c_exchange_api(self) -> str:
        if self.array_type is None:
            return "n/a"
        if hasattr(self.array_type, "__dlpack_c_exchange_api__"):
            return "1.3 capsule"
        if hasattr(self.array_type, "__c_dlpack_exchange_api__"):
            return "1.2 int"
        return "no"


def importable(name: str) -> bool:
    return name == "dlbridge" or _libraries.installed(name)


def _version(module) -> str:
    return str(getattr(module, "__version__", "?"))


def _dlbridge() -> Library:
    import numpy as np

    import dlbridge

    return Library(
        "dlbridge", _version(dlbridge), make=dlbridge.from_dlpack, consume=dlbridge.from_dlpack,
        data_ptr=lambda t: t.data_ptr, to_numpy=np.from_dlpack, writable=lambda t: not t.readonly,
        array_type=getattr(dlbridge, "Tensor", None),
    )


def load(name: str) -> Library:
    """The library, imported (in the order that keeps the process alive) and ready to drive."""
    if name == "dlbridge":
        return _dlbridge()
    module = _libraries.import_library(name, order_others=True)
    # The top package's version, or the imported module's where only it has one (mlx.core).
    version = _version(importlib.import_module(_libraries.fact(name, "MODULE", name).split(".")[0]))
    if version == "?":
        version = _version(module)
    peer = _libraries.fact(name, "peer")
    if peer is None:  # installed, not driven yet: listed so the report shows it is there
        return Library(name, _version(module), None, None, None, None, lambda x: None)
    p = peer()
    return Library(name, version, make=p.make, consume=p.consume, data_ptr=p.data_ptr, to_numpy=p.to_numpy,
                   writable=p.writable, array_type=p.array_type)


def drives(name: str) -> bool:
    """Whether the doctor can make and read this library's arrays (it has a peer)."""
    return name == "dlbridge" or _libraries.fact(name, "peer") is not None


def import_order(names) -> list[str]:
    """names, with the installed libraries that must be imported before them (those that crash
    when imported after one of names: libraries/<name>.py, CRASHES_WHEN_IMPORTED_AFTER), in a
    safe order."""
    names = list(names)
    for other, module in _libraries.LIBRARIES.items():
        crashes_after = getattr(module, "CRASHES_WHEN_IMPORTED_AFTER", ())
        if other not in names and any(n in crashes_after for n in names) and _libraries.installed(other):
            names.append(other)
    return sorted(names, key=lambda n: KNOWN.index(n) if n in KNOWN else len(KNOWN))


def module_name(name: str) -> str:
    """What to import for the library (dlbridge's own name for it may differ: arrow is pyarrow)."""
    return "dlbridge" if name == "dlbridge" else _libraries.fact(name, "MODULE", name)


def discover(names=None) -> tuple[dict[str, Library], dict[str, str]]:
    """(libraries loaded, {name: why not} for the known ones that are absent or broken)."""
    loaded, missing = {}, {}
    for name in import_order(names or KNOWN):
        if name not in KNOWN:
            missing[name] = "unknown to doctor"
            continue
        if not importable(name):
            missing[name] = "not installed"
            continue
        try:
            loaded[name] = load(name)
        except Exception as exc:  # a broken install is a finding, not a doctor crash
            missing[name] = f"import failed: {type(exc).__name__}: {exc}"
    return loaded, missing
