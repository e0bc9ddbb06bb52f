"""convert's "mlx" target. MLX copies every CPU import, and its mx.from_dlpack narrows
float64 to float32 and complex128 to complex64; mx.array with an explicit dtype does not."""

from __future__ import annotations

from ._errors import fail


_MLX_NAMES = {"bool": "bool_"}


def from_tensor(tensor, copy=None):
    """An mlx array holding a copy of the tensor's values, in the tensor's own dtype."""
    if copy is False:
        raise fail("CopyRequiredError", "MLX copies every array it imports on the CPU, and copy=False forbids the copy.",
                   "Pass copy=None (the one copy MLX makes is the only one).")
    import mlx.core as mx
    import numpy

    if tensor.dtype.name == "bfloat16":
        import ml_dtypes

        host = numpy.asarray(tensor).view(ml_dtypes.bfloat16)
    else:
        host = numpy.from_dlpack(tensor)
    return mx.array(host, dtype=getattr(mx, _MLX_NAMES.get(tensor.dtype.name, tensor.dtype.name)))
