"""Arrow tables and record batches for ``convert``: a dict of column name -> the target's
tensor, each column converted as a call of its own would convert it (``structures``).

A column is a ``ChunkedArray`` (tables) or an ``Array`` (record batches); the single-array
import reads it (``libraries/arrow.py``): one chunk is handed over zero-copy where the target
may share it, several chunks are joined into one buffer (one copy, which the column's plan
says), nulls, strings and nested types are refused with the code a single call raises, and
a fixed-shape tensor column becomes an n-d tensor. pyarrow is never imported here: a table
can only exist once it is.
"""

from __future__ import annotations

import sys
from typing import Any, Callable


def _pyarrow():
    return sys.modules.get("pyarrow")


def is_table(x) -> bool:
    """Whether x is a pyarrow Table or RecordBatch."""
    pa = _pyarrow()
    return pa is not None and isinstance(x, (pa.Table, pa.RecordBatch))


def is_arrow_array(x) -> bool:
    """Whether x is a pyarrow Array or ChunkedArray (a column)."""
    pa = _pyarrow()
    return pa is not None and isinstance(x, (pa.Array, pa.ChunkedArray))


def walk(table, walk, path: Callable[[], str]) -> dict[str, Any]:
    """Each column of table through walk.leaf, keyed by its name; a name twice is refused."""
    names = table.column_names
    if len(set(names)) != len(names):
        twice = sorted({name for name in names if names.count(name) > 1})
        raise ValueError(f"{path()}: the table has more than one column named {', '.join(map(repr, twice))}; "
                         "a dict keeps one value per name. Rename them first (table.rename_columns).")
    return {name: walk.leaf(table.column(i), _column(path, name)) for i, name in enumerate(names)}


def _column(path: Callable[[], str], name: str) -> Callable[[], str]:
    return lambda: f"{path()}[{name!r}]"
