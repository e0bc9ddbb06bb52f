"""MLX (0.32.4): copies every array it imports on the CPU; its from_dlpack asks for legacy
capsules, narrows float64 to float32 and complex128 to complex64, and refuses negative
strides. mx.array with an explicit dtype does neither, so those go that way."""

from __future__ import annotations

import math

from ._spec import CPU, INT32_MAX, STANDARD_DTYPES, EntryTakes, NotObservable, Target

NAME = "mlx"
RANK = 7
MODULE = "mlx.core"
IMPORT_SECONDS = 0.1

_MLX_NAMES = {"bool": "bool_"}
_NARROWED = frozenset({"float64", "complex128"})


def hand_over(tensor, copy=None):
    """An mlx array holding a copy of the tensor's values, in the tensor's own dtype."""
    import mlx.core as mx
    import numpy

    if tensor.dtype.name == "bfloat16":
        import ml_dtypes

        host = numpy.asarray(tensor).view(ml_dtypes.bfloat16)
    else:
        host = numpy.from_dlpack(tensor)
    return mx.array(host, dtype=getattr(mx, _MLX_NAMES.get(tensor.dtype.name, tensor.dtype.name)))


_HOLDS = (STANDARD_DTYPES - {"complex128"}) | {"bfloat16"}

TARGET = Target(
    "mlx.core", read_only="honoured", strides="any", devices=frozenset({CPU}), dtypes=_HOLDS,
    copies_on_import=True, max_extent=INT32_MAX, hand_over=hand_over,
    entry_takes=EntryTakes(dtypes=_HOLDS - _NARROWED, strides="nonnegative"), array_types=("mlx.core:array",),
    note="always copies on the CPU; its from_dlpack narrows float64 and complex128 and refuses negative strides",
)


def make(shape, dtype, readonly=False):
    """A fresh mlx array for `dlbridge check mlx`."""
    import mlx.core as mx

    if readonly:
        raise NotObservable("mlx arrays have no read-only state")
    return mx.arange(math.prod(shape), dtype=getattr(mx, dtype)).reshape(shape)


SUPPORTS_READONLY = False
