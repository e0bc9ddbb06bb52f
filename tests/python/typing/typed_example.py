# Checked by mypy (tests/python/test_typing.py), never run: what a typed user writes.
# Every line must check clean.
from typing import Any, NamedTuple, assert_type

import jax
import numpy
import paddle
import torch

import dlbridge

a = numpy.ones(3, dtype=numpy.float32)

t = dlbridge.convert(a, "torch")
assert_type(t, torch.Tensor)
t.backward()
assert_type(dlbridge.convert(t, "jax"), jax.Array)
assert_type(dlbridge.convert(t, "numpy"), numpy.ndarray[Any, Any])
assert_type(dlbridge.convert(t, "paddle"), paddle.Tensor)
assert_type(dlbridge.convert(t, "dlbridge"), dlbridge.Tensor)
assert_type(dlbridge.convert(a, "torch", copy=False, device="cpu"), torch.Tensor)
# A module or a name convert cannot know statically: Any.
assert_type(dlbridge.convert(a, torch), Any)
name: str = "torch"
assert_type(dlbridge.convert(a, name), Any)

# Structures keep their shape.
batch = dlbridge.convert({"x": a, "y": a}, "torch")
assert_type(batch, dict[str, Any])
assert_type(dlbridge.convert([a, a], "jax"), list[Any])


class Pair(NamedTuple):
    first: object
    second: object


assert_type(dlbridge.convert(Pair(a, a), "torch", keep_non_arrays=True), Pair)

plan = dlbridge.plan_convert(a, "torch")
assert_type(plan, dlbridge.ConversionPlan)
assert_type(plan.zero_copy, bool)
assert_type(plan.reasons, tuple[str, ...])
assert_type(dlbridge.plan_convert({"x": a}, "torch"), dict[str, Any])

x = dlbridge.from_dlpack(a)
assert_type(x, dlbridge.Tensor)
assert_type(x.shape, tuple[int, ...])
assert_type(x.readonly, bool)
assert_type(x.dtype, dlbridge.DType)
