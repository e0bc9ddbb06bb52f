"""bench/results/*.json -> docs/benchmarks.md (tables) and docs/benchmarks.png (plot).

    python bench/report.py [--results DIR] [--md FILE] [--png FILE]

Every number in the Markdown comes from the JSON, so the page can be
regenerated at any time without rerunning anything. A missing result file
leaves its section marked "not run" instead of failing.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import report_casters  # noqa: E402
import report_distributed  # noqa: E402

MiB = 1 << 20


def load(results: Path, name: str) -> dict | None:
    path = results / name
    return json.loads(path.read_text()) if path.exists() else None


def size_label(nbytes: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", MiB), ("KiB", 1024)):
        if nbytes >= scale:
            value = nbytes / scale
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{nbytes} B"


def table(header: list[str], rows: list[list]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return out + [""]


# A timing whose per-round spread (p10-p90) is this many times wider than
# the target cannot tell met from missed: JAX's from_dlpack takes 40-60 µs
# and varies by +-10 µs per batch on a shared 2-CPU machine, against a
# +300 ns target. Its callgrind row decides instead.
NOISE_FACTOR = 4


def verdict(ok: bool | None | str) -> str:
    if isinstance(ok, str):
        return ok
    return "not measured" if ok is None else ("**met**" if ok else "**missed**")


def diff_verdict(row: dict, target_ns: float) -> bool | str:
    wide = row["diff_p90"] - row["diff_p10"] > NOISE_FACTOR * target_ns
    if wide and row["diff_p10"] <= target_ns < row["diff_p90"]:
        return f"inconclusive (spread > {NOISE_FACTOR}× the target; see callgrind)"
    return row["diff_ns"] <= target_ns


# ---------------------------------------------------------------- targets

def per_process(row: dict) -> str:
    """Each fresh process's own median ratio, where rounds were pooled."""
    ratios = row.get("process_ratios")
    return f"; per process {min(ratios):.2f}–{max(ratios):.2f}" if ratios else ""


def spread(row: dict) -> str:
    return f" ({row['ratio_p10']:.2f}–{row['ratio_p90']:.2f})" if "ratio_p10" in row else ""


def targets(ex, api, cpp, py, conv=None, cg=None) -> list[dict]:
    """Issues 5 and 11's targets, each with the measured figure and a verdict."""
    out = []

    def add(name, goal, value, ok, detail=""):
        out.append({"target": name, "goal": goal, "measured": value, "ok": ok, "detail": detail})

    if ex:
        for row in ex["import"]:
            if row.get("target") is not None:
                ratio = row.get("ratio")
                add(f"import {row['producer']} array: dlbridge vs {row['competitor']}", f"≤ {row['target']:.2f}×",
                    f"{ratio:.2f}×{spread(row)}" if ratio else row.get("error", "failed"),
                    ratio is not None and ratio <= row["target"],
                    f"{row['dlbridge_ns']:.0f} vs {row['competitor_ns']:.0f} ns{per_process(row)}" if ratio else "")
        for row in ex["export"]:
            ratio = row.get("ratio")
            if row.get("target") is None:
                continue
            add(f"export: {row['call']}(dlbridge) vs {row['call']}(own)", f"≤ {row['target']:.2f}×",
                f"{ratio:.2f}×{spread(row)}" if ratio else row.get("error", "failed"),
                ratio is not None and ratio <= row["target"],
                f"{row['dlbridge_ns']:.0f} vs {row['own_ns']:.0f} ns{per_process(row)}" if ratio else "")
    if api:
        for row in api["results"]:
            if row.get("target_ns"):
                what = {"managed_import_delete": "C API managed import + delete",
                        "borrowed_dltensor": "C API borrowed DLTensor"}[row["op"]]
                add(what, f"≤ {row['target_ns']:.0f} ns", f"{row['ns']:.1f} ns", row["ns"] <= row["target_ns"],
                    f"min batch {row['ns_min']:.1f} ns")
    if cpp:
        contiguous = [r for r in cpp["results"] if r["kind"] == "contiguous" and r["bytes"] >= MiB]
        if contiguous:
            worst = min(contiguous, key=lambda r: r["ratio"])
            add("contiguous copy ≥ 1 MiB vs memcpy (C++)", "≥ 0.90×",
                f"worst {worst['ratio']:.2f}× ({size_label(worst['bytes'])}, {worst['threads']} thr)",
                worst["ratio"] >= 0.9,
                f"median over sizes {sorted(r['ratio'] for r in contiguous)[len(contiguous) // 2]:.2f}×")
        small = [r for r in cpp["results"] if r["kind"] == "contiguous" and 4096 <= r["bytes"] <= 16384]
        if small:
            worst = min(small, key=lambda r: r["ratio"])
            add("contiguous copy 4–16 KiB vs memcpy (C++)", "≥ 0.80×",
                f"worst {worst['ratio']:.2f}× ({size_label(worst['bytes'])}, {worst['threads']} thr)",
                worst["ratio"] >= 0.8)
        for r in cpp["results"]:
            if (r["kind"] == "transpose" and r.get("mode", "touched") == "touched"
                    and r["name"] in ("4096x4096 32-bit", "4096x4096 64-bit")):
                # Issue 32: one thread against the fair floor; issue 11: two.
                goal = 0.6 if r["threads"] == 1 else 0.5
                what = "float32" if r["name"].endswith("32-bit") else "float64"
                add(f"4096² {what} transpose vs fair memcpy floor (C++, {r['threads']} thr)", f"≥ {goal:.2f}×",
                    f"{r['ratio']:.2f}×{spread(r)}",
                    r["ratio"] >= goal, f"{r['dlbridge_gbps']:.1f} vs {r['baseline_gbps']:.1f} GB/s")
        for kind, what in (("unpack", "int4 unpack (copy_unpacked)"), ("pack", "int4 pack (copy_packed)")):
            fresh = [r for r in cpp["results"] if r["kind"] == kind and r["name"] == "int4"
                     and r.get("mode") == "fresh"]
            if fresh:
                worst = min(fresh, key=lambda r: r["dlbridge_gbps"])
                add(f"{what}, 1 thr, ≥ 64 KiB (C++, fresh result)", "≥ 4 GB/s of output",
                    f"worst {worst['dlbridge_gbps']:.1f} GB/s ({size_label(worst['bytes'])} out)",
                    worst["dlbridge_gbps"] >= 4.0,
                    "all sizes: " + ", ".join(f"{size_label(r['bytes'])} {r['dlbridge_gbps']:.1f}" for r in fresh))
    if conv:
        for r in conv["results"]:
            what = f"convert({r['producer']} array, {r['target']!r})"
            if "error" in r:
                continue
            if "target_ratio" in r:
                add(f"{what} vs {r['target']} direct call", f"≤ {r['target_ratio']:.2f}×",
                    f"{r['ratio']:.2f}×{spread(r)}", r["ratio"] <= r["target_ratio"],
                    f"{r['convert_ns']:.0f} vs {r['direct_ns']:.0f} ns{per_process(r)}")
            else:
                label = (f"{what} of negative strides vs copy + direct" if r["kind"].startswith("repair")
                         else f"{what} vs {r['target']} direct call")
                add(label, f"≤ +{r['target_extra_ns']:.0f} ns",
                    f"+{r['diff_ns']:.0f} ns ({r['diff_p10']:.0f}–{r['diff_p90']:.0f})",
                    diff_verdict(r, r["target_extra_ns"]), f"{r['convert_ns']:.0f} vs {r['direct_ns']:.0f} ns")
    if cg and cg.get("targets"):
        for t in cg["targets"]:
            if t["goal"] is None:  # a baseline shown beside the targets, with no goal of its own
                continue
            goal = f"≤ {t['goal']:.2f}×" if t["kind"] == "ratio" else f"≤ +{t['goal']:.0f} Ir"
            value = f"{t['value']:.2f}×" if t["kind"] == "ratio" else f"{t['value']:+.0f} Ir"
            add(f"callgrind: {t['case']} vs {t['baseline']}", goal, value, t["ok"], "net Ir per call")
    if py:
        for r in py["results"]:
            if r["kind"] != "transpose" or r["n"] != 4096 or r.get("dtype", "float32") not in ("float32", "float64"):
                continue
            dtype = r.get("dtype", "float32")
            if dtype == "float32":
                add("4096² float32 Tensor.copy() of a.T vs numpy.ascontiguousarray(a.T) (1 CPU)", "> 1.00× (faster)",
                    f"{r['ratio_vs_numpy']:.2f}×{py_spread(r, 'numpy')}",
                    r["ratio_vs_numpy"] > 1.0, f"{r['dlbridge_gbps']:.2f} vs {r['numpy_gbps']:.2f} GB/s")
            if "ratio_vs_floor" in r:
                add(f"4096² {dtype} Tensor.copy() of a.T vs a.copy() of the same bytes (1 CPU, fresh results)",
                    "≥ 0.75×", f"{r['ratio_vs_floor']:.2f}×{py_spread(r, 'floor')}", r["ratio_vs_floor"] >= 0.75,
                    f"{r['dlbridge_gbps']:.2f} vs {r['floor_gbps']:.2f} GB/s")
        if py.get("unpack"):
            worst = min(py["unpack"], key=lambda r: r["ratio_vs_numpy"])
            add("int4 Tensor.copy_unpacked() vs NumPy shift/mask unpack (1 CPU, ≥ 64 Ki values)", "≥ 2.00×",
                f"worst {worst['ratio_vs_numpy']:.2f}×{py_spread(worst, 'numpy')}", worst["ratio_vs_numpy"] >= 2.0,
                f"at {size_label(worst['bytes'])}: {worst['dlbridge_gbps']:.2f} vs {worst['numpy_gbps']:.2f} GB/s")
    return out


def load_sentence(machine: dict) -> str:
    """How much to trust this run's timings, from the load it recorded at its start."""
    load = (machine.get("load_average") or [None])[0]
    cpus = machine.get("usable_cpus") or machine.get("logical_cpus") or 1
    where = (f"at a load average of {load:.2f} on {cpus} usable CPUs" if load is not None
             else "at an unrecorded load")
    busy = load is None or load > 0.5 * cpus
    return (f"**Timings on this page were taken in one `bench/run` {where}**"
            + (" (a machine shared with other builds and test runs): they move from run to run by tens of percent. "
               if busy else ": rerun on a busier machine, they move by tens of percent. ")
            + "The instruction counts (callgrind, section 5 and the callgrind rows of the targets table) do not "
              "depend on load and are the stable figure; read the verdicts from them first.")


def py_spread(row: dict, against: str) -> str:
    key = f"ratio_vs_{against}"
    return f" ({row[key + '_p10']:.2f}–{row[key + '_p90']:.2f})" if key + "_p10" in row else ""


# ---------------------------------------------------------------- markdown

def machine_lines(info: dict) -> list[str]:
    v = info["versions"]
    versions = ", ".join(f"{k} {v[k]}" for k in v if v[k])
    return [f"- Machine: {info['cpu']}, {info['usable_cpus']} usable of {info['logical_cpus']} logical CPUs, "
            f"{info['memory_gib']} GiB; {info['platform']}; load average at the start "
            f"{' / '.join(str(x) for x in info['load_average'])} (shared machine: medians of interleaved batches)",
            f"- Python {info['python']}; {versions}",
            f"- dlbridge commit {info['git_commit']}{' (with uncommitted changes)' if info['git_dirty'] else ''}, "
            f"run {info['date']}"]


def markdown(results: Path) -> str:
    ex, api = load(results, "exchange.json"), load(results, "exchange_api.json")
    cpp, py = load(results, "copy.json"), load(results, "copy_numpy.json")
    cg = load(results, "callgrind.json")
    conv = load(results, "convert.json")
    lines = ["# Benchmarks", "",
             "Generated by `bench/report.py` from `bench/results/*.json` (run everything with `bench/run`). "
             "Every figure is a ratio against a competitor measured side by side in the same run: "
             "candidates take turns batch by batch (rotating order), and each figure is the median of the batches.",
             ""]
    first = next((d for d in (ex, api, py, cg) if d), None)
    lines += [load_sentence(first["machine"] if first else {}), ""]
    if first:
        lines += machine_lines(first["machine"]) + [""]
    if cpp:
        lines += [f"- C++ benchmarks: {cpp['compiler']}, dlbridge {cpp['dlbridge']}, "
                  f"{cpp['machine']['threads']} threads for 'all'", ""]

    lines += ["## Targets (issues 5, 11 and 32)", "",
              "Ratios are medians over rounds of the per-round ratio, with the 10th–90th percentile "
              "spread in brackets; callgrind rows count instructions (stable under load; "
              "+n Ir goals take ~4 instructions per ns). Import, export and convert pool the rounds of "
              "several fresh processes (one process's median can stand apart from the next one's by "
              "more than its own spread); 'per process' gives the range of their medians. A time difference whose spread is over "
              f"{NOISE_FACTOR}× its target and straddles it is *inconclusive*: that call's own time varies "
              "more than the target, and its callgrind row decides.", ""]
    rows = [[t["target"], t["goal"], t["measured"], verdict(t["ok"]), t["detail"]]
            for t in targets(ex, api, cpp, py, conv, cg)]
    lines += table(["target", "goal", "measured", "verdict", "detail"], rows) if rows else ["not run", ""]

    lines += ["## 1. Import: `dlbridge.from_dlpack(x)` vs each library's `from_dlpack(x)`", ""]
    if ex:
        s = ex["settings"]
        lines += [f"x: a {'x'.join(map(str, s['shape']))} {s['dtype']} array made by the producer. Time per call "
                  f"as a user sees it, result freed. Ratio = dlbridge / competitor (below 1: dlbridge faster); "
                  f"net subtracts the timing loop ({s['loop_overhead_ns']:.0f} ns per call).", ""]
        rows = []
        for r in ex["import"]:
            if "ratio" in r:
                rows.append([r["producer"], r["competitor"], f"{r['dlbridge_ns']:.0f}", f"{r['competitor_ns']:.0f}",
                             f"{r['ratio']:.2f}{spread(r)}", f"{r['ratio_net']:.2f}",
                             f"≤ {r['target']:.2f}" if r.get("target") is not None else ""])
            else:
                rows.append([r["producer"], r["competitor"], f"{r['dlbridge_ns']:.0f}", "fails", "", "",
                             r["error"]])
        lines += table(["producer", "competitor", "dlbridge ns", "competitor ns", "ratio", "net ratio", "target"], rows)
    else:
        lines += ["not run", ""]

    lines += ["## 2. Export: `lib.from_dlpack(t)` of a dlbridge tensor vs of the library's own array", ""]
    if ex:
        rows = [[r["call"], f"{r['dlbridge_ns']:.0f}", f"{r['own_ns']:.0f}", f"{r['ratio']:.2f}{spread(r)}",
                 f"{r['ratio_net']:.2f}", f"≤ {r['target']:.2f}" if r.get("target") else ""] if "ratio" in r
                else [r["call"], "fails", "", "", "", r["error"]] for r in ex["export"]]
        lines += table(["consumer", "of dlbridge.Tensor ns", "of own array ns", "ratio", "net ratio", "target"], rows)
    else:
        lines += ["not run", ""]

    lines += ["## 3. C exchange API from a C++ loop (`bench/exchange_api_bench.cpp`)", ""]
    if api:
        lines += [f"Tables: {', '.join(f'{k} {v}' for k, v in api['tables'].items())}. {api['note']}.", ""]
        rows = [[r["object"], r["table"], f"`{r['op']}`", f"{r['ns']:.1f}", f"{r['ns_min']:.1f}",
                 f"≤ {r['target_ns']:.0f}" if r.get("target_ns") else ""] for r in api["results"]]
        lines += table(["object", "table", "operation", "ns (median)", "ns (best batch)", "target"], rows)
    else:
        lines += ["not run", ""]

    lines += ["## 4. Copies", "", "### C++: `dlbridge` copies vs a fair `memcpy` floor (`bench/copy_bench.cpp`)", ""]
    if cpp:
        m = cpp["machine"]
        lines += [cpp["note"] + ". 'loop' is the plain nested loop a user would write. "
                  f"Load average {m.get('load_average_start')} at the start, {m.get('load_average_end')} at the end; "
                  f"transparent huge pages: enabled {m.get('thp_enabled', '?')}, defrag {m.get('thp_defrag', '?')}; "
                  f"sub-byte kernels: {m.get('subbyte_isa', '?')}.", ""]
        rows = []
        for r in cpp["results"]:
            faults = r.get("faults_per_call")
            vm = r.get("vmstat") or {}
            paging = (f"{faults[0]:.0f} / {faults[1]:.0f}" if faults else "")
            if vm.get("compact_stall") or vm.get("thp_fault_fallback"):
                paging += f"; compact_stall +{vm.get('compact_stall', 0)}, thp fallback +{vm.get('thp_fault_fallback', 0)}"
            rows.append([r["kind"], r["name"], r.get("mode", ""), size_label(r["bytes"]), r["threads"],
                         f"{r['dlbridge_gbps']:.2f}", f"{r['baseline_gbps']:.2f}", f"{r['ratio']:.2f}{spread(r)}",
                         f"{r['loop_gbps']:.2f}" if r["loop_gbps"] else "", paging])
        lines += table(["kind", "case", "dst", "bytes", "threads", "dlbridge GB/s", "floor GB/s",
                        "ratio (p10–p90)", "loop GB/s", "faults per call (dlbridge / floor)"], rows)
        lines += ["threshold rows: 'dlbridge' is the copy with every thread forced on, the floor the same copy "
                  "on one thread. unpack / pack rows: the kernels into touched buffers, and `copy_unpacked` / "
                  "`copy_packed` with a fresh result (GB/s of bytes written: one per value unpacked, "
                  "bits / 8 per value packed).", ""]
    else:
        lines += ["not run", ""]
    lines += ["### Python: `Tensor.copy()` and `Tensor.copy_unpacked()` vs NumPy (`bench/bench_copy_numpy.py`)", ""]
    if py:
        pinned = py["settings"].get("pinned_cpu")
        lines += [py["note"] + ". contiguous: `a.copy()`; transpose: `ascontiguousarray(a.T)`; "
                  "slice: `ascontiguousarray(a[:, ::2])` of n×2n; reversed: `ascontiguousarray(a[::-1, ::-1])`"
                  + (f"; pinned to CPU {pinned}" if pinned is not None else "") + ".", ""]
        rows = [[r["kind"], r.get("dtype", "float32"), f"{r['n']}×{r['n']}", size_label(r["bytes"]),
                 f"{r['dlbridge_gbps']:.2f}", f"{r['numpy_gbps']:.2f}",
                 f"{r['ratio_vs_numpy']:.2f}{py_spread(r, 'numpy')}",
                 f"{r.get('floor_gbps', r.get('memcpy_gbps', 0)):.2f}",
                 f"{r['ratio_vs_floor']:.2f}{py_spread(r, 'floor')}" if "ratio_vs_floor" in r else ""]
                for r in py["results"]]
        lines += table(["kind", "dtype", "result", "bytes", "dlbridge GB/s", "NumPy GB/s", "dlbridge / NumPy",
                        "floor GB/s", "dlbridge / floor"], rows)
        if py.get("unpack"):
            lines += ["int4 unpacking: `Tensor.copy_unpacked()` of a packed int4 tensor against this NumPy code on "
                      "the same bytes `p` (GB/s of output, one byte per value):", "", "```python",
                      py["settings"]["numpy_unpack"], "```", ""]
            rows = [[size_label(r["bytes"]), f"{r['dlbridge_gbps']:.2f}", f"{r['numpy_gbps']:.2f}",
                     f"{r['ratio_vs_numpy']:.2f}{py_spread(r, 'numpy')}", f"{r['floor_gbps']:.2f}",
                     f"{r['ratio_vs_floor']:.2f}{py_spread(r, 'floor')}"] for r in py["unpack"]]
            lines += table(["output", "dlbridge GB/s", "NumPy GB/s", "dlbridge / NumPy", "floor GB/s",
                            "dlbridge / floor"], rows)
    else:
        lines += ["not run", ""]

    lines += ["## 5. Instructions per call (callgrind, `bench/callgrind.py`)", ""]
    if cg:
        lines += [f"{cg['note']}; {cg['settings']['calls_per_case']} calls per case; {cg['settings']['valgrind']}.", ""]
        rows = []
        for r in cg["results"]:
            objects = ", ".join(f"{k.split('.cpython')[0].split('.so')[0]} {v:.0f}"
                                for k, v in list(r["by_object"].items())[:4])
            rows.append([r["case"], f"`{r['statement']}`", f"{r['ir_per_call']:.0f}",
                         f"{r['ir_per_call_net']:.0f}", objects])
        lines += table(["case", "statement", "Ir / call", "net Ir / call", "where (Ir / call by library)"], rows)
        lines += [f"- {k}: **{v:.2f}×** (net)" for k, v in cg["ratios_net"].items()] + [""]
        if any(r["case"].startswith("tvm_ffi.") for r in cg["results"]):
            lines += ["The floors are `bench/floor_bench.cpp`: the least a correct import does, in the Python C API "
                      "alone. For a torch tensor that is torch's C exchange API plus `requires_grad`, `is_neg()` and, "
                      "for complex dtypes only (no other dtype has a conjugate bit), `is_conj()`. "
                      "apache/tvm-ffi's `from_dlpack(torch)` is shown beside it for scale: it makes none of these "
                      "checks, so `tvm_ffi.from_dlpack(torch.tensor([1+2j, 3-4j]).conj())` holds `[1+2j, 3-4j]` "
                      "(the unconjugated memory), where dlbridge returns `[1-2j, 3+4j]`.", ""]
    else:
        lines += ["not run", ""]
    lines += pairs_section(load(results, "convert_pairs.json"))
    lines += ["## 6. `dlbridge.convert(x, target)` vs the direct call (`bench/bench_convert.py`)", ""]
    if conv:
        lines += [conv["note"] + ".", ""]
        rows = []
        for r in conv["results"]:
            if "error" in r:
                rows.append([r["kind"], r["producer"], r["target"], "", "", "", "", r["error"]])
                continue
            goal = (f"≤ {r['target_ratio']:.2f}×" if "target_ratio" in r else f"≤ +{r['target_extra_ns']:.0f} ns")
            rows.append([r["kind"], r["producer"], r["target"], f"{r['convert_ns']:.0f}", f"{r['direct_ns']:.0f}",
                         f"{r['ratio']:.2f}{spread(r)}", f"{r['diff_ns']:+.0f} ({r['diff_p10']:+.0f}…{r['diff_p90']:+.0f})",
                         goal])
        lines += table(["kind", "x from", "target", "convert ns", "direct ns", "ratio (p10–p90)",
                        "difference ns (p10…p90)", "goal"], rows)
        lines += ["The repair row's direct call is `torch.from_dlpack(numpy.ascontiguousarray(x))`: the same one "
                  "compact copy, written by hand.", ""]
    else:
        lines += ["not run", ""]
    lines += report_distributed.section(results)
    lines += report_casters.markdown_lines(load(results, "casters.json"))
    lines += ["![benchmarks](benchmarks.png)", ""]
    return "\n".join(lines)


def pairs_section(pairs: dict | None) -> list[str]:
    """The whole convert table (bench/callgrind_pairs.py): every producer into every target."""
    lines = ["## 6a. The whole convert table: `dlbridge.convert(x, to)` vs `to`'s own import of x "
             "(`bench/callgrind_pairs.py`)", ""]
    if not pairs:
        return lines + ["not run", ""]
    goal = pairs["settings"]["target_ratio"]
    lines += [f"x: an 8-element float32 array made by the producer; net instructions per call (callgrind, "
              f"{pairs['settings']['calls_per_case']} calls, the loop subtracted) and the best time per call of "
              f"{pairs['settings']['timing_rounds']} rounds (ns). Target: convert ≤ {goal:.2f}× the direct call "
              "in instructions.", ""]
    rows = []
    for r in pairs["rows"]:
        if r.get("ratio_ir") is None:
            why = "direct call refused: " + r["direct_refused"] if r["direct_refused"] else "not measured"
            conv = f"{r['convert_ir']:.0f}" if r["convert_ir"] is not None else ""
            rows.append([r["from"], r["to"], conv, "", "", "", "", "", f"≤ {goal:.2f}×", why])
            continue
        rows.append([r["from"], r["to"], f"{r['convert_ir']:.0f}", f"{r['direct_ir']:.0f}", f"{r['ratio_ir']:.2f}",
                     f"{r['convert_ns']:.0f}", f"{r['direct_ns']:.0f}", f"{r['ratio_ns']:.2f}", f"≤ {goal:.2f}×",
                     verdict(r["ok"])])
    return lines + table(["from", "to", "convert Ir", "direct Ir", "ratio", "convert ns", "direct ns", "ratio",
                          "target", "verdict"], rows)


# ---------------------------------------------------------------- plot

def plot(results: Path, png: Path) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("report.py: matplotlib not installed, no PNG (pip install -r requirements/dev.txt)", file=sys.stderr)
        return False
    ex, api = load(results, "exchange.json"), load(results, "exchange_api.json")
    cpp, py = load(results, "copy.json"), load(results, "copy_numpy.json")
    fig, axes = plt.subplots(2, 2, figsize=(14, 10))

    ax = axes[0][0]
    if ex:
        bars = [(f"import {r['producer']} → {r['consumer']}", r["ratio"], r.get("target"))
                for r in ex["import"] if "ratio" in r]
        bars += [(f"export dlbridge → {r['library']}", r["ratio"], r["target"]) for r in ex["export"] if "ratio" in r]
        xs = range(len(bars))
        ax.bar(xs, [b[1] for b in bars], color=["tab:green" if b[1] <= (b[2] or 1) else "tab:red" for b in bars])
        for x, b in zip(xs, bars):
            if b[2] is not None:
                ax.hlines(b[2], x - 0.4, x + 0.4, colors="black", linestyles="dashed")
        ax.set_xticks(list(xs), [b[0] for b in bars], fontsize=7, rotation=40, ha="right")
        ax.set_yscale("log")
        ax.axhline(1.0, color="grey", linewidth=0.8)
        ax.set_ylabel("dlbridge time / competitor time")
        ax.set_title("Import / export (below 1: dlbridge faster; dashes: targets)")

    ax = axes[0][1]
    if api:
        rows = api["results"]
        labels = [f"{r['object']}\n{r['table'].split(' ')[0]}\n{r['op'].replace('_', ' ')}" for r in rows]
        ax.barh(range(len(rows)), [r["ns"] for r in rows],
                color=["tab:blue" if r["table"] == "dlbridge.Tensor" else "tab:orange" for r in rows])
        for i, r in enumerate(rows):
            if r.get("target_ns"):
                ax.vlines(r["target_ns"], i - 0.4, i + 0.4, colors="black", linestyles="dashed")
        ax.set_yticks(range(len(rows)), labels, fontsize=6)
        ax.set_xscale("log")
        ax.set_xlabel("ns per tensor (median)")
        ax.set_title("C exchange API from C++ (blue: dlbridge table)")

    ax = axes[1][0]
    if cpp:
        for threads in sorted({r["threads"] for r in cpp["results"] if r["kind"] == "contiguous"}):
            rows = [r for r in cpp["results"] if r["kind"] == "contiguous" and r["threads"] == threads]
            if not rows:
                continue
            ax.plot([r["bytes"] for r in rows], [r["dlbridge_gbps"] for r in rows], marker="o",
                    label=f"dlbridge contiguous, {threads} thr")
            ax.plot([r["bytes"] for r in rows], [r["baseline_gbps"] for r in rows], linestyle="dotted",
                    label=f"memcpy (beside {threads} thr)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("bytes")
        ax.set_ylabel("GB/s")
        ax.legend(fontsize=7)
        ax.set_title("C++ contiguous copy vs memcpy")

    ax = axes[1][1]
    if py:
        for kind in py["settings"]["kinds"]:
            rows = [r for r in py["results"] if r["kind"] == kind and r.get("dtype", "float32") == "float32"]
            ax.plot([r["bytes"] for r in rows], [r["ratio_vs_numpy"] for r in rows], marker="o", label=kind)
        ax.axhline(1.0, color="grey", linewidth=0.8)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("result bytes")
        ax.set_ylabel("dlbridge GB/s / NumPy GB/s")
        ax.legend(fontsize=7)
        ax.set_title("Python Tensor.copy() vs NumPy (above 1: dlbridge faster)")

    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=90)
    plt.close(fig)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--md", type=Path, default=ROOT / "docs" / "benchmarks.md")
    parser.add_argument("--png", type=Path, default=ROOT / "docs" / "benchmarks.png")
    args = parser.parse_args(argv)
    args.md.parent.mkdir(parents=True, exist_ok=True)
    args.md.write_text(markdown(args.results))
    # Section 8 has its own writer; rendered here from its JSON too, so that
    # rewriting the page from the results never drops it.
    libraries = load(args.results, "libraries.json")
    if libraries is not None:
        import bench_libraries
        bench_libraries.splice(args.md, bench_libraries.markdown(libraries["libraries"]))
    print(f"wrote {args.md}")
    if plot(args.results, args.png):
        print(f"wrote {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
