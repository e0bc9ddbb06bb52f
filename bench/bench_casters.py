"""Cost per call of dlbridge's nanobind / pybind11 type casters against each
framework's own array parameter, for the same one-line function and input.

    python bench/bench_casters.py [--quick] [--out bench/results/casters.json]
                                  [--modules build/bench-suite/bench/casters]

The modules come from bench/casters_bench_*.cpp (bench/run builds them).
Pairs, each timed side by side in the same process:
  nanobind  nb::ndarray<float, c_contig, device::cpu>  vs  TensorArg<dtype<float>, c_contiguous, cpu, writable>
  nanobind  nb::ndarray<>                               vs  TensorView
  pybind11  py::array_t<float, c_style>                 vs  TensorArg<dtype<float>, c_contiguous, cpu, writable>
for a small float32 array made by NumPy, PyTorch and dlbridge. A time is the
whole Python call of the bound function. Ratios are dlbridge's time over the
competitor's; the target is 1.2 for the nanobind pairs.
"""
from __future__ import annotations

import importlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402

import numpy as np  # noqa: E402

import dlbridge  # noqa: E402

SHAPE = (8, 8)
TARGET = 1.2
DEFAULT_MODULES = benchlib.ROOT / "build" / "bench-suite" / "bench" / "casters"

PAIRS = [
    # framework, competitor function, its parameter, dlbridge function, its parameter, target
    ("nanobind", "ndarray_f32", "nb::ndarray<float, nb::c_contig, nb::device::cpu>",
     "arg_f32", "TensorArg<dtype<float>, c_contiguous, cpu, writable>", TARGET),
    ("nanobind", "ndarray_any", "nb::ndarray<>", "view_any", "TensorView", TARGET),
    ("pybind11", "array_t_f32", "py::array_t<float, py::array::c_style>",
     "arg_f32", "TensorArg<dtype<float>, c_contiguous, cpu, writable>", None),
]


def inputs() -> dict:
    made = {"numpy": np.arange(np.prod(SHAPE), dtype=np.float32).reshape(SHAPE)}
    try:
        import torch
        made["torch"] = torch.arange(int(np.prod(SHAPE)), dtype=torch.float32).reshape(SHAPE)
    except ImportError:
        pass
    made["dlbridge"] = dlbridge.from_dlpack(made["numpy"].copy())
    return made


def refusal(fn, arg) -> str | None:
    try:
        fn(arg)
        return None
    except Exception as e:  # a parameter type that cannot take this input is a result
        return f"{type(e).__name__}: {e}".splitlines()[0][:200]


def run(quick: bool, modules: Path) -> dict:
    sys.path.insert(0, str(modules))
    bound = {"nanobind": importlib.import_module("casters_bench_nanobind"),
             "pybind11": importlib.import_module("casters_bench_pybind11")}
    batch_s, reps, budget_s = (0.0005, 3, None) if quick else (0.002, 101, 10.0)
    rows, loop_ns = [], []
    for source, x in inputs().items():
        for framework, theirs, their_param, mine, my_param, target in PAIRS:
            module = bound[framework]
            row = {"input": source, "framework": framework, "competitor": their_param, "dlbridge": my_param,
                   "target": target}
            candidates = {"loop": (id, x)}
            for key, name in (("competitor", theirs), ("dlbridge", mine)):
                reason = refusal(getattr(module, name), x)
                if reason is None:
                    candidates[key] = (getattr(module, name), x)
                else:
                    row[f"{key}_error"] = reason
            times = benchlib.compare(candidates, batch_s=batch_s, reps=reps, budget_s=budget_s)
            loop = times["loop"]["ns"]
            loop_ns.append(loop)
            for key in ("competitor", "dlbridge"):
                if key in times:
                    row[f"{key}_ns"] = times[key]["ns"]
            if "competitor_ns" in row and "dlbridge_ns" in row:
                row.update(ratio=row["dlbridge_ns"] / row["competitor_ns"],
                           ratio_net=(row["dlbridge_ns"] - loop) / max(row["competitor_ns"] - loop, 1e-9))
            rows.append(row)
            print(f"{source:>8} {framework:<8} {their_param:<48} "
                  + (f"{row['competitor_ns']:7.0f} ns" if "competitor_ns" in row else "fails     ")
                  + f" | dlbridge {my_param:<52} "
                  + (f"{row['dlbridge_ns']:7.0f} ns" if "dlbridge_ns" in row else "fails")
                  + (f"  ratio {row['ratio']:.2f}" if "ratio" in row else ""), flush=True)
    return {
        "benchmark": "casters",
        "machine": benchlib.machine_info() | {"versions": benchlib.machine_info()["versions"] | {
            "nanobind": _version("nanobind"), "pybind11": _version("pybind11")}},
        "settings": {"shape": list(SHAPE), "dtype": "float32", "batch_s": batch_s, "max_rounds": reps,
                     "quick": quick, "loop_overhead_ns": sorted(loop_ns)[len(loop_ns) // 2]},
        "note": "ns per Python call of a bound one-line function; ratio = dlbridge ns / competitor ns "
                "(lower is better for dlbridge); medians of interleaved batches; ratio_net subtracts the "
                "timing loop's own cost",
        "results": rows,
    }


def _version(module: str) -> str | None:
    try:
        return importlib.import_module(module).__version__
    except Exception:  # an absent library is recorded as such
        return None


def main(argv: list[str] | None = None) -> int:
    import argparse
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few repetitions: checks the script, times nothing")
    parser.add_argument("--out", type=Path, default=benchlib.ROOT / "bench" / "results" / "casters.json")
    parser.add_argument("--modules", type=Path, default=DEFAULT_MODULES,
                        help="directory holding the built casters_bench_* modules")
    args = parser.parse_args(argv if argv is not None else sys.argv[1:])
    benchlib.write_json(args.out, run(args.quick, args.modules))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
