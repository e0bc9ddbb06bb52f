"""Instructions of converting 1,000 small arrays in one call (a list) beside the same 1,000
calls in a Python loop, under callgrind (bench/callgrind.py's method: one valgrind child,
counters dumped between the cases, each case warmed first).

    python bench/callgrind_structures.py [--to torch] [--repeat 3]

Prints instructions per array for each, and their ratio (issue 42's goal: at most 1.0); and what
the structure hook costs a single call: convert beside _convert_leaf (the same call without it).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import callgrind  # noqa: E402

COUNT = 1000
# The arrays, made in the child beside callgrind.py's own set-up.
SETUP = f"xs = [numpy.arange(8, dtype=numpy.float32) + i for i in range({COUNT})]\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--to", default="torch")
    parser.add_argument("--repeat", type=int, default=3, help="loops of each case (default 3)")
    args = parser.parse_args()
    callgrind.CHILD = callgrind.CHILD.replace("n = int(sys.argv[1])\n", "n = int(sys.argv[1])\n" + SETUP)
    cases = {
        "loop": "id(a)",
        "one call": f"dlbridge.convert(xs, {args.to!r})",
        "Python loop": f"[dlbridge.convert(v, {args.to!r}) for v in xs]",
        "single convert": f"dlbridge.convert(a, {args.to!r})",
        "single _convert_leaf": f"dlbridge._core._convert_leaf(a, {args.to!r})",
    }
    per_call, _ = callgrind.measure(cases, args.repeat, None)
    one = per_call["one call"] / COUNT
    loop = per_call["Python loop"] / COUNT
    print(f"{COUNT} arrays of 8 float32 to {args.to}, instructions per array:")
    print(f"  one call of convert on the list:  {one:10.0f}")
    print(f"  a Python loop of convert calls:   {loop:10.0f}")
    print(f"  ratio (one call / loop):          {one / loop:10.3f}")
    print("one 8x8 float32 array, instructions per call:")
    print(f"  convert (with the structure hook): {per_call['single convert']:10.0f}")
    print(f"  _convert_leaf (without it):        {per_call['single _convert_leaf']:10.0f}")
    return 0 if one <= loop else 1


if __name__ == "__main__":
    raise SystemExit(main())
