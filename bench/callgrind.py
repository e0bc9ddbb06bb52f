"""Instructions per call of the import and export paths, under callgrind.

    python bench/callgrind.py [--quick] [--out bench/results/callgrind.json]

Instruction counts do not depend on load or clock speed, so a regression of
a few percent shows here when wall-clock medians on a shared machine cannot.

One process runs every case as a loop of N calls, and os.getppid() between
the loops; callgrind dumps its counters each time getppid is entered
(--dump-before), so dump k holds exactly loop k plus a marker call. Each
case is warmed first, so one-time work (type caches, first lookups) is not
in the count. The "loop" case (id(x)) measures the Python loop itself; net
figures subtract it.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402

# name -> statement; a, t, neg, tt and ttd are set up in CHILD.
CASES = {
    "loop": "id(a)",
    "dlbridge.from_dlpack(numpy)": "dlbridge.from_dlpack(a)",
    "numpy.from_dlpack(numpy)": "numpy.from_dlpack(a)",
    "numpy.from_dlpack(dlbridge)": "numpy.from_dlpack(t)",
    "convert(dlbridge, numpy)": "dlbridge.convert(t, 'numpy')",
    "dlbridge.from_dlpack(dlbridge)": "dlbridge.from_dlpack(t)",
    "dlbridge.Tensor.copy() 8x8": "t.copy()",
    "convert(numpy, numpy)": "dlbridge.convert(a, 'numpy')",
    # Contiguous float32 copies against NumPy's a.copy() of the same array (issue 41).
    "numpy a.copy() 4 KiB": "c4[0].copy()",
    "dlbridge Tensor.copy() 4 KiB": "c4[1].copy()",
    "numpy a.copy() 64 KiB": "c64[0].copy()",
    "dlbridge Tensor.copy() 64 KiB": "c64[1].copy()",
    "numpy a.copy() 1 MiB": "c1m[0].copy()",
    "dlbridge Tensor.copy() 1 MiB": "c1m[1].copy()",
}
# Cases that need PyTorch (a pinned dev dependency; skipped without it).
TORCH_CASES = {
    "dlbridge.from_dlpack(torch)": "dlbridge.from_dlpack(tt)",
    "torch.from_dlpack(torch)": "torch.from_dlpack(tt)",
    "torch.from_dlpack(dlbridge)": "torch.from_dlpack(ttd)",
    "torch.from_dlpack(numpy)": "torch.from_dlpack(a)",
    "numpy.from_dlpack(torch)": "numpy.from_dlpack(tt)",
    "convert(torch, torch)": "dlbridge.convert(tt, 'torch')",
    "convert(numpy, torch)": "dlbridge.convert(a, 'torch')",
    "convert(torch, numpy)": "dlbridge.convert(tt, 'numpy')",
    "convert(negative strides, torch)": "dlbridge.convert(neg, 'torch')",
    "torch.from_dlpack(ascontiguousarray(negative strides))": "torch.from_dlpack(numpy.ascontiguousarray(neg))",
}

# The floors (bench/floor_bench.cpp: the least a correct import does, in the Python C API
# alone), beside dlbridge's import of the same array; built by bench/run beside the casters.
FLOOR_CASES = {
    "floor: from_dlpack(numpy)": "fb.numpy(a)",
}
FLOOR_TORCH_CASES = {
    "dlbridge.from_dlpack(torch complex)": "dlbridge.from_dlpack(ttc)",
    "floor: from_dlpack(torch)": "fb.torch(tt)",
    "floor: from_dlpack(torch complex)": "fb.torch(ttc)",
    "floor: torch's exchange API alone (no lazy-view checks)": "fb.torch_unchecked(tt)",
}
# apache/tvm-ffi's import of the same torch tensor, for scale: it makes none of the lazy-view
# checks (tvm_ffi.from_dlpack(torch.tensor([1+2j, 3-4j]).conj()) holds [1+2j, 3-4j]).
TVM_FFI_CASES = {"tvm_ffi.from_dlpack(torch)": "tvm_ffi.from_dlpack(tt)"}

# Cases that need JAX (CPU; skipped without it, and by --quick: its import is slow under valgrind).
JAX_CASES = {
    "jax.numpy.from_dlpack(numpy)": "jnp.from_dlpack(a)",
    "convert(numpy, jax)": "dlbridge.convert(a, 'jax')",
    "numpy.from_dlpack(jax)": "numpy.from_dlpack(ja)",
    "convert(jax, numpy)": "dlbridge.convert(ja, 'numpy')",
}

# convert into the libraries whose import is not NumPy's, torch's or JAX's, beside each
# library's own import of the same dlbridge tensor (issue 27), and a library to itself
# beside its own from_dlpack. Measured in a child of their own (--libraries): each import
# takes minutes under valgrind.
LIBRARY_CASES = {
    "mlx.from_dlpack(dlbridge)": "mx.from_dlpack(t)",
    "convert(dlbridge, mlx)": "dlbridge.convert(t, 'mlx')",
    "paddle.from_dlpack(dlbridge)": "paddle.from_dlpack(t)",
    "convert(dlbridge, paddle)": "dlbridge.convert(t, 'paddle')",
    "tf.experimental.dlpack.from_dlpack(dlbridge capsule)": "tfd(t.__dlpack__())",
    "convert(dlbridge, tensorflow)": "dlbridge.convert(t, 'tensorflow')",
    "warp.from_dlpack(dlbridge)": "wp.from_dlpack(t)",
    "convert(dlbridge, warp)": "dlbridge.convert(t, 'warp')",
    "mlx.from_dlpack(mlx)": "mx.from_dlpack(ma)",
    "convert(mlx, mlx)": "dlbridge.convert(ma, 'mlx')",
    "paddle.from_dlpack(paddle)": "paddle.from_dlpack(pa_)",
    "convert(paddle, paddle)": "dlbridge.convert(pa_, 'paddle')",
    "tf.experimental.dlpack.from_dlpack(tensorflow capsule)": "tfd(tfa.__dlpack__())",
    "convert(tensorflow, tensorflow)": "dlbridge.convert(tfa, 'tensorflow')",
    "warp.from_dlpack(warp)": "wp.from_dlpack(wa)",
    "convert(warp, warp)": "dlbridge.convert(wa, 'warp')",
}

# The type casters of issue 14, for the same 8x8 float32 NumPy array: each
# dlbridge caster beside the framework's own array parameter (bench/casters_bench_*.cpp,
# built by bench/run; left out when the modules are not built).
CASTER_CASES = {
    "caster nb::ndarray<>": "cbn.ndarray_any(a)",
    "caster TensorView (nanobind)": "cbn.view_any(a)",
    "caster nb::ndarray<float, c_contig, cpu>": "cbn.ndarray_f32(a)",
    "caster TensorArg<float, c_contig, cpu, writable> (nanobind)": "cbn.arg_f32(a)",
    # The same module built at nanobind's default -Os (which leaves libnanobind,
    # where nb::ndarray's import is, at the build type's level).
    "caster nb::ndarray<> (-Os module)": "cbo.ndarray_any(a)",
    "caster TensorView (nanobind, -Os module)": "cbo.view_any(a)",
    "caster nb::ndarray<float, c_contig, cpu> (-Os module)": "cbo.ndarray_f32(a)",
    "caster TensorArg<float, c_contig, cpu, writable> (nanobind, -Os module)": "cbo.arg_f32(a)",
    "caster py::array_t<float, c_style>": "cbp.array_t_f32(a)",
    "caster TensorArg<float, c_contig, cpu, writable> (pybind11)": "cbp.arg_f32(a)",
}
DEFAULT_CASTER_MODULES = benchlib.ROOT / "build" / "bench-suite" / "bench" / "casters"

# (case, baseline, goal): goal ("ratio", x) is net Ir case / baseline <= x;
# ("extra", n) is at most n more Ir per call than the baseline.
TARGETS = [
    ("dlbridge.from_dlpack(numpy)", "floor: from_dlpack(numpy)", ("ratio", 1.10)),
    ("dlbridge.from_dlpack(torch)", "floor: from_dlpack(torch)", ("ratio", 1.10)),
    ("dlbridge.from_dlpack(torch complex)", "floor: from_dlpack(torch complex)", ("ratio", 1.10)),
    ("tvm_ffi.from_dlpack(torch)", "floor: from_dlpack(torch)", ("ratio", None)),
    ("dlbridge.from_dlpack(numpy)", "numpy.from_dlpack(numpy)", ("ratio", 0.85)),
    # Instructions: at most NumPy's (bench_copy_numpy.py times the same copies; 0.95x NumPy's speed).
    ("dlbridge Tensor.copy() 4 KiB", "numpy a.copy() 4 KiB", ("ratio", 1.05)),
    ("dlbridge Tensor.copy() 64 KiB", "numpy a.copy() 64 KiB", ("ratio", 1.05)),
    ("dlbridge Tensor.copy() 1 MiB", "numpy a.copy() 1 MiB", ("ratio", 1.05)),
    ("numpy.from_dlpack(dlbridge)", "numpy.from_dlpack(numpy)", ("ratio", 0.95)),
    ("convert(numpy, numpy)", "numpy.from_dlpack(numpy)", ("ratio", 1.10)),
    # docs/benchmarks.md: convert(x, lib) at most 1.2x the library's own import, on the abi3 wheel too.
    ("convert(dlbridge, numpy)", "numpy.from_dlpack(dlbridge)", ("ratio", 1.2)),
    ("dlbridge.from_dlpack(torch)", "torch.from_dlpack(torch)", ("ratio", 0.5)),
    ("torch.from_dlpack(dlbridge)", "torch.from_dlpack(torch)", ("ratio", 1.0)),
    ("convert(torch, torch)", "torch.from_dlpack(torch)", ("ratio", 1.10)),
    ("convert(numpy, torch)", "torch.from_dlpack(numpy)", ("extra", 1200)),
    ("convert(torch, numpy)", "numpy.from_dlpack(torch)", ("extra", 1200)),
    ("convert(negative strides, torch)", "torch.from_dlpack(ascontiguousarray(negative strides))",
     ("extra", 2000)),
    ("convert(numpy, jax)", "jax.numpy.from_dlpack(numpy)", ("extra", 1200)),
    ("convert(jax, numpy)", "numpy.from_dlpack(jax)", ("extra", 1200)),
    ("convert(dlbridge, mlx)", "mlx.from_dlpack(dlbridge)", ("ratio", 1.2)),
    ("convert(dlbridge, paddle)", "paddle.from_dlpack(dlbridge)", ("ratio", 1.2)),
    ("convert(dlbridge, tensorflow)", "tf.experimental.dlpack.from_dlpack(dlbridge capsule)", ("ratio", 1.2)),
    ("convert(dlbridge, warp)", "warp.from_dlpack(dlbridge)", ("ratio", 1.2)),
    ("convert(mlx, mlx)", "mlx.from_dlpack(mlx)", ("ratio", 1.1)),
    ("convert(paddle, paddle)", "paddle.from_dlpack(paddle)", ("ratio", 1.1)),
    ("convert(tensorflow, tensorflow)", "tf.experimental.dlpack.from_dlpack(tensorflow capsule)", ("ratio", 1.1)),
    ("convert(warp, warp)", "warp.from_dlpack(warp)", ("ratio", 1.1)),
    ("caster TensorView (nanobind)", "caster nb::ndarray<>", ("ratio", 1.2)),
    ("caster TensorArg<float, c_contig, cpu, writable> (nanobind)", "caster nb::ndarray<float, c_contig, cpu>",
     ("ratio", 1.2)),
    ("caster TensorView (nanobind, -Os module)", "caster nb::ndarray<> (-Os module)", ("ratio", None)),
    ("caster TensorArg<float, c_contig, cpu, writable> (nanobind, -Os module)",
     "caster nb::ndarray<float, c_contig, cpu> (-Os module)", ("ratio", None)),
    # pybind11 has no DLPack: py::array_t is the baseline shown, with no goal.
    ("caster TensorArg<float, c_contig, cpu, writable> (pybind11)", "caster py::array_t<float, c_style>",
     ("ratio", None)),
]

CHILD = """
import os, re, sys
import numpy, dlbridge
a = numpy.arange(64, dtype=numpy.float32).reshape(8, 8)
t = dlbridge.from_dlpack(a)
neg = a[:, ::-1]
c4, c64, c1m = ((h, dlbridge.from_dlpack(h)) for h in (numpy.arange(k * 256, dtype=numpy.float32) for k in (4, 64, 1024)))
n = int(sys.argv[1])
if os.environ.get("DLBRIDGE_CASTER_MODULES"):
    sys.path.insert(0, os.environ["DLBRIDGE_CASTER_MODULES"])
statements = sys.argv[2:]
if any(re.search(r"\\bcb[nop]\\.", s) for s in statements):
    import casters_bench_nanobind as cbn, casters_bench_nanobind_os as cbo, casters_bench_pybind11 as cbp
if any(s.startswith("fb.") for s in statements):
    import floor_bench as fb
if any("tt" in s or "torch" in s for s in statements):
    import torch
    tt = torch.arange(64, dtype=torch.float32).reshape(8, 8)
    ttc = tt.to(torch.complex64)
    if any("tvm_ffi" in s for s in statements):
        import tvm_ffi
    ttd = dlbridge.from_dlpack(tt)
# A JAX array or module named anywhere (--only may keep convert(ja, ...) without jnp.from_dlpack).
if any(re.search(r"\\bja\\b|jnp", s) for s in statements):
    import jax.numpy as jnp
    ja = jnp.arange(64, dtype=jnp.float32).reshape(8, 8)
# The other libraries, each only where a statement names it; paddle before tensorflow
# (dlbridge.libraries.paddle: importing it after tensorflow kills the process).
if any(re.search(r"paddle|pa_", s) for s in statements):
    import paddle
    pa_ = paddle.to_tensor(a)
if any(re.search(r"\\btfd\\b|tensorflow", s) for s in statements):
    import tensorflow as tf
    tfd = tf.experimental.dlpack.from_dlpack
    tfa = tf.constant(a)
if any(re.search(r"\\bmx\\b|mlx|\\bma\\b", s) for s in statements):
    import mlx.core as mx
    ma = mx.array(a)
if any(re.search(r"\\bwp\\b|warp|\\bwa\\b", s) for s in statements):
    from dlbridge.libraries.warp import ready
    wp = ready()
    wa = wp.array(a, device="cpu")
loops = []
for s in statements:
    scope = {}
    # A plain for loop: each result is freed before the next call, as in use.
    exec("def loop():\\n    for _ in range(n):\\n        " + s, globals(), scope)
    loops.append(scope["loop"])
for loop in loops:
    loop()
os.getppid()
for loop in loops:
    loop()
    os.getppid()
"""


def callgrind_totals(path: Path) -> int:
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith(("totals:", "summary:")):
            return int(line.split()[1])
    raise ValueError(f"no totals in {path}")


def self_costs(path: Path, calls: int, limit: int = 12) -> tuple[list[dict], dict[str, float]]:
    """The functions with the most self instructions in one dump, and the
    instructions spent in each shared object, both per call.

    Parsed here rather than by callgrind_annotate, which (3.19) charges a
    --dump-before part wholly to __libc_start_main.
    """
    self_cost: dict[str, int] = {}
    obj = fn = ""
    call_follows = False
    for line in path.read_text(errors="replace").splitlines():
        if not line:
            continue
        head = line[0]
        if head.isdigit() or head in "+-*":
            if call_follows:  # the inclusive cost of a call, not the caller's own
                call_follows = False
                continue
            parts = line.split()
            if len(parts) > 1:
                self_cost[fn] = self_cost.get(fn, 0) + int(parts[1])
        elif line.startswith("calls="):
            call_follows = True
        elif line.startswith("ob="):
            obj = Path(line[3:].strip()).name
        elif line.startswith("fn="):
            fn = f"{line[3:].strip()} [{obj}]"
    top = sorted(self_cost.items(), key=lambda kv: -kv[1])[:limit]
    by_object: dict[str, float] = {}
    for name, cost in self_cost.items():
        obj_name = name.rsplit(" [", 1)[-1].rstrip("]")
        by_object[obj_name] = by_object.get(obj_name, 0) + cost / calls
    by_object = dict(sorted(((k, round(v, 1)) for k, v in by_object.items() if v >= 1), key=lambda kv: -kv[1]))
    return [{"function": name[-160:], "ir_per_call": cost / calls} for name, cost in top], by_object


def measure(cases: dict, n: int, caster_modules: Path | None) -> tuple[dict, list[dict]]:
    """Instructions per call of each case (the "loop" case among them) in one valgrind child,
    and the report rows, net of that child's own loop."""
    valgrind = shutil.which("valgrind")
    names = list(cases)
    with tempfile.TemporaryDirectory(prefix="dlbridge-callgrind-") as tmp:
        out = Path(tmp) / "callgrind.out"
        cmd = [valgrind, "--tool=callgrind", "--compress-strings=no", "--compress-pos=no",
               f"--callgrind-out-file={out}.%p",
               "--dump-before=getppid", sys.executable, "-c", CHILD, str(n),
               *cases.values()]
        # PYTHONMALLOC=malloc would change what is counted; the default
        # allocator is what users run, and callgrind handles it fine.
        # One OpenBLAS thread: its idle workers spin, and callgrind counts
        # their spinning into whichever case is running (counts drifted by
        # hundreds of instructions per call from run to run).
        env = dict(os.environ, PYTHONHASHSEED="0", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
        if caster_modules is not None:
            env["DLBRIDGE_CASTER_MODULES"] = str(caster_modules)
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            raise SystemExit(f"valgrind failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
        # Part files are <out>.<pid>.<k>, k = 1 for the first dump; the
        # first getppid dump holds start-up and warm-up, then one per case.
        parts = sorted(Path(tmp).glob("callgrind.out.*.*"), key=lambda p: int(p.name.rsplit(".", 1)[1]))
        if len(parts) < len(names) + 1:
            raise SystemExit(f"expected {len(names) + 1} dumps, got {len(parts)}: is getppid called elsewhere?")
        case_parts = parts[1:len(names) + 1]
        per_call = {name: callgrind_totals(p) / n for name, p in zip(names, case_parts)}
        loop = per_call["loop"]
        rows = []
        for name, p in zip(names, case_parts):
            top, by_object = self_costs(p, n)
            rows.append({"case": name, "statement": cases[name], "ir_per_call": per_call[name],
                         "ir_per_call_net": per_call[name] - loop,
                         "by_object": by_object, "top_self": top})
            print(f"{name:<34} {per_call[name]:10.0f} Ir/call   net {per_call[name] - loop:10.0f}   "
                  f"[{benchlib.interpreter()}]", flush=True)
    return {name: per_call[name] - loop for name in names}, rows


def run(quick: bool, caster_modules: Path | None = DEFAULT_CASTER_MODULES, only: str | None = None) -> dict:
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise SystemExit("callgrind.py needs valgrind (apt-get install valgrind)")
    n = 50 if quick else 500
    cases = dict(CASES)
    # torch takes minutes to import under valgrind: --quick (a smoke test of
    # this script) leaves it out.
    try:
        import torch  # noqa: F401
        if not quick:
            cases.update(TORCH_CASES)
    except ImportError:
        print("torch not installed: no torch cases", file=sys.stderr)
    try:
        import jax.numpy  # noqa: F401
        if not quick:
            cases.update(JAX_CASES)
    except ImportError:
        print("jax not installed: no jax cases", file=sys.stderr)
    casters = caster_modules is not None and all(
        any(caster_modules.glob(f"{name}.*")) for name in
        ("casters_bench_nanobind", "casters_bench_nanobind_os", "casters_bench_pybind11"))
    floors = caster_modules is not None and any(caster_modules.glob("floor_bench.*"))
    if floors:
        cases.update(FLOOR_CASES)
        if "dlbridge.from_dlpack(torch)" in cases:
            cases.update(FLOOR_TORCH_CASES)
            if importlib.util.find_spec("tvm_ffi") is not None:
                cases.update(TVM_FFI_CASES)
    if casters:
        cases.update(CASTER_CASES)
    else:
        print(f"caster modules not built in {caster_modules}: no caster cases", file=sys.stderr)
    # The other libraries' cases, where every library they name is installed.
    from dlbridge import libraries

    library_cases = {"loop": CASES["loop"]}
    if not quick:
        wanted = {"mlx": "mlx", "paddle": "paddle", "tensorflow": "tf", "warp": "warp"}
        present = {name for name in wanted if libraries.installed(name)}
        for name, statement in LIBRARY_CASES.items():
            if any(tag in name for lib, tag in wanted.items() if lib not in present):
                continue
            library_cases[name] = statement
    if only is not None:  # a quick look at some cases while working on them
        import re

        cases = {k: v for k, v in cases.items() if k == "loop" or re.search(only, k)}
        library_cases = {k: v for k, v in library_cases.items() if k == "loop" or re.search(only, k)}
    net, rows = measure(cases, n, caster_modules if casters or floors else None)
    if len(library_cases) > 1:
        more, more_rows = measure(library_cases, n, None)
        net.update({k: v for k, v in more.items() if k != "loop"})
        rows += [r for r in more_rows if r["case"] != "loop"]

    targets = []
    for case, baseline, (kind, goal) in TARGETS:
        if case not in net or baseline not in net:
            continue
        mine, theirs = net[case], net[baseline]
        value = mine / theirs if kind == "ratio" else mine - theirs
        targets.append({"case": case, "baseline": baseline, "kind": kind, "goal": goal,
                        "value": value, "ok": None if goal is None else value <= goal})

    return {
        "benchmark": "callgrind",
        "machine": benchlib.machine_info(),
        "settings": {"calls_per_case": n, "quick": quick,
                     "valgrind": subprocess.run([valgrind, "--version"], capture_output=True,
                                                text=True).stdout.strip()},
        "note": "instructions (Ir) per call from callgrind; net subtracts the loop case id(a) measured in the "
                "same child (the other libraries' cases run in a child of their own); "
                "a = float32 8x8 numpy array, t = dlbridge.from_dlpack(a), tt = the same in torch, "
                "neg = a[:, ::-1], jnp = jax.numpy, ja = a in JAX, ma/pa_/tfa/wa = a in mlx/paddle/tensorflow/warp",
        "results": rows,
        "targets": targets,
        "ratios_net": {f"{t['case']} / {t['baseline']}": net[t["case"]] / net[t["baseline"]] for t in targets},
    }


def main(argv: list[str] | None = None) -> int:
    args = benchlib.main_args(argv, "callgrind.json", extra=lambda p: (
        p.add_argument("--casters", type=Path, default=DEFAULT_CASTER_MODULES,
                       help="directory holding the built casters_bench_* modules"),
        p.add_argument("--only", help="only the cases whose name this regular expression finds (plus the loop)")))
    result = run(args.quick, args.casters, args.only)
    benchlib.write_json(args.out, result)
    print(f"ratios on {result['machine']['interpreter']}:")
    print(json.dumps(result["ratios_net"], indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
