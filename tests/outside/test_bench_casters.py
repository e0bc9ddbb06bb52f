"""bench/bench_casters.py still runs and writes what bench/report_casters.py
reads: its --quick mode against the modules built here. Only the shape of
the JSON is checked, never a timing."""

from __future__ import annotations

import json
import sys

from conftest import ROOT, run


def test_bench_casters_quick_writes_every_pair(extensions, tmp_path):
    out = tmp_path / "casters.json"
    run([sys.executable, ROOT / "bench/bench_casters.py", "--quick", "--modules", extensions, "--out", out])
    data = json.loads(out.read_text())
    assert data["benchmark"] == "casters" and data["settings"]["quick"] is True
    pairs = {(r["input"], r["framework"], r["competitor"]) for r in data["results"]}
    assert ("numpy", "nanobind", "nb::ndarray<float, nb::c_contig, nb::device::cpu>") in pairs
    assert ("numpy", "pybind11", "py::array_t<float, py::array::c_style>") in pairs
    numpy_nb = next(r for r in data["results"] if r["input"] == "numpy" and r["competitor"].startswith("nb::ndarray<float"))
    assert numpy_nb["target"] == 1.2
    assert numpy_nb["ratio"] == numpy_nb["dlbridge_ns"] / numpy_nb["competitor_ns"]
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import report_casters
    finally:
        sys.path.remove(str(ROOT / "bench"))
    section = "\n".join(report_casters.markdown_lines(data))
    assert "| numpy | nanobind | `nb::ndarray<float, nb::c_contig, nb::device::cpu>` |" in section
