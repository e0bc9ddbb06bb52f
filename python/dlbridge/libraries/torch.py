"""PyTorch (2.13.0, CPU build): reads versioned capsules but never sets or honours READ_ONLY;
negative strides from another library abort the process; has a DLPack 1.3 C exchange API
(torch.Tensor.__dlpack_c_exchange_api__). Its conjugate and negative bits are resolved by the
core's importer (src/python/libraries/torch.cpp)."""

from __future__ import annotations

import math

from ._spec import CPU, CUDA, FLOAT8, ROCM, STANDARD_DTYPES, NotApplicable, NotObservable, Peer, Target

NAME = "torch"
RANK = 2
MODULE = "torch"
CONSUMER = "torch:from_dlpack"
# The doctor's cases whose direct hand-over kills the consumer's process.
DIRECT_ABORTS = ("negative",)

TARGET = Target(
    "torch", read_only="ignored", strides="nonnegative", devices=frozenset({CPU, CUDA, ROCM}),
    dtypes=(STANDARD_DTYPES | FLOAT8 | {"bfloat16"}) - {"uint16", "uint32", "uint64"},
    exchange_api="Tensor", array_types=("torch:Tensor",),
    note="never sets or honours READ_ONLY; negative strides abort the process",
)


def make(shape, dtype, readonly=False):
    """A fresh torch tensor for `dlbridge check torch`."""
    import torch

    if readonly:
        raise NotObservable("torch tensors have no read-only state")
    return torch.arange(math.prod(shape), dtype=getattr(torch, dtype)).reshape(shape)


SUPPORTS_READONLY = False


def peer() -> Peer:
    """The doctor's driver: torch.from_numpy keeps the layout (bfloat16 through its raw bits)."""
    import numpy as np
    import torch

    def make(a):
        if not a.flags.writeable:
            raise NotApplicable("torch tensors cannot be read-only")
        if a.dtype.name == "bfloat16":
            return torch.from_numpy(a.view(np.uint16)).view(torch.bfloat16)
        try:
            return torch.from_numpy(a)
        except (ValueError, TypeError) as exc:
            raise NotApplicable(str(exc)) from None

    def to_numpy(t):
        t = t.detach().cpu().resolve_conj()
        if t.dtype == torch.bfloat16:
            import ml_dtypes

            return t.view(torch.uint16).numpy().view(ml_dtypes.bfloat16)
        return t.numpy()

    return Peer(make=make, consume=torch.from_dlpack, data_ptr=lambda t: t.data_ptr(), to_numpy=to_numpy,
                writable=lambda t: True, array_type=torch.Tensor)
