"""The whole convert table under callgrind: dlbridge.convert(x, to) against to's own import of x.

    python bench/callgrind_pairs.py [--quick] [--from numpy,arrow] [--libraries numpy,arrow,mlx]
                                    [--out bench/results/convert_pairs.json]

x is an 8-element float32 array made by each installed library (1-d: Arrow's arrays
are); the direct call is what a user writes for that target (TensorFlow: its importer
of x.__dlpack__(), since it takes capsules only). One valgrind child for the
whole table (it imports every installed library once; paddle before tensorflow), the loop's own
cost (id(x)) subtracted. A direct call that raises is shown as such, not measured.
Each case also gets its time per call (ns, best of rounds, outside valgrind) and the
functions with the most self instructions per call, so a pair above its target shows
where its instructions go.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402
from callgrind import callgrind_totals, self_costs  # noqa: E402

# Both routes copy alike (or neither does): convert may cost at most this much more.
TARGET_RATIO = 1.10

# Library -> (module to look for, how its 8-element array is made from host `h`, its direct import of `{x}`).
LIBRARIES = {
    "numpy": ("numpy", "numpy.array(h)", "numpy.from_dlpack({x})"),
    "torch": ("torch", "torch.from_numpy(h.copy())", "torch.from_dlpack({x})"),
    "jax": ("jax", "jnp.asarray(h)", "jnp.from_dlpack({x})"),
    "tensorflow": ("tensorflow", "tf.constant(h)", "tfd({x}.__dlpack__())"),
    "paddle": ("paddle", "paddle.to_tensor(h)", "paddle.from_dlpack({x})"),
    "arrow": ("pyarrow", "pa.array(h)", "pa.Array.from_dlpack({x})"),
    "warp": ("warp", "wp.array(h, device='cpu')", "wp.from_dlpack({x})"),
    "mlx": ("mlx", "mx.array(h)", "mx.from_dlpack({x})"),
}

SETUP = """
import os, sys, warnings
warnings.simplefilter("ignore")
import numpy, dlbridge
from dlbridge import libraries
h = numpy.arange(8, dtype=numpy.float32)
present = set(sys.argv[3].split(","))
if "jax" in present:
    import jax.numpy as jnp
if "torch" in present:
    import torch
if "paddle" in present:  # paddle dies when imported after tensorflow
    import paddle
if "tensorflow" in present:
    import tensorflow as tf
    tfd = tf.experimental.dlpack.from_dlpack
if "arrow" in present:
    import pyarrow as pa
if "warp" in present:
    from dlbridge.libraries.warp import ready
    wp = ready()
if "mlx" in present:
    import mlx.core as mx
for producer, make in zip(sys.argv[4].split(","), sys.argv[5].split(";")):
    globals()["x_" + producer] = eval(make)
names, statements = [], []
for name, s in zip(sys.argv[6::2], sys.argv[7::2]):
    try:
        eval(s)
    except Exception as exc:  # a direct call the target refuses: reported, not measured
        print("REFUSED\t" + name + "\t" + type(exc).__name__ + ": " + str(exc)[:120].replace("\\n", " "), flush=True)
        continue
    names.append(name)
    statements.append(s)
print("KEPT", "\\t".join(names), flush=True)
"""

CHILD = SETUP + """
n = int(sys.argv[1])
loops = []
for s in statements:
    scope = {}
    exec("def loop():\\n    for _ in range(n):\\n        " + s, globals(), scope)
    loops.append(scope["loop"])
for loop in loops:
    loop()
os.getppid()
for loop in loops:
    loop()
    os.getppid()
"""

TIMER = SETUP + """
import json, timeit
rounds = int(sys.argv[2])
out = {}
for name, s in zip(names, statements):
    t = timeit.Timer(s, globals=globals())
    number = max(1, int(0.01 / max(t.timeit(1), 1e-7)))
    out[name] = min(t.timeit(number) / number for _ in range(rounds)) * 1e9
print("TIMES", json.dumps(out), flush=True)
"""


def cases_for(producers: list[str], present: list[str]) -> dict[str, str]:
    cases = {"loop": "id(h)"}
    for producer in producers:
        x = f"x_{producer}"
        for target in present:
            cases[f"convert({producer}, {target})"] = f"dlbridge.convert({x}, {target!r})"
            cases[f"direct({producer}, {target})"] = LIBRARIES[target][2].format(x=x)
    return cases


def child_args(producers: list[str], present: list[str], cases: dict[str, str]) -> list[str]:
    return [",".join(present), ",".join(producers), ";".join(LIBRARIES[p][1] for p in producers),
            *[v for kv in cases.items() for v in kv]]


def env() -> dict:
    # One OpenBLAS/OpenMP thread: idle workers spinning would be counted into the running case.
    return dict(os.environ, PYTHONHASHSEED="0", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
                TF_CPP_MIN_LOG_LEVEL="3")


def count(producers: list[str], present: list[str], n: int) -> tuple[dict, dict, dict]:
    """Net instructions per call of each kept case, the refusals, and each case's top functions."""
    cases = cases_for(producers, present)
    with tempfile.TemporaryDirectory(prefix="dlbridge-pairs-") as tmp:
        out = Path(tmp) / "cg.out"
        cmd = [shutil.which("valgrind"), "--tool=callgrind", "--compress-strings=no", "--compress-pos=no",
               f"--callgrind-out-file={out}.%p", "--dump-before=getppid", sys.executable, "-c", CHILD, str(n),
               "0", *child_args(producers, present, cases)]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env())
        if proc.returncode != 0:
            raise SystemExit(f"valgrind failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
        refused, kept = parse_child(proc.stdout)
        parts = sorted(Path(tmp).glob("cg.out.*.*"), key=lambda p: int(p.name.rsplit(".", 1)[1]))
        if len(parts) < len(kept) + 1:
            raise SystemExit(f"expected {len(kept) + 1} dumps, got {len(parts)}")
        per_call = {name: callgrind_totals(p) / n for name, p in zip(kept, parts[1:])}
        top = {name: self_costs(p, n, limit=8)[0] for name, p in zip(kept, parts[1:]) if name != "loop"}
    loop = per_call.pop("loop")
    return {k: v - loop for k, v in per_call.items()}, refused, top


def time_cases(producers: list[str], present: list[str], rounds: int) -> dict:
    cases = cases_for(producers, present)
    proc = subprocess.run([sys.executable, "-c", TIMER, "0", str(rounds), *child_args(producers, present, cases)],
                          capture_output=True, text=True, env=env())
    for line in proc.stdout.splitlines():
        if line.startswith("TIMES "):
            return json.loads(line[6:])
    raise SystemExit(f"timing failed:\n{proc.stderr[-3000:]}")


def parse_child(stdout: str) -> tuple[dict, list[str]]:
    refused, kept = {}, []
    for line in stdout.splitlines():
        if line.startswith("REFUSED\t"):
            _, name, why = line.split("\t", 2)
            refused[name] = why
        elif line.startswith("KEPT "):
            kept = line[5:].split("\t")
    return refused, kept


def table(producers: list[str], present: list[str], r: dict) -> list[dict]:
    rows = []
    for p in producers:
        for t in present:
            conv, direct = f"convert({p}, {t})", f"direct({p}, {t})"
            row = {"from": p, "to": t, "convert_ir": r["ir"].get(conv), "direct_ir": r["ir"].get(direct),
                   "convert_ns": r["ns"].get(conv), "direct_ns": r["ns"].get(direct),
                   "direct_refused": r["refused"].get(direct), "top_self": r["top"].get(conv, [])}
            if row["convert_ir"] is not None and row["direct_ir"]:
                row["ratio_ir"] = row["convert_ir"] / row["direct_ir"]
                row["ratio_ns"] = row["convert_ns"] / row["direct_ns"]
                row["ok"] = row["ratio_ir"] <= TARGET_RATIO
            rows.append(row)
    return rows


def print_table(rows: list[dict]) -> None:
    print(f"{'from':<11}{'to':<11}{'convert Ir':>11}{'direct Ir':>11}{'ratio':>7}"
          f"{'convert ns':>12}{'direct ns':>11}{'ratio':>7}  target <= {TARGET_RATIO:.2f}")
    for r in rows:
        if r.get("ratio_ir") is None:
            why = "direct call refused" if r["direct_refused"] else "not measured"
            conv = f"{r['convert_ir']:11.0f}" if r["convert_ir"] is not None else f"{'-':>11}"
            print(f"{r['from']:<11}{r['to']:<11}{conv}{'-':>11}{'':>7}{'':>12}{'':>11}{'':>7}  {why}")
            continue
        print(f"{r['from']:<11}{r['to']:<11}{r['convert_ir']:11.0f}{r['direct_ir']:11.0f}{r['ratio_ir']:7.2f}"
              f"{r['convert_ns']:12.0f}{r['direct_ns']:11.0f}{r['ratio_ns']:7.2f}  "
              f"{'met' if r['ok'] else 'MISSED'}")


def main(argv: list[str] | None = None) -> int:
    args = benchlib.main_args(argv, "convert_pairs.json", extra=lambda p: (
        p.add_argument("--from", dest="producers", help="comma-separated producers (default: all installed)"),
        p.add_argument("--libraries", help="comma-separated libraries to import at all (default: all installed)")))
    import importlib.util

    present = [name for name, (module, _, _) in LIBRARIES.items() if importlib.util.find_spec(module)]
    if shutil.which("valgrind") is None:
        raise SystemExit("callgrind_pairs.py needs valgrind (apt-get install valgrind)")
    if args.libraries:
        present = [p for p in present if p in args.libraries.split(",")]
    if args.quick:  # a smoke run of this script: NumPy alone imports quickly under valgrind
        present = ["numpy"]
    producers = args.producers.split(",") if args.producers else present
    n, rounds = (20, 3) if args.quick else (200, 7)
    ir, refused, top = count(producers, present, n)
    ns = time_cases(producers, present, rounds)
    print(f"{len(ir)} cases measured, {len(refused)} direct calls refused", flush=True)
    rows = table(producers, present, {"ir": ir, "refused": refused, "top": top, "ns": ns})
    print_table(rows)
    benchlib.write_json(args.out, {"benchmark": "convert_pairs", "machine": benchlib.machine_info(),
                                   "settings": {"calls_per_case": n, "timing_rounds": rounds,
                                                "target_ratio": TARGET_RATIO, "quick": args.quick},
                                   "rows": rows})
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
