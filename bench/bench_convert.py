"""dlbridge.convert against the direct call it stands in for (issue 11).

    python bench/bench_convert.py [--quick] [--processes N] [--out bench/results/convert.json]

same library:  convert(x, lib) vs lib.from_dlpack(x), x one of lib's arrays:
               target ratio <= 1.15.
other library: convert(x, lib) vs lib.from_dlpack(x) where that direct path
               works: target at most 300 ns more.
repair:        convert(x[:, ::-1], "torch") (torch.from_dlpack aborts the
               process on negative strides) vs the hand-written fix
               torch.from_dlpack(numpy.ascontiguousarray(x[:, ::-1])): one
               compact copy either way, target at most 500 ns more.

Each pair runs in the same process in alternating batches; the ratio and
the difference are medians over rounds of the per-round values, with their
10th-90th percentile spread. A full run pools the rounds of --processes
fresh processes (benchlib.PROCESSES).
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402
from bench_exchange import SHAPE, libraries, usable  # noqa: E402

import numpy as np  # noqa: E402

import dlbridge  # noqa: E402

SAME_TARGET_RATIO = 1.15
OTHER_TARGET_NS = 300.0
REPAIR_TARGET_NS = 500.0
TARGET_NAME = {"numpy": "numpy", "torch": "torch", "jax": "jax"}


def direct_function(name: str):
    # What a user calls for that library (jax: jax.numpy.from_dlpack, the
    # function convert's table names).
    if name == "jax":
        import jax.numpy as jnp
        return jnp.from_dlpack
    return libraries()[name]["from_dlpack"]


def pair_row(kind: str, producer: str, target: str, times: dict, goal: dict) -> dict:
    p = benchlib.paired(times, "convert", "direct")
    return {"kind": kind, "producer": producer, "target": target,
            "convert_ns": times["convert"]["ns"], "direct_ns": times["direct"]["ns"], **p, **goal}


def run(quick: bool) -> dict:
    libs = libraries()
    batch_s, reps, budget_s = (0.0005, 3, None) if quick else (0.002, 61, 8.0)
    rows = []
    for producer, plib in libs.items():
        x = plib["make"]()
        for target in libs:
            direct = direct_function(target)
            reason = usable(direct, x)
            row_kind = "same library" if producer == target else "other library"
            if reason is not None:
                rows.append({"kind": row_kind, "producer": producer, "target": target,
                             "error": f"direct path fails: {reason}"})
                continue
            name = TARGET_NAME[target]
            refusal = usable(lambda v, n=name: dlbridge.convert(v, n), x)
            if refusal is not None:
                # e.g. JAX's read-only data for torch, which ignores READ_ONLY:
                # convert refuses where the direct path would hand it over.
                rows.append({"kind": row_kind, "producer": producer, "target": target,
                             "error": f"convert refuses (by design): {refusal}"})
                continue
            times = benchlib.compare({"convert": (dlbridge.convert, x, (name,)),
                                      "direct": (direct, x)},
                                     batch_s=batch_s, reps=reps, budget_s=budget_s)
            goal = ({"target_ratio": SAME_TARGET_RATIO} if producer == target
                    else {"target_extra_ns": OTHER_TARGET_NS})
            rows.append(pair_row(row_kind, producer, target, times, goal))
            r = rows[-1]
            print(f"convert {producer:>5} -> {target:<5} {r['convert_ns']:8.0f} ns vs direct "
                  f"{r['direct_ns']:8.0f} ns  ratio {r['ratio']:.2f} ({r['ratio_p10']:.2f}-{r['ratio_p90']:.2f})"
                  f"  +{r['diff_ns']:.0f} ns", flush=True)
    if "torch" in libs:
        import torch
        flipped = np.arange(int(np.prod(SHAPE)), dtype=np.float32).reshape(SHAPE)[:, ::-1]
        # Two calls on the direct side need a wrapper; convert goes through one
        # too, so that each side pays one Python call on top of its own work.
        times = benchlib.compare({"convert": (lambda v: dlbridge.convert(v, "torch"), flipped),
                                  "direct": (lambda v: torch.from_dlpack(np.ascontiguousarray(v)), flipped)},
                                 batch_s=batch_s, reps=reps, budget_s=budget_s)
        rows.append(pair_row("repair: negative strides", "numpy", "torch", times,
                             {"target_extra_ns": REPAIR_TARGET_NS,
                              "direct_call": "torch.from_dlpack(numpy.ascontiguousarray(x))"}))
        r = rows[-1]
        print(f"convert negative strides -> torch {r['convert_ns']:8.0f} ns vs copy+direct "
              f"{r['direct_ns']:8.0f} ns  +{r['diff_ns']:.0f} ns", flush=True)
    return {
        "benchmark": "convert",
        "machine": benchlib.machine_info(),
        "settings": {"shape": list(SHAPE), "dtype": "float32", "batch_s": batch_s, "max_rounds": reps,
                     "quick": quick},
        "note": "convert(x, target) vs target's from_dlpack(x); ratio and diff_ns are medians over "
                "rounds of the per-round ratio / difference, p10-p90 their spread",
        "results": rows,
    }


def main(argv: list[str] | None = None) -> int:
    args = benchlib.main_args(argv, "convert.json")
    if args.child_out is not None:
        benchlib.write_json(args.child_out, run(args.quick))
        return 0
    payload = benchlib.run_pooled(Path(__file__), args, run, {
        "results": lambda r: (r["kind"], r["producer"], r["target"])})
    benchlib.write_json(args.out, payload)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
