"""doctor's adapters for TensorFlow, PaddlePaddle, PyArrow, Warp and MLX.

Each makes its library's own array from a case's NumPy array through the library's
ordinary constructors (never through dlbridge), and reads results back the same way,
so a case checks the library, not dlbridge.
"""

from __future__ import annotations

from .libraries import Library, NotApplicable, _version


def _strided_layout(a) -> bool:
    return a.ndim >= 1 and a.size and not a.flags.c_contiguous


def _exported_pointer(x) -> int:
    # Where the library has no pointer accessor, its own export says where the data is.
    import dlbridge

    return dlbridge.inspect_capsule(x.__dlpack__())["data"]


def _tensorflow_cannot_make(a) -> str | None:
    if _strided_layout(a):
        return "tensorflow tensors are always compact row-major"
    if not a.flags.writeable:
        return "tensorflow tensors have no read-only flag (they are immutable)"
    return None


def _tensorflow():
    import tensorflow as tf

    def make(a):
        if (why := _tensorflow_cannot_make(a)) is not None:
            raise NotApplicable(why)
        return tf.constant(a)

    def consume(x):
        # TensorFlow's importer takes a capsule, never an array.
        return tf.experimental.dlpack.from_dlpack(x.__dlpack__())

    return Library("tensorflow", _version(tf), make=make, consume=consume, data_ptr=_exported_pointer,
                   to_numpy=lambda t: t.numpy(), writable=lambda t: None, array_type=type(tf.constant(0)))


def _paddle_cannot_make(a) -> str | None:
    if not a.flags.writeable:
        return "paddle tensors have no read-only state"
    if _strided_layout(a) and a.dtype.name != "bfloat16":  # bfloat16 is made through a cast, compact either way
        return "paddle.to_tensor always makes a compact copy"
    return None


def _paddle():
    import numpy as np
    import paddle

    def make(a):
        if (why := _paddle_cannot_make(a)) is not None:
            raise NotApplicable(why)
        if a.dtype.name == "bfloat16":
            return paddle.to_tensor(a.astype(np.float32)).astype("bfloat16")
        return paddle.to_tensor(a)

    def to_numpy(t):
        if t.dtype == paddle.bfloat16:
            import ml_dtypes

            # Paddle hands bfloat16 to NumPy as its raw uint16 bits.
            return t.numpy().view(ml_dtypes.bfloat16)
        return t.numpy()

    return Library("paddle", _version(paddle), make=make, consume=paddle.from_dlpack, data_ptr=lambda t: t.data_ptr(),
                   to_numpy=to_numpy, writable=lambda t: True, array_type=paddle.Tensor)


def _arrow():
    import pyarrow as pa

    def make(a):
        if a.ndim == 0:
            raise NotApplicable("arrow arrays have at least one dimension")
        if _strided_layout(a) or not a.flags.c_contiguous:
            raise NotApplicable("arrow arrays are compact")
        if a.dtype.kind == "c" or a.dtype.name == "bfloat16":
            raise NotApplicable(f"arrow has no {a.dtype.name}")
        if a.ndim == 1:
            return pa.array(a)
        if a.dtype == bool:
            raise NotApplicable("FixedShapeTensorArray.from_numpy_ndarray takes no booleans")
        return pa.FixedShapeTensorArray.from_numpy_ndarray(a)

    def consume(x):
        # Arrow has one importer per kind of array; the shape says which the user would call.
        # Arrow's own arrays have no .shape: a FixedShapeTensorArray is n-d, any other 1-d.
        shape = getattr(x, "shape", None)
        if shape is None:
            shape = (0, 0) if isinstance(x, pa.FixedShapeTensorArray) else (0,)
        if len(shape) == 1:
            return pa.Array.from_dlpack(x)
        return pa.FixedShapeTensorArray.from_dlpack(x)

    def to_numpy(x):
        if isinstance(x, pa.FixedShapeTensorArray):
            return x.to_numpy_ndarray()
        return x.to_numpy(zero_copy_only=False)

    return Library("arrow", _version(pa), make=make, consume=consume, data_ptr=_exported_pointer,
                   to_numpy=to_numpy, writable=lambda x: None, array_type=pa.Array)


def _warp():
    import warp as wp

    from dlbridge.adapters.warp import _warp as ready_warp

    ready_warp()

    def make(a):
        if a.ndim == 0:
            raise NotApplicable("warp arrays have at least one dimension")
        if not a.flags.writeable:
            raise NotApplicable("warp arrays have no read-only state")
        if a.dtype.kind == "c" or a.dtype.name == "bfloat16":
            raise NotApplicable(f"warp.array cannot be made from NumPy {a.dtype.name}")
        return wp.array(a, device="cpu")

    return Library("warp", _version(wp), make=make, consume=wp.from_dlpack, data_ptr=lambda x: x.ptr,
                   to_numpy=lambda x: x.numpy(), writable=lambda x: True, array_type=wp.array)


def _mlx():
    import mlx.core as mx
    import numpy as np

    def make(a):
        if _strided_layout(a):
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

    return Library("mlx", _version(mx), make=make, consume=mx.from_dlpack, data_ptr=_exported_pointer,
                   to_numpy=to_numpy, writable=lambda x: None, array_type=mx.array)


ADAPTERS = {"tensorflow": _tensorflow, "paddle": _paddle, "arrow": _arrow, "warp": _warp, "mlx": _mlx}
# The cases a producer cannot make, decided without importing it: the doctor's workers skip the
# import (seconds for these two) when every exchange left for the library is one of them.
CANNOT_MAKE = {"tensorflow": _tensorflow_cannot_make, "paddle": _paddle_cannot_make}
# Where the doctor's name is not the module's.
MODULES = {"arrow": "pyarrow", "mlx": "mlx.core"}
