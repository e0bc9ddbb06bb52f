"""dlbridge: one correct, fast bridge for DLPack tensors between array libraries.

    t = dlbridge.from_dlpack(x)      # any array-like in, a validated zero-copy Tensor out
    numpy.from_dlpack(t)            # and out again to any DLPack consumer
"""

from ._core import (
    DLPACK_VERSION,
    Device,
    DeviceType,
    DType,
    Tensor,
    __version__,
    empty,
    from_dlpack,
    inspect_capsule,
    to_dlpack,
)
from ._paths import get_cmake_dir, get_include, get_pkgconfig_dir  # noqa: F401  (C++ extension authors)
from .convert import convert
from .errors import (
    ConsumedCapsuleError,
    CopyRequiredError,
    DeviceUnavailableError,
    DLPackError,
    InvalidTensorError,
    LayoutError,
    ReadOnlyError,
    StreamError,
    UnsupportedDeviceError,
    UnsupportedDTypeError,
    VersionError,
)

__all__ = [
    "DLPACK_VERSION", "convert", "Device", "DeviceType", "DType", "Tensor", "__version__", "empty", "from_dlpack",
    "inspect_capsule", "to_dlpack", "ConsumedCapsuleError", "CopyRequiredError", "DeviceUnavailableError",
    "DLPackError", "InvalidTensorError", "LayoutError", "ReadOnlyError", "StreamError",
    "UnsupportedDeviceError", "UnsupportedDTypeError", "VersionError",
]
