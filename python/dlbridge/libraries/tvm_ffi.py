"""apache-tvm-ffi (0.1.15.post2): asks for legacy capsules only, ignores READ_ONLY, has no
copy keyword."""

from __future__ import annotations

from ._spec import NotApplicable, NotObservable, Peer, Target, exported_pointer

NAME = "tvm_ffi"
RANK = 8
MODULE = "tvm_ffi"
CONSUMER = "tvm_ffi:from_dlpack"

TARGET = Target("tvm_ffi", read_only="ignored", strides="any", copy_keyword=False, legacy_capsules_only=True,
                array_types=("tvm_ffi:Tensor",), note="asks for legacy capsules only; no copy keyword")


def make(shape, dtype, readonly=False):
    """A tvm_ffi.Tensor over a fresh NumPy array, for `dlbridge check tvm_ffi`."""
    import tvm_ffi

    from .numpy import make as numpy_make

    if readonly:
        raise NotObservable("tvm_ffi has no read-only tensors")
    return tvm_ffi.from_dlpack(numpy_make(shape, dtype))


SUPPORTS_READONLY = False


def peer() -> Peer:
    """The doctor's driver: tvm_ffi.from_dlpack of the NumPy array (its only constructor)."""
    import numpy as np
    import tvm_ffi

    def make(a):
        if not a.flags.writeable:
            raise NotApplicable("tvm_ffi asks for legacy capsules, which cannot carry read-only data")
        return tvm_ffi.from_dlpack(a)

    def data_ptr(t):
        # Tensor.data_ptr() is newer than 0.1.8; its own export says the same where it is absent.
        return t.data_ptr() if hasattr(t, "data_ptr") else exported_pointer(t)

    return Peer(make=make, consume=tvm_ffi.from_dlpack, data_ptr=data_ptr, to_numpy=np.from_dlpack,
                writable=lambda t: True, array_type=tvm_ffi.Tensor)
