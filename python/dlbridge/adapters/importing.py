"""dlbridge.from_dlpack: the core importer, and a second chance for Arrow objects.

The core reads anything with __dlpack__; only when it fails is the object looked at
again, so the common path costs one Python call more than the core alone.
"""

from __future__ import annotations

from .._core import from_dlpack as _core_from_dlpack
from . import arrow


def from_dlpack(x, /, *, device=None, copy=None):
    try:
        return _core_from_dlpack(x, device=device, copy=copy)
    except Exception as exc:
        if arrow.is_arrow(x):
            return arrow.import_array(x, exc, device=device, copy=copy)
        raise


from_dlpack.__doc__ = _core_from_dlpack.__doc__
