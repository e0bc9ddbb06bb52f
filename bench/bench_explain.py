"""How long `dlbridge explain` takes on long inputs: linear in the text, and bounded.

    .venv/bin/python bench/bench_explain.py

Prints, for inputs of 40,000 to 4,000,000 characters shaped to make backtracking patterns
slow (one long word, one long number, many near-misses of a pattern's prefix), the median
time of `dlbridge.explain(text)` as shipped (the last catalogue.MAX_TEXT characters are
matched) and with that bound lifted, which shows the matching itself is linear.
"""

import statistics
import sys
import time

from dlbridge import catalogue, explain

SIZES = (40_000, 120_000, 1_000_000, 4_000_000)
# Every record's class name first, so that dlbridge's own patterns are tried too.
PREFIX = " ".join(r.exception for r in catalogue.records()) + "\n"
SHAPES = {
    "one word": "a",
    "one number": "9",
    "words": "x ",
    "brackets": "[",
    "near-misses": "Storage size calculation overflowed with sizes=[",
}


def _median_seconds(text: str, rounds: int = 3) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        explain(text)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> int:
    bound = catalogue.MAX_TEXT
    print(f"dlbridge.explain(text), median of 3, seconds; {len(catalogue.records())} records; "
          f"MAX_TEXT = {bound} characters")
    print(f"{'input':<12} {'characters':>10} {'as shipped':>11} {'no bound':>9} {'no bound / char (ns)':>21}")
    for shape, unit in SHAPES.items():
        for size in SIZES:
            text = PREFIX + unit * (size // len(unit))
            catalogue.MAX_TEXT = bound
            shipped = _median_seconds(text)
            catalogue.MAX_TEXT = sys.maxsize
            unbounded = _median_seconds(text)
            print(f"{shape:<12} {size:>10,} {shipped:>11.4f} {unbounded:>9.4f} {unbounded / size * 1e9:>21.1f}")
    catalogue.MAX_TEXT = bound
    return 0


if __name__ == "__main__":
    sys.exit(main())
