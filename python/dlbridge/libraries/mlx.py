"""MLX (0.32.4; 0.29 has no from_dlpack, for_installed): copies every array it imports on the CPU; its from_dlpack asks for legacy
capsules, narrows float64 to float32 and complex128 to complex64, and refuses negative
strides, as mx.array does. mx.array with an explicit dtype keeps the dtype, and reads any
positive strides; negative ones are flipped before its copy and back after (an MLX view),
so that its one copy stays the only one."""

from __future__ import annotations

import dataclasses
import math

from ._spec import CPU, INT32_MAX, STANDARD_DTYPES, EntryTakes, NotApplicable, NotObservable, Peer, Target, exported_pointer, strided_layout

NAME = "mlx"
RANK = 7
MODULE = "mlx.core"

_MLX_NAMES = {"bool": "bool_"}
_NARROWED = frozenset({"float64", "complex128"})


def hand_over(tensor, copy=None):
    """An mlx array holding a copy of the tensor's values, in the tensor's own dtype."""
    # The modules are bound once: an import statement per call costs more than MLX's own
    # import of a small array.
    mx, numpy = _modules or _bind_modules()
    name = tensor.dtype.name
    if name == "bfloat16":
        import ml_dtypes

        host = numpy.asarray(tensor).view(ml_dtypes.bfloat16)
    else:
        host = numpy.asarray(tensor)  # a view through __array_interface__, on every NumPy release
    dtype = getattr(mx, _MLX_NAMES.get(name, name))
    if min(host.strides, default=0) >= 0:  # no reversed axis: mx.array reads the layout as it is
        return mx.array(host, dtype=dtype)
    flip = tuple(slice(None, None, -1) if step < 0 and size > 1 else slice(None)
                 for step, size in zip(host.strides, host.shape))
    reversed_axes = any(s.step == -1 for s in flip)
    if reversed_axes:
        host = host[flip]
    out = mx.array(host, dtype=dtype)
    return out[flip] if reversed_axes else out


_modules = None


def _bind_modules():
    global _modules
    import mlx.core
    import numpy

    _modules = (mlx.core, numpy)
    return _modules


_HOLDS = (STANDARD_DTYPES - {"complex128"}) | {"bfloat16"}

TARGET = Target(
    "mlx.core", read_only="honoured", strides="any", devices=frozenset({CPU}), dtypes=_HOLDS,
    copies_on_import=True, max_extent=INT32_MAX, hand_over=hand_over,
    entry_takes=EntryTakes(dtypes=_HOLDS - _NARROWED, strides="nonnegative"), array_types=("mlx.core:array",),
    note="always copies on the CPU; its from_dlpack narrows float64 and complex128 and refuses negative strides",
)


def for_installed(target: Target, facts) -> Target:
    """The Target for the installed MLX: its from_dlpack only where it has one (0.29 has none)."""
    import mlx.core as mx

    if hasattr(mx, "from_dlpack"):
        facts.seen("mlx.core.from_dlpack exists")
        return target
    facts.seen("no mlx.core.from_dlpack: every hand-over goes through mx.array")
    return dataclasses.replace(target, entry="", entry_takes=None,
                               note=target.note + "; this release has no from_dlpack (mx.array is used)")


def export_keeps_memory() -> bool:
    """Whether the installed MLX's capsules keep their memory alive: measured on 0.32.4; 0.29.4's
    point into the array's buffer without holding it (the values change once the array is freed),
    so older releases are read through the buffer protocol."""
    import mlx.core as mx

    from ._release import at_least

    return at_least(mx.__version__, 0, 32)


def make(shape, dtype, readonly=False):
    """A fresh mlx array for `dlbridge check mlx`."""
    import mlx.core as mx

    if readonly:
        raise NotObservable("mlx arrays have no read-only state")
    return mx.arange(math.prod(shape), dtype=getattr(mx, dtype)).reshape(shape)


SUPPORTS_READONLY = False


def peer() -> Peer:
    """The doctor's driver: mx.array with the dtype named (compact copies only)."""
    import mlx.core as mx
    import numpy as np

    def make(a):
        if strided_layout(a):
            raise NotApplicable("mx.array always makes a compact copy")
        if not a.flags.writeable:
            raise NotApplicable("mlx arrays have no read-only flag")
        name = "bool_" if a.dtype == bool else a.dtype.name
        if not hasattr(mx, name):
            raise NotApplicable(f"mlx has no {a.dtype.name}")
        return mx.array(a, dtype=getattr(mx, name))

    def to_numpy(x):
        if x.dtype == mx.bfloat16:
            import ml_dtypes

            return np.array(x.view(mx.uint16)).view(ml_dtypes.bfloat16)
        return np.array(x)

    def consume(x):
        return mx.from_dlpack(x)  # looked up per call: a release without it fails here, as a user's call would

    return Peer(make=make, consume=consume, data_ptr=exported_pointer, to_numpy=to_numpy,
                writable=lambda x: None, array_type=mx.array)
