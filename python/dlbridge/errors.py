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


def _error_class(name: str, code: str, doc: str) -> type:
    return type(name, (DLPackError,), {"code": code, "__doc__": doc, "__module__": __name__})


UnsupportedDeviceError = _error_class(
    "UnsupportedDeviceError", "unsupported_device_type", "A DLDeviceType that this build cannot serve.")
DeviceUnavailableError = _error_class(
    "DeviceUnavailableError", "device_unavailable", "A supported device type whose backend or device id is absent.")
UnsupportedDTypeError = _error_class(
    "UnsupportedDTypeError", "unsupported_dtype", "A dtype that the target cannot hold.")
LayoutError = _error_class(
    "LayoutError", "unsupported_layout", "Strides or offsets the target cannot represent without a forbidden copy.")
ReadOnlyError = _error_class(
    "ReadOnlyError", "read_only", "Read-only data requested as writable, or as a legacy capsule without copy=True.")
VersionError = _error_class(
    "VersionError", "unsupported_version", "A DLPack major version from the future, or a max_version that cannot be met.")
CopyRequiredError = _error_class(
    "CopyRequiredError", "copy_required", "copy=False where only a copy would do.")
StreamError = _error_class(
    "StreamError", "invalid_stream", "A stream value that is invalid for the device.")
ConsumedCapsuleError = _error_class(
    "ConsumedCapsuleError", "capsule_consumed", "A DLPack capsule that was already consumed.")
InvalidTensorError = _error_class(
    "InvalidTensorError", "invalid_tensor", "A malformed DLTensor.")

ERROR_CLASSES = {
    cls.code: cls
    for cls in (
        UnsupportedDeviceError, DeviceUnavailableError, UnsupportedDTypeError, LayoutError, ReadOnlyError,
        VersionError, CopyRequiredError, StreamError, ConsumedCapsuleError, InvalidTensorError,
    )
}

__all__ = ["DLPackError", "ERROR_CLASSES", *(cls.__name__ for cls in ERROR_CLASSES.values())]
