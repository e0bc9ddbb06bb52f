"""``python -m dlbridge``: the command line, plus the flags that build systems
ask for (like ``python -m nanobind --cmake_dir``)::

    python -m dlbridge --includedir      # for -I
    python -m dlbridge --cmake-dir       # for -Ddlbridge_DIR=...
    python -m dlbridge --pkgconfig-dir   # for PKG_CONFIG_PATH
    python -m dlbridge --version         # the dlbridge and DLPack versions
"""

import sys

from .cli import PATH_FLAGS, guard_pipe, main, print_path

if len(sys.argv) == 2 and sys.argv[1] in PATH_FLAGS:
    sys.exit(guard_pipe(lambda: print_path(sys.argv[1])))  # these flags need no subcommand parser
sys.exit(main())
