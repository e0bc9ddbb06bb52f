"""The "C++ extension casters" section of docs/benchmarks.md, from
bench/results/casters.json (bench/bench_casters.py); report.py includes it."""
from __future__ import annotations


def _ns(row: dict, key: str) -> str:
    return f"{row[key + '_ns']:.0f}" if key + "_ns" in row else "refuses"


def markdown_lines(data: dict | None) -> list[str]:
    lines = ["## 9. C++ extension casters: dlbridge's vs each framework's own parameter type "
             "(`bench/bench_casters.py`)", ""]
    if not data:
        return lines + ["not run", ""]
    s = data["settings"]
    lines += [f"The same one-line function (read the data pointer) bound with each parameter type, called from "
              f"Python with a {'x'.join(map(str, s['shape']))} {s['dtype']} array. Time per call; ratio = dlbridge / "
              f"framework (below 1: dlbridge faster); net subtracts the timing loop "
              f"({s['loop_overhead_ns']:.0f} ns). dlbridge's parameter validates the whole tensor "
              "(shape, strides, extent, flags) and keeps read-only truthful; target for the nanobind pairs: "
              "≤ 1.2×. The nanobind module is built with `NOMINSIZE`, so that dlbridge's header-only caster "
              "is compiled at the same level as nanobind's own `nb::ndarray` import (libnanobind ignores -Os); "
              "section 5 counts instructions for both that build and nanobind's default -Os module.", "",
              "| input | framework | framework's parameter | ns | dlbridge parameter | ns | ratio | net ratio | target |",
              "|---|---|---|---|---|---|---|---|---|"]
    for r in data["results"]:
        ratio = f"{r['ratio']:.2f}" if "ratio" in r else ""
        net = f"{r['ratio_net']:.2f}" if "ratio_net" in r else ""
        target = f"≤ {r['target']:.1f}" if r.get("target") else ""
        lines.append(f"| {r['input']} | {r['framework']} | `{r['competitor']}` | {_ns(r, 'competitor')} | "
                     f"`{r['dlbridge']}` | {_ns(r, 'dlbridge')} | {ratio} | {net} | {target} |")
    refusals = [f"- {r['input']} → `{r['competitor']}`: {r['competitor_error']}" for r in data["results"]
                if "competitor_error" in r]
    return lines + [""] + refusals + ([""] if refusals else [])
