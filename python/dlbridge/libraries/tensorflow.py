"""TensorFlow (tensorflow-cpu 2.21.0): its importer takes a legacy capsule, never an array, and
reads compact row-major layouts only; it ignores READ_ONLY (and exports legacy capsules, so its
own tensors arrive with unknown writability).

Before 2.20 its tensors have no __dlpack__ and their buffer protocol cannot describe bfloat16:
second_look reads what that refuses through tf.experimental.dlpack.to_dlpack."""

from __future__ import annotations

from ._spec import CPU, CUDA, STANDARD_DTYPES, NotApplicable, NotObservable, Peer, Target, exported_pointer, strided_layout

NAME = "tensorflow"
RANK = 6
MODULE = "tensorflow"

TARGET = Target(
    "tensorflow", "experimental.dlpack.from_dlpack", read_only="ignored", strides="row_major",
    devices=frozenset({CPU, CUDA}), dtypes=STANDARD_DTYPES | {"bfloat16"}, takes="capsule", copy_keyword=False,
    array_types=("tensorflow:Tensor",), note="takes a legacy capsule, compact row-major only",
)


def second_look(x, refusal: BaseException, device=None, copy=None):
    """dlbridge.from_dlpack for a TensorFlow object the usual reading failed on (`refusal`): a
    tensor with no __dlpack__ (before 2.20) is read from its own to_dlpack capsule, and is no copy."""
    import sys

    from .. import _core

    tf = sys.modules.get("tensorflow")
    if tf is None or hasattr(x, "__dlpack__") or not isinstance(x, tf.Tensor):
        raise refusal
    return _core.from_dlpack(tf.experimental.dlpack.to_dlpack(x), device=device, copy=copy), False


def make(shape, dtype, readonly=False):
    """A fresh tf.constant for `dlbridge check tensorflow`."""
    from . import import_library
    from .numpy import make as numpy_make

    if readonly:
        raise NotObservable("tensorflow tensors have no read-only state")
    return import_library("tensorflow", order_others=True).constant(numpy_make(shape, dtype))


SUPPORTS_READONLY = False


def cannot_make(a) -> str | None:
    """Why the doctor's tf.constant cannot make this case, decided without importing tensorflow."""
    if strided_layout(a):
        return "tensorflow tensors are always compact row-major"
    if not a.flags.writeable:
        return "tensorflow tensors have no read-only flag (they are immutable)"
    return None


def peer() -> Peer:
    """The doctor's driver: tf.constant; its importer takes a capsule, never an array."""
    from . import import_library

    tf = import_library("tensorflow", order_others=True)

    def make(a):
        if (why := cannot_make(a)) is not None:
            raise NotApplicable(why)
        return tf.constant(a)

    return Peer(make=make, consume=lambda x: tf.experimental.dlpack.from_dlpack(x.__dlpack__()),
                data_ptr=exported_pointer, to_numpy=lambda t: t.numpy(), writable=lambda t: None,
                array_type=type(tf.constant(0)))
