"""Import and export speed: dlbridge against each library's own from_dlpack.

    python bench/bench_exchange.py [--quick] [--processes N] [--out bench/results/exchange.json]

import: for the same small array x from NumPy, PyTorch and JAX,
        dlbridge.from_dlpack(x) against numpy.from_dlpack(x),
        torch.from_dlpack(x) and jax.dlpack.from_dlpack(x).
export: for t = dlbridge.from_dlpack(own), lib.from_dlpack(t) against
        lib.from_dlpack(own), for lib in NumPy, PyTorch, JAX.

A time is the whole call as a user sees it, result freed (deleter included).
Ratios are dlbridge's time over the competitor's: below 1.0 dlbridge is
faster. "net" figures subtract the cost of the timing loop itself (a call of
a builtin that does nothing), which otherwise pulls every ratio towards 1.
A full run pools the rounds of --processes fresh processes (benchlib.PROCESSES).
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402

import numpy as np  # noqa: E402

import dlbridge  # noqa: E402

SHAPE = (8, 8)
# Issue 11's targets (issue 5's import/export ones, tightened).
IMPORT_TARGETS = {("numpy", "numpy"): 0.85, ("numpy", "torch"): 0.5, ("numpy", "jax"): 0.5,
                  ("torch", "torch"): 0.5}
EXPORT_TARGETS = {"numpy": 0.95, "torch": 1.0, "jax": 1.0}


def libraries() -> dict[str, dict]:
    """Each available library: how to make its own small array, and its from_dlpack."""
    libs = {"numpy": {"make": lambda: np.arange(np.prod(SHAPE), dtype=np.float32).reshape(SHAPE),
                      "from_dlpack": np.from_dlpack, "call": "numpy.from_dlpack"}}
    try:
        import torch
        libs["torch"] = {"make": lambda: torch.arange(int(np.prod(SHAPE)), dtype=torch.float32).reshape(SHAPE),
                         "from_dlpack": torch.from_dlpack, "call": "torch.from_dlpack"}
    except ImportError:
        pass
    try:
        import jax
        import jax.dlpack
        import jax.numpy as jnp
        jax.config.update("jax_platforms", "cpu")
        libs["jax"] = {"make": lambda: jnp.arange(int(np.prod(SHAPE)), dtype=jnp.float32).reshape(SHAPE),
                       "from_dlpack": jax.dlpack.from_dlpack, "call": "jax.dlpack.from_dlpack"}
    except ImportError:
        pass
    return libs


def usable(fn, arg) -> str | None:
    """None when fn(arg) works, else the reason; a failing pair is reported, not timed."""
    try:
        fn(arg)
        return None
    except Exception as e:  # any library's refusal is a result worth printing
        return f"{type(e).__name__}: {e}".splitlines()[0][:200]


def run(quick: bool) -> dict:
    libs = libraries()
    batch_s, reps, budget_s = (0.0005, 3, None) if quick else (0.002, 101, 12.0)
    results = {"import": [], "export": []}
    loop_ns = []

    # Import: one group per producer, all consumers interleaved in the group.
    for producer, plib in libs.items():
        x = plib["make"]()
        candidates = {"dlbridge": (dlbridge.from_dlpack, x), "loop": (id, x)}
        failures = {}
        for consumer, clib in libs.items():
            reason = usable(clib["from_dlpack"], x)
            if reason is None:
                candidates[consumer] = (clib["from_dlpack"], x)
            else:
                failures[consumer] = reason
        times = benchlib.compare(candidates, batch_s=batch_s, reps=reps, budget_s=budget_s)
        loop = times["loop"]["ns"]
        loop_ns.append(loop)
        mine = times["dlbridge"]
        for consumer, clib in libs.items():
            row = {"producer": producer, "competitor": clib["call"], "consumer": consumer,
                   "dlbridge_ns": mine["ns"], "target": IMPORT_TARGETS.get((producer, consumer))}
            if consumer in failures:
                row["error"] = failures[consumer]
            else:
                theirs = times[consumer]
                pair = benchlib.paired(times, "dlbridge", consumer)
                row.update(competitor_ns=theirs["ns"], ratio=pair["ratio"],
                           ratio_p10=pair["ratio_p10"], ratio_p90=pair["ratio_p90"],
                           ratios=pair["ratios"], diffs=pair["diffs"],
                           ratio_net=(mine["ns"] - loop) / max(theirs["ns"] - loop, 1e-9),
                           batches=theirs["batches"])
            results["import"].append(row)
            print(f"import {producer:>6} array: dlbridge {mine['ns']:9.0f} ns | {clib['call']:<24}"
                  + (f" {row['competitor_ns']:9.0f} ns  ratio {row['ratio']:.2f}"
                     if "ratio" in row else f" fails: {row['error']}"), flush=True)

    # Export: each consumer on a dlbridge view of its own array, against the
    # same consumer on the array itself.
    for name, lib in libs.items():
        own = lib["make"]()
        t = dlbridge.from_dlpack(own)
        reason = usable(lib["from_dlpack"], t)
        row = {"library": name, "call": lib["call"], "target": EXPORT_TARGETS.get(name)}
        if reason is not None:
            row["error"] = reason
        else:
            times = benchlib.compare({"dlbridge": (lib["from_dlpack"], t), "own": (lib["from_dlpack"], own),
                                      "loop": (id, t)},
                                     batch_s=batch_s, reps=reps, budget_s=budget_s)
            loop = times["loop"]["ns"]
            loop_ns.append(loop)
            pair = benchlib.paired(times, "dlbridge", "own")
            row.update(dlbridge_ns=times["dlbridge"]["ns"], own_ns=times["own"]["ns"],
                       ratio=pair["ratio"], ratio_p10=pair["ratio_p10"], ratio_p90=pair["ratio_p90"],
                       ratios=pair["ratios"], diffs=pair["diffs"],
                       ratio_net=(times["dlbridge"]["ns"] - loop) / max(times["own"]["ns"] - loop, 1e-9),
                       batches=times["own"]["batches"])
        results["export"].append(row)
        print(f"export {row['call']:<24} of dlbridge.Tensor vs own array: "
              + (f"{row['dlbridge_ns']:9.0f} vs {row['own_ns']:9.0f} ns  ratio {row['ratio']:.2f}"
                 if "ratio" in row else f"fails: {row['error']}"), flush=True)

    return {
        "benchmark": "exchange",
        "machine": benchlib.machine_info(),
        "settings": {"shape": list(SHAPE), "dtype": "float32", "batch_s": batch_s,
                     "max_rounds": reps, "quick": quick,
                     "loop_overhead_ns": sorted(loop_ns)[len(loop_ns) // 2]},
        "note": "ratio = median over rounds of dlbridge ns / competitor ns in the same round (lower is "
                "better for dlbridge), p10/p90 its spread; ns are medians of interleaved batches; "
                "ratio_net subtracts the timing loop's own cost",
        **results,
    }


def main(argv: list[str] | None = None) -> int:
    args = benchlib.main_args(argv, "exchange.json")
    if args.child_out is not None:
        benchlib.write_json(args.child_out, run(args.quick))
        return 0
    payload = benchlib.run_pooled(Path(__file__), args, run, {
        "import": lambda r: (r["producer"], r["consumer"]), "export": lambda r: r["library"]})
    benchlib.write_json(args.out, payload)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
