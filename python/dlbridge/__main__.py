"""``python -m dlbridge``: the command line, plus the flags that build systems
ask for (like ``python -m nanobind --cmake_dir``)::

    python -m dlbridge --includedir      # for -I
    python -m dlbridge --cmake-dir       # for -Ddlbridge_DIR=...
    python -m dlbridge --pkgconfig-dir   # for PKG_CONFIG_PATH
"""

import sys

_PATH_FLAGS = {"--includedir": "get_include", "--cmake-dir": "get_cmake_dir", "--pkgconfig-dir": "get_pkgconfig_dir"}


def _print_path(flag: str) -> int:
    from . import _paths

    try:
        print(getattr(_paths, _PATH_FLAGS[flag])())
    except FileNotFoundError as e:
        print(f"dlbridge: {e}", file=sys.stderr)
        return 1
    return 0


if len(sys.argv) == 2 and sys.argv[1] in _PATH_FLAGS:
    sys.exit(_print_path(sys.argv[1]))

from .cli import main  # noqa: E402  (the flags above need no subcommand parser)

sys.exit(main())
