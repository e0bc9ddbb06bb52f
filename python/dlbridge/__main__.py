"""``python -m dlbridge``: the command line, plus the flags that build systems
ask for (like ``python -m nanobind --cmake_dir``)::

    python -m dlbridge --includedir      # for -I
    python -m dlbridge --cmake-dir       # for -Ddlbridge_DIR=...
    python -m dlbridge --pkgconfig-dir   # for PKG_CONFIG_PATH
    python -m dlbridge --version         # the dlbridge and DLPack versions
"""

import sys

from .cli import guard_pipe, main

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
    sys.exit(guard_pipe(lambda: _print_path(sys.argv[1])))  # these flags need no subcommand parser
sys.exit(main())
