"""The exceptions dlbridge raises when a tensor cannot be expressed or exchanged.

Every class subclasses :class:`DLPackError`, itself a :class:`BufferError`, so
code that already falls back on ``BufferError`` keeps working. ``code`` is a
stable string (documented in docs/errors.md, shown by ``dlbridge explain``) and
``hint`` says what to do about it.
"""

from __future__ import annotations


class DLPackError(BufferError):
    """Base class of every dlbridge exchange failure."""

    code: str = "dlpack_error"

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(f"{message} {hint}" if hint else message)
        self.message = message
        self.hint = hint


class UnsupportedDeviceError(DLPackError):
    """A DLDeviceType that this build cannot serve."""

    code = "unsupported_device_type"


class DeviceUnavailableError(DLPackError):
    """A supported device type whose backend or device id is absent."""

    code = "device_unavailable"


class UnsupportedDTypeError(DLPackError):
    """A dtype that the target cannot hold."""

    code = "unsupported_dtype"


class LayoutError(DLPackError):
    """Strides or offsets the target cannot represent without a forbidden copy."""

    code = "unsupported_layout"


class ReadOnlyError(DLPackError):
    """Read-only data requested as writable, or as a legacy capsule without copy=True."""

    code = "read_only"


class VersionError(DLPackError):
    """A DLPack major version from the future, or a max_version that cannot be met."""

    code = "unsupported_version"


class CopyRequiredError(DLPackError, ValueError):
    """copy=False where only a copy would do.

    Also a ValueError: the array API standard asks from_dlpack for a
    ValueError when device= needs a copy that copy=False forbids, and for a
    BufferError otherwise; one class that is both meets either reading.
    """

    code = "copy_required"


class StreamError(DLPackError, ValueError):
    """A stream value that is invalid for the device.

    Also a ValueError: the stream is a bad argument, not a tensor that
    cannot be expressed (NumPy raises ValueError for it).
    """

    code = "invalid_stream"


class ConsumedCapsuleError(DLPackError):
    """A DLPack capsule that was already consumed."""

    code = "capsule_consumed"


class InvalidTensorError(DLPackError):
    """A malformed DLTensor."""

    code = "invalid_tensor"


class ProducerError(DLPackError):
    """The producer's own __dlpack__ refused the export for a reason dlbridge
    cannot map to a more specific code; its exception is the __cause__."""

    code = "producer_refused"


ERROR_CLASSES = {
    cls.code: cls
    for cls in (
        UnsupportedDeviceError, DeviceUnavailableError, UnsupportedDTypeError, LayoutError, ReadOnlyError,
        VersionError, CopyRequiredError, StreamError, ConsumedCapsuleError, InvalidTensorError, ProducerError,
    )
}

__all__ = ["DLPackError", "ERROR_CLASSES", *(cls.__name__ for cls in ERROR_CLASSES.values())]
