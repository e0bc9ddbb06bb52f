"""NumPy (2.4.6): reads versioned capsules and honours READ_ONLY; its from_dlpack has no
bfloat16, FP8, FP4 or int4, which ml_dtypes defines as NumPy dtypes under the DLPack names.

Older releases (observed at first use, for_installed): before 2.1 from_dlpack takes no keywords
and __dlpack__ no max_version (legacy capsules only, never of read-only memory: a read-only
array is refused, and dlbridge reads it through __array_interface__); before 2.2 every import
is read-only. Where from_dlpack would give a read-only array for writable memory, dlbridge hands
tensors over through __array_interface__ (numpy.asarray), which keeps writability either way."""

from __future__ import annotations

import math

import dataclasses

from ._spec import CPU, CUDA_HOST, FLOAT8, ROCM_HOST, STANDARD_DTYPES, Extension, Peer, Target

NAME = "numpy"
RANK = 1
MODULE = "numpy"
CONSUMER = "numpy:from_dlpack"
# NumPy exports read-only memory only in versioned capsules (a legacy request for it is refused),
# so its legacy capsules carry writable memory.
LEGACY_EXPORT_WRITABLE = True

# The DLPack names ml_dtypes (0.5+) defines NumPy dtypes for, under the same names.
ML_DTYPES = FLOAT8 | {
    "bfloat16", "float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float6_e2m3fn", "float6_e3m2fn",
    "float4_e2m1fn", "int4", "uint4", "int2", "uint2", "int1", "uint1",
}


def _view_as(tensor, dtype):
    # NumPy takes the Tensor through __array_interface__ as raw '|V<n>' elements
    # (its from_dlpack refuses these codes) and the view relabels them without a
    # copy; the array's base chain keeps the Tensor, so the memory, alive.
    import numpy

    return numpy.asarray(tensor).view(dtype)


def _as_array(tensor, copy=None):
    # __array_interface__ says whether the memory is read-only, and NumPy keeps it either way.
    import numpy

    return numpy.asarray(tensor)


TARGET = Target(
    "numpy", read_only="honoured", strides="any", devices=frozenset({CPU, CUDA_HOST, ROCM_HOST}),
    dtypes=STANDARD_DTYPES, array_types=("numpy:ndarray",),
    direct_from=("jaxlib._jax:ArrayImpl",),
    extension=Extension("ml_dtypes", ML_DTYPES, one_per_byte=True, hand_over=_view_as),
    note="from_dlpack has no bfloat16/FP8/FP4/int4 (ml_dtypes holds them); host memory only",
)


def for_installed(target: Target, facts) -> Target:
    """The Target for the installed NumPy: whether its from_dlpack takes copy= and whether its
    imports of writable memory are writable, both observed on a NumPy array of one element."""
    import numpy as np

    probe = np.zeros(1)
    try:
        np.from_dlpack(probe, copy=False)
        keywords = True
    except TypeError:
        keywords = False
    facts.seen(f"from_dlpack takes copy=: {'yes' if keywords else 'no'}")
    writable = bool(np.from_dlpack(probe).flags.writeable)
    facts.seen(f"from_dlpack of writable memory is writable: {'yes' if writable else 'no'}")
    facts.seen("legacy export carries writable memory only (read-only arrays are refused or versioned)")
    if keywords and writable:
        return target
    return dataclasses.replace(
        target, entry="", hand_over=_as_array, copy_keyword=False, direct_from=(),
        note=target.note + "; this release's from_dlpack gives read-only arrays: handed over through "
                           "__array_interface__")


def make(shape, dtype, readonly=False):
    """A fresh NumPy array for `dlbridge check numpy`."""
    import numpy as np

    a = np.arange(math.prod(shape), dtype=np.float32 if dtype == "float32" else None).reshape(shape).astype(dtype)
    if readonly:
        a.flags.writeable = False
    return a


SUPPORTS_READONLY = True


def peer() -> Peer:
    """The doctor's driver: a case's NumPy array is NumPy's own."""
    import numpy as np

    return Peer(make=lambda a: a, consume=np.from_dlpack, data_ptr=lambda a: a.__array_interface__["data"][0],
                to_numpy=np.asarray, writable=lambda a: bool(a.flags.writeable), array_type=np.ndarray)
