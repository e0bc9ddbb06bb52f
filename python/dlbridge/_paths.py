"""Where the C++ headers and the CMake package of this installation are.

A wheel keeps them inside the package (``dlbridge/include``,
``dlbridge/cmake``, ``dlbridge/pkgconfig``), beside the compiled ``_core``
module; an editable install puts them in the same place next to its ``_core``.
Found from ``_core``'s location without importing it, so asking costs nothing.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path


def _installed_root() -> Path:
    spec = importlib.util.find_spec("dlbridge._core")
    if spec is None or spec.origin is None:
        raise FileNotFoundError("dlbridge._core is not installed, so neither are dlbridge's C++ files; "
                                "reinstall dlbridge (pip install . in its clone, or its wheel).")
    return Path(spec.origin).parent


def _existing(directory: Path, marker: str, what: str) -> str:
    if not (directory / marker).is_file():
        raise FileNotFoundError(f"dlbridge's {what} should be at {directory} but {marker} is missing there; "
                                "reinstall dlbridge (pip install --force-reinstall . in its clone, or its wheel).")
    return str(directory)


def get_include() -> str:
    """The directory to add to the include path for ``#include <dlbridge/dlbridge.hpp>``."""
    return _existing(_installed_root() / "include", "dlbridge/dlbridge.hpp", "C++ headers")


def get_cmake_dir() -> str:
    """The directory holding ``dlbridgeConfig.cmake``: pass it as ``dlbridge_DIR`` (or
    append it to ``CMAKE_PREFIX_PATH``) before ``find_package(dlbridge CONFIG)``."""
    return _existing(_installed_root() / "cmake", "dlbridgeConfig.cmake", "CMake package")


def get_pkgconfig_dir() -> str:
    """The directory holding ``dlbridge.pc``, for ``PKG_CONFIG_PATH``."""
    return _existing(_installed_root() / "pkgconfig", "dlbridge.pc", "pkg-config file")


__all__ = ["get_cmake_dir", "get_include", "get_pkgconfig_dir"]
