"""Arrow's second look inside dlbridge.from_dlpack.

The core importer (src/python/fast_calls.cpp) calls second_look only after
pyarrow's own __dlpack__ refused an Arrow object, so every other import costs
nothing more.
"""

from __future__ import annotations

from .. import _core
from . import arrow


def second_look(x, refusal, device, copy):
    return arrow.import_array(x, refusal, device=device, copy=copy)


_core._install_arrow_second_look(second_look)
