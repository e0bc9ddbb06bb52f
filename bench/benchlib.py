"""Shared by the Python benchmarks: side-by-side timing and the machine record.

Every figure in bench/results is a ratio of two things measured in the same
process, in alternating batches, so that a load spike or a clock change on a
shared machine lands on both sides instead of on one.
"""
from __future__ import annotations

import datetime
import gc
import importlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import timeit
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _version(module: str) -> str | None:
    try:
        return importlib.import_module(module).__version__
    except Exception:  # an absent or broken library is a fact to record, not a failure
        return None


def _git(*args: str) -> str | None:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def interpreter() -> str:
    """The interpreter and the dlbridge build a figure was measured on, e.g. "CPython 3.12.1, cp312-abi3":
    users of 3.12 and later get the stable-ABI wheel, whose calls cost more than the 3.11 build's."""
    name = f"{platform.python_implementation()} {platform.python_version()}"
    try:
        from dlbridge import _core
    except ImportError:
        return name
    suffix = Path(_core.__file__).name.split(".")[1:-1]  # ['abi3'] or ['cpython-311-x86_64-linux-gnu']
    if suffix == ["abi3"]:
        build = "cp312-abi3"
    elif suffix:
        build = "cp" + suffix[0].split("-")[1]  # cp311, cp313t
    else:
        build = "unknown build"
    return f"{name}, {build}"


def machine_info() -> dict:
    """What a reader needs to judge a number: where, when, with which versions."""
    commit = _git("rev-parse", "--short", "HEAD")
    # Only dlbridge's own sources decide whether the measured build is the commit.
    dirty = _git("status", "--porcelain", "--", "include", "src", "python")
    return {
        "cpu": cpu_model(),
        "logical_cpus": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "interpreter": interpreter(),
        "versions": {name: _version(name) for name in ("dlbridge", "numpy", "torch", "jax", "jaxlib")},
        "git_commit": commit,
        "git_dirty": bool(dirty) if dirty is not None else None,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def _calibrate(timer: timeit.Timer, batch_s: float) -> int:
    """Calls per batch so that one batch lasts about batch_s."""
    number = 1
    while True:
        elapsed = timer.timeit(number)
        if elapsed >= batch_s / 4 or number >= 1 << 24:
            return max(1, int(number * batch_s / max(elapsed, 1e-9)))
        number *= 4


def compare(candidates: dict[str, tuple], *, batch_s: float, reps: int,
            budget_s: float | None = None, warmup: bool = False,
            min_reps: int = 3) -> dict[str, dict]:
    """Median ns per call of fn(arg) for each name -> (fn, arg), or of
    fn(arg, *more) for name -> (fn, arg, more): a function that takes more
    arguments is called as users call it, not through a Python wrapper that
    would add its own call (~60 ns) to one side only.

    Candidates take turns batch by batch, and the order rotates each round so
    that none always runs first after the others warmed or cooled the caches.
    warmup: each batch follows one untimed call of its own candidate, so it
    starts from that candidate's cache, TLB and allocator state, not the one
    the previous candidate left. budget_s stops early (after at least
    min_reps rounds) when a round is slow.
    """
    def timer(fn, arg, more=()):
        names = {f"more{i}": value for i, value in enumerate(more)}
        call = "fn(" + ", ".join(["arg", *names]) + ")"
        return timeit.Timer(call, globals={"fn": fn, "arg": arg, **names})

    timers = {name: timer(*candidate) for name, candidate in candidates.items()}
    numbers = {name: _calibrate(t, batch_s) for name, t in timers.items()}
    samples: dict[str, list[float]] = {name: [] for name in timers}
    names = list(timers)
    start = time.perf_counter()
    for r in range(reps):
        for k in range(len(names)):
            name = names[(r + k) % len(names)]
            if warmup:
                timers[name].timeit(1)
            samples[name].append(timers[name].timeit(numbers[name]) / numbers[name] * 1e9)
        if budget_s is not None and r + 1 >= min_reps and time.perf_counter() - start > budget_s:
            break
    gc.collect()
    return {name: {"ns": statistics.median(s), "ns_min": min(s), "batches": len(s),
                   "calls_per_batch": numbers[name], "samples": [round(x, 1) for x in s]}
            for name, s in samples.items()}


def paired(times: dict[str, dict], mine: str, theirs: str) -> dict:
    """Median and spread (10th-90th percentile) of the per-round ratio and
    difference mine / theirs: each round's two batches ran back to back, so a
    load change between rounds cancels out of these."""
    a, b = times[mine]["samples"], times[theirs]["samples"]
    ratios = [x / y for x, y in zip(a, b)]
    diffs = [x - y for x, y in zip(a, b)]
    return {**spread_of(ratios, diffs), "ratios": [round(x, 4) for x in ratios],
            "diffs": [round(x, 1) for x in diffs]}


def _pct(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(q * len(values)))]


def spread_of(ratios: list[float], diffs: list[float]) -> dict:
    ratios, diffs = sorted(ratios), sorted(diffs)
    return {"ratio": statistics.median(ratios), "ratio_p10": _pct(ratios, 0.1), "ratio_p90": _pct(ratios, 0.9),
            "diff_ns": statistics.median(diffs), "diff_p10": _pct(diffs, 0.1), "diff_p90": _pct(diffs, 0.9),
            "rounds": len(ratios)}


# Fresh processes per benchmark in a full run. One process's median ratio
# stood apart from the next one's by more than its own spread (export on the
# 2-CPU VM: 0.89 (0.85-0.95) in one run, 1.02 (0.98-1.09) in another, same
# code), so a figure pools the rounds of several processes, started a few
# seconds apart, and keeps each process's median beside it.
PROCESSES = 5


def in_processes(script: Path, argv: list[str], processes: int) -> list[dict]:
    """Runs `script --child-out FILE` `processes` times, one after another,
    each in a fresh interpreter, and returns what each wrote."""
    import tempfile
    payloads = []
    with tempfile.TemporaryDirectory(prefix="dlbridge-bench-") as tmp:
        for k in range(processes):
            out = Path(tmp) / f"part{k}.json"
            subprocess.run([sys.executable, str(script), *argv, "--child-out", str(out)], check=True)
            payloads.append(json.loads(out.read_text()))
    return payloads


def pool_rows(runs: list[list[dict]], key) -> list[dict]:
    """Rows of several processes' runs merged by key(row): per-round ratios
    and differences pooled (their median and spread recomputed), times the
    median of the processes' medians, and each process's median ratio kept
    as process_ratios; the per-round lists themselves are not kept. A row
    that any process could not time keeps its error."""
    merged = []
    for rows in zip(*runs):
        first = dict(rows[0])
        if any(key(r) != key(first) for r in rows):
            raise ValueError(f"processes timed different rows: {[key(r) for r in rows]}")
        if any("ratios" not in r for r in rows):
            merged.append(next((r for r in rows if "error" in r), first))
            continue
        ratios = [x for r in rows for x in r["ratios"]]
        diffs = [x for r in rows for x in r["diffs"]]
        first.update(spread_of(ratios, diffs))
        for field in first:
            timed = field.endswith("_ns") and not field.startswith(("diff", "target"))
            if timed or field == "ratio_net":
                first[field] = statistics.median(r[field] for r in rows)
        first["process_ratios"] = [round(r["ratio"], 3) for r in rows]
        del first["ratios"], first["diffs"]  # what they gave is above
        merged.append(first)
    return merged


def run_pooled(script: Path, args, run, sections: dict) -> dict:
    """A script's payload: run(quick) in this process (--quick, or
    --processes 1), or the pooled rows of fresh processes; sections maps
    each list of rows in the payload to the key that names a row."""
    processes = args.processes or (1 if args.quick else PROCESSES)
    if processes <= 1:
        payload = run(args.quick)
    else:
        parts = in_processes(script, ["--quick"] if args.quick else [], processes)
        payload = parts[0]
        for section, key in sections.items():
            payload[section] = pool_rows([p[section] for p in parts], key)
    payload["settings"]["processes"] = processes
    if processes <= 1:  # pooled rows have already given up their per-round values
        for section in sections:
            for row in payload[section]:
                row.pop("ratios", None)
                row.pop("diffs", None)
    return payload


def write_json(path: Path, payload: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # Written next to the target and renamed, so an interrupted run never
    # leaves a truncated result where report.py will read it.
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(payload, indent=2) + "\n")
    tmp.replace(path)


def main_args(argv: list[str] | None, default_name: str, extra=None):
    """--quick and --out; extra(parser) adds a script's own options."""
    import argparse
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true",
                        help="a few repetitions of small cases: checks that the script works, times nothing")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / default_name)
    parser.add_argument("--processes", type=int, default=None,
                        help=f"fresh processes whose rounds are pooled (default {PROCESSES}, 1 with --quick)")
    parser.add_argument("--child-out", type=Path, default=None, help=argparse.SUPPRESS)
    if extra is not None:
        extra(parser)
    return parser.parse_args(argv if argv is not None else sys.argv[1:])
