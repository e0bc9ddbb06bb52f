"""Copies from Python, as a user calls them, against NumPy in the same process.

    python bench/bench_copy_numpy.py [--quick] [--out bench/results/copy_numpy.json]

The process is pinned to one CPU (os.sched_setaffinity) so that both sides
run on one thread: NumPy copies on one, and dlbridge's default thread count
follows the affinity. Every candidate allocates its result, as a user's call
does. Candidates take turns batch by batch in rotating order, each batch after
one untimed call of its own (benchlib.compare with warmup); figures are
medians, ratios the median of the per-round ratios with the 10th-90th
percentile.

float32 copies, n x n results from 4 KiB to 256 MiB:
  contiguous  Tensor.copy() of a compact tensor        vs a.copy()
  transpose   Tensor.copy() of from_dlpack(a.T)         vs numpy.ascontiguousarray(a.T)
  slice       Tensor.copy() of from_dlpack(a[:, ::2])   vs numpy.ascontiguousarray(a[:, ::2])  (n x 2n)
  reversed    Tensor.copy() of from_dlpack(a[::-1, ::-1]) vs numpy.ascontiguousarray(...)
and for each, NumPy's a.copy() of a compact array of the same bytes: the
floor a copy into a fresh array cannot beat (ratio_vs_floor).
float64, uint8 and uint16 transposes at 4096 x 4096 the same way.

int4 unpacking, 64 KiB to 256 MiB of output (one value per byte):
  dlbridge    Tensor.copy_unpacked() of a packed int4 tensor
  numpy       the shift-and-mask unpack of the same bytes, NUMPY_UNPACK below
  floor       a.copy() of a uint8 array of the output's size
Speeds are result bytes per second.
"""
from __future__ import annotations

import ctypes
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402

import numpy as np  # noqa: E402

import dlbridge  # noqa: E402
from dlbridge._core import _testing  # noqa: E402

NUMPY_UNPACK = """\
out = np.empty(2 * p.size, np.uint8)
out[0::2] = p & 0x0F
out[1::2] = p >> 4"""


def numpy_unpack_int4(p: np.ndarray) -> np.ndarray:
    """Two int4 values per byte, low nibble first, to a byte each (zero-extended, as
    copy_unpacked writes them): the code of NUMPY_UNPACK."""
    out = np.empty(2 * p.size, np.uint8)
    out[0::2] = p & 0x0F
    out[1::2] = p >> 4
    return out


def pin_to_one_cpu() -> int | None:
    if not hasattr(os, "sched_setaffinity"):
        return None
    cpu = max(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    return cpu


def views(kind: str, n: int, dtype=np.float32) -> tuple[np.ndarray, np.ndarray]:
    """(source array, the strided view to copy) with an n x n result."""
    if kind == "contiguous":
        a = np.ones((n, n), dtype)
        return a, a
    if kind == "transpose":
        a = np.arange(n * n, dtype=np.int64).astype(dtype).reshape(n, n)
        return a, a.T
    if kind == "slice":
        a = np.ones((n, 2 * n), dtype)
        return a, a[:, ::2]
    if kind == "reversed":
        a = np.ones((n, n), dtype)
        return a, a[::-1, ::-1]
    raise ValueError(kind)


def timed(candidates: dict, quick: bool) -> dict:
    if quick:
        return benchlib.compare(candidates, batch_s=0.0005, reps=3, warmup=True)
    # Large copies take turns one call at a time, for about two seconds per
    # group, never fewer than 7 rounds.
    return benchlib.compare(candidates, batch_s=0.005, reps=101, budget_s=2.0, warmup=True, min_reps=7)


def ratio_of(times: dict, mine: str, theirs: str) -> dict:
    """Speed ratio mine / theirs per round (theirs' time over mine)."""
    ratios = sorted(b / a for a, b in zip(times[mine]["samples"], times[theirs]["samples"]))
    pick = lambda q: ratios[min(len(ratios) - 1, int(q * len(ratios)))]  # noqa: E731
    return {"ratio": statistics.median(ratios), "p10": pick(0.1), "p90": pick(0.9)}


def copy_row(kind: str, n: int, dtype, quick: bool) -> dict:
    src, view = views(kind, n, dtype)
    t = dlbridge.from_dlpack(view)
    compact = np.ones((n, n), dtype)  # same result bytes, for the floor
    copied = dlbridge.Tensor.copy(t)
    assert np.array_equal(np.asarray(copied), view), kind  # a fast wrong copy is no result
    candidates = {
        "dlbridge": (dlbridge.Tensor.copy, t),
        "numpy": ((np.ndarray.copy if kind == "contiguous" else np.ascontiguousarray), view),
        "floor": (np.ndarray.copy, compact),
    }
    times = timed(candidates, quick)
    nbytes = compact.nbytes
    gbps = {name: nbytes / (v["ns"] * 1e-9) / 1e9 for name, v in times.items()}
    vs_numpy, vs_floor = ratio_of(times, "dlbridge", "numpy"), ratio_of(times, "dlbridge", "floor")
    row = {"kind": kind, "dtype": np.dtype(dtype).name, "n": n, "bytes": nbytes,
           "dlbridge_gbps": gbps["dlbridge"], "numpy_gbps": gbps["numpy"], "floor_gbps": gbps["floor"],
           "ratio_vs_numpy": vs_numpy["ratio"], "ratio_vs_numpy_p10": vs_numpy["p10"],
           "ratio_vs_numpy_p90": vs_numpy["p90"], "ratio_vs_floor": vs_floor["ratio"],
           "ratio_vs_floor_p10": vs_floor["p10"], "ratio_vs_floor_p90": vs_floor["p90"],
           "rounds": times["dlbridge"]["batches"]}
    print(f"{kind:<10} {row['dtype']:<8} {n:5d}x{n:<5d} {nbytes / 1024:10.0f} KiB  dlbridge {gbps['dlbridge']:7.2f} GB/s"
          f"  numpy {gbps['numpy']:7.2f} ({vs_numpy['ratio']:5.2f}x, {vs_numpy['p10']:.2f}-{vs_numpy['p90']:.2f})"
          f"  floor a.copy() {gbps['floor']:7.2f} ({vs_floor['ratio']:5.2f}x, "
          f"{vs_floor['p10']:.2f}-{vs_floor['p90']:.2f})", flush=True)
    return row


def packed_int4(values: int) -> tuple[dlbridge.Tensor, np.ndarray]:
    """A packed int4 tensor of `values` elements and the same bytes as a uint8 array."""
    rng = np.random.default_rng(5)
    p = rng.integers(0, 256, values // 2, dtype=np.uint8)
    t = dlbridge.from_dlpack(_testing.make_capsule(shape=[values], strides=None, dtype=(0, 4, 1),
                                                   data_bytes=p.nbytes))
    ctypes.memmove(t.data_ptr, p.ctypes.data, p.nbytes)
    return t, p


def unpack_row(values: int, quick: bool) -> dict:
    t, p = packed_int4(values)
    got = np.asarray(t.copy_unpacked()).view(np.uint8).reshape(-1)
    assert np.array_equal(got, numpy_unpack_int4(p)), "copy_unpacked disagrees with NumPy"
    floor = np.ones(values, np.uint8)
    times = timed({"dlbridge": (dlbridge.Tensor.copy_unpacked, t), "numpy": (numpy_unpack_int4, p),
                   "floor": (np.ndarray.copy, floor)}, quick)
    gbps = {name: values / (v["ns"] * 1e-9) / 1e9 for name, v in times.items()}
    vs_numpy, vs_floor = ratio_of(times, "dlbridge", "numpy"), ratio_of(times, "dlbridge", "floor")
    row = {"kind": "unpack int4", "values": values, "bytes": values, "dlbridge_gbps": gbps["dlbridge"],
           "numpy_gbps": gbps["numpy"], "floor_gbps": gbps["floor"],
           "ratio_vs_numpy": vs_numpy["ratio"], "ratio_vs_numpy_p10": vs_numpy["p10"],
           "ratio_vs_numpy_p90": vs_numpy["p90"], "ratio_vs_floor": vs_floor["ratio"],
           "ratio_vs_floor_p10": vs_floor["p10"], "ratio_vs_floor_p90": vs_floor["p90"],
           "rounds": times["dlbridge"]["batches"]}
    print(f"unpack int4 {values / 1024:10.0f} Ki values  dlbridge {gbps['dlbridge']:7.2f} GB/s"
          f"  numpy {gbps['numpy']:7.2f} ({vs_numpy['ratio']:5.2f}x, {vs_numpy['p10']:.2f}-{vs_numpy['p90']:.2f})"
          f"  floor a.copy() {gbps['floor']:7.2f}", flush=True)
    return row


def run(quick: bool) -> dict:
    machine = benchlib.machine_info()
    cpu = pin_to_one_cpu()
    sides = [32, 128] if quick else [32, 64, 128, 256, 512, 1024, 2048, 4096, 8192]
    kinds = ["contiguous", "transpose", "slice", "reversed"]
    rows = [copy_row(kind, n, np.float32, quick) for n in sides for kind in kinds]
    big = 256 if quick else 4096
    rows += [copy_row("transpose", big, dtype, quick) for dtype in (np.float64, np.uint16, np.uint8)]
    counts = [64 << 10, 1 << 20] if quick else [64 << 10, 1 << 20, 16 << 20, 256 << 20]
    unpack = [unpack_row(values, quick) for values in counts]
    machine["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    return {
        "benchmark": "copy_numpy",
        "machine": machine,
        "settings": {"quick": quick, "sides": sides, "kinds": kinds, "pinned_cpu": cpu,
                     "openblas_env": {k: os.environ[k] for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
                                      if k in os.environ},
                     "numpy_unpack": NUMPY_UNPACK},
        "note": "GB/s of result bytes; one pinned CPU; every side allocates its result; floor = "
                "a.copy() of a compact array of the same bytes; ratios are medians of per-round "
                "speed ratios (p10-p90 beside them); ratio_vs_numpy > 1 means dlbridge is faster; "
                "dlbridge keeps the last freed result of 8-256 MiB for the next result of its size "
                "(DLBRIDGE_KEEP_FREED=0 keeps none), so from 2048x2048 float32 on its result pages "
                "are not new to the kernel, while NumPy's above 32 MiB are",
        "results": rows,
        "unpack": unpack,
    }


def main(argv: list[str] | None = None) -> int:
    args = benchlib.main_args(argv, "copy_numpy.json")
    benchlib.write_json(args.out, run(args.quick))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
