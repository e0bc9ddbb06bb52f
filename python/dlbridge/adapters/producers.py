"""``dlbridge check`` targets for TensorFlow, PaddlePaddle, PyArrow, Warp and MLX: each
makes a fresh CPU array with the library's own constructors, as check.BUILTIN's do."""

from __future__ import annotations

import importlib.util
import math


def _host(shape, dtype):
    import numpy as np

    return np.arange(math.prod(shape)).reshape(shape).astype(dtype)


def _no_readonly(library: str):
    from ..check import NotObservable

    return NotObservable(f"{library} arrays have no read-only state")


def import_tensorflow():
    # paddle 3.3.1 dies (SIGSEGV) when imported after tensorflow 2.21.0; before it is fine.
    if importlib.util.find_spec("paddle") is not None:
        import paddle  # noqa: F401
    import tensorflow

    return tensorflow


def _tensorflow_make(shape, dtype, readonly=False):
    if readonly:
        raise _no_readonly("tensorflow")
    return import_tensorflow().constant(_host(shape, dtype))


def _paddle_make(shape, dtype, readonly=False):
    import paddle

    if readonly:
        raise _no_readonly("paddle")
    return paddle.arange(math.prod(shape), dtype=dtype).reshape(list(shape))


def _arrow_make(shape, dtype, readonly=False):
    # Arrow data is immutable, so a read-only array is any array.
    import pyarrow as pa

    from ..check import NotObservable

    if len(shape) == 0:
        raise NotObservable("arrow arrays have at least one dimension")
    host = _host(shape, dtype)
    if len(shape) == 1:
        return pa.array(host)
    return pa.FixedShapeTensorArray.from_numpy_ndarray(host)


def _warp_make(shape, dtype, readonly=False):
    from .warp import _warp

    if readonly:
        raise _no_readonly("warp")
    return _warp().array(_host(shape, dtype), device="cpu")


def _mlx_make(shape, dtype, readonly=False):
    import mlx.core as mx

    if readonly:
        raise _no_readonly("mlx")
    return mx.arange(math.prod(shape), dtype=getattr(mx, dtype)).reshape(shape)


def producers(producer_cls) -> dict:
    """Entries for check.BUILTIN: name -> () -> Producer."""
    return {
        "tensorflow": lambda: producer_cls("tensorflow", _tensorflow_make, False),
        "paddle": lambda: producer_cls("paddle", _paddle_make, False),
        "arrow": lambda: producer_cls("arrow", _arrow_make, True),
        "warp": lambda: producer_cls("warp", _warp_make, False),
        "mlx": lambda: producer_cls("mlx", _mlx_make, False),
    }
