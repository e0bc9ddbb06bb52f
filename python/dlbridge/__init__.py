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
from . import _core, errors as _errors

# The extension raises the package's classes for coded C++ errors; it never imports the package.
_core._register_error_classes(_errors.ERROR_CLASSES, _errors.DLPackError)

from ._paths import get_cmake_dir, get_include, get_pkgconfig_dir  # for C++ extension authors
from .convert import alias_readonly, convert, plan_convert
from ._core import ConversionPlan
from . import libraries as _libraries

# What the library modules say about a producer type (decided by its class, never its name).
_core._install_producer_facts(_libraries.producer_facts)

# What a library's objects need after the usual reading failed (pyarrow's __dlpack__ refuses nulls,
# booleans and chunked arrays; TensorFlow before 2.20 has no __dlpack__): from_dlpack asks the
# second look of the module an object's class comes from after such a failure (and only then).
_core._install_second_looks({m.MODULE.split(".")[0]: m.second_look for m in _libraries.LIBRARIES.values()
                             if hasattr(m, "second_look")})
from .errors import (
    ConsumedCapsuleError,
    CopyRequiredError,
    DeviceUnavailableError,
    DLPackError,
    InvalidTensorError,
    LayoutError,
    NotAnArrayError,
    ProducerError,
    ReadOnlyError,
    StreamError,
    UnsupportedDeviceError,
    UnsupportedDTypeError,
    VersionError,
)
from .explain import explain

__all__ = [
    "DLPACK_VERSION", "ConversionPlan", "alias_readonly", "convert", "plan_convert", "explain", "Device", "DeviceType", "DType", "Tensor", "__version__", "empty", "from_dlpack",
    "inspect_capsule", "to_dlpack", "ConsumedCapsuleError", "CopyRequiredError", "DeviceUnavailableError",
    "DLPackError", "InvalidTensorError", "LayoutError", "NotAnArrayError", "ProducerError", "ReadOnlyError",
    "StreamError", "UnsupportedDeviceError", "UnsupportedDTypeError", "VersionError",
    "get_cmake_dir", "get_include", "get_pkgconfig_dir",
]
