"""apache-tvm-ffi (0.1.15.post2): asks for legacy capsules only, ignores READ_ONLY, has no
copy keyword."""

from __future__ import annotations

from ._spec import NotObservable, Target

NAME = "tvm_ffi"
RANK = 8
MODULE = "tvm_ffi"
CONSUMER = "tvm_ffi:from_dlpack"
IMPORT_SECONDS = 2.0

TARGET = Target("tvm_ffi", read_only="ignored", strides="any", copy_keyword=False,
                array_types=("tvm_ffi:Tensor",), note="asks for legacy capsules only; no copy keyword")


def make(shape, dtype, readonly=False):
    """A tvm_ffi.Tensor over a fresh NumPy array, for `dlbridge check tvm_ffi`."""
    import tvm_ffi

    from .numpy import make as numpy_make

    if readonly:
        raise NotObservable("tvm_ffi has no read-only tensors")
    return tvm_ffi.from_dlpack(numpy_make(shape, dtype))


SUPPORTS_READONLY = False
