"""NumPy (2.4.6): reads versioned capsules and honours READ_ONLY; its from_dlpack has no
bfloat16, FP8, FP4 or int4, which ml_dtypes defines as NumPy dtypes under the DLPack names."""

from __future__ import annotations

import math

from ._spec import CPU, CUDA_HOST, FLOAT8, ROCM_HOST, STANDARD_DTYPES, Extension, Peer, Target

NAME = "numpy"
RANK = 1
MODULE = "numpy"
CONSUMER = "numpy:from_dlpack"

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


TARGET = Target(
    "numpy", read_only="honoured", strides="any", devices=frozenset({CPU, CUDA_HOST, ROCM_HOST}),
    dtypes=STANDARD_DTYPES, array_types=("numpy:ndarray",),
    direct_from=("jaxlib._jax:ArrayImpl",),
    extension=Extension("ml_dtypes", ML_DTYPES, one_per_byte=True, hand_over=_view_as),
    note="from_dlpack has no bfloat16/FP8/FP4/int4 (ml_dtypes holds them); host memory only",
)


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
