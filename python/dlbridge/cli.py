"""The ``dlbridge`` command line."""

import argparse
import sys


def _version(args) -> int:
    import dlbridge

    print(f"dlbridge {dlbridge.__version__} (DLPack {dlbridge.DLPACK_VERSION[0]}.{dlbridge.DLPACK_VERSION[1]})")
    return 0


def _doctor(args) -> int:
    from .doctor import main as doctor_main

    return doctor_main(args)


def _check(args) -> int:
    from .check import main as check_main

    return check_main(args.target, as_json=args.json)


def _explain(args) -> int:
    from .explain import main as explain_main

    return explain_main(args.text, as_json=args.json)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dlbridge", description="DLPack interop: see, verify and fix exchanges.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("version", help="print the dlbridge and DLPack versions")
    p.set_defaults(run=_version)

    p = sub.add_parser("doctor", help="which array libraries exchange with which, directly and through dlbridge")
    p.add_argument("--json", action="store_true", help="print the findings as JSON on stdout")
    p.add_argument("--html", metavar="FILE", help="also write a self-contained HTML report to FILE")
    p.add_argument("--libraries", metavar="A,B", help="only these libraries (default: every importable one)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar even on a terminal")
    p.add_argument("--color", choices=("auto", "always", "never"), default="auto")
    p.set_defaults(run=_doctor)

    p = sub.add_parser("check", help="conformance of one producer to the DLPack 1.3 rules")
    p.add_argument("target", help="numpy, torch, jax, dlbridge, tvm_ffi, or module:factory")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.set_defaults(run=_check)

    p = sub.add_parser("explain", help="cause and fix of a DLPack error: a code, or any library's message")
    p.add_argument("text", help="an error code such as read_only, a pasted message or traceback, or - for stdin")
    p.add_argument("--json", action="store_true", help="print the matching catalogue records as JSON")
    p.set_defaults(run=_explain)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
