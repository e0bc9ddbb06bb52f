"""Copies from Python: dlbridge's Tensor.copy() against NumPy doing the same.

    python bench/bench_copy_numpy.py [--quick] [--out bench/results/copy_numpy.json]

For float32 data from 4 KiB to 256 MiB (result bytes):
  contiguous  dlbridge.from_dlpack(a).copy()        vs a.copy()
  transpose   dlbridge.from_dlpack(a.T).copy()      vs numpy.ascontiguousarray(a.T)   (n x n)
  slice       dlbridge.from_dlpack(a[:, ::2]).copy() vs numpy.ascontiguousarray(a[:, ::2])  (n x 2n)
  reversed    dlbridge.from_dlpack(a[::-1, ::-1]).copy() vs numpy.ascontiguousarray(...)
Both sides allocate their result, as a user's call does; numpy.copyto into a
preallocated array of the same bytes is recorded as the memcpy-like ceiling.
dlbridge uses its default thread count (all cores for large copies), NumPy
one thread; bench/copy_bench.cpp has the one-thread-vs-all split in C++.
Speeds are result bytes per second; ratio = dlbridge GB/s / NumPy GB/s.
"""
from __future__ import annotations

import functools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402

import numpy as np  # noqa: E402

import dlbridge  # noqa: E402


def views(kind: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(source array, the strided view to copy) with an n x n float32 result."""
    if kind == "contiguous":
        a = np.ones((n, n), np.float32)
        return a, a
    if kind == "transpose":
        a = np.ones((n, n), np.float32)
        return a, a.T
    if kind == "slice":
        a = np.ones((n, 2 * n), np.float32)
        return a, a[:, ::2]
    if kind == "reversed":
        a = np.ones((n, n), np.float32)
        return a, a[::-1, ::-1]
    raise ValueError(kind)


def run(quick: bool) -> dict:
    sides = [32, 64, 128] if quick else [32, 64, 128, 256, 512, 1024, 2048, 4096, 8192]
    kinds = ["contiguous", "transpose", "slice", "reversed"]
    rows = []
    for n in sides:
        nbytes = n * n * 4
        for kind in kinds:
            src, view = views(kind, n)
            t = dlbridge.from_dlpack(view)
            dst = np.empty((n, n), np.float32)
            compact = np.ones((n, n), np.float32)  # same result bytes, for the memcpy-like ceiling
            copied = dlbridge.Tensor.copy(t)
            assert np.array_equal(np.asarray(copied), view), kind  # a fast wrong copy is no result
            candidates = {
                "dlbridge": (dlbridge.Tensor.copy, t),
                "numpy": ((np.ndarray.copy if kind == "contiguous" else np.ascontiguousarray), view),
                "memcpy": (functools.partial(np.copyto, dst), compact),
            }
            if quick:
                times = benchlib.compare(candidates, batch_s=0.0005, reps=3)
            else:
                # Large copies take turns one call at a time, for about a
                # second per group, never fewer than 3 rounds.
                times = benchlib.compare(candidates, batch_s=0.005, reps=101, budget_s=1.0)
            gbps = {name: nbytes / (v["ns"] * 1e-9) / 1e9 for name, v in times.items()}
            row = {"kind": kind, "n": n, "bytes": nbytes, "dlbridge_gbps": gbps["dlbridge"],
                   "numpy_gbps": gbps["numpy"], "memcpy_gbps": gbps["memcpy"],
                   "ratio_vs_numpy": gbps["dlbridge"] / gbps["numpy"],
                   "ratio_vs_memcpy": gbps["dlbridge"] / gbps["memcpy"],
                   "batches": times["dlbridge"]["batches"]}
            rows.append(row)
            print(f"{kind:<10} {n:5d}x{n:<5d} {nbytes / 1024:10.0f} KiB  dlbridge {row['dlbridge_gbps']:7.2f} GB/s"
                  f"  numpy {row['numpy_gbps']:7.2f}  ({row['ratio_vs_numpy']:5.2f}x)"
                  f"  copyto {row['memcpy_gbps']:7.2f}", flush=True)
            del src, view, t, dst, compact, copied
    return {
        "benchmark": "copy_numpy",
        "machine": benchlib.machine_info(),
        "settings": {"dtype": "float32", "quick": quick, "sides": sides, "kinds": kinds},
        "note": "GB/s of result bytes; each side allocates its result; memcpy_gbps = numpy.copyto "
                "into a preallocated array (no allocation); ratio_vs_numpy > 1 means dlbridge is faster",
        "results": rows,
    }


def main(argv: list[str] | None = None) -> int:
    args = benchlib.main_args(argv, "copy_numpy.json")
    benchlib.write_json(args.out, run(args.quick))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
