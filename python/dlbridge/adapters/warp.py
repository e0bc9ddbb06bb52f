"""convert's "warp" target: wp.from_dlpack, after the two things it cannot do itself."""

from __future__ import annotations

from ._errors import fail

_ready = False


def _warp():
    global _ready
    import warp

    if not _ready:
        # wp.from_dlpack refuses to run before wp.init(), whose banner and "no CUDA driver"
        # warning would land on the user's terminal; the user's log level is put back after.
        level = warp.config.log_level
        warp.config.log_level = warp.LOG_ERROR
        try:
            warp.init()
        finally:
            warp.config.log_level = level
        _ready = True
    return warp


def from_tensor(tensor):
    """A warp.array on the tensor's memory (zero-copy)."""
    if tensor.ndim == 0:
        # Warp arrays have at least one dimension; its importer fails with an IndexError.
        raise fail("LayoutError", "warp arrays have at least one dimension, so a 0-d tensor cannot be handed over.",
                   "Reshape to (1,) in the source library first.")
    return _warp().from_dlpack(tensor)
