"""dlbridge: one correct, fast bridge for DLPack tensors between array libraries."""

from ._core import DLPACK_VERSION, __version__

__all__ = ["DLPACK_VERSION", "__version__"]
