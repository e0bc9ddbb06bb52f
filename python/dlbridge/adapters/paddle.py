"""convert's "paddle" target: paddle.from_dlpack, unless importing paddle would kill the process."""

from __future__ import annotations

import sys


def _paddle():
    if "paddle" not in sys.modules and "tensorflow" in sys.modules:
        # Measured with paddlepaddle 3.3.1 and tensorflow-cpu 2.21.0: SIGSEGV during import.
        raise ImportError("paddle crashes the process (SIGSEGV) when first imported after tensorflow, "
                          "which this process has imported; import paddle before tensorflow.")
    import paddle

    return paddle


def from_tensor(tensor, copy=None):
    """A paddle.Tensor on the tensor's memory (zero-copy unless copy=True)."""
    paddle = _paddle()
    if copy is None:
        # paddle.from_dlpack takes ~4x longer (57 vs 15 us) when copy= is passed at all.
        return paddle.from_dlpack(tensor)
    return paddle.from_dlpack(tensor, copy=copy)
