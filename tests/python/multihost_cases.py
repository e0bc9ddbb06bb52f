"""What the multi-host tests send (tests/python/test_multihost_ray.py, test_multihost_dask.py), and how a
receiving host describes what arrived. Imported on every test host (by the driver and by the engines'
workers), so it imports only what every host has.

Each case is made fresh by name on the sending host; `describe` gives, for every tensor in a value (lists
and dicts walked), what the docs promise about it on arrival: dtype, shape, strides, flags, writability,
the alignment of element 0, whether it is a shared-memory tensor, and a digest of its values (the bytes of a
C-order copy, so two hosts compare values bit for bit without sending them back)."""

from __future__ import annotations

import hashlib

import ml_dtypes
import numpy as np

import dlbridge

MiB = 1 << 20
# Ray keeps objects under 100 KiB inline in its messages; a large case goes through the object stores.
LARGE = 4 * MiB


def _readonly(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


def _torch():
    import torch
    return dlbridge.from_dlpack(torch.arange(LARGE // 4, dtype=torch.float32).reshape(512, -1))


def _jax():
    import jax
    jax.config.update("jax_platforms", "cpu")
    import jax.numpy as jnp
    # JAX hands over a legacy capsule: read-only to every view, writability unknown (docs/boundary.md).
    return dlbridge.from_dlpack(jnp.arange(LARGE // 4, dtype=jnp.int32).reshape(-1, 256))


MAKERS = {
    "dense": lambda: dlbridge.from_dlpack(np.arange(LARGE // 4, dtype=np.float32).reshape(1024, -1)),
    "fortran": lambda: dlbridge.from_dlpack(np.arange(LARGE // 8, dtype=np.float64).reshape(1024, -1).T),
    "strided": lambda: dlbridge.from_dlpack(np.arange(2 * LARGE // 8, dtype=np.float64).reshape(2048, -1)[::2, ::-1]),
    "readonly": lambda: dlbridge.from_dlpack(_readonly(np.arange(LARGE // 2, dtype=np.int16))),
    "int4": lambda: dlbridge.from_dlpack((np.arange(LARGE) % 16 - 8).astype(ml_dtypes.int4)),
    "bfloat16": lambda: dlbridge.from_dlpack(np.linspace(-4, 4, LARGE // 2).astype(ml_dtypes.bfloat16)),
    "zero_d": lambda: dlbridge.from_dlpack(np.array(3.25)),
    "size_0": lambda: dlbridge.from_dlpack(np.empty((0, 7), dtype=np.complex64)),
    "from_torch": _torch,
    "from_jax": _jax,
    "from_numpy": lambda: dlbridge.convert(np.arange(LARGE // 8, dtype=np.uint64), "dlbridge"),
    "list": lambda: [MAKERS["dense"](), MAKERS["bfloat16"](), MAKERS["zero_d"]()],
    "dict": lambda: {"weights": MAKERS["fortran"](), "nested": {"ids": [MAKERS["int4"](), MAKERS["size_0"]()]}},
}
TENSOR_CASES = [name for name in MAKERS if name not in ("list", "dict")]


def make(name: str):
    return MAKERS[name]()


def shared(nbytes: int = LARGE) -> dlbridge.Tensor:
    """A tensor in this host's shared memory (/dev/shm), filled."""
    t = dlbridge.empty((nbytes // 4,), "float32", shared=True)
    np.from_dlpack(t)[...] = 1.5
    return t


def tensors(value) -> list:
    """The tensors in value, depth first (dict values in key order)."""
    if isinstance(value, dlbridge.Tensor):
        return [value]
    if isinstance(value, dict):
        return [t for key in sorted(value) for t in tensors(value[key])]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in tensors(item)]
    raise TypeError(f"not a tensor, list or dict: {type(value).__name__}")


def digest(t: dlbridge.Tensor) -> str:
    return hashlib.sha256(dlbridge.convert(t, "numpy", copy=True).tobytes()).hexdigest()


def describe_tensor(t: dlbridge.Tensor) -> dict:
    return {"type": type(t).__name__, "dtype": t.dtype.name, "shape": list(t.shape), "strides": list(t.strides),
            "flags": t.flags, "readonly": t.readonly, "nbytes": t.nbytes, "device": str(t.device),
            "shared": t.is_shared, "align64": t.data_ptr % 64 == 0 if t.size else True,
            "c_contiguous": t.is_c_contiguous, "digest": digest(t), "data_ptr": t.data_ptr}


def describe(value) -> dict:
    """The shape of value (lists and dict keys kept) and what each of its tensors is."""
    if isinstance(value, dlbridge.Tensor):
        return {"tensor": describe_tensor(value)}
    if isinstance(value, dict):
        return {"dict": {key: describe(value[key]) for key in sorted(value)}}
    if isinstance(value, (list, tuple)):
        return {"list": [describe(item) for item in value]}
    return {"other": type(value).__name__}


def payload_bytes(value) -> int:
    return sum(t.nbytes for t in tensors(value))


def error_record(exc: BaseException) -> dict:
    """What a user sees of an exception: its class and bases, a dlbridge code and hint where it has them."""
    cause = exc
    while cause is not None and not isinstance(cause, dlbridge.DLPackError):
        cause = cause.__cause__ or getattr(cause, "cause", None)
    return {"type": type(exc).__name__, "module": type(exc).__module__,
            "mro": [c.__name__ for c in type(exc).__mro__], "message": str(exc)[:4000],
            "is_device_unavailable": isinstance(exc, dlbridge.DeviceUnavailableError),
            "dlbridge": None if cause is None else {"type": type(cause).__name__,
                                                    "code": getattr(cause, "code", None),
                                                    "hint": getattr(cause, "hint", None)}}
