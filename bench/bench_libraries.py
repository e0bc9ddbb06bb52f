"""Import and export speed against TensorFlow, Paddle, PyArrow, Warp and MLX (requirements/libs.txt).

    python bench/bench_libraries.py [--quick] [--out bench/results/libraries.json] [--md docs/benchmarks.md]

import: dlbridge.from_dlpack(x) against the library's own importer of its own
        array x (for TensorFlow, which imports only capsules, from_dlpack(to_dlpack(x))).
export: the library's importer of t = dlbridge.from_dlpack(x) against the same
        importer of x, and dlbridge.convert(t, name) (route checks included).
Ratios are dlbridge's time over the library's own: below 1.0 dlbridge is faster.
--md replaces the section between the markers below in that file (bench/run
passes docs/benchmarks.md after report.py has written it).
"""
from __future__ import annotations

import importlib.util
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402

import numpy as np  # noqa: E402

import dlbridge  # noqa: E402

BEGIN, END = "<!-- bench_libraries: begin -->", "<!-- bench_libraries: end -->"


def _host(shape):
    return np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)


def _tensorflow():
    if importlib.util.find_spec("paddle") is not None:
        import paddle  # noqa: F401  (paddle 3.3.1 dies when imported after tensorflow)
    import tensorflow as tf

    dl = tf.experimental.dlpack
    return tf.constant(_host((8, 8))), lambda x: dl.from_dlpack(x.__dlpack__()), \
        lambda x: dl.from_dlpack(dl.to_dlpack(x)), "tf.experimental.dlpack.from_dlpack"


def _paddle():
    import paddle

    return paddle.to_tensor(_host((8, 8))), paddle.from_dlpack, paddle.from_dlpack, "paddle.from_dlpack"


def _arrow():
    import pyarrow as pa

    return pa.array(_host((64,))), pa.Array.from_dlpack, pa.Array.from_dlpack, "pyarrow.Array.from_dlpack"


def _warp():
    from dlbridge.libraries.warp import ready as ready_warp

    wp = ready_warp()
    return wp.array(_host((8, 8)), device="cpu"), wp.from_dlpack, wp.from_dlpack, "warp.from_dlpack"


def _mlx():
    import mlx.core as mx

    return mx.array(_host((8, 8))), mx.from_dlpack, mx.from_dlpack, "mlx.core.from_dlpack"


LIBRARIES = {"tensorflow": ("tensorflow", _tensorflow), "paddle": ("paddle", _paddle), "arrow": ("pyarrow", _arrow),
             "warp": ("warp", _warp), "mlx": ("mlx", _mlx)}


def measure(quick: bool) -> dict:
    batch_s, reps = (0.002, 3) if quick else (0.02, 15)
    out = {}
    for name, (module, setup) in LIBRARIES.items():
        if importlib.util.find_spec(module) is None:
            out[name] = {"skipped": f"{module} is not installed"}
            continue
        x, import_capsule_or_array, own_import, call = setup()
        t = dlbridge.from_dlpack(x)
        if t.readonly:
            # A legacy capsule's memory (TensorFlow, Warp, MLX): its writability is
            # unknown, and convert refuses it to a consumer that cannot see READ_ONLY
            # unless copy=True (docs/boundary.md). A dlbridge-owned copy is timed.
            t = dlbridge.from_dlpack(x, copy=True)
        times = benchlib.compare({
            "dlbridge_import": (dlbridge.from_dlpack, x),
            "own_import": (own_import, x),
            "import_of_dlbridge": (import_capsule_or_array, t),
            "convert": (dlbridge.convert, t, (name,)),
        }, batch_s=batch_s, reps=reps)
        out[name] = {"call": call, **{k: round(v["ns"], 1) for k, v in times.items()}}
    return out


def markdown(results: dict) -> str:
    lines = [BEGIN, "## 8. TensorFlow, Paddle, PyArrow, Warp, MLX (`bench/bench_libraries.py`)", "",
             "Same small float32 array (8×8; PyArrow: 64 elements, a 1-d Array). *import*: "
             "`dlbridge.from_dlpack(x)` vs the library's own importer of its own `x`. *export*: the library's "
             "importer of a `dlbridge.Tensor` vs of its own array, and `dlbridge.convert(t, name)` with its "
             "route checks. Ratio = dlbridge / own; below 1.0 dlbridge is faster.", "",
             "| library | own importer | import: dlbridge ns | own ns | ratio | export: of dlbridge ns | own ns | ratio "
             "| convert ns | ratio |", "|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in results.items():
        if "skipped" in r:
            lines.append(f"| {name} | {r['skipped']} | | | | | | | | |")
            continue
        own = r["own_import"]
        lines.append(f"| {name} | `{r['call']}` | {r['dlbridge_import']:.0f} | {own:.0f} | "
                     f"{r['dlbridge_import'] / own:.2f} | {r['import_of_dlbridge']:.0f} | {own:.0f} | "
                     f"{r['import_of_dlbridge'] / own:.2f} | {r['convert']:.0f} | {r['convert'] / own:.2f} |")
    lines.append(END)
    return "\n".join(lines) + "\n"


def splice(md_path: Path, section: str) -> None:
    text = md_path.read_text() if md_path.exists() else ""
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + section.rstrip("\n") + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + section
    md_path.write_text(text)


def main(argv=None) -> int:
    warnings.simplefilter("ignore")
    argv = list(sys.argv[1:] if argv is None else argv)
    md = None
    if "--md" in argv:
        i = argv.index("--md")
        md = Path(argv[i + 1])
        del argv[i:i + 2]
    args = benchlib.main_args(argv, "libraries.json")
    results = measure(args.quick)
    benchlib.write_json(args.out, {"machine": benchlib.machine_info(), "quick": args.quick, "libraries": results})
    if md is not None:
        splice(md, markdown(results))
    print(markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
