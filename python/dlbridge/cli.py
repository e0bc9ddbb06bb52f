"""The ``dlbridge`` command line (also ``python -m dlbridge``)."""

import argparse
import os
import sys

# What a command that is cut off by a closed pipe (`dlbridge explain X --json | head`) exits with:
# 128 + SIGPIPE, what the shell reports for the other tools of such a pipeline.
EXIT_BROKEN_PIPE = 141


def version_line() -> str:
    import dlbridge

    major, minor = dlbridge.DLPACK_VERSION
    return f"dlbridge {dlbridge.__version__} (DLPack {major}.{minor})"


def _version(args) -> int:
    print(version_line())
    return 0


class _VersionAction(argparse.Action):
    """``--version``: imports the package only when asked, so ``--help`` stays cheap."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_line())
        parser.exit()


# The flags that build systems ask for (like ``python -m nanobind --cmake_dir``): the path helpers
# of dlbridge._paths, which find the files without importing the extension.
PATH_FLAGS = {"--includedir": ("get_include", "the C++ include directory, for -I"),
              "--cmake-dir": ("get_cmake_dir", "the directory of dlbridgeConfig.cmake, for -Ddlbridge_DIR=..."),
              "--pkgconfig-dir": ("get_pkgconfig_dir", "the directory of dlbridge.pc, for PKG_CONFIG_PATH")}


def print_path(flag: str) -> int:
    from . import _paths

    try:
        print(getattr(_paths, PATH_FLAGS[flag][0])())
    except FileNotFoundError as e:
        print(f"dlbridge: {e}", file=sys.stderr)
        return 1
    return 0


class _PathAction(argparse.Action):
    """A path flag: prints the path and exits, before any subcommand is asked for."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        status = print_path(option_string)
        sys.stdout.flush()
        parser.exit(status)


def _doctor(args) -> int:
    from .doctor import main as doctor_main

    return doctor_main(args)


def _check(args) -> int:
    from .check import main as check_main

    return check_main(args.target, as_json=args.json)


def _explain(args) -> int:
    from .explain import main as explain_main

    return explain_main(args.text, as_json=args.json, short=args.brief)


# The longest deadline a step may be given: one week. Every wait the doctor makes goes to the
# operating system, which takes nothing near float's range (threading.TIMEOUT_MAX is finite).
MAX_SECONDS = 7 * 24 * 3600.0


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds: {text!r}")
    if not value <= MAX_SECONDS:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_SECONDS:g} seconds (one week): {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dlbridge", description="DLPack interop: see, verify and fix exchanges.")
    parser.add_argument("--version", action=_VersionAction, help="print the dlbridge and DLPack versions and exit")
    for flag, (_, what) in PATH_FLAGS.items():
        parser.add_argument(flag, action=_PathAction, help=f"print {what}, and exit")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("version", help="print the dlbridge and DLPack versions")
    p.set_defaults(run=_version)

    p = sub.add_parser(
        "doctor", help="which array libraries exchange with which, directly and through dlbridge",
        description="Tries every pair of installed array libraries on dtypes and layouts, directly and through "
                    "dlbridge, and says what works, what dlbridge fixes and what to do about the rest. "
                    "Exit status: 0 when dlbridge does everything it should, 1 when it fails somewhere "
                    "(worse than the direct call, a wrong or uncoded result, a crash or a hang), 2 for bad "
                    "arguments. The JSON schema and the symbols: docs/doctor.md.")
    p.add_argument("-v", "--verbose", action="store_true", help="also every failing case, one per line")
    p.add_argument("--json", action="store_true", help="print the report as JSON on stdout (docs/doctor.md)")
    p.add_argument("--html", metavar="FILE", help="also write a self-contained HTML report to FILE")
    p.add_argument("--libraries", metavar="A,B",
                   help="only these libraries (default: every installed one); dlbridge's route is always tried")
    p.add_argument("--timeout", metavar="SECONDS", type=_positive_seconds, default=None,
                   help="how long one library import or one exchange may take before it is reported as "
                        "hanging (default: 120)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar even on a terminal")
    p.add_argument("--color", choices=("auto", "always", "never"), default="auto")
    p.set_defaults(run=_doctor)

    p = sub.add_parser("check", help="conformance of one producer to the DLPack 1.3 rules")
    # No list of names here: they are dlbridge.libraries', and reading them would import the package
    # for every command; an unknown name is answered with the whole list.
    p.add_argument("target", help="a library of dlbridge.libraries that makes arrays (an unknown name lists "
                                  "them), dlbridge, or module:factory")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.set_defaults(run=_check)

    p = sub.add_parser("explain", help="cause and fix of a DLPack error: a code, or any library's message")
    p.add_argument("text", help="an error code such as read_only, a pasted message or traceback, or - for stdin")
    form = p.add_mutually_exclusive_group()
    form.add_argument("--json", action="store_true", help="print the matching catalogue records as JSON")
    form.add_argument("--brief", action="store_true",
                      help="one line per match: what it is, the fix to try first, and its entry")
    p.set_defaults(run=_explain)
    return parser


def _silence_closed_pipes() -> None:
    # The reader went away: what is still buffered cannot be written, and Python would say
    # so at exit with a second traceback unless the streams point somewhere harmless.
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        try:
            os.dup2(devnull, stream.fileno())
        except (OSError, ValueError):
            pass
    os.close(devnull)


def guard_pipe(command) -> int:
    """command()'s exit status, or EXIT_BROKEN_PIPE when its reader closed the pipe."""
    try:
        try:
            return command()
        finally:
            sys.stdout.flush()  # inside the guard: most of what a command prints is still buffered here
    except BrokenPipeError:
        _silence_closed_pipes()
        return EXIT_BROKEN_PIPE


def main(argv=None) -> int:
    def command() -> int:
        args = build_parser().parse_args(argv)
        return args.run(args)

    return guard_pipe(command)


if __name__ == "__main__":
    sys.exit(main())
