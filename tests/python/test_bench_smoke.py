"""The benchmark scripts still run and still write what report.py reads.

Each script runs in its --quick mode in a subprocess (as bench/run runs it);
only the shape of the JSON is checked, never a timing.
"""
from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
EXCHANGE_API_BENCH = ROOT / "build" / "bench-suite" / "bench" / "exchange_api_bench"


def run_script(script: str, out: Path) -> dict:
    subprocess.run([sys.executable, str(BENCH / script), "--quick", "--out", str(out)],
                   check=True, capture_output=True, text=True, timeout=300)
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("bench-results")


def check_machine(data: dict) -> None:
    machine = data["machine"]
    assert machine["cpu"] and machine["logical_cpus"] >= 1
    assert set(machine["versions"]) >= {"dlbridge", "numpy", "torch", "jax"}
    assert machine["versions"]["dlbridge"] and machine["python"]


def test_exchange_quick(results: Path) -> None:
    data = run_script("bench_exchange.py", results / "exchange.json")
    assert data["benchmark"] == "exchange" and data["settings"]["quick"] is True
    check_machine(data)
    pairs = {(r["producer"], r["consumer"]): r for r in data["import"]}
    mine = pairs[("numpy", "numpy")]
    assert mine["target"] == 0.85
    assert mine["dlbridge_ns"] > 0 and mine["competitor_ns"] > 0
    # The ratio is the median of per-round ratios, inside its own spread.
    assert 0 < mine["ratio_p10"] <= mine["ratio"] <= mine["ratio_p90"]
    for row in data["import"] + data["export"]:
        # A pair is either timed or carries the library's refusal.
        assert ("ratio" in row) != ("error" in row), row
    assert {r["library"] for r in data["export"]} >= {"numpy"}
    targets = {r["library"]: r["target"] for r in data["export"]}
    assert targets["numpy"] == 0.95 and targets.get("torch", 1.0) == 1.0


def test_copy_numpy_quick(results: Path) -> None:
    data = run_script("bench_copy_numpy.py", results / "copy_numpy.json")
    check_machine(data)
    kinds = {r["kind"] for r in data["results"]}
    assert kinds == {"contiguous", "transpose", "slice", "reversed"}
    for row in data["results"]:
        assert row["bytes"] == row["n"] * row["n"] * {"float32": 4, "float64": 8, "uint16": 2, "uint8": 1}[row["dtype"]]
        assert row["dlbridge_gbps"] > 0 and row["numpy_gbps"] > 0 and row["floor_gbps"] > 0
        assert 0 < row["ratio_vs_floor_p10"] <= row["ratio_vs_floor"] <= row["ratio_vs_floor_p90"]
    assert {r["dtype"] for r in data["results"] if r["kind"] == "transpose"} == {"float32", "float64", "uint16", "uint8"}
    # One pinned CPU, and the NumPy code the unpacking is compared with, recorded.
    assert data["settings"]["pinned_cpu"] is not None
    assert "p >> 4" in data["settings"]["numpy_unpack"]
    assert [r["values"] for r in data["unpack"]] == [64 << 10, 1 << 20]
    assert all(r["dlbridge_gbps"] > 0 and r["numpy_gbps"] > 0 for r in data["unpack"])


COPY_BENCH = ROOT / "build" / "bench-suite" / "bench" / "copy_bench"


@pytest.mark.skipif(not COPY_BENCH.exists(),
                    reason="copy_bench is not built (bench/run builds it into build/bench-suite)")
def test_copy_bench_quick(results: Path) -> None:
    out = results / "copy.json"
    subprocess.run([str(COPY_BENCH), "--quick", "--only", "transpose,subbyte", str(out)],
                   check=True, capture_output=True, text=True, timeout=300)
    data = json.loads(out.read_text())
    assert data["machine"]["load_average_start"] and data["machine"]["subbyte_isa"]
    rows = data["results"]
    assert {r["kind"] for r in rows} == {"transpose", "unpack", "pack"}
    for row in rows:
        # The floor is measured in the same rounds: a ratio and its spread, and faults apart.
        assert row["candidates"][1] == "memcpy" and len(row["gbps"]) == len(row["faults_per_call"])
        assert 0 < row["ratio_p10"] <= row["ratio"] <= row["ratio_p90"]
    assert {r["mode"] for r in rows} == {"touched", "fresh"}


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_callgrind_quick(results: Path) -> None:
    data = run_script("callgrind.py", results / "callgrind.json")
    check_machine(data)
    cases = {r["case"]: r for r in data["results"]}
    assert {"loop", "dlbridge.from_dlpack(numpy)", "numpy.from_dlpack(numpy)",
            "numpy.from_dlpack(dlbridge)"} <= set(cases)
    assert cases["loop"]["ir_per_call_net"] == 0
    # An import does more than an empty loop iteration; otherwise the dumps
    # were attributed to the wrong cases.
    assert cases["dlbridge.from_dlpack(numpy)"]["ir_per_call"] > cases["loop"]["ir_per_call"]
    assert any("_core" in name for name in cases["dlbridge.from_dlpack(numpy)"]["by_object"])
    assert len(data["ratios_net"]) == len(data["targets"]) >= 3
    assert all(t["ok"] == (t["value"] <= t["goal"]) for t in data["targets"] if t["goal"] is not None)
    # A baseline row (py::array_t for the pybind11 caster) has no goal and no verdict.
    assert all(t["ok"] is None for t in data["targets"] if t["goal"] is None)


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_callgrind_pairs_quick(results: Path) -> None:
    data = run_script("callgrind_pairs.py", results / "convert_pairs.json")
    check_machine(data)
    [row] = data["rows"]  # --quick: NumPy into NumPy only
    assert (row["from"], row["to"]) == ("numpy", "numpy")
    assert row["convert_ir"] > 0 and row["direct_ir"] > 0 and row["convert_ns"] > 0 and row["direct_ns"] > 0
    assert row["ok"] == (row["ratio_ir"] <= data["settings"]["target_ratio"])
    assert all("function" in f for f in row["top_self"])


def test_convert_quick(results: Path) -> None:
    data = run_script("bench_convert.py", results / "convert.json")
    check_machine(data)
    rows = {(r["producer"], r["target"], r["kind"]): r for r in data["results"]}
    same = rows[("numpy", "numpy", "same library")]
    assert same["target_ratio"] == 1.15 and same["convert_ns"] > 0 and same["direct_ns"] > 0
    assert same["ratio_p10"] <= same["ratio"] <= same["ratio_p90"]
    other = rows[("numpy", "torch", "other library")]
    assert other["target_extra_ns"] == 300
    assert other["diff_p10"] <= other["diff_ns"] <= other["diff_p90"]
    assert rows[("numpy", "torch", "repair: negative strides")]["target_extra_ns"] == 500


@pytest.mark.skipif(not EXCHANGE_API_BENCH.exists(),
                    reason="exchange_api_bench is not built (bench/run builds it into build/bench-suite)")
def test_exchange_api_quick(results: Path) -> None:
    out = results / "exchange_api.json"
    subprocess.run([str(EXCHANGE_API_BENCH), "--quick", "--python", sys.executable, str(out)],
                   check=True, capture_output=True, text=True, timeout=300)
    data = json.loads(out.read_text())
    check_machine(data)
    assert data["tables"]["dlbridge.Tensor"] == "1.3"
    rows = {(r["object"], r["table"], r["op"]): r for r in data["results"]}
    managed = rows[("dlbridge.Tensor", "dlbridge.Tensor", "managed_import_delete")]
    borrowed = rows[("dlbridge.Tensor", "dlbridge.Tensor", "borrowed_dltensor")]
    assert managed["target_ns"] == 50 and borrowed["target_ns"] == 20
    assert all(r["ns"] > 0 and r["batches"] >= 3 for r in data["results"])


def test_report(results: Path, tmp_path: Path) -> None:
    # Runs on whatever the tests above left; absent files become "not run".
    md, png = tmp_path / "benchmarks.md", tmp_path / "benchmarks.png"
    subprocess.run([sys.executable, str(BENCH / "report.py"), "--results", str(results),
                    "--md", str(md), "--png", str(png)], check=True, capture_output=True, text=True)
    text = md.read_text()
    for heading in ("## Targets (issues 5, 11 and 32)", "## 1. Import", "## 2. Export", "## 3. C exchange API",
                    "## 4. Copies", "## 5. Instructions per call", "## 6. `dlbridge.convert"):
        assert heading in text
    assert "import numpy array: dlbridge vs numpy.from_dlpack" in text
    if importlib.util.find_spec("matplotlib") is not None:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.sharing
def test_distributed_quick_and_its_report_section(results: Path) -> None:
    # Ray and Dask start clusters of their own (tests/python/test_ray.py and
    # test_dask.py run them); the smoke test keeps to the pickle engine.
    out = results / "distributed.json"
    subprocess.run([sys.executable, str(BENCH / "bench_distributed.py"), "--quick", "--engines", "pickle",
                    "--out", str(out)], check=True, capture_output=True, text=True, timeout=300)
    data = json.loads(out.read_text())
    check_machine(data)
    assert data["settings"]["bytes"] == 4 << 20
    [row] = data["results"]
    assert row["engine"].startswith("pickle-5")
    assert row["ratio"] == pytest.approx(row["dlbridge_s"] / row["numpy_s"])
    assert row["bytes_copied"] == {"dlbridge": 0, "numpy": 0}, "both sides are zero-copy in one process"
    sys.path.insert(0, str(BENCH))
    import report_distributed
    section = "\n".join(report_distributed.section(results))
    assert "| pickle-5 dumps+loads (out-of-band) |" in section


def test_exchange_pools_fresh_processes(results: Path) -> None:
    out = results / "exchange_pooled.json"
    subprocess.run([sys.executable, str(BENCH / "bench_exchange.py"), "--quick", "--processes", "2",
                    "--out", str(out)], check=True, capture_output=True, text=True, timeout=300)
    data = json.loads(out.read_text())
    assert data["settings"]["processes"] == 2
    mine = {(r["producer"], r["consumer"]): r for r in data["import"]}[("numpy", "numpy")]
    assert len(mine["process_ratios"]) == 2 and mine["rounds"] == 6
    assert mine["ratio_p10"] <= mine["ratio"] <= mine["ratio_p90"]


def load_benchlib():
    spec = importlib.util.spec_from_file_location("benchlib", BENCH / "benchlib.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_pool_rows_recomputes_from_every_round() -> None:
    benchlib = load_benchlib()

    def row(name, ratios, ns):
        return {"name": name, "ratios": ratios, "diffs": [r * 10 for r in ratios], "ratio": sorted(ratios)[1],
                "dlbridge_ns": ns, "target_extra_ns": 300.0}

    first = [row("a", [1.0, 1.1, 1.2], 100.0), {"name": "b", "error": "refused"}]
    second = [row("a", [0.7, 0.8, 0.9], 300.0), {"name": "b", "error": "refused"}]
    a, b = benchlib.pool_rows([first, second], key=lambda r: r["name"])
    assert a["ratio"] == pytest.approx(0.95) and a["rounds"] == 6
    assert (a["ratio_p10"], a["ratio_p90"]) == (0.7, 1.2)
    assert a["process_ratios"] == [1.1, 0.8]
    assert a["dlbridge_ns"] == 200.0 and a["target_extra_ns"] == 300.0  # a goal is not a time
    assert b == {"name": "b", "error": "refused"}
    with pytest.raises(ValueError, match="different rows"):
        benchlib.pool_rows([first, list(reversed(second))], key=lambda r: r["name"])


def test_a_time_difference_noisier_than_its_target_is_inconclusive() -> None:
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location("bench_report", BENCH / "report.py")
        report = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(report)
    finally:
        sys.path.remove(str(BENCH))
    wide_straddling = {"diff_ns": 100.0, "diff_p10": -2000.0, "diff_p90": 2000.0}
    wide_below = {"diff_ns": -5000.0, "diff_p10": -9000.0, "diff_p90": 200.0}
    narrow_above = {"diff_ns": 400.0, "diff_p10": 350.0, "diff_p90": 450.0}
    assert report.diff_verdict(wide_straddling, 300.0).startswith("inconclusive")
    assert report.diff_verdict(wide_below, 300.0) is True
    assert report.diff_verdict(narrow_above, 300.0) is False
    assert report.per_process({"process_ratios": [0.9, 0.97, 0.93]}) == "; per process 0.90–0.97"
    assert report.per_process({}) == ""
