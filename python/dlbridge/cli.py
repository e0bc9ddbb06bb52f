"""The ``dlbridge`` command line."""

import argparse
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="dlbridge")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("version", help="print the dlbridge and DLPack versions")
    args = parser.parse_args(argv)
    if args.command == "version":
        import dlbridge

        print(f"dlbridge {dlbridge.__version__} (DLPack {dlbridge.DLPACK_VERSION[0]}.{dlbridge.DLPACK_VERSION[1]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
