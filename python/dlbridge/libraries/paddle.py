"""PaddlePaddle (3.3.1): reads versioned capsules but never honours READ_ONLY, reads negative
strides as wrong values, and kills the process (SIGSEGV) when first imported after tensorflow."""

from __future__ import annotations

import math

from ._spec import CPU, CUDA, STANDARD_DTYPES, NotObservable, Target

NAME = "paddle"
RANK = 5
MODULE = "paddle"
IMPORT_SECONDS = 3.2
# Measured with paddlepaddle 3.3.1 and tensorflow-cpu 2.21.0: SIGSEGV while importing paddle
# in a process that has imported tensorflow; the other order works.
CRASHES_WHEN_IMPORTED_AFTER = ("tensorflow",)

TARGET = Target(
    "paddle", read_only="ignored", strides="nonnegative", devices=frozenset({CPU, CUDA}),
    dtypes=STANDARD_DTYPES | {"bfloat16", "float8_e4m3fn", "float8_e5m2"}, array_types=("paddle:Tensor",),
    note="never honours READ_ONLY; reads negative strides as wrong values; dies when imported after tensorflow",
)


def make(shape, dtype, readonly=False):
    """A fresh paddle tensor for `dlbridge check paddle`."""
    from . import import_library

    if readonly:
        raise NotObservable("paddle tensors have no read-only state")
    paddle = import_library("paddle")
    return paddle.arange(math.prod(shape), dtype=dtype).reshape(list(shape))


SUPPORTS_READONLY = False
