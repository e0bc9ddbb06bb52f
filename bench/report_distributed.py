"""The distributed section of docs/benchmarks.md, from bench/results/distributed.json
(written by bench/bench_distributed.py); report.py includes it."""
from __future__ import annotations

import json
from pathlib import Path

TARGET_KEYS = {"pickle-5": "pickle", "ray": "ray", "dask": "dask"}


def _target(payload: dict, engine: str) -> float | None:
    for key, word in TARGET_KEYS.items():
        if word in engine:
            return payload["targets"].get(key)
    return None


def _copied(value) -> str:
    if isinstance(value, dict):
        return "; ".join(f"{k}: {v / (1 << 20):.0f} MiB" for k, v in value.items())
    if isinstance(value, int):
        return f"{value / (1 << 20):.0f} MiB"
    return str(value)


def section(results: Path) -> list[str]:
    lines = ["## 7. Tensors between processes (`bench/bench_distributed.py`)", ""]
    path = results / "distributed.json"
    if not path.exists():
        return lines + ["not run", ""]
    payload = json.loads(path.read_text())
    size = payload["settings"]["bytes"] / (1 << 20)
    versions = payload["machine"]["versions"]
    lines += [f"A {size:.0f} MiB float32 tensor, dlbridge.Tensor against a NumPy array of the same bytes "
              f"through the same engine, alternating, median per transfer; ray {versions.get('ray')}, "
              f"dask/distributed {versions.get('distributed')}. Bytes copied are observed (a receiver "
              "whose data pointer is the sender's, or lies in Ray's object store, copied nothing).", ""]
    lines += ["| engine | dlbridge ms | NumPy ms | dlbridge / NumPy | target | verdict | bytes copied (dlbridge) |",
              "|---|---|---|---|---|---|---|"]
    for r in payload["results"]:
        target = _target(payload, r["engine"])
        verdict = "not set" if target is None else ("**met**" if r["ratio"] <= target else "**missed**")
        lines.append(f"| {r['engine']} | {r['dlbridge_s'] * 1e3:.3f} | {r['numpy_s'] * 1e3:.3f} | "
                     f"{r['ratio']:.2f}× | ≤ {target}× | {verdict} | {_copied(r['bytes_copied']['dlbridge'])} |")
    return lines + [""]
