"""PaddlePaddle (3.3.1): reads versioned capsules but never honours READ_ONLY, reads negative
strides as wrong values, and kills the process (SIGSEGV) when first imported after tensorflow."""

from __future__ import annotations

import dataclasses
import math

from ._spec import CPU, CUDA, STANDARD_DTYPES, NotApplicable, NotObservable, Peer, Target, strided_layout

NAME = "paddle"
RANK = 5
MODULE = "paddle"
# Measured with paddlepaddle 3.3.1 and tensorflow-cpu 2.21.0: SIGSEGV while importing paddle
# in a process that has imported tensorflow; the other order works.
CRASHES_WHEN_IMPORTED_AFTER = ("tensorflow",)

TARGET = Target(
    "paddle", read_only="ignored", strides="nonnegative", devices=frozenset({CPU, CUDA}),
    dtypes=STANDARD_DTYPES | {"bfloat16", "float8_e4m3fn", "float8_e5m2"}, array_types=("paddle:Tensor",),
    note="never honours READ_ONLY; reads negative strides as wrong values; dies when imported after tensorflow",
)


def for_installed(target: Target, facts) -> Target:
    """The Target for the installed Paddle: copy= is passed only where its from_dlpack names it
    (3.0.0's takes the array alone), read from its signature."""
    import inspect

    import paddle

    try:
        keywords = "copy" in inspect.signature(paddle.from_dlpack).parameters
    except (TypeError, ValueError):  # no signature to read: the cautious reading
        keywords = False
    facts.seen(f"from_dlpack takes copy=: {'yes' if keywords else 'no'}")
    return target if keywords else dataclasses.replace(target, copy_keyword=False)


def make(shape, dtype, readonly=False):
    """A fresh paddle tensor for `dlbridge check paddle`."""
    from . import import_library

    if readonly:
        raise NotObservable("paddle tensors have no read-only state")
    paddle = import_library("paddle")
    return paddle.arange(math.prod(shape), dtype=dtype).reshape(list(shape))


SUPPORTS_READONLY = False


def cannot_make(a) -> str | None:
    """Why the doctor's paddle.to_tensor cannot make this case, decided without importing paddle."""
    if not a.flags.writeable:
        return "paddle tensors have no read-only state"
    if strided_layout(a) and a.dtype.name != "bfloat16":  # bfloat16 is made through a cast, compact either way
        return "paddle.to_tensor always makes a compact copy"
    return None


def peer() -> Peer:
    """The doctor's driver: paddle.to_tensor (bfloat16 through a cast)."""
    import numpy as np

    from . import import_library

    paddle = import_library("paddle")

    def make(a):
        if (why := cannot_make(a)) is not None:
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

    return Peer(make=make, consume=paddle.from_dlpack, data_ptr=lambda t: t.data_ptr(), to_numpy=to_numpy,
                writable=lambda t: True, array_type=paddle.Tensor)
